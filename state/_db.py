"""What every concern of the state store shares: the engine, UTC times, and how principals compare.

Each concern (:mod:`state.events`, :mod:`state.actions`, ...) is a :class:`Concern` over the one engine
that :class:`state.store.StateStore` opens (:func:`open_engine`); its tables are those of :mod:`state.schema`.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, overload

import sqlalchemy as sa
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import ConnectionPoolEntry

from .errors import StateStoreError

__all__ = ["Concern", "open_engine", "sqlite_url", "safe_url", "now", "aware", "utc", "principal_part"]


class Concern:
    """One concern's reads and writes (a few tables of :mod:`state.schema`) on a shared engine.

    Args:
        engine: the state database's engine (opened by :func:`open_engine`; the database migrated first).
    """

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine


def open_engine(url: str, echo: bool = False) -> sa.Engine:
    """The engine of the state database at ``url`` (SQLite: WAL, 30 s busy timeout, usable across threads).

    Raises:
        StateStoreError: when the URL cannot be used (malformed, or its driver is not installed).
    """
    kwargs: dict[str, Any] = {"echo": echo, "pool_pre_ping": True}
    if url.startswith("sqlite"):
        kwargs["connect_args"] = {"timeout": 30, "check_same_thread": False}
    try:
        engine = sa.create_engine(url, **kwargs)
    except (SQLAlchemyError, ImportError, ValueError) as exc:
        raise StateStoreError(f"cannot use DATABASE_URL ({safe_url(url)}): {exc}") from exc
    if url.startswith("sqlite"):
        sa.event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def sqlite_url(path: str | os.PathLike[str]) -> str:
    """SQLAlchemy URL of a SQLite file (its folder is created)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{Path(path)}"


def safe_url(url: str) -> str:
    """The URL with any password masked, for messages and logs."""
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<unparseable URL>"


def now() -> datetime:
    """The current time, aware, UTC."""
    return datetime.now(timezone.utc)


# A NOT NULL column's time stays a datetime for the type checker; a nullable one may be None.
@overload
def aware(dt: datetime) -> datetime: ...


@overload
def aware(dt: None) -> None: ...


def aware(dt: datetime | None) -> datetime | None:
    """``dt`` with its UTC zone put back (SQLite returns naive datetimes; every time in the store is UTC)."""
    if dt is not None and dt.tzinfo is None:
        return dt.replace(tzinfo=timezone.utc)
    return dt


def utc(dt: datetime, name: str) -> datetime:
    """``dt`` in UTC (SQLite compares times as text, so every stored and compared time must be UTC).

    Raises:
        ValueError: when ``dt`` is naive (its time zone would be a guess).
    """
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError(f"{name} must be an aware datetime (with a time zone), got {dt!r}")
    return dt.astimezone(timezone.utc)


def principal_part(text: str) -> str:
    """A source name, group name or e-mail as principals compare it: trimmed, lower case."""
    return (text or "").strip().lower()


def _sqlite_pragmas(dbapi_conn: DBAPIConnection, _record: ConnectionPoolEntry) -> None:  # pragma: no cover - trivial
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()
