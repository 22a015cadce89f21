"""The chunk stores: Whoosh (BM25F, sparse), Qdrant (dense vectors), Qdrant's sparse vectors (BM25 in a collection of
its own) and the shared mode's one collection holding both (:class:`QdrantHybridStore`, with its keyword view).

Qdrant keeps every chunk whole as its point payload; searches hydrate chunks from it. Whoosh
keeps the chunk's fields too (stored, for inspection) but its fast search returns chunk ids and scores.
Both implement :class:`~index.stores.base.ChunkStore` (``replace``, ``delete``, ``search``, ...).

A reader of the embedded index answers dense searches from a snapshot of the Qdrant collection
(:class:`~index.stores.dense_snapshot.LocalDenseStore`) and loads ``qdrant-client`` only when it must, so
the stores are imported on first use (PEP 562) rather than with the package.
"""

import importlib
from typing import TYPE_CHECKING

from .base import ChunkStore
from .records import StoredChunk, chunk_from_record, chunk_to_record

if TYPE_CHECKING:  # the type checker sees the lazily imported names below as what they are
    from .dense_snapshot import LocalDenseStore
    from .qdrant_hybrid import HybridHits, HybridKeywordView, QdrantHybridStore
    from .qdrant_sparse import QdrantSparseStore
    from .qdrant_store import QdrantStore
    from .whoosh_store import WhooshStore

__all__ = ["ChunkStore", "WhooshStore", "QdrantStore", "QdrantSparseStore", "QdrantHybridStore", "HybridKeywordView",
           "HybridHits", "StoredChunk", "chunk_to_record", "chunk_from_record", "LocalDenseStore"]

_HOMES = {"WhooshStore": ".whoosh_store", "QdrantStore": ".qdrant_store", "QdrantSparseStore": ".qdrant_sparse",
          "QdrantHybridStore": ".qdrant_hybrid", "HybridKeywordView": ".qdrant_hybrid", "HybridHits": ".qdrant_hybrid",
          "LocalDenseStore": ".dense_snapshot"}


def __getattr__(name: str) -> object:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
