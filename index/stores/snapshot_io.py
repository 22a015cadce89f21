"""The dense store's snapshot file (see :mod:`index.stores.dense_snapshot`): where it is, the digest of the files it
was read from, and writing it. The store (:class:`~index.stores.QdrantStore`) writes it; the reader
(:class:`~index.stores.dense_snapshot.LocalDenseStore`) checks and reads it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["SNAPSHOT_FORMAT", "SnapshotRow", "snapshot_file", "store_digest", "write_snapshot", "row_bytes"]

log = logging.getLogger(__name__)

#: Bumped when the snapshot's tables change; a snapshot of another format is ignored (and replaced).
SNAPSHOT_FORMAT = "1"

#: One point as the snapshot keeps it: Qdrant id, its payload (the chunk record), its vector.
SnapshotRow = tuple[str, dict[str, Any], np.ndarray]


def snapshot_file(folder: str | os.PathLike[str], collection: str) -> Path:
    """Where the snapshot of ``collection`` in the local-mode folder ``folder`` lives."""
    return Path(folder) / f"chatops-snapshot-{collection}.sqlite"


def _storage(folder: Path, collection: str) -> Path:
    return folder / "collection" / collection / "storage.sqlite"


def store_digest(folder: str | os.PathLike[str], collection: str) -> str | None:
    """SHA-256 over local Qdrant's ``meta.json`` and the collection's ``storage.sqlite`` as they are on disk, or
    ``None`` when either is missing or unreadable, or a SQLite journal beside the storage shows a write that did
    not finish (the next opener rolls it back, changing the file)."""
    folder = Path(folder)
    storage = _storage(folder, collection)
    if any(storage.with_name(storage.name + side).exists() for side in ("-journal", "-wal")):
        return None
    h = hashlib.sha256(SNAPSHOT_FORMAT.encode())
    try:
        for f in (folder / "meta.json", storage):
            with open(f, "rb") as fh:
                h.update(f.name.encode() + b"\0" + hashlib.file_digest(fh, "sha256").digest())
    except OSError:
        return None
    return h.hexdigest()


def row_bytes(pid: str, doc_key: str, access: str, vector: bytes) -> bytes:
    return b"\0".join((pid.encode(), doc_key.encode(), access.encode(), vector))


def write_snapshot(folder: str | os.PathLike[str], collection: str, dim: int, rows: Iterable[SnapshotRow],
                   digest: str) -> bool:
    """Write the snapshot of ``collection`` (``rows`` in scroll order; ``digest``: :func:`store_digest` of the files
    they were read from, both taken by the store while it holds the folder's lock with every write committed)
    atomically (a temporary file renamed over the old snapshot). A failure (read-only folder, full disk) leaves no file behind and returns False: the next reader
    opens the store instead."""
    target = snapshot_file(folder, collection)
    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    mirror = hashlib.sha256()
    try:
        tmp.unlink(missing_ok=True)
        con = sqlite3.connect(tmp)
        try:
            con.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            con.execute("CREATE TABLE points (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, chunk_id TEXT NOT NULL, "
                        "doc_key TEXT NOT NULL, access TEXT NOT NULL, vector BLOB NOT NULL, payload TEXT NOT NULL, "
                        "payload_sha TEXT NOT NULL)")
            n = 0
            for seq, (pid, payload, vector) in enumerate(rows):
                access = json.dumps(list(payload.get("access") or ()))
                doc_key = str(payload.get("doc_key") or "")
                vec = np.asarray(vector, dtype=np.float32).tobytes()
                record = json.dumps(payload, sort_keys=True)  # ASCII: a lone surrogate in page text survives
                mirror.update(row_bytes(pid, doc_key, access, vec))
                con.execute("INSERT INTO points VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                            (seq, pid, str(payload.get("chunk_id") or ""), doc_key, access, vec, record,
                             hashlib.sha256(record.encode()).hexdigest()))
                n += 1
            con.executemany("INSERT INTO meta VALUES (?, ?)", [
                ("format", SNAPSHOT_FORMAT), ("collection", collection), ("dim", str(dim)), ("points", str(n)),
                ("store_digest", digest), ("mirror_digest", mirror.hexdigest())])
            con.commit()
        finally:
            con.close()
        os.replace(tmp, target)
        return True
    except (OSError, sqlite3.Error, TypeError, ValueError) as exc:
        log.warning("could not write the dense store's snapshot %s (%s: %s); `chatops ask` opens the store instead",
                    target, type(exc).__name__, exc)
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        return False
