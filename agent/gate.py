"""The evidence gate: answer only when enough distinct, relevant chunks support it.

Policy (``GateConfig``), measured on the handbook dev set (see the README's evaluation section):

- A chunk *supports* the question when its dense cosine similarity to the question is at least
  ``relevance_floor`` and it contains at least one key term of the question; or, without any key
  term (a paraphrase: "gym" for a page on the "wellness" stipend), when its cosine is at least
  ``semantic_floor``; or when it contains every key term of the question and its cosine is at
  least ``lexical_floor`` (an exact identifier such as "PTEP" or ``/genie whoisoncall`` that a
  small dense model does not know well).
- The gate passes when at least ``min_citations`` distinct chunks support the question.
- **Single strong source exception**: with one supporting chunk, the gate still passes when that
  chunk contains at least ``strong_coverage`` of the question's IDF-weighted key terms and either
  its cosine is at least ``strong_single`` or both retrievers independently rank it among their
  top ``agreement_rank`` (dense and BM25 agreeing is strong evidence on its own); or when it
  stands out: cosine at least ``semantic_floor`` and at least ``standout_margin`` above the
  median cosine of everything retrieved (one passage far closer than the rest is a focused
  answer, typical of a paraphrased question about a one-page policy). Handbooks often state a fact on exactly one page; refusing
  those would be a false refusal, while a chunk that is both close in meaning and mentions what
  was asked is rarely wrong. Such answers carry one citation and the trace marks the exception.
- Otherwise the gate fails; the reason names the key terms no supporting chunk contains (used for
  the retry query and shown in the refusal).

Why cosine and not a BM25 score: BM25 scores are not comparable across queries, and on the dev
set the top cosine separated unanswerable from answerable questions better than any BM25 or
coverage statistic, though not perfectly (see the baselines); key-term coverage is kept in the
verdict for the retry and the trace.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tools.knowledge_search import Evidence

from .terms import KeyTerms, chunk_terms

__all__ = ["EvidenceGate", "GateConfig", "GateVerdict"]


@dataclass(frozen=True, slots=True)
class GateConfig:
    """Thresholds of the gate (cosines in [-1, 1], coverages in [0, 1])."""

    min_citations: int = 2
    relevance_floor: float = 0.43
    semantic_floor: float = 0.50
    lexical_floor: float = 0.33
    strong_single: float = 0.55
    strong_coverage: float = 0.6
    agreement_rank: int = 2
    standout_margin: float = 0.15
    considered: int = 8

    def __post_init__(self) -> None:
        if self.min_citations < 1:
            raise ValueError("MIN_CITATIONS must be at least 1")


@dataclass(slots=True)
class GateVerdict:
    """The gate's decision.

    Attributes:
        sufficient: whether to answer.
        support: the supporting evidence, best first.
        coverage: key-term coverage of the supporting chunks.
        single_source: True when the single strong source exception applied.
        missing: key terms the evidence lacks, heaviest first.
        reason: a short human-readable reason.
    """

    sufficient: bool
    support: list[Evidence] = field(default_factory=list)
    coverage: float = 0.0
    single_source: bool = False
    missing: list[str] = field(default_factory=list)
    reason: str = ""
    top_cosine: float = 0.0

    def as_dict(self) -> dict:
        """Trace-friendly dict."""
        return {"sufficient": self.sufficient, "support": [e.chunk.chunk_id for e in self.support],
                "coverage": round(self.coverage, 3), "single_source": self.single_source,
                "missing": self.missing, "reason": self.reason, "top_cosine": round(self.top_cosine, 4)}


class EvidenceGate:
    """Judges retrieved evidence against a question's key terms.

    Args:
        config: thresholds.
        analyze: the index analyzer (text to stemmed terms), to read chunk terms the same way.
    """

    def __init__(self, config: GateConfig, analyze: Callable[[str], list[str]]) -> None:
        self.config = config
        self.analyze = analyze

    def judge(self, evidence: list[Evidence], terms: KeyTerms) -> GateVerdict:
        """Decide whether ``evidence`` suffices for a question with key terms ``terms``."""
        cfg = self.config
        considered = evidence[: cfg.considered]
        per_chunk = {e.chunk.chunk_id: chunk_terms([e.chunk], self.analyze) for e in considered}
        top_cos = max((e.cosine or 0.0 for e in considered), default=0.0)
        key = set(terms.weights)

        def supports(e: Evidence) -> bool:
            cos = e.cosine or 0.0
            terms_in = per_chunk[e.chunk.chunk_id] & key
            if cos >= cfg.semantic_floor or (cos >= cfg.relevance_floor and (terms_in or not key)):
                return True
            return bool(key) and terms_in == key and cos >= cfg.lexical_floor

        support = [e for e in considered if supports(e)]
        covered: set[str] = set()
        for e in support:
            covered |= per_chunk[e.chunk.chunk_id]
        coverage = terms.coverage(covered)
        missing = terms.missing(covered)
        if len(support) >= cfg.min_citations:
            return GateVerdict(True, support, coverage, False, missing,
                               f"{len(support)} supporting passages (best cosine {top_cos:.2f})", top_cos)
        if support:
            e = support[0]
            cos = e.cosine or 0.0
            own = terms.coverage(per_chunk[e.chunk.chunk_id])
            agree = all(e.ranks.get(r, 10**6) <= cfg.agreement_rank for r in ("dense", "bm25"))
            cosines = sorted(x.cosine for x in evidence if x.cosine is not None)
            median = cosines[len(cosines) // 2] if cosines else 0.0
            strong = own >= cfg.strong_coverage and (cos >= cfg.strong_single or agree)
            standout = cos >= cfg.semantic_floor and cos - median >= cfg.standout_margin
            if strong or standout:
                why = "strong and on topic" if strong else f"stands out ({cos - median:+.2f} over the median)"
                return GateVerdict(True, [e], own, True, terms.missing(per_chunk[e.chunk.chunk_id]),
                                   f"one source, {why} (single-source exception)", top_cos)
        if not support:
            reason = "no passage was close enough to the question"
        else:
            reason = f"only {len(support)} supporting passage, {cfg.min_citations} needed"
        if missing:
            reason += f"; not found: {', '.join(missing[:4])}"
        return GateVerdict(False, support, coverage, False, missing, reason, top_cos)
