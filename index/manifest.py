"""The index manifest: which pages each index holds, at which content hash, and a write journal.

One class, two homes (the same methods and behaviour; only the tables differ):

- **a SQLite file** (``Manifest(path)``, ``<index dir>/manifest.sqlite``; tables ``pages``, ``journal``,
  ``meta``) beside an embedded index's stores, because it describes files on this machine;
- **the state database** (``Manifest(database_url=..., scope=...)``; ``DATABASE_URL``, PostgreSQL in
  production, SQLite too) for an index shared by replicas (``QDRANT_URL``), so every replica sees the same
  pages and no replica needs a local file: tables ``index_pages``, ``index_journal``, ``index_meta`` of
  the state store's revision ``0006`` (:mod:`state.index_manifest`), every row keyed by ``scope``, the
  index's id, so indexes sharing a database never see each other's rows. ``index_pages.chunk_count``
  keeps each page's number of chunks (PostgreSQL has no ``json_array_length`` on text).

The journal makes indexing crash-consistent across two stores that cannot share a transaction:
a page is written to the journal (committed) before either store changes, and removed from it
together with its manifest row once both stores committed. Any journal entry found when the
index is next opened marks a page whose write may have stopped half-way; recovery deletes its
chunks from both stores and forgets it, so the next scan indexes it again from the source.

Several writers at once (two sources syncing in one worker, on their own connections): each write is
one short transaction; the index version is bumped by one ``INSERT ... ON CONFLICT DO UPDATE SET value =
value + 1`` (atomic on SQLite and PostgreSQL: no bump is lost) as the transaction's last statement, so
the one row every writer updates is locked last and writers never wait on each other in opposite orders.

Errors, from any method, each with a message that says what to do: a damaged file (not a database, or
failing ``PRAGMA quick_check`` on open) raises :class:`~core.errors.IndexCorruptError`, a full disk
:class:`~core.errors.DiskFullError`; a state database that cannot be reached or used, or that lacks
the tables (not migrated: ``chatops db upgrade``), :class:`~core.errors.IndexUnavailableError`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import ExceptionContext
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.pool import ConnectionPoolEntry

from core.access import PUBLIC_TOKEN, Access
from core.errors import IndexCorruptError, IndexUnavailableError
from state.index_manifest import SCOPE_LENGTH, index_manifest_tables

from .faults import REBUILD_INDEX, guard_engine, storage_error

if TYPE_CHECKING:  # the dialects are imported on the first write (see _upsert)
    from sqlalchemy.dialects.postgresql import Insert as PgInsert
    from sqlalchemy.dialects.sqlite import Insert as SqliteInsert

__all__ = ["Manifest", "PageEntry", "VERSION_KEY"]

#: The metadata key of the index version (:attr:`Manifest.version`).
VERSION_KEY = "index_version"
#: The databases the manifest can live in, each with its module of ``INSERT ... ON CONFLICT``.
_INSERTS = {"sqlite": "sqlalchemy.dialects.sqlite", "postgresql": "sqlalchemy.dialects.postgresql"}


def _upsert(dialect: str) -> Callable[[sa.Table], SqliteInsert | PgInsert]:
    """``insert`` of ``dialect`` (imported on the first write: a reader of a SQLite manifest does not load
    SQLAlchemy's PostgreSQL dialect)."""
    import importlib

    insert: Callable[[sa.Table], SqliteInsert | PgInsert] = importlib.import_module(_INSERTS[dialect]).insert
    return insert


@dataclass(frozen=True, slots=True)
class PageEntry:
    """What the indexes hold for one page.

    Attributes:
        sensitive_chunks: chunks holding a credential or personal data (:func:`screening.flag_chunks`);
            ``None`` for a page indexed before the scan existed.
        injection_chunks: chunks holding an instruction addressed to an assistant; ``None`` likewise.
        access: the page's read access as indexed (:class:`core.access.Access`, as its tokens and
            ``unresolved``; a public page keeps no principals); ``None`` for a page recorded before access
            control existed.
    """

    doc_key: str
    source: str
    doc_id: str
    hash: str
    chunk_ids: tuple[str, ...]
    sensitive_chunks: int | None = None
    injection_chunks: int | None = None
    access: Access | None = None

    @property
    def readable_by_nobody(self) -> bool:
        """True when no viewer may read the page (its access unresolved, or no token at all)."""
        return self.access is None or not self.access.tokens()


def _access_columns(access: Access | None) -> dict[str, str | None]:
    if access is None:
        return {"access_tokens": None, "access_unresolved": None}
    return {"access_tokens": json.dumps(list(access.tokens())), "access_unresolved": access.unresolved}


def _access_of(tokens: str | None, unresolved: str | None) -> Access | None:
    if tokens is None:
        return None
    if unresolved:
        return Access.nobody(unresolved)
    toks = json.loads(tokens)
    return Access.everyone() if PUBLIC_TOKEN in toks else Access(principals=frozenset(toks))


def _file_tables(md: sa.MetaData) -> tuple[sa.Table, sa.Table, sa.Table]:
    """The tables of a manifest file (unchanged since access control: :meth:`Manifest._add_missing_columns`)."""
    pages = sa.Table(
        "pages", md,
        sa.Column("doc_key", sa.String(600), primary_key=True),
        sa.Column("source", sa.String(200), nullable=False, index=True),
        sa.Column("doc_id", sa.String(500), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("chunk_ids", sa.Text, nullable=False),
        sa.Column("indexed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("sensitive_chunks", sa.Integer, nullable=True),
        sa.Column("injection_chunks", sa.Integer, nullable=True),
        sa.Column("access_tokens", sa.Text, nullable=True),
        sa.Column("access_unresolved", sa.Text, nullable=True),
    )
    journal = sa.Table(
        "journal", md,
        sa.Column("doc_key", sa.String(600), primary_key=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
    )
    meta = sa.Table(
        "meta", md,
        sa.Column("key", sa.String(100), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )
    return pages, journal, meta


def _open_file(path: Path) -> sa.Engine:
    """An engine on the manifest file ``path`` (created with its folder), checked with ``PRAGMA quick_check``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    engine = sa.create_engine(f"sqlite:///{path}")
    fix = REBUILD_INDEX.format(index_dir=path.parent)
    guard_engine(engine, "the index manifest", path, fix)
    with engine.connect() as conn:
        check = [r[0] for r in conn.exec_driver_sql("PRAGMA quick_check")]
    if check != ["ok"]:
        engine.dispose()
        raise IndexCorruptError(f"the index manifest at {path} is damaged (sqlite quick_check: "
                                f"{'; '.join(map(str, check[:3]))}); {fix}")
    return engine


def _safe(url: str) -> str:
    """``url`` with any password masked (for messages)."""
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - only for messages
        return "<unparseable URL>"


#: What to do about a damaged (SQLite) state database holding a manifest.
_REBUILD_STATE = ("restore the state database from a backup (it also holds sync cursors, pending actions and the "
                  "audit log), or move it away and rebuild the index with `chatops sync --full`")


def _sqlite_pragmas(dbapi_conn: DBAPIConnection, _record: ConnectionPoolEntry) -> None:  # pragma: no cover - trivial
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")  # as the state store's own connections: readers never block the writer
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


def _open_database(url: str, tables: Iterable[sa.Table]) -> sa.Engine:
    """An engine on the state database ``url`` whose failures raise the manifest's errors, after checking
    that it is SQLite or PostgreSQL and has ``tables`` (revision 0006).

    Raises:
        IndexUnavailableError: an unusable URL, another database, an unreachable server, missing tables.
    """
    where = _safe(url)
    try:
        engine = sa.create_engine(url, pool_pre_ping=True, **(
            {"connect_args": {"timeout": 30, "check_same_thread": False}} if url.startswith("sqlite") else {}))
    except (SQLAlchemyError, ImportError, ValueError) as exc:
        raise IndexUnavailableError(f"cannot use DATABASE_URL ({where}) for the shared index's manifest: {exc}; "
                                    "check DATABASE_URL") from exc
    if engine.dialect.name not in _INSERTS:
        engine.dispose()
        raise IndexUnavailableError(f"the shared index's manifest needs PostgreSQL or SQLite, not "
                                    f"{engine.dialect.name} ({where}); check DATABASE_URL")
    if engine.dialect.name == "sqlite":
        sa.event.listen(engine, "connect", _sqlite_pragmas)

    def unavailable(context: ExceptionContext) -> None:
        exc = context.original_exception
        mapped = storage_error(exc, "the shared index's manifest in the state database", where, _REBUILD_STATE,
                               damage=lambda e: False)
        if mapped is None and (context.is_disconnect or isinstance(
                context.sqlalchemy_exception, (sa.exc.OperationalError, sa.exc.InterfaceError))):
            mapped = IndexUnavailableError(
                f"cannot use the state database {where}, which holds the shared index's manifest "
                f"({type(exc).__name__}: {' '.join(str(exc).split())}); check DATABASE_URL and that the database "
                "server is running, then try again")
        if mapped is not None:
            raise mapped from exc

    sa.event.listen(engine, "handle_error", unavailable)
    try:
        with engine.connect() as conn:
            missing = [t.name for t in tables if not sa.inspect(conn).has_table(t.name)]
    except BaseException:
        engine.dispose()
        raise
    if missing:
        engine.dispose()
        raise IndexUnavailableError(
            f"the state database {where} lacks the tables of the shared index's manifest ({', '.join(missing)}; schema "
            "revision 0006): run `chatops db upgrade` (or start `chatops serve` or `chatops worker`, which migrate "
            "it), then run the command again")
    return engine


class Manifest:
    """Pages, journal and metadata of one index: in a SQLite file, or in the state database under a scope.

    Args:
        path: the SQLite file (an embedded index's ``manifest.sqlite``; created with its folder).
        database_url: instead of ``path``: the state database (a SQLAlchemy URL of PostgreSQL or SQLite),
            migrated to revision ``0006`` (``chatops db upgrade``; the state store migrates on opening).
        scope: with ``database_url`` only: the index's id (for a shared index
            :func:`index.identity.shared_index_id`), at most 64 characters; every row read or written
            belongs to it.

    Attributes:
        scope: the scope in the state database, ``None`` for a file.

    Raises:
        ValueError: neither or both of ``path`` and ``database_url``; ``scope`` missing, empty or too long
            with ``database_url``, or given with ``path``.
        IndexCorruptError: when the file (or a SQLite state database) is damaged (here or from any later call).
        DiskFullError: when a write finds no space (from any call).
        IndexUnavailableError: the state database cannot be reached or used, or lacks the tables (here or from
            any later call).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, database_url: str | None = None,
                 scope: str | None = None) -> None:
        if (path is None) == (database_url is None):
            raise ValueError("a Manifest takes exactly one of path (a SQLite file) and database_url (the state database)")
        if (database_url is None) != (scope is None) or scope == "" or len(scope or "") > SCOPE_LENGTH:
            raise ValueError(f"scope (the index id, 1 to {SCOPE_LENGTH} characters) goes with database_url, and only "
                             f"with it; got scope={scope!r}")
        self.scope = scope
        md = sa.MetaData()
        if path is not None:
            self.pages, self.journal, self.meta = _file_tables(md)
            self.engine = _open_file(Path(path))
            md.create_all(self.engine)
            self._add_missing_columns()
        else:
            assert database_url is not None  # exactly one of the two, checked above
            self.pages, self.journal, self.meta = index_manifest_tables(md)
            self.engine = _open_database(database_url, (self.pages, self.journal, self.meta))
        #: Column values every row written carries, and the condition every row read meets (the scope).
        self._key = {} if scope is None else {"scope": scope}
        #: A page's chunk count in SQL: the stored count in the database, the JSON list's length in a file.
        self._chunks = self.pages.c.chunk_count if scope is not None else sa.func.json_array_length(
            self.pages.c.chunk_ids)

    def _mine(self, table: sa.Table) -> list[sa.ColumnElement[bool]]:
        """The conditions selecting this manifest's rows of ``table`` (none for a file)."""
        return [table.c[k] == v for k, v in self._key.items()]

    def _add_missing_columns(self) -> None:
        """Manifests made before the flag counts (or the access) existed get the columns (NULL: not
        scanned yet; no access recorded)."""
        have = {c["name"] for c in sa.inspect(self.engine).get_columns("pages")}
        with self.engine.begin() as conn:
            for name, kind in (("sensitive_chunks", "INTEGER"), ("injection_chunks", "INTEGER"),
                               ("access_tokens", "TEXT"), ("access_unresolved", "TEXT")):
                if name not in have:
                    conn.execute(sa.text(f"ALTER TABLE pages ADD COLUMN {name} {kind}"))

    # -- pages -------------------------------------------------------------------------------
    def pages_of(self, source: str) -> dict[str, PageEntry]:
        """Every page of ``source``, by doc_id."""
        q = sa.select(self.pages).where(*self._mine(self.pages), self.pages.c.source == source)
        with self.engine.connect() as conn:
            return {r["doc_id"]: self._entry(r) for r in conn.execute(q).mappings()}

    def page(self, doc_key: str) -> PageEntry | None:
        """One page by its doc key (``source:doc_id``), or None when the manifest does not hold it."""
        q = sa.select(self.pages).where(*self._mine(self.pages), self.pages.c.doc_key == doc_key)
        with self.engine.connect() as conn:
            row = conn.execute(q).mappings().first()
        return self._entry(row) if row is not None else None

    def counts(self) -> tuple[int, int]:
        """``(pages, chunks)`` held, from one aggregate query (no row reaches Python, so probes such as
        ``/readyz`` cost the same whatever the corpus size)."""
        q = sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(self._chunks), 0)).where(*self._mine(self.pages))
        with self.engine.connect() as conn:
            pages, chunks = conn.execute(q.select_from(self.pages)).one()
        return int(pages), int(chunks)

    def counts_by_source(self) -> dict[str, tuple[int, int]]:
        """``{source: (pages, chunks)}`` from one aggregate query (no page row reaches Python; for ``/metrics``)."""
        src = self.pages.c.source
        q = sa.select(src, sa.func.count(), sa.func.coalesce(sa.func.sum(self._chunks), 0)).where(
            *self._mine(self.pages)).group_by(src)
        with self.engine.connect() as conn:
            return {s: (int(p), int(c)) for s, p, c in conn.execute(q)}

    def all_pages(self) -> list[PageEntry]:
        """Every page of every source."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(self.pages).where(*self._mine(self.pages))).mappings()
            return [self._entry(r) for r in rows]

    @staticmethod
    def _entry(r: sa.RowMapping) -> PageEntry:
        return PageEntry(r["doc_key"], r["source"], r["doc_id"], r["hash"], tuple(json.loads(r["chunk_ids"])),
                         r["sensitive_chunks"], r["injection_chunks"],
                         _access_of(r["access_tokens"], r["access_unresolved"]))

    def _row(self, e: PageEntry, now: datetime) -> dict[str, Any]:
        """The ``pages`` row of ``e`` (with its scope and chunk count in the state database)."""
        row = {**self._key, "doc_key": e.doc_key, "source": e.source, "doc_id": e.doc_id, "hash": e.hash,
               "chunk_ids": json.dumps(list(e.chunk_ids)), "indexed_at": now,
               "sensitive_chunks": e.sensitive_chunks, "injection_chunks": e.injection_chunks,
               **_access_columns(e.access)}
        if self.scope is not None:
            row["chunk_count"] = len(e.chunk_ids)
        return row

    def unresolved_access(self, source: str | None = None) -> int:
        """Pages readable by nobody (their access could not be read, or names no reader; pages recorded
        before access control count too), of ``source`` or of every source; one aggregate query."""
        q = sa.select(sa.func.count()).select_from(self.pages).where(*self._mine(self.pages), sa.or_(
            self.pages.c.access_tokens.is_(None), self.pages.c.access_tokens == "[]",
            sa.func.coalesce(self.pages.c.access_unresolved, "") != ""))
        if source is not None:
            q = q.where(self.pages.c.source == source)
        with self.engine.connect() as conn:
            return int(conn.execute(q).scalar() or 0)

    def set_access(self, doc_key: str, access: Access) -> None:
        """Record a page's new access (its chunks' access changed in both stores; nothing else did) and
        clear its journal entry, atomically."""
        with self.engine.begin() as conn:
            conn.execute(self.pages.update().where(*self._mine(self.pages), self.pages.c.doc_key == doc_key)
                         .values(**_access_columns(access)))
            self._unjournal(conn, [doc_key])
            self._bump_version(conn)

    # -- journal -----------------------------------------------------------------------------
    def begin(self, doc_keys: Iterable[str]) -> None:
        """Journal ``doc_keys`` before touching the stores (committed on return)."""
        now = datetime.now(timezone.utc)
        keys = list(doc_keys)
        if not keys:
            return
        with self.engine.begin() as conn:
            self._unjournal(conn, keys)
            conn.execute(self.journal.insert(), [{**self._key, "doc_key": k, "started_at": now} for k in keys])

    def _unjournal(self, conn: sa.Connection, keys: list[str]) -> None:
        conn.execute(self.journal.delete().where(*self._mine(self.journal), self.journal.c.doc_key.in_(keys)))

    def _drop_pages(self, conn: sa.Connection, keys: list[str]) -> None:
        conn.execute(self.pages.delete().where(*self._mine(self.pages), self.pages.c.doc_key.in_(keys)))

    def commit(self, upserts: Iterable[PageEntry], deletes: Iterable[str]) -> None:
        """Record written pages and deleted page keys, and clear their journal entries, atomically."""
        ups = list(upserts)
        dels = list(deletes)
        now = datetime.now(timezone.utc)
        keys = [e.doc_key for e in ups] + dels
        with self.engine.begin() as conn:
            if keys:
                self._drop_pages(conn, keys)
                self._unjournal(conn, keys)
            if ups:
                conn.execute(self.pages.insert(), [self._row(e, now) for e in ups])
            if keys:
                self._bump_version(conn)

    def set_flags(self, doc_key: str, sensitive_chunks: int, injection_chunks: int) -> None:
        """Record a page's flag counts (for a page indexed before the scan existed; its chunks are unchanged)."""
        with self.engine.begin() as conn:
            conn.execute(self.pages.update().where(*self._mine(self.pages), self.pages.c.doc_key == doc_key).values(
                sensitive_chunks=sensitive_chunks, injection_chunks=injection_chunks))

    def pending(self) -> list[str]:
        """Doc keys journaled by a run that did not finish."""
        with self.engine.connect() as conn:
            return [r[0] for r in conn.execute(sa.select(self.journal.c.doc_key).where(*self._mine(self.journal)))]

    def forget(self, doc_keys: Iterable[str]) -> None:
        """Drop pages and journal entries of ``doc_keys`` (after their chunks left both stores)."""
        keys = list(doc_keys)
        if not keys:
            return
        with self.engine.begin() as conn:
            self._drop_pages(conn, keys)
            self._unjournal(conn, keys)
            self._bump_version(conn)

    def clear(self) -> None:
        """Forget everything (pages, journal, metadata) but the index version, which is bumped (answer
        caches keyed by it never see an earlier version number again)."""
        with self.engine.begin() as conn:
            for t in (self.pages, self.journal):
                conn.execute(t.delete().where(*self._mine(t)))
            conn.execute(self.meta.delete().where(*self._mine(self.meta), self.meta.c.key != VERSION_KEY))
            self._bump_version(conn)

    def adopt(self, other: Manifest) -> int:
        """Copy the pages, journal and metadata of ``other`` (the manifest file a shared index kept before
        revision 0006) into this manifest, when this one holds no page yet; one transaction.

        Metadata keys this manifest already has keep their values; the version is bumped.

        Returns:
            The number of pages copied: 0 when this manifest already held pages (or another process adopted
            at the same moment).
        """
        pages, pending = other.all_pages(), other.pending()
        now = datetime.now(timezone.utc)
        with other.engine.connect() as conn:
            meta = dict(conn.execute(sa.select(other.meta.c.key, other.meta.c.value).where(*other._mine(other.meta))).all())
        try:
            with self.engine.begin() as conn:
                held = conn.execute(sa.select(sa.func.count()).select_from(self.pages).where(*self._mine(self.pages)))
                if held.scalar() or not pages:
                    return 0
                have = set(conn.execute(sa.select(self.meta.c.key).where(*self._mine(self.meta))).scalars())
                conn.execute(self.pages.insert(), [self._row(e, now) for e in pages])
                if pending:
                    conn.execute(self.journal.insert(), [{**self._key, "doc_key": k, "started_at": now} for k in pending])
                new = [{**self._key, "key": k, "value": v} for k, v in meta.items() if k not in have and k != VERSION_KEY]
                if new:
                    conn.execute(self.meta.insert(), new)
                self._bump_version(conn)
        except IntegrityError:  # another process copied the same rows first
            return 0
        return len(pages)

    # -- metadata ----------------------------------------------------------------------------
    def get(self, key: str, default: str | None = None) -> str | None:
        """Read a metadata value."""
        with self.engine.connect() as conn:
            v = conn.execute(sa.select(self.meta.c.value).where(*self._mine(self.meta), self.meta.c.key == key)).scalar()
            return default if v is None else v

    def set(self, key: str, value: str) -> None:
        """Write a metadata value."""
        with self.engine.begin() as conn:
            self._put(conn, key, value)

    def _put(self, conn: sa.Connection, key: str, value: str, on_conflict: sa.ColumnElement[str] | None = None) -> None:
        """Insert the metadata row ``key`` = ``value``, or when it exists set its value to ``on_conflict``
        (default: ``value``): one atomic statement, so concurrent writers neither collide nor lose an update."""
        insert = _upsert(conn.dialect.name)(self.meta).values(**self._key, key=key, value=value)
        conn.execute(insert.on_conflict_do_update(
            index_elements=[*self._key, "key"],
            set_={"value": insert.excluded.value if on_conflict is None else on_conflict}))

    def _bump_version(self, conn: sa.Connection) -> None:
        """Add one to the index version (1 when there is none); keep it the transaction's last statement."""
        self._put(conn, VERSION_KEY, "1", sa.cast(sa.cast(self.meta.c.value, sa.Integer) + 1, sa.Text))

    @property
    def version(self) -> int:
        """Increases on every change to the indexed pages (for answer caches)."""
        return int(self.get(VERSION_KEY, "0") or 0)

    def close(self) -> None:
        """Release connections."""
        self.engine.dispose()
