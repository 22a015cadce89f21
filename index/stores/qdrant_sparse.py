"""Keyword store on Qdrant: BM25 as a named sparse vector, so the shared mode (issue 12) needs no Whoosh files.

Each chunk is one point whose sparse vector ``bm25`` holds a weight per term of the text the Whoosh
store indexes (:func:`index.stores.whoosh_store.bm25f_content`: title and heading path twice, body
once, analysed by :func:`index.stores.whoosh_store.analyzer`: the same tokens, stop words and Porter
stems). A term's index in the vector is the first four bytes of its BLAKE2b digest (:func:`term_index`).
The collection's sparse vector is configured with ``Modifier.IDF``: the server keeps every term's
document frequency current as points come and go and multiplies each query weight by
``ln((N - df + 0.5) / (df + 0.5) + 1)`` (BM25's IDF) at search time.

What the dot product computes. With ``Modifier.IDF`` Qdrant scores ``sum_t q_t * idf(t) * d_t``. If
``d_t`` were the raw term frequency that would be TF-IDF with neither of BM25's two corrections (no
saturation of repeated terms by ``k1``, no normalisation by the chunk's length by ``b``). So the
stored value is BM25's term weight, computed once at write time (Robertson & Zaragoza 2009, "The
Probabilistic Relevance Framework: BM25 and Beyond", eq. 3.15)::

    d_t = tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))

with ``k1=1.2, b=0.75`` (the Whoosh store's) and ``dl`` the chunk's number of terms. ``avgdl`` is a
fixed constructor argument, not the collection's running mean: a mean that moved would change every
stored weight. The dot product is then exactly BM25 with that ``avgdl`` (the ``tf="raw"`` mode keeps
plain term frequencies, for comparison; ``README-fragments/sparse.md`` has both measured).

Access control as in :class:`~index.stores.qdrant_store.QdrantStore`: the payload's ``access`` (the
chunk's :meth:`connectors.access.Access.tokens`) and ``source`` get keyword indexes on a server, and every
search sends a ``MatchAny`` filter on them with the query, so the filter runs inside the query and
does not change the scores (IDF is collection-wide). The payload's ``terms`` (the chunk's distinct
terms, keyword-indexed) answers :meth:`QdrantSparseStore.doc_frequency` with a count. Those counts
(and :attr:`~QdrantSparseStore.count`) are remembered until this store writes, and on a server for at
most ``DF_TTL`` seconds (other processes write there too): pseudo-relevance feedback asks for the
document frequency of every term of the top chunks, a few hundred counts per question, which in
local mode (a scan in Python each) took seconds per search before they were remembered; local mode
reads every term's frequency in one pass over the points instead. The search
itself does not use them (the server's IDF is current at every query).
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

import numpy as np
from qdrant_client import models
from qdrant_client.http.exceptions import UnexpectedResponse

from connectors.access import Access, Viewer
from connectors.errors import IndexCorruptError, IndexLockedError
from connectors.models import Chunk
from index.faults import REBUILD_STORE, StoreGuard, storage_error

from .qdrant_store import open_client, point_id, server_errors
from .records import StoredChunk, chunk_from_record, chunk_to_record, viewer_sources, viewer_tokens
from .whoosh_store import analyzer, bm25f_content

__all__ = ["QdrantSparseStore", "term_index", "VECTOR"]

log = logging.getLogger(__name__)

VECTOR = "bm25"  #: the name of the collection's sparse vector
K1, B = 1.2, 0.75  #: BM25's saturation and length normalisation (the Whoosh store's)
BATCH = 256  #: points per upsert
DF_TTL = 60.0  #: seconds a server's document frequencies and count are remembered (local mode: until a write)


def term_index(term: str) -> int:
    """The sparse-vector index of an analysed term: its BLAKE2b digest's first four bytes (0 to 2**32 - 1,
    Qdrant's ``u32``). Two terms sharing an index (about one pair in 2**32 / vocabulary) add their weights."""
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=4).digest(), "big")


class QdrantSparseStore:
    """Chunks as Qdrant points with a BM25 sparse vector (a :class:`~index.stores.base.ChunkStore` searched by text).

    Offers the Whoosh store's search interface too (:meth:`search_ids` with ``boosts``, :meth:`analyze`,
    :meth:`doc_frequency`, :attr:`doc_count`), so :class:`index.knowledge.KnowledgeIndex` can use either.

    Args:
        path: the local-mode folder (used when ``url`` is not given).
        url: a Qdrant server URL; ``api_key`` goes with it.
        collection: collection name.
        avgdl: the chunk length (in terms) BM25's length normalisation is relative to.
        tf: ``"bm25"`` stores BM25 term weights (see the module docstring), ``"raw"`` plain term frequencies.
        max_terms: at most this many distinct query terms are sent...
        max_df_ratio: ...after dropping terms in a larger share of chunks while two rarer ones remain...
        prune_min_docs: ...in collections of at least this many chunks: the Whoosh store's query terms
            (:meth:`query_terms`), so both keyword indexes run the same query.

    Raises:
        IndexLockedError: when another process has the local folder open.
        IndexCorruptError: when the folder or server cannot be read, or the collection has no ``bm25``
            sparse vector; :attr:`damage` keeps the first such error a write ran into.
        DiskFullError: when a local-mode write finds no space.
        IndexUnavailableError: on a server (``url``), from any call (opening too) when the server cannot
            be reached, refuses the API key or answers an error (:func:`~index.stores.qdrant_store.server_errors`).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, url: str | None = None,
                 api_key: str | None = None, collection: str = "chunks-bm25", *, avgdl: float = 56.0,
                 tf: Literal["bm25", "raw"] = "bm25", max_terms: int = 16, max_df_ratio: float = 0.06,
                 prune_min_docs: int = 2000) -> None:
        if tf not in ("bm25", "raw"):
            raise ValueError(f"tf must be 'bm25' or 'raw', got {tf!r}")
        if avgdl <= 0:
            raise ValueError(f"avgdl must be positive, got {avgdl}")
        self.collection = collection
        self.avgdl = float(avgdl)
        self.tf = tf
        self.max_terms = max_terms
        self.max_df_ratio = max_df_ratio
        self.prune_min_docs = prune_min_docs
        self._analyzer = analyzer()
        self._is_local = not url
        self._stats: dict[str, int] = {}  # term -> document frequency ("" -> number of points), see the module docstring
        self._stats_at = time.monotonic()
        self._complete = False  # local mode: _stats holds every term (one pass over the points)
        # Local mode keeps points in Python structures: serialise access (a server handles concurrency).
        self._lock: threading.RLock | _NoLock = threading.RLock() if not url else _NoLock()
        self._guard = StoreGuard("the BM25 index", path or url or "", REBUILD_STORE,
                                 damage=lambda e: not url and isinstance(e, (sqlite3.Error, OSError)),
                                 translate=server_errors(url, "the BM25 index") if url else None)
        try:
            self.client = open_client(url, api_key, path, "the BM25 index", "QdrantSparseStore")
        except (IndexLockedError, ValueError):
            raise
        except RuntimeError as exc:
            raise storage_error(exc, "the BM25 index", path or "", REBUILD_STORE) or exc from exc
        except Exception as exc:
            if url:
                raise IndexCorruptError(f"cannot open the BM25 index at {url} ({type(exc).__name__}: {exc}); "
                                        "check QDRANT_URL and QDRANT_API_KEY") from exc
            raise storage_error(exc, "the BM25 index", path or "", REBUILD_STORE) or exc from exc
        with self._guard():
            self._ensure_collection()

    @property
    def damage(self) -> IndexCorruptError | None:
        """The first :class:`IndexCorruptError` a write ran into, else ``None``."""
        return self._guard.damage

    @property
    def outdated(self) -> bool:
        """Always ``False`` (the Whoosh store's flag for indexes older than access control; this one never is)."""
        return False

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

    # -- terms and weights -----------------------------------------------------------------------
    def analyze(self, text: str) -> list[str]:
        """The index terms of ``text`` (lower-cased, stop words removed, stemmed), in order."""
        return [t.text for t in self._analyzer(text)]

    def chunk_terms(self, c: Chunk) -> list[str]:
        """The terms a chunk is indexed under: its title and heading path twice, its body once (BM25F weights)."""
        return self.analyze(bm25f_content(c.title, " ".join(c.section_path), c.text))

    def doc_vector(self, terms: Sequence[str]) -> models.SparseVector:
        """The stored sparse vector of a chunk with these terms: BM25 term weights (or raw counts, ``tf="raw"``)."""
        tfs = Counter(terms)
        norm = K1 * (1 - B + B * len(terms) / self.avgdl)
        weights: dict[int, float] = {}
        for term, tf in tfs.items():
            w = float(tf) if self.tf == "raw" else tf * (K1 + 1) / (tf + norm)
            idx = term_index(term)
            weights[idx] = weights.get(idx, 0.0) + w
        return _sparse(weights)

    def query_terms(self, query: str) -> list[str]:
        """The terms a query is run with, as the Whoosh store chooses them: analysed, de-duplicated, those no
        chunk holds dropped, in a collection of at least ``prune_min_docs`` chunks those in more than
        ``max_df_ratio`` of them dropped while two rarer ones remain, at most ``max_terms``."""
        terms = [t for t in dict.fromkeys(self.analyze(query)) if self.doc_frequency(t) > 0]
        n = self.count
        if n >= self.prune_min_docs:
            rare = [t for t in terms if self.doc_frequency(t) <= self.max_df_ratio * n]
            if len(rare) >= 2:
                terms = rare
        return terms[: self.max_terms]

    def query_vector(self, query: str, boosts: Mapping[str, float] | None = None) -> models.SparseVector | None:
        """The query's sparse vector: each of its :meth:`query_terms` weighted by its boost (1.0 unless
        ``boosts`` names it); ``None`` when the query has no term."""
        terms = self.query_terms(query)
        if not terms:
            return None
        boosts = boosts or {}
        weights: dict[int, float] = {}
        for t in terms:
            idx = term_index(t)
            weights[idx] = weights.get(idx, 0.0) + float(boosts.get(t, 1.0))
        return _sparse(weights)

    def _point(self, c: Chunk) -> models.PointStruct:
        terms = self.chunk_terms(c)
        payload = chunk_to_record(c) | {"terms": sorted(set(terms))}
        return models.PointStruct(id=point_id(c.chunk_id), vector={VECTOR: self.doc_vector(terms)}, payload=payload)

    def _remembered(self, key: str, where: models.Filter | None) -> int:
        """A count of the points matching ``where`` (all when ``None``), remembered under ``key``."""
        with self._lock:
            if not self._is_local and time.monotonic() - self._stats_at > DF_TTL:
                self._forget()
            n = self._stats.get(key)
        if n is None and self._is_local:
            if not self._complete:
                self._count_all()
            n = self._stats.get(key, 0)
        if n is None:
            with self._guard(), self._lock:
                n = self.client.count(self.collection, count_filter=where, exact=True).count
                self._stats[key] = n
        return n

    def _count_all(self) -> None:
        """Local mode: every term's document frequency (and the count) in one pass over the points' ``terms``
        (a filtered count is a scan in Python too: one pass instead of one per term)."""
        with self._guard(), self._lock:
            stats: Counter[str] = Counter()
            offset = None
            while True:
                points, offset = self.client.scroll(self.collection, limit=1000, offset=offset,
                                                    with_payload=["terms"], with_vectors=False)
                for p in points:
                    stats.update((p.payload or {}).get("terms", ()))
                    stats[""] += 1
                if offset is None:
                    break
            self._stats = dict(stats)
            self._complete = True

    def _forget(self) -> None:
        self._stats = {}
        self._complete = False
        self._stats_at = time.monotonic()

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
        n = 0
        with self._guard(), self._lock:
            for key, acc in access.items():
                where = models.Filter(must=[models.FieldCondition(key="doc_key", match=models.MatchValue(value=key))])
                count = self.client.count(self.collection, count_filter=where, exact=True).count
                if count:
                    self.client.set_payload(self.collection, payload={"access": list(acc.tokens()),
                                                                      "access_unresolved": acc.unresolved},
                                            points=where, wait=True)
                    n += count
        return n

    def optimize(self) -> None:
        """Nothing to do (the Whoosh store merges segments here; Qdrant optimises on its own)."""

    def warm(self) -> None:
        """Nothing to prepare: the server scores postings itself, and the document-frequency memory fills on
        the first searches (:meth:`index.knowledge.KnowledgeIndex.warm` calls every store's after a write)."""

    def clear(self) -> None:
        """Drop and recreate the collection."""
        with self._guard(), self._lock:
            self._forget()
            self.client.delete_collection(self.collection)
            self._ensure_collection()

    # -- reading -----------------------------------------------------------------------------------
    def _query(self, query: str, limit: int, boosts: Mapping[str, float] | None, viewer: Viewer,
               with_payload: bool | list[str]) -> list[models.ScoredPoint]:
        tokens = viewer_tokens(viewer, "the BM25")
        sources = viewer_sources(viewer)
        vector = self.query_vector(query, boosts)
        if vector is None or (sources is not None and not sources):
            return []
        allowed = models.Filter(must=[models.FieldCondition(key="access", match=models.MatchAny(any=tokens))])
        if sources is not None:  # a channel's scope: one more condition of the same pre-filter
            allowed.must.append(models.FieldCondition(key="source", match=models.MatchAny(any=sources)))
        with self._guard(), self._lock:
            res = self.client.query_points(self.collection, query=vector, using=VECTOR, query_filter=allowed,
                                           limit=limit, with_payload=with_payload)
        return [p for p in res.points if p.payload and p.score > 0]

    def search_ids(self, query: str, limit: int = 50, boosts: dict[str, float] | None = None, *,
                   viewer: Viewer) -> list[tuple[str, float]]:
        """BM25 search over the chunks ``viewer`` may read: ``(chunk_id, score)`` pairs, best first.

        Args:
            query: free text; analysed like the indexed text.
            limit: the number of hits to return at most.
            boosts: optional per-term weights (analysed term to weight), sent as the query's sparse values.
            viewer: who will see the result (:class:`connectors.access.Viewer`).

        Raises:
            ValueError: when ``viewer`` is not a :class:`Viewer`.
        """
        return [(p.payload["chunk_id"], float(p.score))
                for p in self._query(query, limit, boosts, viewer, ["chunk_id"])]

    def search(self, query: str, limit: int = 50, boosts: dict[str, float] | None = None, *,
               viewer: Viewer) -> list[StoredChunk]:
        """BM25 search returning the stored chunks ``viewer`` may read with their scores, best first
        (see :meth:`search_ids`)."""
        return [StoredChunk(chunk_from_record(p.payload), float(p.score))
                for p in self._query(query, limit, boosts, viewer, True)]

    def doc_frequency(self, term: str) -> int:
        """Number of chunks containing the analysed ``term`` (a count on the payload's ``terms``, remembered:
        see the module docstring)."""
        if not term:
            return 0
        return self._remembered(term, models.Filter(
            must=[models.FieldCondition(key="terms", match=models.MatchValue(value=term))]))

    @property
    def doc_count(self) -> int:
        """Number of chunks stored (the Whoosh store's name)."""
        return self.count

    @property
    def count(self) -> int:
        """Number of points (remembered like :meth:`doc_frequency`)."""
        return self._remembered("", None)

    def chunks(self, chunk_ids: Iterable[str]) -> dict[str, Chunk]:
        """The stored chunks among ``chunk_ids`` (unknown ids are absent)."""
        ids = list(dict.fromkeys(chunk_ids))
        if not ids:
            return {}
        with self._guard(), self._lock:
            pts = self.client.retrieve(self.collection, ids=[point_id(c) for c in ids], with_payload=True,
                                       with_vectors=False)
        return {p.payload["chunk_id"]: chunk_from_record(p.payload) for p in pts if p.payload}

    def chunk_ids(self) -> set[str]:
        """Every chunk id stored (scrolls the whole collection)."""
        ids: set[str] = set()
        offset = None
        while True:
            with self._guard(), self._lock:
                points, offset = self.client.scroll(self.collection, limit=1000, offset=offset,
                                                    with_payload=["chunk_id"], with_vectors=False)
            ids.update(p.payload["chunk_id"] for p in points if p.payload)
            if offset is None:
                return ids

    def close(self) -> None:
        """Close the client (releases the local-mode lock)."""
        try:
            self.client.close()
        except Exception:  # pragma: no cover - best effort on shutdown
            log.debug("qdrant close failed", exc_info=True)


def _sparse(weights: Mapping[int, float]) -> models.SparseVector:
    idx = sorted(weights)
    return models.SparseVector(indices=idx, values=[weights[i] for i in idx])


class _NoLock:
    """A no-op context manager (server mode needs no client-side lock)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None

