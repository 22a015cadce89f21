"""The candidate stage: the dense and BM25 lists of one query, with the pseudo-relevance feedback between them.

One protocol (:class:`CandidateStage`), two implementations made of the same small stages:

- :class:`SeparateCandidates` (the embedded index: Whoosh or the local sparse store, and local-mode Qdrant):
  dense candidates (:class:`~index.retrieval.stages.DenseCandidates`), then the BM25 query with the feedback of
  their top passages (:class:`~index.retrieval.feedback.PseudoRelevanceFeedback`), then BM25 candidates
  (:class:`~index.retrieval.stages.KeywordCandidates`): one search per store.
- :class:`PairedCandidates` (the shared index, ``QDRANT_URL``: one collection with both vectors): the same stages,
  with BM25 sent through :meth:`~index.stores.QdrantHybridStore.search_pair`, which brings each BM25 hit's chunk
  and its cosine to the dense query (computed by the server) in the same call. Without feedback (``prf`` off, or
  ``retriever="bm25"``) the dense query rides in that call too: ONE round trip; with feedback the dense query goes
  first (its top passages give the feedback terms), then the BM25 query: two.

Both apply the viewer's access and scope inside every store query (the stores' pre-filter), so every candidate and
every feedback passage is one the viewer may read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from ..stores import StoredChunk
from .feedback import PseudoRelevanceFeedback
from .ports import PairStore
from .query import Candidates, Query, Timings
from .stages import DenseCandidates, KeywordCandidates

__all__ = ["CandidateStage", "SeparateCandidates", "PairedCandidates"]


class CandidateStage(Protocol):
    """Gathers the ranked candidate lists of one query."""

    def run(self, query: Query, vector: np.ndarray, version: Callable[[], int], timings: Timings) -> Candidates:
        """The candidates of ``query`` (``vector``: its dense query's vector, shape ``(dim,)``; ``version``: reads the
        index version, which keys the dense cache: called once, and only when the dense ranker runs), each stage's
        time added to ``timings``.

        Returns:
            :class:`~index.retrieval.query.Candidates`: ``lists`` holds ``"dense"`` when ``query.ranks_dense`` and
            ``"bm25"`` when ``query.ranks_bm25`` (in that order); ``chunks`` and ``cosines`` those known so far
            (every dense hit's; BM25 hits' too where the store returned them).

        Raises:
            ValueError: when ``query.viewer`` is not a :class:`~core.access.Viewer` (from the stores).
        """
        ...


def _take_dense(found: Candidates, hits: list[StoredChunk]) -> None:
    for h in hits:
        found.chunks[h.chunk.chunk_id] = h.chunk
        found.cosines[h.chunk.chunk_id] = h.score
    found.lists["dense"] = [(h.chunk.chunk_id, h.score) for h in hits]


class SeparateCandidates:
    """Dense, then feedback, then BM25: one query per store (the embedded index).

    Args:
        dense: the dense ranker.
        feedback: the BM25 query's expansion and feedback.
        keyword: the BM25 ranker.
    """

    def __init__(self, dense: DenseCandidates, feedback: PseudoRelevanceFeedback, keyword: KeywordCandidates) -> None:
        self.dense = dense
        self.feedback = feedback
        self.keyword = keyword

    def run(self, query: Query, vector: np.ndarray, version: Callable[[], int], timings: Timings) -> Candidates:
        """See :class:`CandidateStage`."""
        found = Candidates()
        if query.ranks_dense:
            with timings("dense"):
                _take_dense(found, self.dense.run(vector, self.dense.key(query, version()), query.viewer))
        if query.ranks_bm25:
            with timings("feedback"):
                keyword = self.feedback.run(query, found.dense_chunks())
            with timings("bm25"):
                found.lists["bm25"] = self.keyword.run(keyword, query.viewer)
            found.feedback = keyword.feedback
        return found


class PairedCandidates:
    """The same stages on the shared index: BM25 (with the dense query when it has not run) in one
    :meth:`~index.retrieval.ports.PairStore.search_pair` call that also brings the BM25 hits' chunks and cosines.

    The dense ranker runs on its own first only when feedback needs its top passages (or for ``retriever="dense"``);
    dense hits remembered from an earlier search are used instead of asking again.

    Args:
        pair: the shared collection's store.
        dense: the dense ranker (its store is ``pair``; its cache is used by both paths).
        feedback: the BM25 query's expansion and feedback.
        limit: candidates per ranker.
    """

    def __init__(self, pair: PairStore, dense: DenseCandidates, feedback: PseudoRelevanceFeedback,
                 limit: int = 60) -> None:
        self.pair = pair
        self.dense = dense
        self.feedback = feedback
        self.limit = limit

    def run(self, query: Query, vector: np.ndarray, version: Callable[[], int], timings: Timings) -> Candidates:
        """See :class:`CandidateStage`."""
        found = Candidates()
        key = self.dense.key(query, version()) if query.ranks_dense else None
        if key is not None:
            with timings("dense"):
                hits = self.dense.cached(key)
                if hits is None and (query.feedback or not query.ranks_bm25):
                    hits = self.dense.run(vector, key, query.viewer)
            if hits is not None:
                _take_dense(found, hits)
        if not query.ranks_bm25:
            return found
        with timings("feedback"):
            keyword = self.feedback.run(query, found.dense_chunks())
        with_dense = key is not None and "dense" not in found.lists
        with timings("dense+bm25" if with_dense else "bm25"):
            both = self.pair.search_pair(vector, keyword.text, limit=self.limit, boosts=keyword.boosts,
                                         viewer=query.viewer, dense=with_dense)
        if with_dense and key is not None:
            self.dense.remember(key, both.dense)
            _take_dense(found, both.dense)
        for h in both.bm25:  # their payloads and cosines came with the response: nothing to fetch
            found.chunks.setdefault(h.chunk.chunk_id, h.chunk)
        for cid, cos in both.cosines.items():
            found.cosines.setdefault(cid, cos)
        found.lists["bm25"] = [(h.chunk.chunk_id, h.score) for h in both.bm25]
        found.feedback = keyword.feedback
        return found
