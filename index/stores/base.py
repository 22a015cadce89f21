"""The chunk-store contract that :class:`~index.stores.WhooshStore` and :class:`~index.stores.QdrantStore` implement.

A store keeps chunks keyed by chunk id and grouped by document key (``source:doc_id``,
:attr:`core.models.Chunk.key`). Writes replace a document's chunks as a whole (delete every
chunk of the keys, then add the new ones), which is how the indexer, the journal recovery and
reconciliation use them. Search takes the store's own kind of query: text for BM25, a vector
for the dense store (``Q``), and the :class:`~core.access.Viewer` who will see the result: only
chunks whose access tokens meet the viewer's are candidates (a pre-filter inside the store's query). ``tests/contracts`` holds one test suite that every store passes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol, TypeVar, runtime_checkable

import numpy as np

from core.access import Access, Viewer
from core.errors import IndexCorruptError
from core.models import Chunk

from .records import StoredChunk

__all__ = ["ChunkStore"]

Q = TypeVar("Q", contravariant=True)


@runtime_checkable
class ChunkStore(Protocol[Q]):
    """Chunks grouped by document key, searchable by a query of type ``Q``.

    Every method may raise :class:`~core.errors.IndexCorruptError` (damaged files) or
    :class:`~core.errors.DiskFullError` (no space for a write).
    """

    @property
    def damage(self) -> IndexCorruptError | None:
        """The first damage a read or write ran into since the store was opened, else ``None``."""
        ...

    def replace(self, doc_keys: Iterable[str], chunks: Sequence[Chunk], vectors: np.ndarray | None = None) -> None:
        """Delete every chunk of ``doc_keys``, then add ``chunks`` (one write).

        ``vectors`` (shape ``(len(chunks), dim)``) is required by a store that keeps vectors
        whenever ``chunks`` is not empty (:class:`ValueError` otherwise); others ignore it.
        """
        ...

    def delete(self, doc_keys: Iterable[str]) -> None:
        """Delete every chunk of ``doc_keys`` (unknown keys are ignored)."""
        ...

    def delete_chunks(self, chunk_ids: Iterable[str]) -> None:
        """Delete the chunks with these ids (unknown ids are ignored)."""
        ...

    def search(self, query: Q, limit: int = 50, *, viewer: Viewer) -> list[StoredChunk]:
        """The best ``limit`` chunks ``viewer`` may read for ``query``, best first, with the store's own
        score (the access test filters candidates inside the query; ``ValueError`` without a viewer)."""
        ...

    def set_access(self, access: Mapping[str, Access]) -> int:
        """Give every chunk of each document key (``source:doc_id``) its new :class:`Access`, without
        re-embedding; returns the number of chunks updated (unknown keys are ignored)."""
        ...

    def chunks(self, chunk_ids: Iterable[str]) -> dict[str, Chunk]:
        """The stored chunks among ``chunk_ids`` (unknown ids are absent)."""
        ...

    def chunk_ids(self) -> set[str]:
        """Every chunk id stored."""
        ...

    @property
    def count(self) -> int:
        """Number of chunks stored."""
        ...

    def clear(self) -> None:
        """Remove every chunk."""
        ...

    def close(self) -> None:
        """Release files, searchers and clients (a closed store is not used again)."""
        ...
