"""A read-only snapshot of the embedded dense store, so a reader need not load ``qdrant-client``.

Opening local-mode Qdrant costs a reader more than answering does: importing ``qdrant-client`` builds
several hundred pydantic models (1.2-2 s of a 3-6 s ``chatops ask``), then every point is unpickled. A
process that wrote the collection (or opened it because no current snapshot existed) therefore leaves, when
it closes the store, a snapshot beside it: ``index/qdrant/chatops-snapshot-<collection>.sqlite``, one row per
point in the order of Qdrant's scroll (id, document key, access tokens, vector as float32, payload as JSON),
stamped with a digest of the files it was read from (``meta.json`` and the collection's ``storage.sqlite``).

A reader (:class:`LocalDenseStore`, what :class:`~index.knowledge.KnowledgeIndex` opens for ``repair=False``)
takes the same exclusive lock local-mode Qdrant takes (``flock`` on the folder's ``.lock``, as
``portalocker`` does), so the one-process rule is unchanged, then uses the snapshot only when its digest is
the digest of the files now on disk; it builds the same :class:`~index.stores.local_dense.DenseMirror` from
the same points in the same order, so searches, their access pre-filter and their scores are the same as
the store's own. Anything else — no snapshot, another digest (a write since), a SQLite journal beside the
storage (a write cut short), a snapshot of another size or format, a damaged or unreadable snapshot, a row
whose payload does not match its checksum — and the reader opens :class:`~index.stores.QdrantStore` itself,
exactly as before (with its own errors for a damaged or locked folder), and writes a new snapshot when it
closes. So does any write through the reader (journal recovery, a permission sync in ``chatops serve``):
from then on every call goes to the store.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

import numpy as np

from core.access import Viewer
from core.errors import IndexCorruptError
from core.models import Chunk

from .local_dense import DenseMirror, MirrorPoint
from .snapshot_io import SNAPSHOT_FORMAT, SnapshotRow, row_bytes, snapshot_file, store_digest, write_snapshot
from .records import StoredChunk, chunk_from_record, point_id, viewer_sources, viewer_tokens

if TYPE_CHECKING:  # loaded only when the snapshot cannot answer (see _open_store)
    from .qdrant_store import QdrantStore

__all__ = ["LocalDenseStore", "SnapshotRow", "snapshot_file", "store_digest", "write_snapshot", "SNAPSHOT_FORMAT"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")


#: The last snapshot this process read, kept parsed (the ask worker opens the index for every question; on a 10k-chunk
#: handbook reading and checking the rows again took 0.45-0.6 s): (path, collection, dim, store digest, mirror
#: digest, points) -> (mirror, vectors, chunk ids). One entry: a process reading another index replaces it.
_PARSED: dict[tuple[str, str, int, str, str, str], tuple[DenseMirror, dict[str, np.ndarray], dict[str, str]]] = {}
_PARSED_LOCK = threading.Lock()


class _Snapshot:
    """An open, verified snapshot: the mirror built from it and its payloads by point id.

    The rows are read and checked against the snapshot's digest once per process while the snapshot's meta names the
    same store digest and row digest (:data:`_PARSED`); the payloads are read from the file each time, checked.

    Raises:
        ValueError: the snapshot is not the current one for ``digest`` (or is of another format, size or collection).
        sqlite3.Error: it is not a readable database.
    """

    def __init__(self, path: Path, collection: str, dim: int, digest: str) -> None:
        self._con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
        try:
            meta = dict(self._con.execute("SELECT key, value FROM meta"))
            expected = {"format": SNAPSHOT_FORMAT, "collection": collection, "dim": str(dim), "store_digest": digest}
            if any(meta.get(k) != v for k, v in expected.items()):
                raise ValueError("not the current snapshot")
            key = (str(path.resolve()), collection, dim, digest, str(meta.get("mirror_digest")), str(meta.get("points")))
            with _PARSED_LOCK:
                parsed = _PARSED.get(key)
            if parsed is not None:
                self.mirror, self.vectors, self.chunk_id_of = parsed
                return
            points, digest_rows, self.chunk_id_of = [], hashlib.sha256(), {}
            for pid, chunk_id, doc_key, access, vec in self._con.execute(
                    "SELECT id, chunk_id, doc_key, access, vector FROM points ORDER BY seq"):
                digest_rows.update(row_bytes(pid, doc_key, access, vec))
                vector = np.frombuffer(vec, dtype=np.float32)
                if vector.shape != (dim,):
                    raise ValueError("a vector of another size")
                points.append(MirrorPoint(pid, vector, tuple(json.loads(access)), doc_key))
                self.chunk_id_of[pid] = chunk_id
            if digest_rows.hexdigest() != meta.get("mirror_digest") or str(len(points)) != meta.get("points"):
                raise ValueError("rows that do not match the snapshot's digest")
            self.vectors = {p.id: p.vector for p in points}
            self.mirror = DenseMirror(points, dim)
            with _PARSED_LOCK:
                _PARSED.clear()
                _PARSED[key] = (self.mirror, self.vectors, self.chunk_id_of)
        except BaseException:
            self._con.close()
            raise

    def payloads(self, point_ids: list[str]) -> dict[str, dict[str, Any]]:
        """The payloads of ``point_ids`` that the snapshot holds.

        Raises:
            ValueError: a payload does not match its checksum (the snapshot is damaged).
        """
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(point_ids), 500):
            part = point_ids[start:start + 500]
            marks = ",".join("?" * len(part))
            for pid, record, sha in self._con.execute(
                    f"SELECT id, payload, payload_sha FROM points WHERE id IN ({marks})", part):
                if hashlib.sha256(record.encode()).hexdigest() != sha:
                    raise ValueError(f"the payload of point {pid} does not match its checksum")
                found[pid] = json.loads(record)
        return found

    def close(self) -> None:
        self._con.close()


class LocalDenseStore:
    """The embedded dense store as a reader opens it: answered from the current snapshot (see the module
    docstring), else, and from the first write on, by :class:`~index.stores.QdrantStore` itself.

    Args:
        dim: vector size of the embedder.
        path: the local-mode folder (``index/qdrant``).
        collection: the collection.

    Raises:
        As :class:`~index.stores.QdrantStore` when the snapshot cannot be used.
    """

    WHAT = "the vector index"

    def __init__(self, dim: int, path: str | os.PathLike[str], collection: str = "chunks") -> None:
        self.dim = dim
        self.path = Path(path)
        self.collection = collection
        self._store: QdrantStore | None = None  # once opened
        self._snap: _Snapshot | None = None
        self._lock_file: IO[str] | None = None
        self._switch = threading.RLock()
        self._snap = self._open_snapshot()
        if self._snap is None:
            self._open_store()

    @property
    def from_snapshot(self) -> bool:
        """True while calls are answered from the snapshot (no ``qdrant-client`` loaded for them)."""
        return self._snap is not None

    def _open_snapshot(self) -> _Snapshot | None:
        snap = snapshot_file(self.path, self.collection)
        lock_path = self.path / ".lock"
        if not (snap.is_file() and lock_path.is_file()):
            return None
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: the store (portalocker) only
            return None

        try:
            lock_file = open(lock_path, "r+")  # noqa: SIM115 - held until close()
        except OSError:
            return None
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)  # what local-mode Qdrant takes (portalocker)
        except OSError:
            lock_file.close()
            return None  # another process has the folder: QdrantStore raises IndexLockedError as before
        try:
            digest = store_digest(self.path, self.collection)
            if digest is None:
                raise ValueError("no digest")
            opened = _Snapshot(snap, self.collection, self.dim, digest)
        except (ValueError, sqlite3.Error, OSError, json.JSONDecodeError) as exc:
            log.debug("the dense store's snapshot %s is not used (%s); opening the store", snap, exc)
            _unlock(lock_file)
            return None
        self._lock_file = lock_file
        return opened

    def _open_store(self) -> QdrantStore:
        from .qdrant_store import QdrantStore

        with self._switch:
            if self._store is None:
                self._release_snapshot()
                self._store = QdrantStore(self.dim, path=self.path, collection=self.collection)
                self._store.snapshot_on_close = True  # the next reader finds a current snapshot
            return self._store

    def __getattr__(self, name: str) -> Any:  # whatever the store's attribute is
        # Everything the snapshot does not answer (writes, the client, the mirror) is the store's.
        if name.startswith("__") or name in {"_store", "_snap", "_lock_file", "_switch"}:
            raise AttributeError(name)
        return getattr(self._open_store(), name)

    def _read(self, snapshot_call: Callable[[_Snapshot], _T], store_call: Callable[[QdrantStore], _T]) -> _T:
        """``snapshot_call(snapshot)`` while the snapshot serves; ``store_call(store)`` otherwise, and when the
        snapshot turns out damaged."""
        with self._switch:
            if self._snap is not None:
                try:
                    return snapshot_call(self._snap)
                except (ValueError, sqlite3.Error, json.JSONDecodeError) as exc:
                    log.warning("the dense store's snapshot in %s is damaged (%s); opening the store", self.path, exc)
        return store_call(self._open_store())

    def search(self, query: np.ndarray, limit: int = 50, *, viewer: Viewer) -> list[StoredChunk]:
        """As :meth:`QdrantStore.search` in local mode: the mirror's access-filtered ranking, then the hits' chunks."""
        tokens = viewer_tokens(viewer, "the vector")
        sources = viewer_sources(viewer)

        def run(snap: _Snapshot) -> list[StoredChunk]:
            hits = snap.mirror.search(query, tokens, limit, sources)
            payloads = snap.payloads([h[0] for h in hits]) if hits else {}
            return [StoredChunk(chunk_from_record(payloads[pid]), score) for pid, score in hits if pid in payloads]

        return self._read(run, lambda store: store.search(query, limit, viewer=viewer))

    def _by_chunk(self, snap: _Snapshot, chunk_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        payloads = snap.payloads([point_id(c) for c in dict.fromkeys(chunk_ids)])
        return {p["chunk_id"]: p for p in payloads.values() if p}

    def chunks(self, chunk_ids: Iterable[str]) -> dict[str, Chunk]:
        """The stored chunks among ``chunk_ids`` (unknown ids are absent)."""
        ids = list(chunk_ids)
        return self._read(lambda s: {c: chunk_from_record(p) for c, p in self._by_chunk(s, ids).items()},
                          lambda store: store.chunks(ids))

    def get(self, chunk_id: str) -> Chunk | None:
        """The stored chunk with ``chunk_id``, or ``None``."""
        def run(snap: _Snapshot) -> Chunk | None:
            record = self._by_chunk(snap, [chunk_id]).get(chunk_id)
            return chunk_from_record(record) if record else None

        return self._read(run, lambda store: store.get(chunk_id))

    def fetch(self, chunk_ids: list[str]) -> dict[str, tuple[Chunk, np.ndarray]]:
        """Stored chunks and vectors by chunk id (unknown ids are absent)."""
        def run(snap: _Snapshot) -> dict[str, tuple[Chunk, np.ndarray]]:
            return {c: (chunk_from_record(p), snap.vectors[point_id(c)]) for c, p in self._by_chunk(snap, chunk_ids).items()}

        return self._read(run, lambda store: store.fetch(chunk_ids)) if chunk_ids else {}

    def vectors(self, chunk_ids: list[str]) -> dict[str, np.ndarray]:
        """Stored vectors of ``chunk_ids`` (unknown ids are absent)."""
        def run(snap: _Snapshot) -> dict[str, np.ndarray]:
            pids = dict.fromkeys(point_id(c) for c in chunk_ids)
            return {snap.chunk_id_of[pid]: snap.vectors[pid] for pid in pids if snap.chunk_id_of.get(pid)}

        return self._read(run, lambda store: store.vectors(chunk_ids))

    def chunk_ids(self) -> set[str]:
        """Every chunk id stored."""
        return self._read(lambda s: {c for c in s.chunk_id_of.values() if c}, lambda store: store.chunk_ids())

    @property
    def count(self) -> int:
        """Number of points."""
        with self._switch:
            if self._snap is not None:
                return len(self._snap.vectors)
        return self._open_store().count

    @property
    def damage(self) -> IndexCorruptError | None:
        """The store's first write damage (:attr:`QdrantStore.damage`); ``None`` while the snapshot serves."""
        return self._store.damage if self._store is not None else None

    def warm(self) -> None:
        """The snapshot's mirror is built on open; the store builds its own."""
        if self._store is not None:
            self._store.warm()

    def close(self) -> None:
        """Close the snapshot (releasing the folder's lock) or the store."""
        with self._switch:
            self._release_snapshot()
            if self._store is not None:
                self._store.close()

    def _release_snapshot(self) -> None:
        """Close the snapshot and release the folder's lock (the caller holds ``_switch``)."""
        if self._snap is not None:
            self._snap.close()
            self._snap = None
        if self._lock_file is not None:
            _unlock(self._lock_file)
            self._lock_file = None


def _unlock(lock_file: IO[str]) -> None:
    import fcntl

    with contextlib.suppress(OSError, ValueError):
        fcntl.flock(lock_file, fcntl.LOCK_UN)
    lock_file.close()
