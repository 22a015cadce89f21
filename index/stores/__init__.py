"""The two chunk stores: Whoosh (BM25F, sparse) and Qdrant (dense vectors).

Qdrant keeps every chunk whole as its point payload; searches hydrate chunks from it. Whoosh
keeps the chunk's fields too (stored, for inspection) but its fast search returns chunk ids and scores.
Both implement :class:`~index.stores.base.ChunkStore` (``replace``, ``delete``, ``search``, ...).
"""

from .base import ChunkStore
from .qdrant_store import QdrantStore
from .records import StoredChunk, chunk_from_record, chunk_to_record
from .whoosh_store import WhooshStore

__all__ = ["ChunkStore", "WhooshStore", "QdrantStore", "StoredChunk", "chunk_to_record", "chunk_from_record"]
