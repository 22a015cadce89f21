"""The chunk stores: Whoosh (BM25F, sparse), Qdrant (dense vectors), Qdrant's sparse vectors (BM25 in a collection of
its own) and the shared mode's one collection holding both (:class:`QdrantHybridStore`, with its keyword view).

Qdrant keeps every chunk whole as its point payload; searches hydrate chunks from it. Whoosh
keeps the chunk's fields too (stored, for inspection) but its fast search returns chunk ids and scores.
Both implement :class:`~index.stores.base.ChunkStore` (``replace``, ``delete``, ``search``, ...).
"""

from .base import ChunkStore
from .qdrant_hybrid import HybridHits, HybridKeywordView, QdrantHybridStore
from .qdrant_sparse import QdrantSparseStore
from .qdrant_store import QdrantStore
from .records import StoredChunk, chunk_from_record, chunk_to_record
from .whoosh_store import WhooshStore

__all__ = ["ChunkStore", "WhooshStore", "QdrantStore", "QdrantSparseStore", "QdrantHybridStore", "HybridKeywordView",
           "HybridHits", "StoredChunk", "chunk_to_record", "chunk_from_record"]
