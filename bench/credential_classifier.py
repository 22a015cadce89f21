"""Would a classifier over sentence embeddings, OR-ed with the credential rules, read more statements on new text?

The experiment of issue 24 item 1 (a learned signal beside :mod:`screening.statements` and :mod:`screening.linked`):
each labelled sentence of ``tests/data/credentials/`` is embedded with the bundled all-MiniLM-L6-v2
(:class:`index.embeddings.OnnxMiniLMEmbedder`), and a classifier over the 384-d vectors (L2-regularised logistic
regression in NumPy, or a 7-nearest-neighbour vote) flags a sentence when its score passes a threshold chosen for
high precision: the score above which at most ``--fp`` of the innocent look-alikes fall, read from out-of-fold
scores of the training batches only (an inner leave-one-batch-out), never from the batch measured.

Three evaluations, each printing detection / false positives for the rules alone, the classifier alone and rules
OR classifier, per batch, with the mean and the worst batch:

- **leave one batch out** over the 7 files (train on six, measure the seventh); the rules are today's, which were
  tuned on the corpus and batches 1-5, so their figures there are in-sample (only batch 6 is new text to them);
- **time forward** (``git`` history needed): for each held-out batch, the rules as frozen in the commit that added
  it (before they were tuned on it) and a classifier trained on the labelled files of that commit: what each would
  have read of text written after it;
- **handbooks** (``../shared/corpus``; ``--no-handbooks`` skips): the chunks the classifier (trained on every
  batch) would flag that the rules leave alone, classifying only sentences that name a credential noun, a code
  noun, a door/keypad place or a login verb; the embedding cost per classified sentence and per chunk.

Run: ``nice .venv/bin/python bench/credential_classifier.py [--fp 0.01] [--no-handbooks] [--no-history]``
(about a minute for the batches; the handbooks a few minutes on two shared cores).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from connectors.folder import FolderSource
from index.chunker import Chunker
from index.embeddings import OnnxMiniLMEmbedder
from screening import scan
from screening.linked import _LOGIN
from screening.statements import CODE_NOUN, NOUN, PLACE
from screening.vocabulary import is_common, is_word

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "credentials"
FILES = ["statements.jsonl"] + sorted(p.name for p in DATA.glob("heldout*.jsonl"))
HANDBOOKS = ROOT.parent / "shared" / "corpus"
_CONTEXT = [re.compile(NOUN, re.I), re.compile(rf"(?i)(?<![\w-]){CODE_NOUN}(?![\w-])"), PLACE, _LOGIN]
_SENTENCE = re.compile(r"[^\n]+?(?:[.!?;](?=\s|$)|$)", re.M)

Scorer = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
_TOKEN = re.compile(r"[^\s\"“”„«»‘’`()\[\]{}<>|,;]+")
_QUOTED = re.compile(r"[\"'`“‘«„][^\"'`”’»]{2,}[\"'`”’»“]")
_DIM = 384  # the embedding's columns in a row of :func:`_Vectors.__call__`; the value features follow


def in_context(sentence: str) -> bool:
    """True when ``sentence`` names a credential, a code, a door/keypad place or a login (the classifier's gate)."""
    return any(p.search(sentence) for p in _CONTEXT)


def value_features(sentence: str) -> list[float]:
    """Fifteen 0/1 features of ``sentence``: value-like tokens (a run of letters that is no word or no common word of
    en/de/fr/es, a digit, letters mixed with digits or symbols, a quoted span), context (a credential noun, a code or
    place, a login verb, ``:``/``=``) and their conjunctions (context and a value, a noun and a non-word...)."""
    toks = [w for w in (t.strip(".,;:!?'’¿¡") for t in _TOKEN.findall(sentence)) if w]
    nonword = any(w.isalpha() and len(w) >= 4 and not is_word(w) for w in toks)
    uncommon = any(w.isalpha() and len(w) >= 4 and w.islower() and not is_common(w) for w in toks)
    digit = any(any(c.isdigit() for c in w) for w in toks)
    mixed = any((any(c.isdigit() for c in w) and any(c.isalpha() for c in w))
                or (len(w) > 3 and any(c in "!@#$%^&*+=~" for c in w)) for w in toks)
    quote = bool(_QUOTED.search(sentence))
    noun = bool(_CONTEXT[0].search(sentence))
    code = bool(_CONTEXT[1].search(sentence) or _CONTEXT[2].search(sentence))
    login = bool(_CONTEXT[3].search(sentence))
    value = nonword or uncommon or digit or mixed or quote
    return [float(f) for f in (nonword, uncommon, digit, mixed, quote, noun, code, login,
                               bool(re.search(r":\s|=", sentence)), (noun or code or login) and value, noun and value,
                               code and digit, login and value, noun and nonword, noun and quote)]


def logistic(x_train: np.ndarray, y_train: np.ndarray, x: np.ndarray, lam: float = 1e-3, steps: int = 1500) -> np.ndarray:
    """Scores in [0, 1] for ``x`` (n, d) from logistic regression fitted by gradient descent on (x_train, y_train)."""
    xb = np.hstack([x_train, np.ones((len(x_train), 1))])
    w = np.zeros(xb.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-xb @ w))
        g = xb.T @ (p - y_train) / len(y_train)
        g[:-1] += lam * w[:-1]
        w -= g
    return 1 / (1 + np.exp(-(np.hstack([x, np.ones((len(x), 1))]) @ w)))


def knn(x_train: np.ndarray, y_train: np.ndarray, x: np.ndarray, k: int = 7) -> np.ndarray:
    """The share of credential statements among the ``k`` nearest labelled sentences (cosine) of each row of ``x``."""
    nearest = np.argsort(-(x @ x_train.T), axis=1)[:, :k]
    return y_train[nearest].mean(axis=1)


def threshold(scorer: Scorer, x: np.ndarray, y: np.ndarray, groups: np.ndarray, fp: float) -> float:
    """The score at which at most ``fp`` of the innocent rows pass, from out-of-fold scores (one fold per group)."""
    oof = np.zeros(len(y))
    for g in np.unique(groups):
        oof[groups == g] = scorer(x[groups != g], y[groups != g], x[groups == g])
    neg = np.sort(oof[y == 0])[::-1]
    return float(neg[int(fp * len(neg))]) + 1e-9


def _rates(flag: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    return float(flag[y == 1].mean()), float(flag[y == 0].mean())


def _table(title: str, rows: list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]) -> None:
    """Print per batch (name, rule flags, classifier flags, labels) and the mean and worst rows."""
    print(title)
    figures = []
    for name, rule, clf, y in rows:
        r = [*_rates(rule, y), *_rates(clf, y), *_rates(rule | clf, y)]
        figures.append(r)
        print(f"  {name:18} rules {r[0]:.3f} / {r[1]:.3f}   classifier {r[2]:.3f} / {r[3]:.3f}   "
              f"rules OR classifier {r[4]:.3f} / {r[5]:.3f}")
    a = np.array(figures)
    print(f"  {'mean':18} rules {a[:, 0].mean():.3f} / {a[:, 1].mean():.3f}   classifier {a[:, 2].mean():.3f} / "
          f"{a[:, 3].mean():.3f}   rules OR classifier {a[:, 4].mean():.3f} / {a[:, 5].mean():.3f}")
    print(f"  {'min det / max FP':18} rules {a[:, 0].min():.3f} / {a[:, 1].max():.3f}   classifier {a[:, 2].min():.3f} / "
          f"{a[:, 3].max():.3f}   rules OR classifier {a[:, 4].min():.3f} / {a[:, 5].max():.3f}")


def _load(text_of: Callable[[str], str]) -> list[tuple[int, str, int, str]]:
    """(file index, text, 1 for a credential statement, language) for every row of :data:`FILES`."""
    rows = []
    for i, name in enumerate(FILES):
        for line in text_of(name).splitlines():
            r = json.loads(line)
            rows.append((i, r["text"], int(r["credential"]), r["lang"]))
    return rows


def auc(scores: np.ndarray, y: np.ndarray) -> float:
    """The share of (statement, look-alike) pairs the scores order right (ties count half)."""
    pos, neg = scores[y == 1][:, None], scores[y == 0][None, :]
    return float((pos > neg).mean() + 0.5 * (pos == neg).mean())


class _Vectors:
    """Rows by text: the sentence vector (:data:`_DIM` columns) then :func:`value_features`, embedded once per run."""

    def __init__(self) -> None:
        self.model = OnnxMiniLMEmbedder(threads=1)
        self.cache: dict[str, np.ndarray] = {}

    def __call__(self, texts: list[str]) -> np.ndarray:
        new = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if new:
            rows = np.hstack([self.model.embed(new), np.array([value_features(t) for t in new])])
            self.cache.update(zip(new, rows))
        return np.stack([self.cache[t] for t in texts]) if texts else np.zeros((0, _DIM + 15))


def leave_one_batch_out(vectors: _Vectors, scorers: dict[str, Scorer], fp: float) -> None:
    """Train on six files, measure the seventh, for each file in turn."""
    rows = _load(lambda n: (DATA / n).read_text(encoding="utf-8"))
    batch = np.array([r[0] for r in rows])
    y = np.array([r[2] for r in rows])
    x = vectors([r[1] for r in rows])
    rule = np.array([bool(scan(r[1], ("secret",))) for r in rows])
    lang_of = np.array([r[3] for r in rows])
    for name, scorer in scorers.items():
        out, aucs = [], []
        flags = np.zeros(len(y), bool)
        for b, fname in enumerate(FILES):
            tr, te = batch != b, batch == b
            th = threshold(scorer, x[tr], y[tr], batch[tr], fp)
            scores = scorer(x[tr], y[tr], x[te])
            flags[te] = scores >= th
            aucs.append(auc(scores, y[te]))
            out.append((fname, rule[te], flags[te], y[te]))
        _table(f"leave one batch out, {name}, threshold at {fp:.0%} out-of-fold false positives", out)
        by_lang = ", ".join(f"{lang} {flags[(lang_of == lang) & (y == 1)].mean():.2f}" for lang in ("en", "de", "fr", "es"))
        print(f"  classifier alone: AUC per batch {', '.join(f'{a:.2f}' for a in aucs)}; detection by language {by_lang}")


def time_forward(vectors: _Vectors, scorers: dict[str, Scorer], fp: float) -> None:
    """Each held-out batch against the rules and the data of the commit that added it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout

    results: dict[str, list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]] = {n: [] for n in scorers}
    with tempfile.TemporaryDirectory() as tmp:
        for k, fname in enumerate(FILES[1:], start=1):
            commit = git("log", "--diff-filter=A", "--format=%h", "--", f"tests/data/credentials/{fname}").split()[-1]
            rules_dir = Path(tmp) / commit
            rules_dir.mkdir()
            subprocess.run(f"git archive {commit} screening | tar -x -C {rules_dir}", shell=True, cwd=ROOT, check=True)
            test = [json.loads(line) for line in git("show", f"{commit}:tests/data/credentials/{fname}").splitlines()]
            train = [(i, json.loads(line)) for i, n in enumerate(FILES[:k])
                     for line in git("show", f"{commit}:tests/data/credentials/{n}").splitlines()]
            code = ("import json, sys; from screening import scan; "
                    "print(json.dumps([bool(scan(json.loads(l)['text'], ('secret',))) for l in sys.stdin]))")
            flags = subprocess.run([sys.executable, "-c", code], input="\n".join(json.dumps(r) for r in test),
                                   capture_output=True, text=True, check=True, cwd=rules_dir,
                                   env={**os.environ, "PYTHONPATH": str(rules_dir)}).stdout
            rule = np.array(json.loads(flags))
            xtr = vectors([r["text"] for _, r in train])
            ytr = np.array([int(r["credential"]) for _, r in train])
            groups = np.array([i for i, _ in train]) if k > 1 else np.arange(len(train)) % 5
            xte = vectors([r["text"] for r in test])
            yte = np.array([int(r["credential"]) for r in test])
            for name, scorer in scorers.items():
                th = threshold(scorer, xtr, ytr, groups, fp)
                results[name].append((f"{fname}@{commit}", rule, scorer(xtr, ytr, xte) >= th, yte))
    for name, out in results.items():
        _table(f"time forward, {name}: the rules frozen before each batch, trained on the files of that commit", out)


def handbooks(vectors: _Vectors, scorers: dict[str, Scorer], fp: float) -> None:
    """Chunks each handbook would newly flag, the embedding cost, and a threshold set on the handbooks instead.

    Per scorer (trained on every batch): the chunks flagged at the ``fp`` threshold that the rules leave alone (the
    first sentences printed), then a threshold chosen on two handbooks (18F and Meltano: the highest score among
    their sentences, so neither gets a new flag) and checked on the third (Sourcegraph's new flags) and on the
    batches (leave one batch out: what the OR adds to the rules' detection, and its false positives, at that score).
    """
    rows = _load(lambda n: (DATA / n).read_text(encoding="utf-8"))
    x = vectors([r[1] for r in rows])
    y = np.array([r[2] for r in rows])
    groups = np.array([r[0] for r in rows])
    rule = np.array([bool(scan(r[1], ("secret",))) for r in rows])
    chunker = Chunker()
    books: dict[str, tuple[list[str], list[tuple[int, str]], np.ndarray]] = {}
    for book in sorted(p for p in HANDBOOKS.iterdir() if p.is_dir()):
        chunks = [c.text for doc in FolderSource(book).scan() if hasattr(doc, "text") for c in chunker.chunk(doc)]
        gated = [(i, s.group(0)) for i, text in enumerate(chunks) for s in _SENTENCE.finditer(text)
                 if in_context(s.group(0))]
        sentences = sum(1 for text in chunks for _ in _SENTENCE.finditer(text))
        t0 = time.perf_counter()
        books[book.name] = (chunks, gated, vectors([s for _, s in gated]))
        spent = time.perf_counter() - t0
        print(f"handbook {book.name}: {len(chunks)} chunks, {sentences} sentences, {len(gated)} in credential context "
              f"({len(gated) / max(len(chunks), 1):.2f} per chunk); embedding them {spent:.1f} s "
              f"({1000 * spent / max(len(gated), 1):.1f} ms per sentence, {1000 * spent / max(len(chunks), 1):.1f} ms "
              f"per chunk; all sentences would take about {spent / max(len(gated), 1) * sentences:.0f} s)")

    def new_flags(name: str, scores: np.ndarray, th: float) -> list[int]:
        chunks, gated, _ = books[name]
        hit = sorted({gated[j][0] for j in np.flatnonzero(scores >= th)})
        return [i for i in hit if not scan(chunks[i], ("secret",))]

    for label, scorer in scorers.items():
        th = threshold(scorer, x, y, groups, fp)
        scores = {name: scorer(x, y, b[2]) if len(b[1]) else np.zeros(0) for name, b in books.items()}
        print(f"{label}, threshold at {fp:.0%} out-of-fold false positives:")
        for name, (chunks, gated, _) in books.items():
            print(f"  {name}: {len(new_flags(name, scores[name], th))} chunks newly flagged")
            for j in np.flatnonzero(scores[name] >= th)[:4]:
                print(f"      {gated[j][1].strip()[:140]}")
        dev = [n for n in books if not n.startswith("sourcegraph")]
        check = [n for n in books if n.startswith("sourcegraph")]
        if not dev or not check:
            continue
        hb_th = max(float(scores[n].max(initial=0.0)) for n in dev) + 1e-9
        gain, fps = [], []
        for g in np.unique(groups):
            flag = (scorer(x[groups != g], y[groups != g], x[groups == g]) >= hb_th) | rule[groups == g]
            yy = y[groups == g]
            gain.append(flag[yy == 1].mean() - rule[groups == g][yy == 1].mean())
            fps.append(flag[yy == 0].mean())
        print(f"  threshold {hb_th:.4f} (no new flag on {', '.join(dev)}): {len(new_flags(check[0], scores[check[0]], hb_th))} "
              f"chunks newly flagged on {check[0]}; leave one batch out, the OR adds {np.mean(gain):.3f} detection on "
              f"average (at most {np.max(gain):.3f}) at {np.mean(fps):.3f} false positives (at most {np.max(fps):.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fp", type=float, default=0.01, help="out-of-fold false-positive share for the threshold")
    parser.add_argument("--no-handbooks", action="store_true")
    parser.add_argument("--no-history", action="store_true", help="skip the time-forward evaluation")
    args = parser.parse_args()
    scorers: dict[str, Scorer] = {
        "logistic regression on the embedding": lambda a, b, c: logistic(a[:, :_DIM], b, c[:, :_DIM]),
        "7-NN on the embedding": lambda a, b, c: knn(a[:, :_DIM], b, c[:, :_DIM]),
        "logistic regression on the embedding and value features": logistic}
    vectors = _Vectors()
    leave_one_batch_out(vectors, scorers, args.fp)
    if not args.no_history:
        time_forward(vectors, scorers, args.fp)
    if args.no_handbooks:
        return
    if not HANDBOOKS.is_dir():
        print(f"handbooks: skipped ({HANDBOOKS} is absent)")
        return
    handbooks(vectors, {k: v for k, v in scorers.items() if k.startswith("logistic")}, args.fp)


if __name__ == "__main__":
    main()
