"""The index manifest: which pages each index holds, at which content hash, and a write journal.

It lives beside the indexes (``<index dir>/manifest.sqlite``), not in the shared state store,
because it describes these files on this machine. SQLite through SQLAlchemy.

The journal makes indexing crash-consistent across two stores that cannot share a transaction:
a page is written to the journal (committed) before either store changes, and removed from it
together with its manifest row once both stores committed. Any journal entry found when the
index is next opened marks a page whose write may have stopped half-way; recovery deletes its
chunks from both stores and forgets it, so the next scan indexes it again from the source.

A damaged file (not a database, or failing ``PRAGMA quick_check`` on open) raises
:class:`~connectors.errors.IndexCorruptError`, and a full disk :class:`~connectors.errors.DiskFullError`,
from any method, each with a message that says what to do.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import sqlalchemy as sa

from connectors.access import PUBLIC_TOKEN, Access
from connectors.errors import IndexCorruptError
from .faults import REBUILD_INDEX, guard_engine

__all__ = ["Manifest", "PageEntry"]


@dataclass(frozen=True, slots=True)
class PageEntry:
    """What the indexes hold for one page.

    Attributes:
        sensitive_chunks: chunks holding a credential or personal data (:func:`screening.flag_chunks`);
            ``None`` for a page indexed before the scan existed.
        injection_chunks: chunks holding an instruction addressed to an assistant; ``None`` likewise.
        access: the page's read access as indexed (:class:`connectors.access.Access`, as its tokens and
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


def _access_columns(access: Access | None) -> dict:
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


class Manifest:
    """Pages, journal and metadata of one index folder.

    Args:
        path: the SQLite file.

    Raises:
        IndexCorruptError: when the file is damaged (here or from any later call).
        DiskFullError: when a write finds no space (from any call).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.engine = sa.create_engine(f"sqlite:///{Path(path)}")
        fix = REBUILD_INDEX.format(index_dir=Path(path).parent)
        guard_engine(self.engine, "the index manifest", path, fix)
        with self.engine.connect() as conn:
            check = [r[0] for r in conn.exec_driver_sql("PRAGMA quick_check")]
        if check != ["ok"]:
            self.engine.dispose()
            raise IndexCorruptError(f"the index manifest at {path} is damaged (sqlite quick_check: "
                                    f"{'; '.join(map(str, check[:3]))}); {fix}")
        md = sa.MetaData()
        self.pages = sa.Table(
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
        self.journal = sa.Table(
            "journal", md,
            sa.Column("doc_key", sa.String(600), primary_key=True),
            sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        )
        self.meta = sa.Table(
            "meta", md,
            sa.Column("key", sa.String(100), primary_key=True),
            sa.Column("value", sa.Text, nullable=False),
        )
        md.create_all(self.engine)
        self._add_missing_columns()

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
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(self.pages).where(self.pages.c.source == source)).mappings()
            return {r["doc_id"]: self._entry(r) for r in rows}

    def page(self, doc_key: str) -> PageEntry | None:
        """One page by its doc key (``source:doc_id``), or None when the manifest does not hold it."""
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(self.pages).where(self.pages.c.doc_key == doc_key)).mappings().first()
        return self._entry(row) if row is not None else None

    def counts(self) -> tuple[int, int]:
        """``(pages, chunks)`` held, from one aggregate query (no row reaches Python, so probes such as
        ``/readyz`` cost the same whatever the corpus size)."""
        q = sa.text("SELECT COUNT(*), COALESCE(SUM(json_array_length(chunk_ids)), 0) FROM pages")
        with self.engine.connect() as conn:
            pages, chunks = conn.execute(q).one()
        return int(pages), int(chunks)

    def counts_by_source(self) -> dict[str, tuple[int, int]]:
        """``{source: (pages, chunks)}`` from one aggregate query (no page row reaches Python; for ``/metrics``)."""
        q = sa.text("SELECT source, COUNT(*), COALESCE(SUM(json_array_length(chunk_ids)), 0) FROM pages GROUP BY source")
        with self.engine.connect() as conn:
            return {s: (int(p), int(c)) for s, p, c in conn.execute(q)}

    def all_pages(self) -> list[PageEntry]:
        """Every page of every source."""
        with self.engine.connect() as conn:
            return [self._entry(r) for r in conn.execute(sa.select(self.pages)).mappings()]

    @staticmethod
    def _entry(r) -> PageEntry:
        return PageEntry(r["doc_key"], r["source"], r["doc_id"], r["hash"], tuple(json.loads(r["chunk_ids"])),
                         r["sensitive_chunks"], r["injection_chunks"],
                         _access_of(r["access_tokens"], r["access_unresolved"]))

    def unresolved_access(self, source: str | None = None) -> int:
        """Pages readable by nobody (their access could not be read, or names no reader; pages recorded
        before access control count too), of ``source`` or of every source; one aggregate query."""
        q = sa.select(sa.func.count()).select_from(self.pages).where(sa.or_(
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
            conn.execute(self.pages.update().where(self.pages.c.doc_key == doc_key).values(**_access_columns(access)))
            conn.execute(self.journal.delete().where(self.journal.c.doc_key == doc_key))
            self._bump_version(conn)

    # -- journal -----------------------------------------------------------------------------
    def begin(self, doc_keys: Iterable[str]) -> None:
        """Journal ``doc_keys`` before touching the stores (committed on return)."""
        now = datetime.now(timezone.utc)
        keys = list(doc_keys)
        if not keys:
            return
        with self.engine.begin() as conn:
            conn.execute(self.journal.delete().where(self.journal.c.doc_key.in_(keys)))
            conn.execute(self.journal.insert(), [{"doc_key": k, "started_at": now} for k in keys])

    def commit(self, upserts: Iterable[PageEntry], deletes: Iterable[str]) -> None:
        """Record written pages and deleted page keys, and clear their journal entries, atomically."""
        ups = list(upserts)
        dels = list(deletes)
        now = datetime.now(timezone.utc)
        keys = [e.doc_key for e in ups] + dels
        with self.engine.begin() as conn:
            if keys:
                conn.execute(self.pages.delete().where(self.pages.c.doc_key.in_(keys)))
                conn.execute(self.journal.delete().where(self.journal.c.doc_key.in_(keys)))
            if ups:
                conn.execute(self.pages.insert(), [
                    {"doc_key": e.doc_key, "source": e.source, "doc_id": e.doc_id, "hash": e.hash,
                     "chunk_ids": json.dumps(list(e.chunk_ids)), "indexed_at": now,
                     "sensitive_chunks": e.sensitive_chunks, "injection_chunks": e.injection_chunks,
                     **_access_columns(e.access)} for e in ups])
            if keys:
                self._bump_version(conn)

    def set_flags(self, doc_key: str, sensitive_chunks: int, injection_chunks: int) -> None:
        """Record a page's flag counts (for a page indexed before the scan existed; its chunks are unchanged)."""
        with self.engine.begin() as conn:
            conn.execute(self.pages.update().where(self.pages.c.doc_key == doc_key).values(
                sensitive_chunks=sensitive_chunks, injection_chunks=injection_chunks))

    def pending(self) -> list[str]:
        """Doc keys journaled by a run that did not finish."""
        with self.engine.connect() as conn:
            return [r[0] for r in conn.execute(sa.select(self.journal.c.doc_key))]

    def forget(self, doc_keys: Iterable[str]) -> None:
        """Drop pages and journal entries of ``doc_keys`` (after their chunks left both stores)."""
        keys = list(doc_keys)
        if not keys:
            return
        with self.engine.begin() as conn:
            conn.execute(self.pages.delete().where(self.pages.c.doc_key.in_(keys)))
            conn.execute(self.journal.delete().where(self.journal.c.doc_key.in_(keys)))
            self._bump_version(conn)

    def clear(self) -> None:
        """Forget everything (pages, journal, metadata)."""
        with self.engine.begin() as conn:
            for t in (self.pages, self.journal, self.meta):
                conn.execute(t.delete())

    # -- metadata ----------------------------------------------------------------------------
    def get(self, key: str, default: str | None = None) -> str | None:
        """Read a metadata value."""
        with self.engine.connect() as conn:
            v = conn.execute(sa.select(self.meta.c.value).where(self.meta.c.key == key)).scalar()
            return default if v is None else v

    def set(self, key: str, value: str) -> None:
        """Write a metadata value."""
        with self.engine.begin() as conn:
            self._set(conn, key, value)

    def _set(self, conn, key: str, value: str) -> None:
        conn.execute(self.meta.delete().where(self.meta.c.key == key))
        conn.execute(self.meta.insert(), [{"key": key, "value": value}])

    def _bump_version(self, conn) -> None:
        v = conn.execute(sa.select(self.meta.c.value).where(self.meta.c.key == "index_version")).scalar()
        self._set(conn, "index_version", str(int(v or 0) + 1))

    @property
    def version(self) -> int:
        """Increases on every change to the indexed pages (for answer caches)."""
        return int(self.get("index_version", "0") or 0)

    def close(self) -> None:
        """Release connections."""
        self.engine.dispose()
