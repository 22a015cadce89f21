"""The retrieval engine: hybrid search over a :class:`~index.knowledge.KnowledgeIndex` as small typed stages.

- :mod:`index.retrieval.query`: the request (:class:`Query`), its settings (:class:`SearchConfig`), the candidates
  between stages and what comes out (:class:`Evidence`, :class:`SearchResult`).
- :mod:`index.retrieval.ports`: what the engine needs of the stores, by role (keyword, dense, the shared pair).
- :mod:`index.retrieval.stages`: query vectors, dense and BM25 candidates, hydration, de-duplication.
- :mod:`index.retrieval.feedback`: pseudo-relevance feedback (RM3-style), the BM25 query's expansion.
- :mod:`index.retrieval.fusion`: weighted reciprocal rank fusion.
- :mod:`index.retrieval.candidates`: the candidate stage, embedded and shared.
- :mod:`index.retrieval.engine`: :class:`RetrievalEngine`, the stages in a row.
- :mod:`index.retrieval.identifiers`: exact terms (codes, commands, channels) in a question.
"""

from .candidates import CandidateStage, PairedCandidates, SeparateCandidates
from .engine import RetrievalEngine
from .feedback import KeywordQuery, PseudoRelevanceFeedback, feedback_terms
from .fusion import WeightedRRF, reciprocal_rank_fusion
from .ports import DenseStore, KeywordStore, PairStore
from .query import Candidates, Evidence, Query, Retriever, SearchConfig, SearchResult, Timings
from .stages import Deduplicate, DenseCandidates, Hydrate, KeywordCandidates, QueryEmbedder

__all__ = ["RetrievalEngine", "Query", "Retriever", "SearchConfig", "SearchResult", "Evidence", "Candidates", "Timings",
           "CandidateStage", "SeparateCandidates", "PairedCandidates", "QueryEmbedder", "DenseCandidates",
           "KeywordCandidates", "Hydrate", "Deduplicate", "PseudoRelevanceFeedback", "KeywordQuery", "WeightedRRF",
           "reciprocal_rank_fusion", "feedback_terms", "KeywordStore", "DenseStore", "PairStore"]
