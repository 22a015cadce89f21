"""Calibrating the evidence gate on the user's own corpus, without labelled data.

Absolute cosines are not portable: MiniLM's similarities shift with the corpus and the wording, so
a floor tuned on one wiki refuses paraphrases on another. The gate's rank signal (how far the closest
passage stands out from the ``margin_rank``-th, :meth:`agent.gate.EvidenceGate._strong_paraphrase`)
travels better, but its operating point still depends on how uniform the corpus is. This module
fits it per corpus from self-made probes:

1. **Answerable probes.** A sample of indexed chunks (seeded, so a re-run on the same index gives the
   same result); from each, a question made of its section heading and the rarest words of its first
   sentence ("Laptop refresh: refresh laptop years"). Its answer is known: the chunk it came from.
2. **Near-miss probes.** The same question with its most specific word (the rarest in the corpus)
   swapped for a plausible workplace noun the corpus does not contain (:data:`NEAR_MISS_NOUNS`,
   each checked absent from the index vocabulary). The topic stays, the fact asked is gone: the
   shape of an unanswerable question about a covered topic, as in SQuAD 2.0's adversarial
   unanswerables (Rajpurkar, Jia & Liang 2018, "Know What You Don't Know: Unanswerable Questions for
   SQuAD").
3. Every probe runs through the real retrieval (hybrid ``knowledge.search``), asked as a reader of
   the chunk it came from (:func:`reader_of`: public pages as a public-only viewer, a restricted page
   as its own principals; a page readable by nobody gives no probe), and the gate's features:
   the top cosine and the margin of the top cosine over the ``margin_rank``-th.
4. The operating point is a threshold chosen on held-out scores for a target false-refusal rate, as in
   Platt (1999, "Probabilistic outputs for support vector machines") where a score is mapped to a
   decision on data the scorer was not fitted on: ``paraphrase_margin`` is the ``target_frr``
   quantile of the answerable probes' margins whose source was retrieved, and ``relevance_floor``
   the same quantile of their top cosines; both are bounded by the defaults (calibration may only
   lower a floor, never raise it above what the defaults ask, and never below ``min_floor``), since
   probes are easier than chat questions. The near-miss probes give the refusal rate expected at that
   point (reported, not optimised).

The result is stored with the index (:data:`CALIBRATION_FILE`, JSON: the fitted values, probe counts,
rates and the date; a shared index keeps it in its manifest in the state database instead, metadata key
:data:`CALIBRATION_KEY`, so every replica's gate uses it and no replica needs a local file), loaded when
the gate is built (:func:`gate_config`; defaults when absent), and shown by ``chatops status``. A few
hundred probes take seconds.
"""

from __future__ import annotations

import json
import logging
import random
import re
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from core.access import Access, Viewer
from index.knowledge import KnowledgeIndex
from index.manifest import Manifest
from tools.context import ToolContext
from tools.knowledge_search import KnowledgeSearch, KnowledgeSearchArgs
from telemetry.timing import timed

from .gate import GateConfig
from .text import QUESTION_STOPWORDS, sentence_spans

__all__ = ["CALIBRATION_FILE", "NEAR_MISS_NOUNS", "Probe", "make_probes", "absent_nouns", "calibrate",
           "save_calibration", "load_calibration", "store_calibration", "index_calibration", "CALIBRATION_KEY",
           "gate_config", "describe", "calibrate_index"]

log = logging.getLogger(__name__)

#: The manifest metadata key of a shared index's calibration (see the module docstring).
CALIBRATION_KEY = "gate_calibration"
#: The calibration's file name inside the index folder.
CALIBRATION_FILE = "gate_calibration.json"

#: Plausible workplace nouns; those the corpus does not contain replace a probe's specific word.
NEAR_MISS_NOUNS = (
    "sabbatical", "pension", "annuity", "severance", "probation", "per diem", "gratuity", "timesheet",
    "payslip", "stipulation", "kiosk", "cafeteria", "locker", "parking permit", "shuttle", "daycare",
    "tuition", "mortgage", "lottery", "raffle", "uniform", "badge photo", "notary", "embargo", "tariff",
    "franchise", "warehouse", "forklift", "carpool", "fax", "pager rota", "switchboard", "dress code",
    "overtime", "bereavement fund", "union", "canteen", "vending machine", "gym locker", "typewriter",
    "voicemail", "reimbursement cap", "relocation lump sum", "signing bonus", "stock buyback", "pto cashout",
    "night shift", "shift premium", "hazard pay", "mileage rate",
)

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9-]{2,}")


@dataclass(frozen=True, slots=True)
class Probe:
    """A self-made calibration question.

    Attributes:
        question: the probe's text.
        kind: ``"answerable"`` or ``"near_miss"``.
        chunk_id: the chunk it was made from (the answer, for an answerable probe).
        viewer: who asks it: a reader of that chunk (:func:`reader_of`).
    """

    question: str
    kind: str
    chunk_id: str
    viewer: Viewer = Viewer.public("calibration")


def reader_of(access: Access) -> Viewer | None:
    """A viewer who may read a chunk of ``access``: public-only for a public page, its principals for a
    restricted one; ``None`` for a page readable by nobody."""
    if not access.tokens():
        return None
    if access.public:
        return Viewer.public("calibration")
    return Viewer.person(access.principals, audience="calibration")


def absent_nouns(search: KnowledgeSearch) -> list[str]:
    """The :data:`NEAR_MISS_NOUNS` none of whose analysed terms the index holds."""
    out = []
    for noun in NEAR_MISS_NOUNS:
        terms = search.analyze(noun)
        if terms and all(search.doc_frequency(t) == 0 for t in terms):
            out.append(noun)
    return out


def make_probes(search: KnowledgeSearch, n: int = 100, seed: int = 15) -> list[Probe]:
    """Up to ``n`` answerable probes and as many near-miss probes from a seeded sample of the index.

    Chunks without a heading or a first sentence of at least three content words give no probe.
    """
    ids = sorted(search.index.keyword.chunk_ids())
    rng = random.Random(seed)
    rng.shuffle(ids)
    nouns = absent_nouns(search)
    probes: list[Probe] = []
    for start in range(0, len(ids), 64):
        if len(probes) >= 2 * n:
            break
        for cid, chunk in search.index.keyword.chunks(ids[start:start + 64]).items():
            if len(probes) >= 2 * n:
                break
            heading = (chunk.section_path[-1] if chunk.section_path else chunk.title).strip()
            spans = [s for s in sentence_spans(chunk.text) if len(s.text.split()) >= 5]
            viewer = reader_of(chunk.access)
            if not heading or not spans or viewer is None:
                continue
            words = []
            for w in dict.fromkeys(w.lower() for w in _WORD.findall(spans[0].text)):
                stems = search.analyze(w)
                if w not in QUESTION_STOPWORDS and stems:
                    words.append((search.idf(stems[0]), w))
            if len(words) < 3:
                continue
            phrase = [w for _, w in sorted(words, reverse=True)[:3]]
            question = f"{heading}: {' '.join(phrase)}?"
            probes.append(Probe(question, "answerable", cid, viewer))
            if nouns:
                candidates = [(search.idf(s[0]), w) for w in re.findall(r"[A-Za-z][\w-]+", question)
                              if (s := search.analyze(w)) and w.lower() not in QUESTION_STOPWORDS]
                if candidates:
                    rarest = max(candidates)[1]
                    swapped = re.sub(rf"\b{re.escape(rarest)}\b", rng.choice(nouns), question, count=1)
                    probes.append(Probe(swapped, "near_miss", cid, viewer))
    return probes


def _quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    if not xs:
        return float("nan")
    i = min(len(xs) - 1, max(0, int(q * len(xs))))
    return xs[i]


def calibrate(search: KnowledgeSearch, base: GateConfig | None = None, n: int = 100, target_frr: float = 0.10,
              min_floor: float = 0.25, seed: int = 15) -> dict[str, Any]:
    """Fit the gate's operating point on probes made from ``search``'s index (see the module docstring).

    Args:
        search: the ``knowledge.search`` tool over the index to calibrate.
        base: the thresholds the calibration may lower (the defaults when None).
        n: answerable probes to make (as many near misses).
        target_frr: the share of answerable probes the fitted point may refuse.
        min_floor: no fitted cosine floor goes below this.
        seed: the sample's seed.

    Returns:
        The calibration record (JSON-ready): ``relevance_floor``, ``paraphrase_margin``, probe counts,
        ``expected`` rates on the probes, ``created``, ``chunks`` and ``seconds``.

    Raises:
        ValueError: when the index is too small to make probes (fewer than 10 answerable ones).
    """
    base = base or GateConfig()
    with timed("chatops.calibrate") as clock:
        probes = make_probes(search, n=n, seed=seed)
        rows: dict[str, list[tuple[float, float, bool]]] = {"answerable": [], "near_miss": []}
        for p in probes:
            res = search.run(KnowledgeSearchArgs(query=p.question, k=30, retriever="hybrid"),
                             ToolContext(viewer=p.viewer))
            cos = sorted((e.cosine for e in res.evidence if e.cosine is not None), reverse=True)
            if not cos:
                continue
            margin = cos[0] - cos[min(base.margin_rank, len(cos)) - 1]
            found = any(e.chunk.chunk_id == p.chunk_id for e in res.evidence[: base.considered])
            rows[p.kind].append((cos[0], margin, found))
        answerable = [r for r in rows["answerable"] if r[2]]
        if len(answerable) < 10:
            raise ValueError(f"the index is too small to calibrate the gate ({len(answerable)} answerable probes "
                             "found their source; 10 needed); the default thresholds stay in use")
        floor = min(base.relevance_floor, max(min_floor, _quantile([r[0] for r in answerable], target_frr)))
        margin = min(base.paraphrase_margin, max(0.0, _quantile([r[1] for r in answerable], target_frr)))
        near = rows["near_miss"]
        expected = {
            "false_refusal": round(sum(1 for r in answerable if r[0] < floor or r[1] < margin) / len(answerable), 3),
            "near_miss_refusal": round(sum(1 for r in near if r[0] < floor or r[1] < margin) / len(near), 3)
            if near else None,
        }
    return {
        "method": "self-supervised probes; target false-refusal quantile (see agent/calibration.py)",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "chunks": search.doc_count,
        "index_version": search.index.version,
        "probes": {"answerable": len(rows["answerable"]), "answerable_found": len(answerable),
                   "near_miss": len(near)},
        "target_false_refusal": target_frr,
        "relevance_floor": round(floor, 4),
        "paraphrase_margin": round(margin, 4),
        "expected": expected,
        "seconds": round(clock.elapsed(), 2),
    }


def save_calibration(index_dir: str | Path, record: dict[str, Any]) -> Path:
    """Write ``record`` to ``index_dir/gate_calibration.json`` (atomically); returns the path."""
    path = Path(index_dir) / CALIBRATION_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True), encoding="utf-8")
    tmp.replace(path)
    return path


def load_calibration(index_dir: str | Path) -> dict[str, Any] | None:
    """The stored calibration of the index in ``index_dir``, or None when absent or unreadable."""
    path = Path(index_dir) / CALIBRATION_FILE
    try:
        return _checked(json.loads(path.read_text(encoding="utf-8")), path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("ignoring the damaged gate calibration %s (%s); using the default thresholds until it is fitted "
                    "again: run `chatops calibrate` (or any `chatops index` run)", path, exc)
        return None


def _checked(record: Any, where: Any) -> dict[str, Any] | None:
    """``record`` when it has the fitted values, else None (logged: the defaults stay in use)."""
    if not isinstance(record, dict) or not all(isinstance(record.get(k), (int, float))
                                               for k in ("relevance_floor", "paraphrase_margin")):
        log.warning("ignoring the gate calibration %s (missing fields); using the default thresholds", where)
        return None
    return record


def index_calibration(manifest: Manifest, index_dir: str | Path) -> dict[str, Any] | None:
    """The stored calibration of an index: from its ``manifest`` (an :class:`index.manifest.Manifest`) when
    that lives in the state database (a shared index), else from the file in ``index_dir``; None when
    absent or unreadable."""
    if manifest.scope is None:
        return load_calibration(index_dir)
    raw = manifest.get(CALIBRATION_KEY)
    try:
        return None if raw is None else _checked(json.loads(raw), f"of the shared index {manifest.scope}")
    except ValueError as exc:
        log.warning("ignoring the gate calibration of the shared index %s (%s); using the default thresholds",
                    manifest.scope, exc)
        return None


def store_calibration(index: KnowledgeIndex, record: dict[str, Any]) -> str:
    """Keep ``record`` where :func:`index_calibration` reads it for ``index`` (a
    :class:`index.knowledge.KnowledgeIndex`): its manifest for a shared index, else the file
    (:func:`save_calibration`); returns where, for messages."""
    if index.manifest.scope is None:
        return str(save_calibration(index.path, record))
    index.manifest.set(CALIBRATION_KEY, json.dumps(record, sort_keys=True))
    return f"the manifest of the shared index {index.manifest.scope}"


def gate_config(base: GateConfig, record: dict[str, Any] | None) -> GateConfig:
    """``base`` with the calibrated values of ``record`` (``base`` itself when ``record`` is None).

    A calibrated floor never exceeds ``base``'s (a stricter setting by the operator wins).
    """
    if not record:
        return base
    return replace(base, relevance_floor=min(base.relevance_floor, float(record["relevance_floor"])),
                   paraphrase_margin=min(base.paraphrase_margin, float(record["paraphrase_margin"])),
                   calibrated=str(record.get("created", "calibrated")))


def describe(record: dict[str, Any] | None) -> str:
    """One line for ``chatops status``."""
    if not record:
        return "gate calibration: none (default thresholds; run `chatops calibrate`)"
    p = record.get("probes", {})
    e = record.get("expected", {})
    return (f"gate calibration: {record.get('created', '?')}, {p.get('answerable', 0)} answerable + "
            f"{p.get('near_miss', 0)} near-miss probes; relevance floor {record['relevance_floor']:.3f}, "
            f"paraphrase margin {record['paraphrase_margin']:.3f}; expected false refusal "
            f"{e.get('false_refusal')}, near-miss refusal {e.get('near_miss_refusal')}")


def calibrate_index(index: KnowledgeIndex, force: bool = False, change: float = 0.1) -> dict[str, Any] | None:
    """Calibrate the gate for ``index`` (a :class:`index.knowledge.KnowledgeIndex`) and store the result.

    Without ``force``, only when the index changed substantially since the stored calibration: none
    stored, or the chunk count moved by more than ``change`` (a share). Returns the new record, or None
    when nothing was done or the index is too small (logged; the defaults stay in use).
    """
    old = index_calibration(index.manifest, index.path)
    chunks = index.keyword.doc_count
    if not force and old and abs(chunks - int(old.get("chunks", 0))) <= change * max(int(old.get("chunks", 0)), 1):
        return None
    try:
        record = calibrate(KnowledgeSearch(index))
    except ValueError as exc:
        log.info("gate calibration skipped: %s", exc)
        return None
    store_calibration(index, record)
    return record
