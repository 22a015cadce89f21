"""Qdrant store: dense vectors with the chunk as payload, cosine similarity.

Embedded default: ``qdrant-client`` local mode, persisted under the data dir (exact search in
process; one process may open the folder at a time). With ``QDRANT_URL`` the index is the shared
collection of :class:`~index.stores.qdrant_hybrid.QdrantHybridStore`, a subclass of this store whose
dense vector is named (:attr:`QdrantStore.DENSE`) beside a BM25 sparse vector.

Access control (issue 11): each point's payload holds ``access``, the list of its chunk's
:meth:`core.access.Access.tokens` (a keyword payload index on a server), and every search takes
the asker's :class:`core.access.Viewer` and runs with a ``MatchAny`` payload filter on it, inside
the nearest-neighbour query: a point the viewer may not read is never a candidate (a viewer scoped
to some sources adds a ``MatchAny`` on the payload's ``source`` to the same filter). In local mode,
whose filters run in Python point by point, the same test runs on a NumPy mirror of the collection
(:mod:`index.stores.local_dense`), built once and then updated by every write the store makes (a
write that fails drops it, and the next search rebuilds it from the collection).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

import httpx
import numpy as np
from qdrant_client import QdrantClient, models
from qdrant_client.common.client_exceptions import QdrantException
from qdrant_client.conversions.common_types import PointId
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from core.access import Access, Viewer
from core.errors import IndexCorruptError, IndexLockedError, IndexUnavailableError
from index.faults import REBUILD_STORE, StoreGuard, causes, storage_error
from core.models import Chunk
from .snapshot_io import SnapshotRow, store_digest, write_snapshot
from .local_dense import DenseMirror, MirrorPoint, dense_vector, scroll_points
from .records import StoredChunk, chunk_from_record, chunk_to_record, point_id, viewer_sources, viewer_tokens

__all__ = ["QdrantCollection", "QdrantStore", "point_id", "open_client", "server_errors", "connect", "access_filter", "qdrant_location",
           "damaged_file"]

log = logging.getLogger(__name__)


class QdrantCollection:
    """What every chatops store on one Qdrant collection shares, whatever its vectors: the client (a server, or
    local mode in a folder), the lock local mode needs, the guard that turns failures into the errors users see
    (:class:`~index.faults.StoreGuard`, :func:`server_errors`), and the reads and payload writes that do not
    touch vectors. :class:`QdrantStore` (dense) and :class:`~index.stores.qdrant_sparse.QdrantSparseStore`
    (BM25) build on it; a subclass calls :meth:`_open` first and sets :attr:`WHAT` and :attr:`RECORD`."""

    #: How users know this store (in errors).
    WHAT = "the index"
    #: The ``with_payload`` that reads a point's chunk record (a subclass leaves out payload fields of its own).
    RECORD: bool | models.PayloadSelectorExclude = True

    def _open(self, path: str | os.PathLike[str] | None, url: str | None, api_key: str | None,
              collection: str) -> None:
        """Open the client for ``collection`` (see :func:`connect` for the errors raised)."""
        self.collection = collection
        # Local mode keeps points in plain Python structures: serialise access so a re-index in a
        # background thread cannot race a search. (A Qdrant server handles concurrency itself.)
        self._lock: threading.RLock | _NoLock = threading.RLock() if not url else _NoLock()
        # Local mode keeps every point in memory and writes through to one SQLite file per
        # collection: damage shows as sqlite3 or OS errors (reads are served from memory).
        self._guard = StoreGuard(self.WHAT, path or url or "", REBUILD_STORE,
                                 damage=lambda e: not url and isinstance(e, (sqlite3.Error, OSError)),
                                 translate=server_errors(url, self.WHAT) if url else None)
        self.client = connect(url, api_key, path, self.WHAT, type(self).__name__, collection=collection)

    @property
    def damage(self) -> IndexCorruptError | None:
        """The first :class:`IndexCorruptError` a write ran into, else ``None``."""
        return self._guard.damage

    def _write_access(self, key: str, access: Access) -> int:
        """Set the payload's access of every point of the document ``key`` (``set_payload``: vectors untouched);
        returns how many points it holds (0: unknown, nothing written). The caller holds the guard and the lock."""
        where = models.Filter(must=[models.FieldCondition(key="doc_key", match=models.MatchValue(value=key))])
        count = self.client.count(self.collection, count_filter=where, exact=True).count
        if count:
            self.client.set_payload(self.collection, payload={"access": list(access.tokens()),
                                                              "access_unresolved": access.unresolved},
                                    points=where, wait=True)
        return count

    def chunks(self, chunk_ids: Iterable[str]) -> dict[str, Chunk]:
        """The stored chunks among ``chunk_ids`` (unknown ids are absent), without their vectors."""
        ids = list(dict.fromkeys(chunk_ids))
        if not ids:
            return {}
        with self._guard(), self._lock:
            pts = self.client.retrieve(self.collection, ids=[point_id(c) for c in ids], with_payload=self.RECORD,
                                       with_vectors=False)
        return {p.payload["chunk_id"]: chunk_from_record(p.payload) for p in pts if p.payload}

    def chunk_ids(self) -> set[str]:
        """Every chunk id stored (scrolls the whole collection; for checks and tests)."""
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


class QdrantStore(QdrantCollection):
    """Chunks as Qdrant points in one collection (a :class:`~index.stores.base.ChunkStore` searched by vector).

    Args:
        dim: vector size of the embedder.
        path: the local-mode folder (used when ``url`` is not given).
        url: a Qdrant server URL; ``api_key`` goes with it.
        collection: collection name.

    Raises:
        IndexLockedError: when another process has the local folder open.
        IndexCorruptError: when the local folder cannot be read, or (local mode, from any write) its
            SQLite file turns out damaged; :attr:`damage` keeps the first such error.
        DiskFullError: when a local-mode write finds no space.
        IndexUnavailableError: on a server (``url``), from any call (opening too) when the server cannot
            be reached, refuses the API key or answers an error (:func:`server_errors`); not damage.
    """

    #: The dense vector's name in the collection; ``None``: the collection's one unnamed vector.
    DENSE: str | None = None
    #: Payload fields with a keyword index on a server: the access pre-filter's, the channel scope's, the writes'.
    KEYWORD_FIELDS: tuple[str, ...] = ("access", "source", "doc_key")
    WHAT = "the vector index"

    def __init__(self, dim: int, path: str | os.PathLike[str] | None = None, url: str | None = None,
                 api_key: str | None = None, collection: str = "chunks") -> None:
        self.dim = dim
        self._mirror: DenseMirror | None = None  # local mode: vectors and access as arrays (kept in step by writes)
        # Local mode, one unnamed vector (the embedded index's dense store): the folder for the readers' snapshot
        # (:mod:`index.stores.dense_snapshot`), written on close after a write, or when a reader asked for it.
        self._snapshot_folder = Path(path) if path is not None and not url and self.DENSE is None else None
        self._wrote = False
        self._write_failed = False
        #: Write the snapshot on close even without a write (a reader that found none current sets it).
        self.snapshot_on_close = False
        self._open(path, url, api_key, collection)
        with self._guard():
            self._ensure_collection()

    def _ensure_collection(self) -> None:
        """Open the collection (checking its layout, :meth:`_layout_ok`) or create it (:meth:`_create`), with
        the keyword payload indexes of :attr:`KEYWORD_FIELDS` on a server (local mode ignores them, and warns)."""
        info = self.client.get_collection(self.collection) if self.client.collection_exists(self.collection) else None
        if info is not None and not self._layout_ok(info):
            self.client.delete_collection(self.collection)  # an outdated layout the caller asked to rebuild
            info = None
        if info is None:
            try:
                self._create()
            except UnexpectedResponse as exc:
                if exc.status_code != 409:
                    raise
                info = self.client.get_collection(self.collection)  # another process made it since the check
                if not self._layout_ok(info):
                    raise IndexCorruptError(f"the Qdrant collection {self.collection!r} was just made by another "
                                            "process with another layout; run `chatops index --full SOURCE`") from exc
        if not self._is_local:
            for key in self.KEYWORD_FIELDS:
                if info is None or key not in (info.payload_schema or {}):
                    self.client.create_payload_index(self.collection, key, models.PayloadSchemaType.KEYWORD)

    def _layout_ok(self, info: models.CollectionInfo) -> bool:
        """True when the existing collection is usable as it is (a subclass may answer False to have it made again).

        Raises:
            IndexCorruptError: when it has no one unnamed vector (named ones: another store's layout), or its
                vectors are not the embedder's size.
        """
        vectors = info.config.params.vectors
        if not isinstance(vectors, models.VectorParams):  # named vectors (the shared index's layout), or none
            raise IndexCorruptError(
                f"the Qdrant collection {self.collection!r} does not hold the one unnamed vector of {self.WHAT} "
                f"(another store made it, e.g. the shared index's named vectors); {REBUILD_STORE}")
        self._check_dim(vectors.size)
        return True

    def _check_dim(self, size: int | None) -> None:
        if size != self.dim:
            raise IndexCorruptError(
                f"the vector index holds {size}-dimensional vectors but the embedder makes {self.dim}; "
                "run `chatops index --full SOURCE` after changing EMBEDDING_MODEL")

    def _create(self) -> None:
        """Create the collection: one unnamed cosine vector of the embedder's size."""
        self.client.create_collection(
            self.collection, vectors_config=models.VectorParams(size=self.dim, distance=models.Distance.COSINE))

    def _point(self, c: Chunk, vector: np.ndarray) -> models.PointStruct:
        """The point of chunk ``c``: its id (:func:`point_id`), its vector, its record as payload."""
        return models.PointStruct(id=point_id(c.chunk_id), vector=vector.tolist(), payload=chunk_to_record(c))

    def _dense_of(self, vector: models.VectorStructOutput | None) -> np.ndarray:
        """The dense vector of a returned point's ``vector`` (the named one, :attr:`DENSE`, when named)."""
        return dense_vector(vector, self.DENSE)

    @property
    def _with_dense(self) -> bool | list[str]:
        """The ``with_vectors`` argument that reads the dense vector."""
        return True if self.DENSE is None else [self.DENSE]

    @property
    def _is_local(self) -> bool:
        return type(self.client._client).__name__ == "QdrantLocal"  # noqa: SLF001

    def replace(self, doc_keys: Iterable[str], chunks: Sequence[Chunk], vectors: np.ndarray | None = None) -> None:
        """Delete every point of ``doc_keys``, then upsert ``chunks`` with their ``vectors``.

        ``vectors`` has shape ``(len(chunks), dim)``.

        Raises:
            ValueError: when ``chunks`` is not empty and ``vectors`` is ``None``.
        """
        keys = list(doc_keys)
        if len(chunks) and vectors is None:
            raise ValueError("QdrantStore.replace needs one vector per chunk")
        with self._guard(), self._lock, self._mirror_in_step():
            self._replace(keys, chunks, vectors)

    def delete(self, doc_keys: Iterable[str]) -> None:
        """Delete every point of ``doc_keys`` (unknown keys are ignored)."""
        self.replace(doc_keys, [])

    def delete_chunks(self, chunk_ids: Iterable[str]) -> None:
        """Delete the points of these chunk ids (unknown ids are ignored)."""
        ids = [point_id(c) for c in chunk_ids]
        if ids:
            with self._guard(), self._lock, self._mirror_in_step():
                self.client.delete(self.collection, points_selector=models.PointIdsList(points=ids), wait=True)
                if self._mirror is not None:
                    self._mirror.remove_ids(ids)

    @contextlib.contextmanager
    def _mirror_in_step(self) -> Iterator[None]:
        """Around a write that updates the mirror itself: if anything fails, drop the mirror, so the
        next search rebuilds it from the collection instead of trusting a half-applied change (and write
        no snapshot on close: what is in memory may not be what is on disk)."""
        self._wrote = True
        try:
            yield
        except BaseException:
            self._mirror = None
            self._write_failed = True
            raise

    def _replace(self, keys: list[str], chunks: Sequence[Chunk], vectors: np.ndarray | None) -> None:
        if keys:
            self.client.delete(self.collection, points_selector=models.FilterSelector(filter=models.Filter(
                must=[models.FieldCondition(key="doc_key", match=models.MatchAny(any=keys))])), wait=True)
        if len(chunks) and vectors is not None:
            points = [self._point(c, vectors[i]) for i, c in enumerate(chunks)]
            for start in range(0, len(points), 256):
                self.client.upsert(self.collection, points=points[start:start + 256], wait=True)
        if self._mirror is not None:
            self._mirror.remove_docs(keys)
            if len(chunks) and vectors is not None:
                self._mirror.add(MirrorPoint(point_id(c.chunk_id), vectors[i], tuple(c.access.tokens()), c.key)
                                 for i, c in enumerate(chunks))

    def clear(self) -> None:
        """Drop and recreate the collection."""
        with self._guard(), self._lock, self._mirror_in_step():
            self._mirror = None
            self.client.delete_collection(self.collection)
            self._ensure_collection()

    def search(self, query: np.ndarray, limit: int = 50, *, viewer: Viewer) -> list[StoredChunk]:
        """Nearest chunks ``viewer`` may read by cosine similarity to the vector ``query`` (shape ``(dim,)``),
        best first: the access test is a ``MatchAny`` payload filter inside the query.

        Raises:
            ValueError: when ``viewer`` is not a :class:`Viewer`.
        """
        tokens = viewer_tokens(viewer, "the vector")
        sources = viewer_sources(viewer)  # a channel's scope: one more condition of the same pre-filter
        if self._is_local:
            with self._lock:
                hits = self._local_mirror().search(query, tokens, limit, sources)
                pts = self.client.retrieve(self.collection, ids=[h[0] for h in hits], with_payload=self.RECORD,
                                           with_vectors=False) if hits else []
            payloads = {str(p.id): p.payload for p in pts if p.payload}
            return [StoredChunk(chunk_from_record(payloads[pid]), score) for pid, score in hits if pid in payloads]
        allowed = access_filter(viewer, "the vector")
        if allowed is None:
            return []
        with self._guard(), self._lock:
            res = self.client.query_points(self.collection, query=query.tolist(), using=self.DENSE,
                                           query_filter=allowed, limit=limit, with_payload=self.RECORD)
        return [StoredChunk(chunk_from_record(p.payload or {}), float(p.score)) for p in res.points]

    def warm(self) -> None:
        """Build the local-mode mirror now (a no-op on a server, or when it is current), so the first
        search after a write does not pay for it: sync runs call this once they have written."""
        if self._is_local:
            with self._lock:
                self._local_mirror()

    def _local_mirror(self) -> DenseMirror:
        """The local collection as arrays (:class:`DenseMirror`), built on first use, then kept in step by the writes."""
        if self._mirror is None:
            self._mirror = DenseMirror(scroll_points(lambda offset: self.client.scroll(
                self.collection, limit=1000, offset=offset, with_payload=["access", "doc_key"],
                with_vectors=self._with_dense), self.DENSE), self.dim)
        return self._mirror

    def set_access(self, access: Mapping[str, Access]) -> int:
        """Give every point of each document key its new access (doc key to :class:`Access`) by
        ``set_payload``: vectors are untouched, nothing is embedded. Unknown keys are ignored.

        Returns:
            The number of points updated.
        """
        n = 0
        with self._guard(), self._lock, self._mirror_in_step():
            for key, acc in access.items():
                count = self._write_access(key, acc)
                n += count
                if count and self._mirror is not None:
                    self._mirror.set_tokens({key: acc.tokens()})
        return n

    def fetch(self, chunk_ids: list[str]) -> dict[str, tuple[Chunk, np.ndarray]]:
        """Stored chunks and vectors by chunk id (unknown ids are absent)."""
        if not chunk_ids:
            return {}
        with self._guard(), self._lock:
            pts = self.client.retrieve(self.collection, ids=[point_id(c) for c in chunk_ids],
                                       with_payload=self.RECORD, with_vectors=self._with_dense)
        return {p.payload["chunk_id"]: (chunk_from_record(p.payload), self._dense_of(p.vector)) for p in pts if p.payload}

    def vectors(self, chunk_ids: list[str]) -> dict[str, np.ndarray]:
        """Stored vectors of ``chunk_ids`` (unknown ids are absent), shape ``(dim,)`` each."""
        with self._guard(), self._lock:
            pts = self.client.retrieve(self.collection, ids=[point_id(c) for c in chunk_ids],
                                       with_payload=["chunk_id"], with_vectors=self._with_dense)
        return {p.payload["chunk_id"]: self._dense_of(p.vector) for p in pts if p.payload}

    def get(self, chunk_id: str) -> Chunk | None:
        """The stored chunk with ``chunk_id``, or ``None``."""
        with self._guard(), self._lock:
            pts = self.client.retrieve(self.collection, ids=[point_id(chunk_id)], with_payload=self.RECORD, with_vectors=False)
        return chunk_from_record(pts[0].payload) if pts and pts[0].payload else None

    @property
    def count(self) -> int:
        """Number of points."""
        with self._guard(), self._lock:
            return self.client.count(self.collection, exact=True).count

    def close(self) -> None:
        """Close the client (releases the local-mode lock); in local mode, after a write (or when
        :attr:`snapshot_on_close` is set: a reader found no usable one), first leave the readers' snapshot of what
        it holds (:func:`index.stores.dense_snapshot.write_snapshot`), unless a write failed."""
        folder = self._snapshot_folder
        if folder is not None and (self._wrote or self.snapshot_on_close) and not self._write_failed \
                and self.damage is None:
            # Under the folder's lock (before the client releases it): no other process can write between the
            # rows read here and the digest of the files they are stamped with.
            try:
                with self._lock:
                    rows = self._snapshot_rows()
                    digest = store_digest(folder, self.collection)
                    if digest is not None:
                        write_snapshot(folder, self.collection, self.dim, rows, digest)
            except Exception as exc:  # the snapshot only saves readers time: never fail a close for it
                log.debug("no snapshot of %s: %s", folder, exc)
        super().close()

    def _snapshot_rows(self) -> list[SnapshotRow]:
        """Every point (id, payload, vector) in scroll order, as the snapshot keeps them."""
        rows: list[SnapshotRow] = []
        offset: PointId | None = None
        while True:
            points, offset = self.client.scroll(self.collection, limit=1000, offset=offset, with_payload=True,
                                                with_vectors=True)
            rows.extend((str(p.id), p.payload or {}, self._dense_of(p.vector)) for p in points)
            if offset is None:
                return rows


class _NoLock:
    """A no-op context manager (server mode needs no client-side lock)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def server_errors(url: str, what: str) -> Callable[[BaseException], IndexUnavailableError | None]:
    """For a store on the Qdrant server at ``url``: maps the client's failures (the server refused the key,
    answered an error, could not be reached, answered something unreadable) to an
    :class:`IndexUnavailableError` naming the server, its answer and what to check; ``None`` for anything else."""

    def translate(exc: BaseException) -> IndexUnavailableError | None:
        if isinstance(exc, UnexpectedResponse):
            answer = f"HTTP {exc.status_code} {exc.reason_phrase}: {_error_text(exc.content)}"
            if exc.status_code in (401, 403):
                return IndexUnavailableError(f"the Qdrant server at {url} refused {what} ({answer}); "
                                             "check QDRANT_URL and QDRANT_API_KEY")
            return IndexUnavailableError(f"the Qdrant server at {url} failed a request of {what} ({answer}); "
                                         "the server's log says why; check that QDRANT_URL is the right server")
        if isinstance(exc, ResponseHandlingException):
            source = exc.source
            if isinstance(source, httpx.TransportError):
                how = "cannot reach" if isinstance(source, (httpx.ConnectError, httpx.ConnectTimeout)) else "no answer from"
                return IndexUnavailableError(f"{how} the Qdrant server at {url} for {what} "
                                             f"({type(source).__name__}: {source or 'no answer'}); check that it "
                                             "is running and that QDRANT_URL points at it")
            return IndexUnavailableError(f"the Qdrant server at {url} answered {what} with something qdrant-client "
                                         f"cannot read ({type(source).__name__}); check that QDRANT_URL is a Qdrant "
                                         "server of a version compatible with the installed qdrant-client")
        if isinstance(exc, QdrantException):  # e.g. 429 with Retry-After
            return IndexUnavailableError(f"the Qdrant server at {url} did not serve {what} ({exc}); try again later")
        return None

    return translate


def _error_text(content: bytes) -> str:
    """Qdrant's ``{"status": {"error": ...}}`` message, else the start of the body."""
    try:
        return str(json.loads(content)["status"]["error"])
    except (ValueError, KeyError, TypeError):
        return content[:200].decode("utf-8", "replace") or "no body"


def open_client(url: str | None, api_key: str | None, path: str | os.PathLike[str] | None, what: str,
                owner: str) -> QdrantClient:
    """A client for the server at ``url``, or for local mode in the folder ``path`` (created if missing).

    Args:
        url, api_key: a Qdrant server (10 s timeout), or None for local mode.
        path: local mode's folder, used when ``url`` is None.
        what: the store as users know it ("the vector index"), for the locked-folder error.
        owner: the store class, for the missing-argument error.

    Raises:
        ValueError: with neither ``url`` nor ``path``.
        IndexLockedError: when another process holds the local folder (local Qdrant allows one).
        RuntimeError: any other failure to open local mode (the caller maps it to a storage error).
    """
    if url:
        return QdrantClient(url=url, api_key=api_key, timeout=10)
    if path is None:
        raise ValueError(f"{owner} needs a path (local mode) or a url")
    Path(path).mkdir(parents=True, exist_ok=True)
    try:
        return QdrantClient(path=str(path))
    except RuntimeError as exc:
        if "already accessed by another instance" in str(exc):
            raise IndexLockedError(
                f"{what} in {path} is open in another process (local Qdrant allows one); "
                "stop the other chatops process or set QDRANT_URL to use a Qdrant server") from exc
        raise


def connect(url: str | None, api_key: str | None, path: str | os.PathLike[str] | None, what: str,
            owner: str, collection: str | None = None) -> QdrantClient:
    """:func:`open_client`, with its failures turned into the errors users see.

    Args:
        collection: the collection the caller opens, so a damaged local file is named (:func:`damaged_file`).

    Raises:
        ValueError: with neither ``url`` nor ``path``.
        IndexLockedError: when another process holds the local folder.
        IndexCorruptError: when the server cannot be reached ("check QDRANT_URL and QDRANT_API_KEY"), or the
            local folder cannot be read (it is damaged: an indexing run moves it aside); the message names
            the file when it can tell which (``meta.json``, a collection's ``storage.sqlite``).
        DiskFullError: when loading the local folder finds no space.
    """
    if not url and path is None:
        return open_client(url, api_key, path, what, owner)  # raises the missing-argument ValueError
    try:
        return open_client(url, api_key, path, what, owner)
    except IndexLockedError:
        raise
    except Exception as exc:
        if url or path is None:  # a server (path is None only with a url: returned above otherwise)
            if isinstance(exc, (RuntimeError, ValueError)):
                raise
            raise IndexCorruptError(f"cannot open {what} at {url} ({type(exc).__name__}: {exc}); "
                                    "check QDRANT_URL and QDRANT_API_KEY") from exc
        # Local mode: anything failing while the folder loads (its meta.json not JSON, a collection's SQLite file
        # not a database, a point that does not unpickle) means it is damaged (or the disk is full).
        raise storage_error(exc, what, damaged_file(Path(path), exc, collection), REBUILD_STORE) or exc from exc


def damaged_file(folder: Path, exc: BaseException, collection: str | None = None) -> Path:
    """The file of a local-mode Qdrant ``folder`` that ``exc`` (raised while opening it) was reading: ``meta.json``
    (the collections' configuration, JSON) for a decoding error, the ``collection``'s ``storage.sqlite`` for an
    SQLite error; else the folder itself."""
    chain = list(causes(exc))
    if any(isinstance(e, (UnicodeDecodeError, json.JSONDecodeError)) for e in chain):
        return folder / "meta.json"
    if collection and any(isinstance(e, sqlite3.Error) for e in chain):
        return folder / "collection" / collection / "storage.sqlite"
    return folder


def access_filter(viewer: Viewer, store: str) -> models.Filter | None:
    """The pre-filter of a search for ``viewer``: ``MatchAny`` of its access tokens on the payload's ``access``,
    and, for a viewer scoped to some sources (a channel's scope), ``MatchAny`` of them on ``source``; ``None``
    for an empty scope, which matches nothing (the caller returns no hits without asking).

    Raises:
        ValueError: when ``viewer`` is not a :class:`Viewer` (``store`` names the search in the message).
    """
    tokens = viewer_tokens(viewer, store)
    sources = viewer_sources(viewer)
    if sources is not None and not sources:
        return None
    must: list[models.Condition] = [models.FieldCondition(key="access", match=models.MatchAny(any=tokens))]
    if sources is not None:
        must.append(models.FieldCondition(key="source", match=models.MatchAny(any=sources)))
    return models.Filter(must=must)


def qdrant_location(url: str | None) -> tuple[str | None, Path | None]:
    """``QDRANT_URL`` as ``(server url, local folder)``: a ``file:`` URL (``file:/srv/qdrant``,
    ``file:///srv/qdrant`` or ``file:relative/folder``) names a folder for qdrant-client's local mode (one
    process at a time: for tests and measurements of the shared layout, not for replicas); any other
    value is a server. ``(None, None)`` when unset."""
    if not url:
        return None, None
    parts = urlsplit(url)
    if parts.scheme != "file":
        return url, None
    return None, Path(url2pathname(parts.path))
