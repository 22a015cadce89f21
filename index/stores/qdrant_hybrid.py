"""The shared index (``QDRANT_URL``, issue 12 step 2): ONE Qdrant collection holding both retrievers.

**Layout.** One collection (``QDRANT_COLLECTION``, default ``chunks``); each chunk is one point with two
named vectors, written by one upsert (a point never has one without the other):

- ``dense``: the embedder's vector (cosine, the embedder's size);
- ``bm25``: BM25 as a sparse vector, ``SparseVectorParams(modifier=Modifier.IDF)``, the encoding of
  :mod:`index.stores.sparse_bm25` (our analyzer's terms, BM25 term weights with a fixed ``avgdl``);

and as payload the chunk's record (:func:`index.stores.records.chunk_to_record`) plus ``terms`` (its distinct
analysed terms, for document frequencies), with keyword payload indexes on ``access``, ``source``,
``doc_key`` and ``terms`` on a server. So the shared mode needs no local store files at all.

**Two faces.** :class:`QdrantHybridStore` is the dense store (the :class:`~index.stores.qdrant_store.QdrantStore`
interface, which it subclasses: client opening, guards, the local-mode mirror, access filters) and
:attr:`QdrantHybridStore.keyword` is a view with the keyword store's interface
(:class:`~index.stores.sparse_bm25.SparseBM25`: ``search_ids`` with boosts, ``analyze``, ``doc_frequency``, ...),
which :class:`index.knowledge.KnowledgeIndex` uses as ``index.keyword``. The view never writes: the indexer,
the journal recovery and reconciliation call the keyword store's writes and then the dense store's with the
same keys and chunks, and the dense store's write already put both vectors in the same points.

**One round trip per search.** :meth:`QdrantHybridStore.search_pair` sends the dense and the BM25 queries in
ONE ``query_batch_points`` call (the Query API), each with the viewer's access and scope pre-filter inside
it, plus a third request that rescores the BM25 candidates by the dense query (a ``prefetch`` of the BM25
query, then the dense query over those candidates): it returns the cosine of every BM25 hit, which the
evidence gate reads, without sending any stored vector over the wire. Fusion stays client-side, in
:mod:`index.retrieval.fusion` (weighted RRF, ``w / (k + rank)``, weights 1.0 dense / 0.6 BM25 as measured), because

- Qdrant's weighted RRF (``models.Rrf(k, weights)``, client 1.20) computes ``1 / (rank / w + k - 1)``: a
  different weighting from the one measured;
- the evidence gate needs each retriever's own rank (do they agree?) and raw score, which a fused
  response does not return;
- pseudo-relevance feedback needs the dense top passages before the BM25 query is built.

Hence the retrieval engine (:class:`index.retrieval.PairedCandidates`) sends one batch when pseudo-relevance
feedback does not apply, and with it the dense query first, then the BM25 query with the feedback terms
(``dense=False``): two calls.

**A collection made by an older version** (one unnamed dense vector, no ``bm25``): a reader gets
:class:`~core.errors.IndexOutdatedError` saying to run ``chatops index --full``; an indexing run
(``recreate=True``) drops it and creates the new layout (the run's reconciliation then re-indexes every page).
It drops only an empty collection or one whose points are chatops chunks (``chunk_id`` and ``doc_key`` in the
payload): a ``QDRANT_COLLECTION`` naming someone else's collection is refused, never emptied.

``QDRANT_URL=file:PATH`` (:func:`~index.stores.qdrant_store.qdrant_location`) opens the same layout in
qdrant-client's local mode (one process): the tests and the dev eval of the shared mode use it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from qdrant_client import models

from core.access import Access, Viewer
from core.errors import IndexCorruptError, IndexOutdatedError
from core.models import Chunk

from .qdrant_store import QdrantStore, access_filter, point_id, qdrant_location
from .records import StoredChunk, chunk_from_record, chunk_to_record
from .sparse_bm25 import DF_TTL, RECORD, VECTOR, SparseBM25, TermCounts, matched

__all__ = ["QdrantHybridStore", "HybridKeywordView", "HybridHits", "DENSE"]

log = logging.getLogger(__name__)

DENSE = "dense"  #: the name of the collection's dense vector


@dataclass(frozen=True, slots=True)
class HybridHits:
    """What :meth:`QdrantHybridStore.search_pair` returns.

    Attributes:
        dense: the dense hits, best first (cosine similarity as score): what :meth:`QdrantHybridStore.search` returns.
        bm25: the BM25 hits, best first (BM25 score): what ``store.keyword.search`` returns.
        cosines: chunk id to the cosine similarity of its vector to the dense query, for every BM25 hit.
    """

    dense: list[StoredChunk] = field(default_factory=list)
    bm25: list[StoredChunk] = field(default_factory=list)
    cosines: dict[str, float] = field(default_factory=dict)


class QdrantHybridStore(QdrantStore):
    """The shared collection: dense and BM25 vectors in one point per chunk (see the module docstring).

    The dense store's interface is :class:`~index.stores.qdrant_store.QdrantStore`'s (``replace(keys, chunks,
    vectors)`` writes both vectors); :attr:`keyword` is the keyword store's (:class:`HybridKeywordView`).

    Args:
        dim: vector size of the embedder.
        url: a Qdrant server URL (``api_key`` goes with it), or a ``file:`` URL naming a local-mode folder.
        path: the local-mode folder (used when ``url`` is not given).
        collection: collection name (``QDRANT_COLLECTION``).
        recreate: drop and create again a collection of an older layout instead of raising (indexing runs).
        avgdl, tf, max_terms, max_df_ratio, prune_min_docs: the BM25 encoding and query terms
            (:class:`~index.stores.sparse_bm25.SparseBM25`).

    Raises:
        IndexOutdatedError: (``recreate=False``) the collection has an older layout (no named ``dense``
            vector or no ``bm25`` sparse vector): run ``chatops index --full``.
        IndexCorruptError: the server cannot be reached, the local folder cannot be read, the dense vectors
            are not the embedder's size, or (``recreate=True``) a collection of another layout holds points that
            are not chatops chunks.
        IndexLockedError: another process has the local folder open.
    """

    DENSE = DENSE
    KEYWORD_FIELDS = ("access", "source", "doc_key", "terms")
    WHAT = "the shared index"
    RECORD = RECORD

    def __init__(self, dim: int, url: str | None = None, path: str | os.PathLike[str] | None = None,
                 api_key: str | None = None, collection: str = "chunks", *, recreate: bool = False,
                 avgdl: float = 56.0, tf: Literal["bm25", "raw"] = "bm25", max_terms: int = 16,
                 max_df_ratio: float = 0.06, prune_min_docs: int = 2000) -> None:
        server, folder = qdrant_location(url)
        self._recreate = recreate
        self.location = url or str(path)
        super().__init__(dim, path=folder or path, url=server, api_key=api_key, collection=collection)
        counts = TermCounts(self.client, collection, server=bool(server), guard=self._guard, lock=self._lock,
                            ttl=DF_TTL)
        self.keyword = HybridKeywordView(self, counts, avgdl=avgdl, tf=tf, max_terms=max_terms,
                                         max_df_ratio=max_df_ratio, prune_min_docs=prune_min_docs)

    # -- the layout --------------------------------------------------------------------------------
    def _layout_ok(self, info: models.CollectionInfo) -> bool:
        vectors = info.config.params.vectors
        dense = vectors.get(DENSE) if isinstance(vectors, dict) else None
        if dense is None or VECTOR not in (info.config.params.sparse_vectors or {}):
            if not self._recreate:
                raise IndexOutdatedError(
                    f"the Qdrant collection {self.collection!r} at {self.location} was made by an older chatops "
                    f"(it lacks the named {DENSE!r} vector or the {VECTOR!r} sparse vector of the shared index); "
                    "rebuild it with `chatops index --full SOURCE...` (every source), then start the bot again")
            points, _ = self.client.scroll(self.collection, limit=1, with_payload=["chunk_id", "doc_key"])
            if points and not {"chunk_id", "doc_key"} <= set(points[0].payload or {}):
                raise IndexCorruptError(
                    f"the Qdrant collection {self.collection!r} at {self.location} does not hold chatops chunks, so "
                    "an indexing run will not drop it; set QDRANT_COLLECTION to another name")
            log.warning("the Qdrant collection %r has an older layout: dropping it and creating the shared "
                        "layout (dense + bm25); this run re-indexes every page", self.collection)
            return False
        self._check_dim(dense.size)
        return True

    def _create(self) -> None:
        self.client.create_collection(
            self.collection,
            vectors_config={DENSE: models.VectorParams(size=self.dim, distance=models.Distance.COSINE)},
            sparse_vectors_config={VECTOR: models.SparseVectorParams(modifier=models.Modifier.IDF)})

    def _point(self, c: Chunk, vector: np.ndarray) -> models.PointStruct:
        sparse, terms = self.keyword.encode(c)
        return models.PointStruct(id=point_id(c.chunk_id), vector={DENSE: vector.tolist(), VECTOR: sparse},
                                  payload=chunk_to_record(c) | {"terms": terms})

    # -- writes: the document frequencies are read again after each ---------------------------------------
    def replace(self, doc_keys: Iterable[str], chunks: Sequence[Chunk], vectors: np.ndarray | None = None) -> None:
        """Delete every point of ``doc_keys``, then upsert ``chunks``, each with its dense vector (a row of
        ``vectors``, shape ``(len(chunks), dim)``) and its BM25 vector in one point.

        Raises:
            ValueError: when ``chunks`` is not empty and ``vectors`` is ``None``.
        """
        try:
            super().replace(doc_keys, chunks, vectors)
        finally:
            self.keyword.forget()

    def delete_chunks(self, chunk_ids: Iterable[str]) -> None:
        """Delete the points of these chunk ids (unknown ids are ignored)."""
        try:
            super().delete_chunks(chunk_ids)
        finally:
            self.keyword.forget()

    def clear(self) -> None:
        """Drop and recreate the collection (the shared layout)."""
        try:
            super().clear()
        finally:
            self.keyword.forget()

    # -- searching ---------------------------------------------------------------------------------
    def _query_batch(self, requests: list[models.QueryRequest]) -> list[models.QueryResponse]:
        """One ``query_batch_points`` call."""
        with self._guard(), self._lock:
            return self.client.query_batch_points(self.collection, requests=requests)

    def search_pair(self, query: np.ndarray, text: str, *, limit: int = 50, boosts: Mapping[str, float] | None = None,
                    viewer: Viewer, dense: bool = True) -> HybridHits:
        """Dense and BM25 hits in ONE ``query_batch_points`` call (see the module docstring).

        Args:
            query: the dense query vector, shape ``(dim,)``.
            text: the BM25 query (free text, analysed like the indexed text).
            limit: hits per retriever at most.
            boosts: per-term BM25 weights (analysed term to weight; others weigh 1.0).
            viewer: who will see the result: its access and scope filter sits inside every request.
            dense: False to leave the dense request out (its hits came first, e.g. for pseudo-relevance
                feedback); ``bm25`` and ``cosines`` are still one call.

        Returns:
            :class:`HybridHits`: the same lists as :meth:`search` and ``keyword.search``, and the BM25 hits'
            cosines. Empty, without a call, for an empty scope; without BM25 hits for a text with no
            indexed term (then only the dense request is sent, if any).

        Raises:
            ValueError: when ``viewer`` is not a :class:`Viewer`.
        """
        allowed = access_filter(viewer, "the hybrid")
        if allowed is None:
            return HybridHits()
        keyword = self.keyword.keyword_request(text, limit, boosts, viewer, RECORD)  # before the lock: reads counts
        vec = query.tolist()
        requests: list[models.QueryRequest] = []
        if dense:
            requests.append(models.QueryRequest(query=vec, using=DENSE, filter=allowed, limit=limit, with_payload=RECORD))
        if keyword is not None:
            requests.append(keyword)
            rescore = models.Prefetch(query=keyword.query, using=VECTOR, filter=allowed, limit=limit)
            requests.append(models.QueryRequest(prefetch=rescore, query=vec, using=DENSE, filter=allowed, limit=limit,
                                                with_payload=False))
        if not requests:
            return HybridHits()
        responses = self._query_batch(requests)
        hits = HybridHits()
        if dense:
            hits.dense.extend(StoredChunk(chunk_from_record(p.payload or {}), float(p.score))
                              for p in responses.pop(0).points)
        if keyword is not None:
            found = matched(responses[0])
            hits.bm25.extend(StoredChunk(chunk_from_record(p.payload), p.score) for p in found)
            ids = {p.id: p.payload["chunk_id"] for p in found}
            hits.cosines.update((ids[str(p.id)], float(p.score)) for p in responses[1].points if str(p.id) in ids)
        return hits


class HybridKeywordView(SparseBM25):
    """The keyword-store face of a :class:`QdrantHybridStore` (``KnowledgeIndex.keyword`` in the shared mode).

    Reads (``search_ids``, ``search``, ``analyze``, ``doc_frequency``, ``doc_count``, ``count``, ``chunks``,
    ``chunk_ids``) go to the store's collection. Writes (``replace``, ``delete``, ``delete_chunks``, ``clear``,
    ``set_access``) write nothing: every caller makes the same write on the dense store, which writes both
    vectors of each point; ``set_access`` still returns the number of points of those keys, which
    :meth:`index.knowledge.KnowledgeIndex.set_access` reports. ``close`` leaves the store's client open (the
    store closes it).
    """

    def __init__(self, store: QdrantHybridStore, counts: TermCounts, **encoding: Any) -> None:
        super().__init__(counts, **encoding)
        self._store = store

    @property
    def damage(self) -> IndexCorruptError | None:
        """The store's first damage (one collection, one guard)."""
        return self._store.damage

    def forget(self) -> None:
        """Drop the remembered document frequencies (the store calls this around its writes)."""
        self._counts.forget()

    def _query_batch(self, requests: list[models.QueryRequest]) -> list[models.QueryResponse]:
        return self._store._query_batch(requests)  # noqa: SLF001 - the view is the store's own

    def chunks(self, chunk_ids: Iterable[str]) -> dict[str, Chunk]:
        """The stored chunks among ``chunk_ids`` (unknown ids are absent)."""
        return self._store.chunks(chunk_ids)

    def chunk_ids(self) -> set[str]:
        """Every chunk id stored."""
        return self._store.chunk_ids()

    def replace(self, doc_keys: Iterable[str], chunks: Sequence[Chunk], vectors: np.ndarray | None = None) -> None:
        """Nothing: the dense store's ``replace`` of the same chunks writes their BM25 vectors."""

    def delete(self, doc_keys: Iterable[str]) -> None:
        """Nothing: the dense store's ``delete`` removes the points."""

    def delete_chunks(self, chunk_ids: Iterable[str]) -> None:
        """Nothing: the dense store's ``delete_chunks`` removes the points."""

    def clear(self) -> None:
        """Nothing: the dense store's ``clear`` drops the collection."""

    def set_access(self, access: Mapping[str, Access]) -> int:
        """Write nothing (the dense store's ``set_access`` updates the points' payload); returns the number
        of points of these document keys."""
        keys = list(access)
        if not keys:
            return 0
        where = models.Filter(must=[models.FieldCondition(key="doc_key", match=models.MatchAny(any=keys))])
        with self._store._guard(), self._store._lock:  # noqa: SLF001 - the view is the store's own
            return self._store.client.count(self._store.collection, count_filter=where, exact=True).count

    def optimize(self) -> None:
        """Nothing to do (Qdrant optimises on its own)."""

    def close(self) -> None:
        """Nothing: the store owns the client and closes it."""
