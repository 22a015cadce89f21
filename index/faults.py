"""Low-level storage failures turned into the user-facing errors of :mod:`connectors.errors`.

SQLite (through SQLAlchemy, or directly as local-mode Qdrant uses it), Whoosh's segment files and
plain file writes fail with many exception types. This module decides what such a failure means:

- no space: ``ENOSPC``, ``EDQUOT``, ``EFBIG`` (a file-size limit), SQLite's ``SQLITE_FULL``:
  :class:`~core.errors.DiskFullError`;
- no access: ``EACCES``, ``EPERM``, ``EROFS``: :class:`~core.errors.IndexError_`;
- anything else from reading or writing the file: it is damaged,
  :class:`~core.errors.IndexCorruptError` (for SQLite files only ``SQLITE_CORRUPT`` and
  ``SQLITE_NOTADB`` count, other SQLite errors pass through unchanged);

and builds messages that name the file and say what to do. SQLite error codes are read from
``sqlite3.Error.sqlite_errorcode``, never from the message text.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from core.errors import ChatopsError, DiskFullError, IndexCorruptError, IndexError_

if TYPE_CHECKING:  # SQLAlchemy is imported when guard_engine runs, not with this module
    import sqlalchemy as sa
    from sqlalchemy.engine import ExceptionContext

__all__ = [
    "causes", "reason", "is_disk_full", "is_sqlite_damage", "storage_error", "StoreGuard", "guard_engine",
    "quarantine", "REBUILD_INDEX", "REBUILD_STORE",
]


DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
ACCESS_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})
_SQLITE_CORRUPT, _SQLITE_FULL, _SQLITE_NOTADB = 11, 13, 26

#: What to do about a damaged manifest (or index folder); ``{index_dir}`` is filled in.
REBUILD_INDEX = ("rebuild the index with `chatops sync --full` (the configured sources) or `chatops index --full SOURCE...` "
                 "(name every source): a full run moves the damaged manifest aside (or move the folder {index_dir} "
                 "away yourself); embeddings come from the cache, so this is quick")
#: What to do about a damaged BM25 or vector store: an indexing run rebuilds it from the other one.
REBUILD_STORE = ("run `chatops index SOURCE...` or `chatops sync` (stop `chatops serve` first): an indexing run "
                 "moves the damaged folder aside and rebuilds it from the other index and the embedding cache")


def causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and everything behind it: SQLAlchemy's ``orig``, ``__cause__`` and ``__context__``."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo.extend(x for x in (getattr(e, "orig", None), e.__cause__, e.__context__) if isinstance(x, BaseException))


def _sqlite_code(e: BaseException) -> int | None:
    code = getattr(e, "sqlite_errorcode", None) if isinstance(e, sqlite3.Error) else None
    return None if code is None else int(code) & 0xFF  # extended codes keep the primary in the low byte


def is_disk_full(exc: BaseException) -> bool:
    """True when ``exc`` (or a cause) says the disk or a file-size limit is full."""
    return any((isinstance(e, OSError) and e.errno in DISK_FULL_ERRNOS) or _sqlite_code(e) == _SQLITE_FULL
               for e in causes(exc))


def is_sqlite_damage(exc: BaseException) -> bool:
    """True when ``exc`` (or a cause) is SQLite's "file is not a database" or "disk image is malformed"."""
    return any(_sqlite_code(e) in (_SQLITE_CORRUPT, _SQLITE_NOTADB) for e in causes(exc))


def _access(exc: BaseException) -> OSError | None:
    return next((e for e in causes(exc) if isinstance(e, OSError) and e.errno in ACCESS_ERRNOS), None)


def reason(exc: BaseException) -> str:
    """A short reason: the innermost SQLite or OS error if any, else the exception's type and text."""
    for e in causes(exc):
        if isinstance(e, sqlite3.Error):
            return f"sqlite: {e}"
    for e in causes(exc):
        if isinstance(e, OSError) and e.errno is not None:
            return f"{errno.errorcode.get(e.errno, e.errno)}: {e.strerror}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def storage_error(exc: BaseException, what: str, path: str | os.PathLike[str], fix: str,
                  damage: Callable[[BaseException], bool] = lambda e: True) -> ChatopsError | None:
    """The user-facing error for a failure reading or writing ``what`` at ``path``, or ``None``.

    Args:
        exc: the failure.
        what: a name for the file, e.g. ``"the index manifest"``.
        path: the file or folder.
        fix: what to do when it is damaged.
        damage: which other exceptions mean the file is damaged (default: all).

    Returns:
        ``exc`` itself when it already is a :class:`ChatopsError`; a :class:`DiskFullError`, an
        :class:`IndexError_` (no access) or an :class:`IndexCorruptError`; ``None`` when ``damage``
        says the failure is something else (the caller re-raises it).
    """
    if isinstance(exc, ChatopsError):
        return exc
    if is_disk_full(exc):
        return DiskFullError(
            f"no space left to write {what} at {path} ({reason(exc)}); free some disk space (or point "
            "CHATOPS_DATA_DIR at a bigger disk) and run the command again: what was written before is kept, "
            "and a half-written page is redone by the next run")
    denied = _access(exc)
    if denied is not None:
        return IndexError_(f"cannot use {what} at {path} ({reason(denied)}); give the user running chatops "
                           "read and write access to the data dir (CHATOPS_DATA_DIR)")
    if is_sqlite_damage(exc) or damage(exc):
        return IndexCorruptError(f"{what} at {path} is damaged ({reason(exc)}); {fix}")
    return None


class StoreGuard:
    """Maps a store's low-level failures to user-facing errors and remembers damage.

    Use ``with guard():`` around a store's reads and writes. The first damage seen is kept in
    :attr:`damage` (for readiness checks).

    Args:
        what, path, fix: as for :func:`storage_error`.
        damage: which exceptions mean damage (default: all that are not disk-full or access errors).
        translate: tried first: the user-facing error for a failure that is not about files (a store on a
            server maps the client's errors here), or ``None`` to go on with :func:`storage_error`.
    """

    def __init__(self, what: str, path: str | os.PathLike[str], fix: str,
                 damage: Callable[[BaseException], bool] = lambda e: True,
                 translate: Callable[[BaseException], ChatopsError | None] | None = None) -> None:
        self.what, self.path, self.fix, self._damage, self._translate = what, path, fix, damage, translate
        self.damage: IndexCorruptError | None = None

    @contextmanager
    def __call__(self) -> Iterator[None]:
        try:
            yield
        except ChatopsError:
            raise
        except Exception as exc:
            mapped = self._translate(exc) if self._translate is not None else None
            if mapped is not None:
                raise mapped from exc
            mapped = storage_error(exc, self.what, self.path, self.fix, self._damage)
            if mapped is None:
                raise
            if isinstance(mapped, IndexCorruptError) and self.damage is None:
                self.damage = mapped
            raise mapped from exc


def guard_engine(engine: sa.Engine, what: str, path: str | os.PathLike[str], fix: str) -> None:
    """Make a SQLAlchemy ``engine`` raise :func:`storage_error`'s errors (disk full, damaged file).

    Other database errors are left as they are.
    """
    import sqlalchemy as sa

    def handle(context: ExceptionContext) -> None:
        mapped = storage_error(context.original_exception, what, path, fix, damage=lambda e: False)
        if mapped is not None:
            raise mapped from context.original_exception

    sa.event.listen(engine, "handle_error", handle)


def quarantine(path: Path) -> Path:
    """Rename a damaged file or folder to ``<name>.corrupt-<UTC timestamp>`` beside it; returns the new path."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    path.rename(target)
    return target
