"""The evidence gate: answer only when enough distinct, relevant chunks support it.

Policy (``GateConfig``):

- A chunk *supports* the question when its cosine similarity to the query is at least
  ``relevance_floor`` and it contains at least one key term of the question.
- The gate passes when at least ``min_citations`` distinct supporting chunks exist and, together,
  the top supporting chunks cover at least ``min_coverage`` of the question's IDF-weighted key
  terms, with the single heaviest key term among them.
- **Single strong source exception**: with fewer supporting chunks, one chunk passes alone when
  its cosine is at least ``strong_single`` and it alone covers at least ``strong_coverage`` of the
  key terms. Handbooks often state a fact on exactly one page; refusing those would be a false
  refusal, while a chunk that is both close in meaning and mentions what was asked is rarely wrong.
  Such answers carry one citation, and the trace says the exception applied.
- Otherwise the gate fails, with the missing key terms as the reason (used for a retry query and
  shown in the refusal).
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
    relevance_floor: float = 0.30
    min_coverage: float = 0.6
    strong_single: float = 0.55
    strong_coverage: float = 0.8
    considered: int = 6

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
        support = [e for e in considered
                   if (e.cosine or 0.0) >= cfg.relevance_floor
                   and (not terms.weights or per_chunk[e.chunk.chunk_id] & set(terms.weights))]
        covered: set[str] = set()
        for e in support:
            covered |= per_chunk[e.chunk.chunk_id]
        coverage = terms.coverage(covered)
        missing = terms.missing(covered)
        heaviest = max(terms.weights, key=terms.weights.get) if terms.weights else None
        if len(support) >= cfg.min_citations and coverage >= cfg.min_coverage and (heaviest is None or heaviest in covered):
            return GateVerdict(True, support, coverage, False, missing,
                               f"{len(support)} supporting chunks cover {coverage:.0%} of the key terms", top_cos)
        for e in support:
            own = terms.coverage(per_chunk[e.chunk.chunk_id])
            if (e.cosine or 0.0) >= cfg.strong_single and own >= cfg.strong_coverage:
                return GateVerdict(True, [e], own, True, terms.missing(per_chunk[e.chunk.chunk_id]),
                                   "one strong source (single-source exception)", top_cos)
        if not support:
            reason = "no passage was close enough to the question"
        elif len(support) < cfg.min_citations:
            reason = f"only {len(support)} supporting passage(s), {cfg.min_citations} needed"
        else:
            reason = f"the passages cover {coverage:.0%} of the question's key terms"
        if missing:
            reason += f"; not found: {', '.join(missing[:4])}"
        return GateVerdict(False, support, coverage, False, missing, reason, top_cos)
