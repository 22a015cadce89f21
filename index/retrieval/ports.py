"""What the retrieval engine needs of the stores, by role (:class:`index.knowledge.KnowledgeIndex` names them so):

- :class:`KeywordStore` (``index.keyword``): BM25 over analysed text. Whoosh
  (:class:`~index.stores.WhooshStore`), the embedded sparse Qdrant store (:class:`~index.stores.QdrantSparseStore`)
  and the shared collection's keyword view (:class:`~index.stores.HybridKeywordView`) all have it.
- :class:`DenseStore` (``index.dense``): nearest neighbours by cosine, and stored chunks and vectors by id
  (:class:`~index.stores.QdrantStore`, :class:`~index.stores.QdrantHybridStore`).
- :class:`PairStore` (``index.hybrid``, the shared index only): both rankers in one request
  (:class:`~index.stores.QdrantHybridStore`).

Every search takes the reader's :class:`~core.access.Viewer` and applies it as a pre-filter inside the
store's query; a store raises ``ValueError`` without one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from core.access import Viewer
from core.models import Chunk

from ..stores import StoredChunk

if TYPE_CHECKING:  # the shared collection's store (qdrant-client): an annotation here
    from ..stores import HybridHits

__all__ = ["KeywordStore", "DenseStore", "PairStore"]


@runtime_checkable
class KeywordStore(Protocol):
    """BM25 search and the corpus statistics of its analyzer."""

    def search_ids(self, query: str, limit: int = 50, boosts: dict[str, float] | None = None, *,
                   viewer: Viewer) -> list[tuple[str, float]]:
        """The best ``limit`` ``(chunk id, BM25 score)`` pairs ``viewer`` may read for the free text ``query``,
        best first; ``boosts``: analysed term to weight (others weigh 1.0)."""
        ...

    def analyze(self, text: str) -> list[str]:
        """The index terms of ``text`` (lower-cased, stop words out, stemmed), in order."""
        ...

    def doc_frequency(self, term: str) -> int:
        """Number of chunks holding the analysed ``term``."""
        ...

    def doc_frequencies(self, terms: Iterable[str]) -> dict[str, int]:
        """:meth:`doc_frequency` of each of ``terms``, read together (one snapshot, one freshness check)."""
        ...

    @property
    def doc_count(self) -> int:
        """Number of chunks."""
        ...


@runtime_checkable
class DenseStore(Protocol):
    """Nearest chunks by cosine similarity, and stored chunks and vectors by chunk id."""

    def search(self, query: np.ndarray, limit: int = 50, *, viewer: Viewer) -> list[StoredChunk]:
        """The ``limit`` chunks ``viewer`` may read nearest to ``query`` (shape ``(dim,)``), best first, each with
        its cosine similarity as score."""
        ...

    def fetch(self, chunk_ids: list[str]) -> dict[str, tuple[Chunk, np.ndarray]]:
        """Stored chunks and their vectors (shape ``(dim,)``, unit length) by chunk id; unknown ids are absent."""
        ...

    def vectors(self, chunk_ids: list[str]) -> dict[str, np.ndarray]:
        """Stored vectors by chunk id (unknown ids are absent)."""
        ...


@runtime_checkable
class PairStore(Protocol):
    """Both rankers over one collection in one request (the shared index)."""

    def search_pair(self, query: np.ndarray, text: str, *, limit: int = 50, boosts: Mapping[str, float] | None = None,
                    viewer: Viewer, dense: bool = True) -> HybridHits:
        """Dense hits (unless ``dense`` is False), BM25 hits with their chunks, and every BM25 hit's cosine to
        ``query``, in one call (see :meth:`index.stores.QdrantHybridStore.search_pair`)."""
        ...
