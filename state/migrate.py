"""Schema migrations of the state store, through Alembic (scripts in :mod:`state.migrations`).

:func:`upgrade` brings a database to the newest revision this code knows (the head); the state store
runs it at start-up and ``chatops db upgrade`` runs it ahead. In one transaction, under a lock:

- a new (empty) database gets every revision, from ``0001``;
- a database made before migrations existed (the release ``414ee8a`` or older, whose start-up ran
  ``create_all``: tables, no ``alembic_version``) first gets any ``0001`` table it lacks (as that
  start-up would have made it), is stamped at ``0001`` (or later when it already has the tables of
  later revisions, made by an unreleased build from main before migrations), then upgraded;
- a database at a revision this code does not know (migrated by a newer chatops) is left alone and
  :class:`~state.errors.SchemaTooNewError` says to upgrade chatops.

The lock: on PostgreSQL the transaction first takes the advisory lock :data:`ADVISORY_LOCK_KEY`
(``pg_advisory_xact_lock``, released at commit), so of two processes starting at once one migrates
and the other waits, then finds the head and does nothing; PostgreSQL's DDL is transactional, so a
failed migration leaves nothing half done. On SQLite the transaction starts with ``BEGIN IMMEDIATE``
(the database's write lock; the other process waits up to 30 s), and SQLite's DDL is transactional too.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import ConnectionPoolEntry, NullPool

from .errors import SchemaTooNewError, StateStoreError

__all__ = ["upgrade", "status", "SchemaStatus", "ADVISORY_LOCK_KEY", "BASELINE", "head"]

log = logging.getLogger(__name__)

#: The PostgreSQL advisory lock held while migrating (``0x63686f70`` is "chop").
ADVISORY_LOCK_KEY = 0x63686F70
#: The revision a database made before migrations is stamped at: the schema of release 414ee8a.
BASELINE = "0001"
#: Tables that builds from main after 414ee8a made with ``create_all`` before migrations existed, in
#: order, with the revision that creates each: an unversioned database that already has them is stamped
#: at the last revision whose table (and every earlier one's) it has, so no revision creates a table twice.
_UNRELEASED = (("0002", "turn_log"), ("0003", "sent_replies"))
_SCRIPTS = Path(__file__).parent / "migrations"


@dataclass(frozen=True, slots=True)
class SchemaStatus:
    """Where a database's schema stands.

    Attributes:
        current: its revision (``None``: no ``alembic_version``: empty, or made before migrations).
        head: the newest revision this code knows.
        unversioned: True when it has the state store's tables but no revision (release 414ee8a or older).
        known: False when ``current`` is a revision this code does not know (a newer chatops migrated it).
    """

    current: str | None
    head: str
    unversioned: bool = False
    known: bool = True

    @property
    def is_head(self) -> bool:
        """True when nothing is left to migrate."""
        return self.current == self.head


def _config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(_SCRIPTS))
    return cfg


@functools.lru_cache(maxsize=1)
def _scripts() -> ScriptDirectory:
    """The migration scripts (read once per process: they ship with the code and do not change under it)."""
    return ScriptDirectory.from_config(_config())


def head() -> str:
    """The newest revision of the migration scripts."""
    return _scripts().get_current_head() or ""


def _engine(url: str) -> sa.Engine:
    """A short-lived engine for migrating: SQLite gets real transactions that start with ``BEGIN IMMEDIATE``
    (pysqlite's own would start only before the first write, after the checks)."""
    if not url.startswith("sqlite"):
        return sa.create_engine(url, poolclass=NullPool)
    engine = sa.create_engine(url, poolclass=NullPool, connect_args={"timeout": 30})

    @sa.event.listens_for(engine, "connect")
    def _no_implicit_transactions(dbapi_conn: DBAPIConnection, _record: ConnectionPoolEntry) -> None:  # pragma: no cover - trivial
        dbapi_conn.isolation_level = None

    @sa.event.listens_for(engine, "begin")
    def _begin_immediate(conn: sa.Connection) -> None:  # pragma: no cover - trivial
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


@contextmanager
def _locked(url: str) -> Iterator[sa.Connection]:
    """A connection inside one transaction that holds the migration lock; commits on success."""
    engine = _engine(url)
    try:
        with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": ADVISORY_LOCK_KEY})
            yield conn
    finally:
        engine.dispose()


def _status(conn: sa.Connection, scripts: ScriptDirectory) -> SchemaStatus:
    heads = MigrationContext.configure(conn).get_current_heads()
    top = scripts.get_current_head() or ""
    if not heads:
        tables = set(sa.inspect(conn).get_table_names())
        base = scripts.get_revision(BASELINE).module.metadata()
        return SchemaStatus(None, top, unversioned=bool(tables & set(base.tables)))
    current = heads[0]
    known = {s.revision for s in scripts.walk_revisions()}
    return SchemaStatus(current, top, known=all(h in known for h in heads))


def _stamp_at(conn: sa.Connection) -> str:
    """The revision an unversioned database is stamped at (see :data:`_UNRELEASED`)."""
    at = BASELINE
    tables = set(sa.inspect(conn).get_table_names())
    for revision, table in _UNRELEASED:
        if table not in tables:
            break
        at = revision
    return at


def _too_new(url: str, st: SchemaStatus) -> SchemaTooNewError:
    return SchemaTooNewError(
        f"the state database {_safe(url)} is at schema revision {st.current}, which this chatops does not know "
        f"(its newest is {st.head}): a newer chatops has upgraded it. Upgrade chatops to that version or newer "
        "(pip install -U chatops-bot, or the newer image); do not point an older chatops at this database")


def status(url: str) -> SchemaStatus:
    """Where the database at ``url`` stands (reads only; takes no lock).

    Raises:
        StateStoreError: when the database cannot be reached.
    """
    engine = sa.create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return _status(conn, _scripts())
    except SQLAlchemyError as exc:
        raise StateStoreError(f"cannot read the state database {_safe(url)}: {exc.__class__.__name__}: "
                              f"{getattr(exc, 'orig', None) or exc}; check DATABASE_URL and that the server "
                              "is running") from exc
    finally:
        engine.dispose()


def upgrade(url: str) -> tuple[SchemaStatus, SchemaStatus]:
    """Bring the database at ``url`` to the head revision (see the module docstring); idempotent.

    Returns:
        The status before and after.

    Raises:
        SchemaTooNewError: the database is at a revision this code does not know (nothing changed).
        StateStoreError: the database cannot be reached, or a migration failed (rolled back).
    """
    scripts = _scripts()
    cfg = _config()
    try:
        with _locked(url) as conn:
            before = _status(conn, scripts)
            if not before.known:
                raise _too_new(url, before)
            if before.is_head:
                return before, before
            cfg.attributes["connection"] = conn
            if before.unversioned:
                scripts.get_revision(BASELINE).module.metadata().create_all(conn, checkfirst=True)
                at = _stamp_at(conn)
                log.warning("the state database %s has no schema revision (made by chatops 414ee8a or older); "
                            "stamping it at %s", _safe(url), at)
                command.stamp(cfg, at)
            command.upgrade(cfg, "head")
            after = _status(conn, scripts)
    except StateStoreError:
        raise
    except SQLAlchemyError as exc:
        damaged = _damaged_sqlite_file(url, exc)
        if damaged is not None:
            raise StateStoreError(
                f"the state database {damaged} is damaged ({getattr(exc, 'orig', None) or exc}); restore it from a "
                f"backup, or move it away (`mv {damaged} {damaged}.damaged`) and run the command again to start a "
                "new one (pending actions, reminders, the audit log and conversation history are lost; sync cursors "
                "too, so the next `chatops sync` lists every page again). The index is not affected") from exc
        raise StateStoreError(f"cannot migrate the state database {_safe(url)}: {exc.__class__.__name__}: "
                              f"{getattr(exc, 'orig', None) or exc}; check DATABASE_URL and that the server is "
                              "running (nothing was changed: the migration is one transaction)") from exc
    if before.current != after.current:
        # A new database is not news; an existing one brought to a newer schema is (operators look for it).
        log.log(logging.INFO if before.current else logging.DEBUG, "state database %s migrated from %s to %s",
                _safe(url), before.current or "nothing", after.current)
    return before, after


def _damaged_sqlite_file(url: str, exc: BaseException) -> str | None:
    """The file of a SQLite ``url`` when ``exc`` is SQLite's "not a database" or "malformed" (codes 26, 11), else
    None."""
    orig = getattr(exc, "orig", None)
    code = getattr(orig, "sqlite_errorcode", None)
    if not url.startswith("sqlite") or code is None or int(code) & 0xFF not in (11, 26):
        return None
    return url.split(":///", 1)[-1]


def _safe(url: str) -> str:
    """The URL with any password masked."""
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - only for messages
        return "<unparseable URL>"
