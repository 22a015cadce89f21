"""The retrieval engine: one search as a row of small typed stages.

::

    Query ─> QueryEmbedder ─> CandidateStage ──────────────────────> WeightedRRF ─> Hydrate ─> Deduplicate ─> SearchResult
                              (DenseCandidates ─> PseudoRelevanceFeedback ─> KeywordCandidates: SeparateCandidates, embedded;
                               the same with BM25 through search_pair: PairedCandidates, the shared index)

:meth:`RetrievalEngine.for_index` builds the row for a :class:`~index.knowledge.KnowledgeIndex`: its stores by role
(``index.keyword``, ``index.dense``, and ``index.hybrid`` on a shared index). The tool ``knowledge.search``
(:class:`tools.knowledge_search.KnowledgeSearch`) is a thin layer over it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..knowledge import KnowledgeIndex
from .candidates import CandidateStage, PairedCandidates, SeparateCandidates
from .feedback import PseudoRelevanceFeedback
from .fusion import WeightedRRF
from .identifiers import identifiers
from .ports import KeywordStore
from .query import Query, SearchConfig, SearchResult, Timings
from .stages import Deduplicate, DenseCandidates, Hydrate, KeywordCandidates, QueryEmbedder

__all__ = ["RetrievalEngine"]


class RetrievalEngine:
    """Hybrid retrieval over one index (see the module docstring).

    Args:
        embed: the query-vector stage.
        candidates: the candidate stage (:class:`~index.retrieval.candidates.SeparateCandidates` or
            :class:`~index.retrieval.candidates.PairedCandidates`).
        fusion: the fusion stage.
        hydrate: the stage completing BM25-only candidates.
        deduplicate: the last stage, to :class:`~index.retrieval.query.Evidence`.
        keyword: the keyword store (its analyzer and statistics: :meth:`analyze`, :meth:`doc_frequency`).
        version: reads the index version (keys the dense cache; read at most once per search).
        dense: the dense ranker inside ``candidates`` (:meth:`clear_cache` empties its cache).
    """

    def __init__(self, embed: QueryEmbedder, candidates: CandidateStage, fusion: WeightedRRF, hydrate: Hydrate,
                 deduplicate: Deduplicate, keyword: KeywordStore, version: Callable[[], int],
                 dense: DenseCandidates) -> None:
        self.embed = embed
        self.candidates = candidates
        self.dense = dense
        self.fusion = fusion
        self.hydrate = hydrate
        self.deduplicate = deduplicate
        self.keyword = keyword
        self._version = version

    @classmethod
    def for_index(cls, index: KnowledgeIndex, config: SearchConfig | None = None,
                  query_cache_size: int = 512) -> RetrievalEngine:
        """The engine over ``index``'s stores, with ``config``'s parameters: :class:`PairedCandidates` when
        ``index.hybrid`` is set (a shared index), else :class:`SeparateCandidates`."""
        cfg = config or SearchConfig()
        embed = QueryEmbedder(index.embedder, size=query_cache_size)
        dense = DenseCandidates(index.dense, limit=cfg.candidates)
        feedback = PseudoRelevanceFeedback(index.keyword, docs=cfg.prf_docs, terms=cfg.prf_terms,
                                           weight=cfg.expansion_weight)
        candidates: CandidateStage
        if index.hybrid is not None:
            candidates = PairedCandidates(index.hybrid, dense, feedback, limit=cfg.candidates)
        else:
            candidates = SeparateCandidates(dense, feedback, KeywordCandidates(index.keyword, limit=cfg.candidates))
        fusion = WeightedRRF(cfg.rrf_k, cfg.dense_weight, cfg.bm25_weight, cfg.identifier_bm25_weight)
        return cls(embed, candidates, fusion, Hydrate(index.dense, embed), Deduplicate(), index.keyword,
                   lambda: index.version, dense)

    def search(self, query: Query) -> SearchResult:
        """Run every stage for ``query``.

        Returns:
            :class:`~index.retrieval.query.SearchResult`: at most ``query.k`` passages, best first, with each
            stage's milliseconds (``embed``, ``dense``, ``feedback``, ``bm25`` or ``dense+bm25``, ``fuse``,
            ``hydrate``, ``dedupe``) and the feedback terms.

        Raises:
            ValueError: when ``query.viewer`` is not a :class:`~core.access.Viewer` (from the stores).
            EmbeddingError: when the query cannot be embedded.
        """
        timings = Timings()
        with timings("embed"):
            vector = self.embed.run(query.embedded)
        found = self.candidates.run(query, vector, self._version, timings)
        with timings("fuse"):
            terms = identifiers(" ".join(dict.fromkeys([query.text, query.embedded])))
            fused = self.fusion.run(found.lists, terms)
        with timings("hydrate"):
            self.hydrate.run(query, fused, found, vector)
        with timings("dedupe"):
            evidence = self.deduplicate.run(query, fused, found, terms)
        return SearchResult(evidence, timings.ms, query.text, query.retriever, found.feedback)

    def query_vector(self, text: str) -> np.ndarray:
        """The query vector of ``text`` (shape ``(dim,)``, remembered)."""
        return self.embed.run(text)

    def analyze(self, text: str) -> list[str]:
        """Index terms of ``text`` (the BM25 analyzer: lower-case, stop words out, Porter stems)."""
        return self.keyword.analyze(text)

    def doc_frequency(self, term: str) -> int:
        """Number of chunks holding the analysed ``term``."""
        return self.keyword.doc_frequency(term)

    @property
    def doc_count(self) -> int:
        """Number of chunks in the index."""
        return self.keyword.doc_count

    def idf(self, term: str) -> float:
        """Inverse document frequency of an analysed term over chunks: ``ln(1 + N / (df + 0.5))``."""
        return float(np.log1p(max(self.doc_count, 1) / (self.doc_frequency(term) + 0.5)))

    def clear_cache(self) -> None:
        """Forget the remembered dense candidates (benchmarks time real searches; query vectors stay)."""
        self.dense.clear()
