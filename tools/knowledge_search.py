"""``knowledge.search``: the tool over the retrieval engine (:mod:`index.retrieval`).

Dense candidates, BM25 candidates with pseudo-relevance feedback from the top dense passages, weighted reciprocal
rank fusion, hydration and de-duplication are the engine's stages (:class:`index.retrieval.RetrievalEngine`, one
row of them for an embedded index and one for a shared one). This module validates the arguments, takes the
asker's access context from the :class:`~tools.context.ToolContext` and hands back the engine's
:class:`Evidence`, with each retriever's rank and raw score, the cosine to the query and the query's identifiers
each passage holds. ``retriever="bm25"`` or ``"dense"`` returns one ranker alone for ablations.

Access (issue 11): every search runs for the :class:`core.access.Viewer` in ``ctx.viewer`` (from
``Turn.viewer``; a missing one raises ``ValueError``: a programming error, never "everyone"). Every store applies
it, and a channel's scope (:attr:`Viewer.sources`), as a pre-filter inside its query. The viewer is not a tool
argument: the language model cannot pick it.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from pydantic import BaseModel, Field

from core.access import Viewer
from index.knowledge import KnowledgeIndex
from index.retrieval import Evidence, Query, RetrievalEngine, Retriever, SearchConfig, SearchResult
from telemetry.tracing import span

from .base import ToolContext

__all__ = ["KnowledgeSearch", "KnowledgeSearchArgs", "Evidence", "SearchResult", "SearchConfig"]


class KnowledgeSearchArgs(BaseModel):
    """Arguments of ``knowledge.search``."""

    query: str = Field(min_length=1, max_length=4000, description="What to look for, in words a page would use.")
    k: int = Field(default=8, ge=1, le=100, description="Number of passages to return.")
    retriever: Retriever = Field(default="hybrid", description="hybrid (BM25 + dense, fused), bm25 or dense.")
    dense_query: str | None = Field(default=None, max_length=4000,
                                    description="Text to embed instead of the query (e.g. a hypothetical answer).")
    expansion: list[str] = Field(default_factory=list, max_length=32,
                                 description="Extra keyword terms for BM25 (query expansion), weighted down.")
    prf: bool = Field(default=True, description="Add pseudo-relevance feedback terms from the top dense passages to BM25.")
    cosine_to: str | None = Field(default=None, max_length=4000,
                                  description="Text the reported cosines are measured against (default: the dense query).")


class KnowledgeSearch:
    """The ``knowledge.search`` tool over one :class:`~index.knowledge.KnowledgeIndex`.

    Args:
        index: the index searched.
        config: retrieval parameters (RRF k and weights, candidates, feedback).
        query_cache_size: query vectors remembered.
    """

    name: ClassVar[str] = "knowledge.search"
    description: ClassVar[str] = (
        "Search the company knowledge base (Confluence, wiki, handbook) and return numbered passages "
        "with titles, sections and links. Use for any question about the company, its policies, "
        "processes, tools or people.")
    Args: ClassVar[type[BaseModel]] = KnowledgeSearchArgs
    side_effect: ClassVar[bool] = False
    permission: ClassVar[str] = "everyone"

    def __init__(self, index: KnowledgeIndex, config: SearchConfig | None = None, query_cache_size: int = 512) -> None:
        self.index = index
        self.config = config or SearchConfig()
        self.engine = RetrievalEngine.for_index(index, self.config, query_cache_size=query_cache_size)

    def run(self, args: KnowledgeSearchArgs, ctx: ToolContext | None = None) -> SearchResult:
        """Search in a ``chatops.search`` span when tracing is on (the retriever and the number of results as
        attributes, never the query).

        Raises:
            ValueError: when ``ctx`` carries no :class:`~core.access.Viewer`.
        """
        viewer = ctx.viewer if ctx is not None else None
        if not isinstance(viewer, Viewer):
            raise ValueError("knowledge.search needs the asker's access context (ToolContext.viewer, from "
                             "Turn.viewer); without one it cannot tell what the asker may read")
        query = Query(args.query, viewer, k=args.k, retriever=args.retriever, dense_text=args.dense_query,
                      expansion=tuple(args.expansion), prf=args.prf, cosine_to=args.cosine_to)
        with span("chatops.search", {"chatops.retriever": args.retriever}) as sp:
            result = self.engine.search(query)
            sp.set_attribute("chatops.results", len(result.evidence))
            return result

    def embed_query(self, text: str) -> np.ndarray:
        """The query vector of ``text`` (shape ``(dim,)``), remembered."""
        return self.engine.query_vector(text)

    # -- what the agent reads to judge evidence ------------------------------------------------
    def analyze(self, text: str) -> list[str]:
        """Index terms of ``text`` (the BM25 analyzer: lower-case, stop words out, Porter stems)."""
        return self.engine.analyze(text)

    def idf(self, term: str) -> float:
        """Inverse document frequency of an analysed term over chunks: ``ln(1 + N / (df + 0.5))``."""
        return self.engine.idf(term)

    def doc_frequency(self, term: str) -> int:
        """Number of chunks holding the analysed ``term``."""
        return self.engine.doc_frequency(term)

    @property
    def doc_count(self) -> int:
        """Number of chunks in the index."""
        return self.engine.doc_count
