"""Keyword store on Qdrant: BM25 as a named sparse vector in a collection of its own (``KEYWORD_INDEX=qdrant``
without ``QDRANT_URL``: local mode under the data dir, beside the embedded dense store, to compare keyword
engines with everything else unchanged).

The encoding (BM25 term weights with a fixed ``avgdl``, ``Modifier.IDF``, the Whoosh store's analyzer and query
terms), the document-frequency memory and the search are :mod:`index.stores.sparse_bm25`'s, shared with the
shared mode's collection (:class:`~index.stores.qdrant_hybrid.QdrantHybridStore`, where the same ``bm25``
vector sits beside the dense one). This module adds the store: a collection with only the sparse vector,
its writes, and the store contract (:class:`~index.stores.base.ChunkStore`).

Access control as in :class:`~index.stores.qdrant_store.QdrantStore`: the payload's ``access`` (the chunk's
:meth:`core.access.Access.tokens`) and ``source`` get keyword indexes on a server, and every search sends
a ``MatchAny`` filter on them with the query, so the filter runs inside the query and does not change the
scores (IDF is collection-wide).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

import numpy as np
from qdrant_client import models
from qdrant_client.http.exceptions import UnexpectedResponse

from core.access import Access
from core.errors import IndexCorruptError
from core.models import Chunk

from .qdrant_store import QdrantCollection, point_id
from .records import chunk_to_record
from .sparse_bm25 import B, DF_TTL, K1, RECORD, VECTOR, SparseBM25, TermCounts, term_index

__all__ = ["QdrantSparseStore", "term_index", "VECTOR", "K1", "B", "DF_TTL"]

BATCH = 256  #: points per upsert


class QdrantSparseStore(QdrantCollection, SparseBM25):
    """Chunks as Qdrant points with a BM25 sparse vector (a :class:`~index.stores.base.ChunkStore` searched by text).

    Offers the Whoosh store's search interface too (:class:`~index.stores.sparse_bm25.SparseBM25`:
    :meth:`search_ids` with ``boosts``, :meth:`analyze`, :meth:`doc_frequency`, :attr:`doc_count`), so
    :class:`index.knowledge.KnowledgeIndex` can use either.

    Args:
        path: the local-mode folder (used when ``url`` is not given).
        url: a Qdrant server URL; ``api_key`` goes with it.
        collection: collection name.
        avgdl, tf, max_terms, max_df_ratio, prune_min_docs: the encoding and the query terms
            (:class:`~index.stores.sparse_bm25.SparseBM25`).

    Raises:
        ValueError: for an unknown ``tf`` or an ``avgdl`` that is not positive.
        IndexLockedError: when another process has the local folder open.
        IndexCorruptError: when the folder or server cannot be read, or the collection has no ``bm25``
            sparse vector; :attr:`damage` keeps the first such error a write ran into.
        DiskFullError: when a local-mode write finds no space.
        IndexUnavailableError: on a server (``url``), from any call (opening too) when the server cannot
            be reached, refuses the API key or answers an error (:func:`~index.stores.qdrant_store.server_errors`).
    """

    WHAT = "the BM25 index"
    RECORD = RECORD  # the record without the payload's ``terms``

    def __init__(self, path: str | os.PathLike[str] | None = None, url: str | None = None,
                 api_key: str | None = None, collection: str = "chunks-bm25", *, avgdl: float = 56.0,
                 tf: Literal["bm25", "raw"] = "bm25", max_terms: int = 16, max_df_ratio: float = 0.06,
                 prune_min_docs: int = 2000) -> None:
        self._is_local = not url
        self._open(path, url, api_key, collection)
        counts = TermCounts(self.client, collection, server=bool(url), guard=self._guard, lock=self._lock, ttl=DF_TTL)
        SparseBM25.__init__(self, counts, avgdl=avgdl, tf=tf, max_terms=max_terms, max_df_ratio=max_df_ratio,
                            prune_min_docs=prune_min_docs)
        with self._guard():
            self._ensure_collection()

    def _ensure_collection(self) -> None:
        if self.client.collection_exists(self.collection):
            info = self.client.get_collection(self.collection)
            if VECTOR not in (info.config.params.sparse_vectors or {}):
                raise IndexCorruptError(
                    f"the Qdrant collection {self.collection!r} has no {VECTOR!r} sparse vector; "
                    "set QDRANT_COLLECTION to another name or run `chatops index --full SOURCE`")
            if not self._is_local:
                for key in ("access", "source", "doc_key", "terms"):
                    if key not in (info.payload_schema or {}):
                        self.client.create_payload_index(self.collection, key, models.PayloadSchemaType.KEYWORD)
            return
        try:
            self.client.create_collection(
                self.collection, vectors_config={},
                sparse_vectors_config={VECTOR: models.SparseVectorParams(modifier=models.Modifier.IDF)})
        except UnexpectedResponse as exc:
            if exc.status_code != 409:
                raise
            return self._ensure_collection()  # another process created it since the check: open it as it is
        if not self._is_local:  # local mode ignores payload indexes (and warns)
            for key in ("access", "source", "doc_key", "terms"):
                self.client.create_payload_index(self.collection, key, models.PayloadSchemaType.KEYWORD)

    def _point(self, c: Chunk) -> models.PointStruct:
        vector, terms = self.encode(c)
        return models.PointStruct(id=point_id(c.chunk_id), vector={VECTOR: vector},
                                  payload=chunk_to_record(c) | {"terms": terms})

    def _query_batch(self, requests: list[models.QueryRequest]) -> list[models.QueryResponse]:
        with self._guard(), self._lock:
            return self.client.query_batch_points(self.collection, requests=requests)

    def _forget(self) -> None:
        self._counts.forget()

    # -- writing -----------------------------------------------------------------------------------
    def replace(self, doc_keys: Iterable[str], chunks: Sequence[Chunk], vectors: np.ndarray | None = None) -> None:
        """Delete every point of ``doc_keys``, then upsert ``chunks`` (``vectors`` is ignored: the sparse
        vectors are computed from the text)."""
        keys = list(doc_keys)
        points = [self._point(c) for c in chunks]
        with self._guard(), self._lock:
            self._forget()
            if keys:
                self.client.delete(self.collection, points_selector=models.FilterSelector(filter=models.Filter(
                    must=[models.FieldCondition(key="doc_key", match=models.MatchAny(any=keys))])), wait=True)
            for start in range(0, len(points), BATCH):
                self.client.upsert(self.collection, points=points[start:start + BATCH], wait=True)

    def delete(self, doc_keys: Iterable[str]) -> None:
        """Delete every point of ``doc_keys`` (unknown keys are ignored)."""
        self.replace(doc_keys, [])

    def delete_chunks(self, chunk_ids: Iterable[str]) -> None:
        """Delete the points of these chunk ids (unknown ids are ignored)."""
        ids = [point_id(c) for c in chunk_ids]
        if ids:
            with self._guard(), self._lock:
                self._forget()
                self.client.delete(self.collection, points_selector=models.PointIdsList(points=ids), wait=True)

    def set_access(self, access: Mapping[str, Access]) -> int:
        """Give every point of each document key its new access by ``set_payload`` (the vectors are
        untouched). Unknown keys are ignored. Returns the number of points updated."""
        with self._guard(), self._lock:
            return sum(self._write_access(key, acc) for key, acc in access.items())

    def optimize(self) -> None:
        """Nothing to do (the Whoosh store merges segments here; Qdrant optimises on its own)."""

    def clear(self) -> None:
        """Drop and recreate the collection."""
        with self._guard(), self._lock:
            self._forget()
            self.client.delete_collection(self.collection)
            self._ensure_collection()
