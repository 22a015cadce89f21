"""The two chunk stores: Whoosh (BM25F, sparse) and Qdrant (dense vectors).

Both store every chunk whole (text and metadata), so each can answer a search on its own.
"""

from .qdrant_store import QdrantStore
from .records import StoredChunk, chunk_from_record, chunk_to_record
from .whoosh_store import WhooshStore

__all__ = ["WhooshStore", "QdrantStore", "StoredChunk", "chunk_to_record", "chunk_from_record"]
