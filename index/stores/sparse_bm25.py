"""BM25 as a Qdrant sparse vector: the encoding, the document-frequency memory and the keyword search that
both Qdrant keyword indexes share (:class:`~index.stores.qdrant_sparse.QdrantSparseStore`, its own collection
for ``KEYWORD_INDEX=qdrant`` without ``QDRANT_URL``, and the keyword view of
:class:`~index.stores.qdrant_hybrid.QdrantHybridStore`, the shared collection's ``bm25`` vector).

**Encoding.** Each chunk's sparse vector ``bm25`` holds a weight per term of the text the Whoosh store indexes
(:func:`index.stores.whoosh_store.bm25f_content`: title and heading path twice, body once, analysed by
:func:`index.stores.whoosh_store.analyzer`: the same tokens, stop words and Porter stems). A term's index in
the vector is the first four bytes of its BLAKE2b digest (:func:`term_index`). The collection's sparse vector
is configured with ``Modifier.IDF``: the server keeps every term's document frequency current as points come
and go and multiplies each query weight by ``ln((N - df + 0.5) / (df + 0.5) + 1)`` (BM25's IDF) at search time.

What the dot product computes. With ``Modifier.IDF`` Qdrant scores ``sum_t q_t * idf(t) * d_t``. If ``d_t``
were the raw term frequency that would be TF-IDF with neither of BM25's two corrections (no saturation of
repeated terms by ``k1``, no normalisation by the chunk's length by ``b``). So the stored value is BM25's term
weight, computed once at write time (Robertson & Zaragoza 2009, "The Probabilistic Relevance Framework: BM25
and Beyond", eq. 3.15)::

    d_t = tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))

with ``k1=1.2, b=0.75`` (the Whoosh store's) and ``dl`` the chunk's number of terms. ``avgdl`` is a fixed
constructor argument, not the collection's running mean: a mean that moved would change every stored weight.
The dot product is then exactly BM25 with that ``avgdl`` (the ``tf="raw"`` mode keeps plain term
frequencies, for comparison). A query sends its :meth:`SparseBM25.query_terms` (chosen as the Whoosh store
chooses them), each weighted by its boost (expansion and feedback terms weigh less).

**Document frequencies** (:class:`TermCounts`). The payload's ``terms`` (the chunk's distinct analysed terms,
keyword-indexed on a server) answers :meth:`SparseBM25.doc_frequency`, which pseudo-relevance feedback and the
evidence gate's IDF read, so they use the same engine as the search. Pseudo-relevance feedback asks for the
document frequency of every term of the top passages, a few hundred per question: one count request each
took a few hundred round trips on a cold memory. Instead, one ``facet`` request on ``terms`` (no filter,
``limit`` :data:`FACET_LIMIT`) returns every term's count at once, and one ``count`` request the number of
points: two round trips per refresh, whatever the questions ask. (A facet *filtered* to the top passages'
ids would count the terms among those passages only, not over the collection: it cannot answer a document
frequency.) On a server the facet is Qdrant's approximate one (``exact=False``: per-segment counts added up,
so a point being rewritten can count twice until the optimizer merges its segments, the same lag as the
server's own ``Modifier.IDF`` statistics; an exact facet runs one filtered count per distinct term on the
server, tens of thousands per refresh). In local mode the facet is one pass over the points in Python. The
counts are remembered until the store writes, and on a server for at most :data:`DF_TTL` seconds (other
processes write there too). A vocabulary larger than :data:`FACET_LIMIT` terms leaves the rarest ones out of
the facet; those are counted one by one (and remembered) when asked for. The search itself does not use
these counts (the server's IDF is current at every query).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Literal

from qdrant_client import QdrantClient, models

from core.access import Viewer
from core.models import Chunk

from .qdrant_store import access_filter
from .records import StoredChunk, chunk_from_record
from .whoosh_store import analyzer, bm25f_content

__all__ = ["SparseBM25", "TermCounts", "term_index", "sparse_vector", "matched", "Matched", "RECORD", "VECTOR", "K1", "B", "DF_TTL", "FACET_LIMIT"]

VECTOR = "bm25"  #: the name of the collection's sparse vector
K1, B = 1.2, 0.75  #: BM25's saturation and length normalisation (the Whoosh store's)
DF_TTL = 60.0  #: seconds a server's document frequencies and count are remembered (local mode: until a write)
FACET_LIMIT = 250_000  #: distinct terms one facet request returns at most (the rarest beyond it: counted one by one)
#: The ``with_payload`` that reads a point's chunk record: everything but the ``terms`` kept for the counts.
RECORD = models.PayloadSelectorExclude(exclude=["terms"])


def term_index(term: str) -> int:
    """The sparse-vector index of an analysed term: its BLAKE2b digest's first four bytes (0 to 2**32 - 1,
    Qdrant's ``u32``). Two terms sharing an index (about one pair in 2**32 / vocabulary) add their weights."""
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=4).digest(), "big")


def sparse_vector(weights: Mapping[int, float]) -> models.SparseVector:
    """A Qdrant sparse vector of ``index -> weight``, indices ascending."""
    idx = sorted(weights)
    return models.SparseVector(indices=idx, values=[weights[i] for i in idx])


class TermCounts:
    """Every term's document frequency over one collection's payload ``terms``, and its number of points,
    remembered (see the module docstring).

    Args:
        client, collection: where the points are.
        server: True on a Qdrant server (the memory also expires after ``ttl`` seconds; approximate facet).
        guard: the owning store's :class:`~index.faults.StoreGuard` (a call around each request).
        lock: the owning store's lock (local mode serialises every client call).
        ttl: seconds a server's counts are remembered.
        facet_limit: distinct terms asked for in one facet request.
    """

    def __init__(self, client: QdrantClient, collection: str, *, server: bool,
                 guard: Callable[[], AbstractContextManager[None]], lock: AbstractContextManager[Any],
                 ttl: float = DF_TTL, facet_limit: int = FACET_LIMIT) -> None:
        self.client = client
        self.collection = collection
        self.server = server
        self._guard = guard
        self._lock = lock
        self.ttl = ttl
        self.facet_limit = facet_limit
        self._read: _Snapshot | None = None  # None: not read since the last write
        self._writes = 0  # forget() calls: a refresh that a write overtook is not remembered
        self._mutex = threading.Lock()  # one refresh at a time (a server's client has no lock)

    def forget(self) -> None:
        """Drop what is remembered (the owner calls this after every write)."""
        self._writes += 1
        self._read = None

    def _snapshot(self) -> _Snapshot:
        with self._mutex:
            read = self._read
            if read is not None and not (self.server and time.monotonic() - read.at > self.ttl):
                return read
            writes = self._writes
            with self._guard(), self._lock:
                hits = self.client.facet(self.collection, key="terms", limit=self.facet_limit, exact=False).hits
                n = self.client.count(self.collection, exact=True).count
            read = _Snapshot({str(h.value): int(h.count) for h in hits}, n, len(hits) < self.facet_limit,
                             time.monotonic())
            if writes == self._writes:  # else a write ended meanwhile: answer with it once, read again next time
                self._read = read
            return read

    def doc_frequency(self, term: str) -> int:
        """Number of points whose payload ``terms`` hold ``term`` (0 for an empty term)."""
        if not term:
            return 0
        read = self._snapshot()
        n = read.df.get(term)
        if n is None and read.complete:
            return 0
        if n is None:  # a vocabulary larger than one facet: the rarest terms are counted alone
            where = models.Filter(must=[models.FieldCondition(key="terms", match=models.MatchValue(value=term))])
            with self._guard(), self._lock:
                n = self.client.count(self.collection, count_filter=where, exact=True).count
            read.df[term] = n
        return n

    @property
    def count(self) -> int:
        """Number of points (read with the document frequencies)."""
        return self._snapshot().n


@dataclass(slots=True)
class _Snapshot:
    """One read of the counts: term -> document frequency, the number of points, whether ``df`` holds every term
    (the facet returned fewer than its limit), and when it was read (``time.monotonic()``)."""

    df: dict[str, int]
    n: int
    complete: bool
    at: float


class SparseBM25:
    """BM25 as a sparse vector over one collection: encoding, document frequencies and the keyword search,
    with the Whoosh store's search interface (:meth:`search_ids` with ``boosts``, :meth:`analyze`,
    :meth:`doc_frequency`, :attr:`doc_count`), so :class:`index.knowledge.KnowledgeIndex` can use any of them.

    A subclass provides :meth:`_query_batch` (the store's client, lock and guard around one
    ``query_batch_points`` call).

    Args:
        counts: the collection's document frequencies (:class:`TermCounts`).
        avgdl: the chunk length (in terms) BM25's length normalisation is relative to.
        tf: ``"bm25"`` stores BM25 term weights (see the module docstring), ``"raw"`` plain term frequencies.
        max_terms: at most this many distinct query terms are sent...
        max_df_ratio: ...after dropping terms in a larger share of chunks while two rarer ones remain...
        prune_min_docs: ...in collections of at least this many chunks: the Whoosh store's query terms
            (:meth:`query_terms`), so both keyword indexes run the same query.

    Raises:
        ValueError: for an unknown ``tf`` or an ``avgdl`` that is not positive.
    """

    def __init__(self, counts: TermCounts, *, avgdl: float = 56.0, tf: Literal["bm25", "raw"] = "bm25",
                 max_terms: int = 16, max_df_ratio: float = 0.06, prune_min_docs: int = 2000) -> None:
        if tf not in ("bm25", "raw"):
            raise ValueError(f"tf must be 'bm25' or 'raw', got {tf!r}")
        if avgdl <= 0:
            raise ValueError(f"avgdl must be positive, got {avgdl}")
        self._counts = counts
        self.avgdl = float(avgdl)
        self.tf = tf
        self.max_terms = max_terms
        self.max_df_ratio = max_df_ratio
        self.prune_min_docs = prune_min_docs
        self._analyzer = analyzer()

    @property
    def outdated(self) -> bool:
        """Always ``False`` (the Whoosh store's flag for indexes older than access control; this one never is)."""
        return False

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
        return sparse_vector(weights)

    def encode(self, c: Chunk) -> tuple[models.SparseVector, list[str]]:
        """What a point of chunk ``c`` stores for BM25: its sparse vector and its distinct terms (sorted, the
        payload's ``terms``)."""
        terms = self.chunk_terms(c)
        return self.doc_vector(terms), sorted(set(terms))

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
        return sparse_vector(weights)

    # -- statistics --------------------------------------------------------------------------------
    def doc_frequency(self, term: str) -> int:
        """Number of chunks containing the analysed ``term`` (from the payload's ``terms``, remembered:
        see the module docstring)."""
        return self._counts.doc_frequency(term)

    def doc_frequencies(self, terms: Iterable[str]) -> dict[str, int]:
        """:meth:`doc_frequency` of each of ``terms``."""
        return {t: self._counts.doc_frequency(t) for t in terms}

    @property
    def doc_count(self) -> int:
        """Number of chunks stored (the Whoosh store's name)."""
        return self.count

    @property
    def count(self) -> int:
        """Number of points (remembered like :meth:`doc_frequency`)."""
        return self._counts.count

    def warm(self) -> None:
        """Read the document frequencies now (one facet request), so the first search after a write does not
        (:meth:`index.knowledge.KnowledgeIndex.warm` calls every store's after a write, off the users' path)."""
        self._counts.count  # noqa: B018 - the read is the point

    # -- searching ---------------------------------------------------------------------------------
    def keyword_request(self, query: str, limit: int, boosts: Mapping[str, float] | None, viewer: Viewer,
                        with_payload: models.WithPayloadInterface) -> models.QueryRequest | None:
        """The BM25 request of ``query`` for ``viewer``: the sparse query vector with the viewer's access and
        scope pre-filter inside it; ``None`` when nothing can match (no query term, or an empty scope).

        Raises:
            ValueError: when ``viewer`` is not a :class:`Viewer`.
        """
        allowed = access_filter(viewer, "the BM25")
        vector = self.query_vector(query, boosts)
        if vector is None or allowed is None:
            return None
        return models.QueryRequest(query=vector, using=VECTOR, filter=allowed, limit=limit, with_payload=with_payload)

    def _query_batch(self, requests: list[models.QueryRequest]) -> list[models.QueryResponse]:
        """Send ``requests`` in one ``query_batch_points`` call (the store's client, lock and guard)."""
        raise NotImplementedError

    def _keyword_points(self, query: str, limit: int, boosts: Mapping[str, float] | None, viewer: Viewer,
                        with_payload: models.WithPayloadInterface) -> list[Matched]:
        request = self.keyword_request(query, limit, boosts, viewer, with_payload)
        if request is None:
            return []
        return matched(self._query_batch([request])[0])

    def search_ids(self, query: str, limit: int = 50, boosts: dict[str, float] | None = None, *,
                   viewer: Viewer) -> list[tuple[str, float]]:
        """BM25 search over the chunks ``viewer`` may read: ``(chunk_id, score)`` pairs, best first.

        Args:
            query: free text; analysed like the indexed text.
            limit: the number of hits to return at most.
            boosts: optional per-term weights (analysed term to weight), sent as the query's sparse values.
            viewer: who will see the result (:class:`core.access.Viewer`).

        Raises:
            ValueError: when ``viewer`` is not a :class:`Viewer`.
        """
        return [(p.payload["chunk_id"], p.score)
                for p in self._keyword_points(query, limit, boosts, viewer, ["chunk_id"])]

    def search(self, query: str, limit: int = 50, boosts: dict[str, float] | None = None, *,
               viewer: Viewer) -> list[StoredChunk]:
        """BM25 search returning the stored chunks ``viewer`` may read with their scores, best first
        (see :meth:`search_ids`)."""
        return [StoredChunk(chunk_from_record(p.payload), p.score)
                for p in self._keyword_points(query, limit, boosts, viewer, RECORD)]


@dataclass(frozen=True, slots=True)
class Matched:
    """A point of a BM25 response (see :func:`matched`): its id, its payload (the fields the query asked for) and
    its score."""

    id: str
    payload: dict[str, Any]
    score: float


def matched(response: models.QueryResponse) -> list[Matched]:
    """The points of a BM25 response that hold a query term (a positive score) and a payload."""
    return [Matched(str(p.id), p.payload, float(p.score)) for p in response.points if p.payload and p.score > 0]
