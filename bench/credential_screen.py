"""The credential screen (issue 24 item 1): detection and false positives per language, and what it flags on real handbooks.

Two figures:

- over each batch in ``tests/data/credentials/`` (credential statements and innocent look-alikes in English,
  German, French and Spanish: ``statements.jsonl``, the corpus the rules were built on, and the held-out batches
  ``heldout.jsonl`` to ``heldout9.jsonl``): per language, the share of statements with a
  ``secret`` finding (detection) and the share of look-alikes with one (false positives), via :func:`screening.scan`;
- per handbook under ``../shared/corpus`` (each a folder source, chunked by the indexer's
  :class:`index.chunker.Chunker`): the chunks with a ``secret`` finding, and how many of those only the
  statement screen (:mod:`screening.statements`) flags, with the first few printed for review.

Run: ``.venv/bin/python bench/credential_screen.py [--corpus FILE] [--show N] [--no-handbooks] [--unexplained]
[--site-vocabulary N]`` (about a minute per handbook; ``--show`` prints the flagged sentences, the ones to read for
false positives). ``--unexplained`` adds the fail-closed tier (:mod:`screening.unexplained`, on by default in the bot) and prints
each figure for the rules alone and with the tier, and on the handbooks the chunks only the tier flags (``--show`` of them);
``--site-vocabulary N`` explains, on a handbook, the tokens used on N pages or more of it (0: off). Skips the
handbooks with a reason when ../shared/corpus is absent.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from connectors.folder import FolderSource
from index.chunker import Chunker
from screening import scan
from screening.linked import find_linked_values
from screening.statements import find_statements
from screening.unexplained import _TOKEN, _core

ROOT = Path(__file__).resolve().parents[1]

CORPUS = ROOT / "tests" / "data" / "credentials" / "statements.jsonl"
BATCHES = [CORPUS] + sorted((ROOT / "tests" / "data" / "credentials").glob("heldout*.jsonl"))
HANDBOOKS = ROOT.parent / "shared" / "corpus"


def corpus_rates(path: Path = CORPUS, *, unexplained: bool = False) -> dict[str, dict[str, float]]:
    """Per language (and ``all``): ``{"detection", "false_positives", "credentials", "lookalikes"}`` (``unexplained``:
    with the fail-closed tier)."""
    hits: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # detected, credentials, flagged, look-alikes
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        flagged = any(f.category == "secret" for f in scan(row["text"], ("secret",), unexplained=unexplained))
        for key in (row["lang"], "all"):
            h = hits[key]
            if row["credential"]:
                h[0] += flagged
                h[1] += 1
            else:
                h[2] += flagged
                h[3] += 1
    return {k: {"detection": h[0] / max(h[1], 1), "false_positives": h[2] / max(h[3], 1),
                "credentials": h[1], "lookalikes": h[3]} for k, h in sorted(hits.items())}


def site_vocabulary(pages: dict[str, str], least: int) -> set[str]:
    """The lower-case tokens used on ``least`` pages or more of ``pages`` (id -> text): the wiki's own words."""
    seen: dict[str, set[str]] = defaultdict(set)
    for doc_id, text in pages.items():
        for m in _TOKEN.finditer(text):
            core = _core(m.group(0))[1].lower()
            if core:
                seen[core].add(doc_id)
    return {w for w, ids in seen.items() if len(ids) >= least}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, action="append", help="a batch (default: every batch)")
    parser.add_argument("--show", type=int, default=5, help="flagged statement sentences to print per handbook")
    parser.add_argument("--no-handbooks", action="store_true", help="only the batches")
    parser.add_argument("--handbooks", type=Path, default=HANDBOOKS,
                        help="the folder of handbooks (default: ../shared/corpus beside the repository)")
    parser.add_argument("--unexplained", action="store_true",
                        help="also measure with the fail-closed tier (screening.unexplained)")
    parser.add_argument("--site-vocabulary", type=int, default=0, metavar="N",
                        help="with --unexplained, on a handbook: tokens on N pages or more are its vocabulary (0: off)")
    args = parser.parse_args()
    for corpus in args.corpus or BATCHES:
        print(f"corpus {corpus.relative_to(ROOT) if corpus.is_relative_to(ROOT) else corpus}")
        tier = corpus_rates(corpus, unexplained=True) if args.unexplained else {}
        for lang, r in corpus_rates(corpus, unexplained=False).items():
            line = (f"  {lang:4} detection {r['detection']:.3f} ({r['credentials']} statements)  "
                    f"false positives {r['false_positives']:.3f} ({r['lookalikes']} look-alikes)")
            if tier:
                line += f"  | with the tier: {tier[lang]['detection']:.3f} / {tier[lang]['false_positives']:.3f}"
            print(line)
    if args.no_handbooks:
        return
    if not args.handbooks.is_dir():
        print(f"handbooks: skipped ({args.handbooks} is absent)")
        return
    chunker = Chunker()
    for book in sorted(p for p in args.handbooks.iterdir() if p.is_dir()):
        chunks = flagged = by_statement = tier_only = 0
        shown: list[str] = []
        tier_shown: list[str] = []
        docs = [doc for doc in FolderSource(book).scan() if hasattr(doc, "text")]  # not the skipped pages
        known = site_vocabulary({d.doc_id: d.text for d in docs}, args.site_vocabulary) if args.site_vocabulary else ()
        for doc in docs:
            for chunk in chunker.chunk(doc):
                chunks += 1
                found = scan(chunk.text, ("secret",), unexplained=False)
                if not found and args.unexplained:
                    extra = scan(chunk.text, ("secret",), unexplained=True, known=known)
                    if extra:
                        tier_only += 1
                        for f in extra[: max(0, args.show - len(tier_shown))]:
                            line_start = chunk.text.rfind("\n", 0, f.start) + 1
                            line_end = chunk.text.find("\n", f.end)
                            tier_shown.append(f"{doc.doc_id}: [{chunk.text[f.start:f.end]}] "
                                              f"{chunk.text[line_start:line_end if line_end >= 0 else None][:160]}")
                if not found:
                    continue
                flagged += 1
                stated = find_statements(chunk.text) + find_linked_values(chunk.text)
                if stated and len(stated) == len(found):
                    by_statement += 1
                for f in stated[: max(0, args.show - len(shown))]:
                    line_start = chunk.text.rfind("\n", 0, f.start) + 1
                    line_end = chunk.text.find("\n", f.end)
                    shown.append(f"{doc.doc_id}: {chunk.text[line_start:line_end if line_end >= 0 else None][:160]}")
        print(f"handbook {book.name}: {flagged} of {chunks} chunks flagged as holding a credential "
              f"({by_statement} by a statement or a linked value only)")
        for s in shown:
            print(f"    {s}")
        if args.unexplained:
            print(f"  with the tier: {flagged + tier_only} of {chunks} chunks ({tier_only} flagged by the tier only"
                  f"{f', site vocabulary: tokens on {args.site_vocabulary}+ pages' if args.site_vocabulary else ''})")
            for s in tier_shown:
                print(f"    {s}")


if __name__ == "__main__":
    main()
