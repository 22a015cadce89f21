"""What flows through the retrieval engine: the request (:class:`Query`), its settings (:class:`SearchConfig`), what
the candidate stages found (:class:`Candidates`), and what comes out (:class:`Evidence`, :class:`SearchResult`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from core.access import Viewer
from core.models import Chunk
from telemetry.timing import timed

__all__ = ["Retriever", "Query", "SearchConfig", "Candidates", "Evidence", "SearchResult", "Timings"]

#: Which rankers a search runs: both fused, or one alone (for ablations).
Retriever = Literal["hybrid", "bm25", "dense"]


@dataclass(frozen=True, slots=True)
class Query:
    """One search.

    Attributes:
        text: the keyword (BM25) query, free text.
        viewer: who will read the result: every store applies its access and scope as a pre-filter inside the
            query (a missing viewer is a programming error: ``ValueError`` from the stores).
        k: passages returned at most.
        retriever: ``hybrid`` (dense and BM25 fused), ``bm25`` or ``dense``.
        dense_text: the text embedded for the dense ranker and the cosines (``None``: ``text``).
        expansion: extra keyword terms for BM25, weighted down (``SearchConfig.expansion_weight``).
        prf: add pseudo-relevance feedback terms from the top dense passages to BM25 (hybrid only).
        cosine_to: the text the reported cosines are measured against (``None``: the dense text).
    """

    text: str
    viewer: Viewer
    k: int = 8
    retriever: Retriever = "hybrid"
    dense_text: str | None = None
    expansion: tuple[str, ...] = ()
    prf: bool = True
    cosine_to: str | None = None

    @property
    def embedded(self) -> str:
        """The text whose vector is the dense query (``dense_text`` or ``text``)."""
        return self.dense_text or self.text

    @property
    def ranks_dense(self) -> bool:
        """True when the dense ranker runs (``hybrid`` or ``dense``)."""
        return self.retriever != "bm25"

    @property
    def ranks_bm25(self) -> bool:
        """True when the BM25 ranker runs (``hybrid`` or ``bm25``)."""
        return self.retriever != "dense"

    @property
    def feedback(self) -> bool:
        """True when pseudo-relevance feedback applies (asked for, and a hybrid search)."""
        return self.prf and self.retriever == "hybrid"


@dataclass(frozen=True, slots=True)
class SearchConfig:
    """Retrieval parameters.

    Attributes:
        rrf_k: RRF constant (Cormack et al. use 60).
        dense_weight, bm25_weight: RRF weights per retriever.
        candidates: candidates taken from each retriever before fusion.
        expansion_weight: BM25 weight of expansion and feedback terms relative to query terms.
        prf_docs, prf_terms: pseudo-relevance feedback from this many top dense passages, this many terms.
        identifier_bm25_weight: the BM25 weight instead of ``bm25_weight`` when the query names a
            code-like identifier (a code, command, ticket id or version; not a bare acronym such as
            "PRs", which the dense model reads well enough).
    """

    rrf_k: int = 60
    dense_weight: float = 1.0
    bm25_weight: float = 0.6
    candidates: int = 60
    expansion_weight: float = 0.3
    prf_docs: int = 3
    prf_terms: int = 6
    identifier_bm25_weight: float = 1.5


@dataclass(slots=True)
class Candidates:
    """What the candidate stages found for one query (filled by a
    :class:`~index.retrieval.candidates.CandidateStage`, completed by :class:`~index.retrieval.stages.Hydrate`).

    Attributes:
        lists: ranker name (``"dense"``, ``"bm25"``) to its ``(chunk id, raw score)`` pairs, best first; the
            dense list first when both ran (fusion keeps first-seen order on ties).
        chunks: chunk id to the chunk, for every candidate whose chunk is known so far.
        cosines: chunk id to the cosine similarity of its vector to the dense query's vector (in [-1, 1]).
        feedback: the pseudo-relevance feedback terms added to the BM25 query (analysed terms).
    """

    lists: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    chunks: dict[str, Chunk] = field(default_factory=dict)
    cosines: dict[str, float] = field(default_factory=dict)
    feedback: list[str] = field(default_factory=list)

    def dense_chunks(self) -> list[Chunk]:
        """The dense hits' chunks, best first (``[]`` when the dense ranker did not run)."""
        return [self.chunks[cid] for cid, _ in self.lists.get("dense", [])]


@dataclass(frozen=True, slots=True)
class Evidence:
    """One retrieved chunk.

    Attributes:
        chunk: the passage.
        score: the fused score (RRF) or the single retriever's score.
        ranks: retriever name to 1-based rank in its own list.
        scores: retriever name to raw score (BM25F score; cosine similarity in [-1, 1]).
        cosine: cosine similarity of the chunk's vector to the dense query's vector (or to ``cosine_to``),
            computed for every returned chunk, also those only BM25 found (the evidence gate reads it); ``None``
            only when the chunk's vector is missing.
        exact: the query's identifiers (:func:`index.retrieval.identifiers.identifiers`, as written in the
            query) that the chunk's text holds verbatim; ``()`` when the query names none.
    """

    chunk: Chunk
    score: float
    ranks: dict[str, int] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)
    cosine: float | None = None
    exact: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """Trace-friendly summary."""
        c = self.chunk
        return {"chunk_id": c.chunk_id, "doc_id": c.doc_id, "title": c.title, "section": c.section,
                "score": round(self.score, 5), "ranks": self.ranks,
                "scores": {k: round(v, 4) for k, v in self.scores.items()},
                "cosine": None if self.cosine is None else round(self.cosine, 4),
                **({"exact": list(self.exact)} if self.exact else {})}


@dataclass(slots=True)
class SearchResult:
    """Evidence plus per-stage timings in milliseconds."""

    evidence: list[Evidence]
    timings_ms: dict[str, float]
    query: str
    retriever: str
    feedback_terms: list[str] = field(default_factory=list)


class Timings:
    """Per-stage wall time of one search, in milliseconds (``with timings("dense"): ...``)."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        """Add the block's wall time to ``stage`` (stages timed twice add up), in a ``chatops.search.<stage>``
        span (:func:`telemetry.timing.timed`)."""
        clock = None
        try:
            with timed(f"chatops.search.{stage}") as clock:
                yield
        finally:
            if clock is not None:
                self.ms[stage] = self.ms.get(stage, 0.0) + clock.ms
