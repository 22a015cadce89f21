"""One knowledge index: its two stores named by role, ``keyword`` (BM25: Whoosh, a local sparse Qdrant store, or the
shared collection's keyword view) and ``dense`` (Qdrant's vectors), and their manifest.

Layout under the index folder::

    whoosh/          BM25F index (KEYWORD_INDEX=whoosh, the default)
    qdrant/          local-mode Qdrant (absent when QDRANT_URL is used)
    qdrant-bm25/     BM25 as a local-mode Qdrant sparse vector (KEYWORD_INDEX=qdrant without QDRANT_URL)
                     (a shared index, QDRANT_URL: none of the three, its stores are one Qdrant collection)
    manifest.sqlite  pages, write journal, metadata (embedding model, index version, index id)

A **shared** index (``qdrant_url`` and ``database_url`` both given: replicas writing and reading one
Qdrant collection) keeps its manifest in the state database instead, scoped by the index id
(:func:`open_manifest`), so every replica sees the same pages; the folder is then not created (with
``keyword_index="qdrant"`` nothing of the index is on this machine). Journal recovery and clearing a
shared index for another embedding model are then left to writers (``repair=True``): a reader must not
undo pages a writer is writing at that moment, nor empty the index every replica answers from.

The index has an id (:attr:`KnowledgeIndex.index_id`, see :mod:`index.identity`): sync cursors, run
records and sync locks in the shared state store are keyed by it, so replicas with their own index
each keep their own cursor, and replicas writing one Qdrant collection share one.

Opening a :class:`KnowledgeIndex` runs journal recovery (see :mod:`index.manifest`), so the
two stores agree from the moment it is open, even after a run that was killed half-way.

A **shared** index (``qdrant_url`` set: ``QDRANT_URL``) is ONE Qdrant collection (``collection``:
``QDRANT_COLLECTION``) holding both retrievers, :class:`~index.stores.QdrantHybridStore`: it is the dense
store (``dense``), its keyword view (``store.keyword``, BM25 as the collection's sparse vector) is the
keyword store (``keyword``), and :attr:`KnowledgeIndex.hybrid` is the store again, through which the retrieval
engine (:mod:`index.retrieval`) sends both queries in one call. No store folder is made
(only the manifest stays under the index folder); a ``file:`` URL opens that layout in local mode, for tests
and the eval. ``keyword_index`` ``"auto"`` (the default) or ``"qdrant"`` mean the collection's sparse vector
there; ``"whoosh"`` is refused (a shared index cannot use local Whoosh files).

An **embedded** index (no ``qdrant_url``) is Whoosh and local-mode Qdrant under the index folder, as before.
With ``keyword_index="qdrant"`` its keyword store is :class:`~index.stores.QdrantSparseStore` (BM25 as a
sparse vector in a local collection ``<collection>-bm25`` under ``qdrant-bm25/``, beside the unchanged dense
store: a comparison of keyword engines) instead of Whoosh; either is the attribute ``keyword``. Switching an
index between the two leaves the new store empty: the next indexing run's reconciliation fills it from the dense
store.

The manifest is the record of what the index holds; the two stores are derived from it. Opened
with ``repair=True`` (indexing runs), a store whose files are damaged is moved aside
(``whoosh.corrupt-<timestamp>``) and started empty; :func:`index.reconcile.reconcile` then
fills it from the other store. Readers (``ask``, ``serve``) get :class:`IndexCorruptError`.

An index built before access control (schema below :data:`ACCESS_SCHEMA`: its chunks carry no
``access``) cannot say who may read what. Opened by an indexing run (``repair=True``) it is cleared
and rebuilt like any index of another schema (embeddings come from the cache; the sources list every
page again because the manifest no longer knows them); opened by a reader it raises
:class:`IndexOutdatedError` telling the admin to run ``chatops index --full``: never serving every
page to everyone, and never emptying the index behind a running bot.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, TypeVar

from core.access import Access
from core.errors import IndexCorruptError, IndexOutdatedError
from core.models import Chunk

from .embeddings import Embedder
from .faults import quarantine, reason
from .identity import ensure_index_id, index_id_of, shared_index_id
from .manifest import Manifest

if TYPE_CHECKING:
    from .stores import HybridKeywordView, LocalDenseStore, QdrantHybridStore, QdrantSparseStore, QdrantStore, WhooshStore

# The stores are imported where they are opened: a reader of the embedded index loads Whoosh and the dense store's
# snapshot (index.stores.dense_snapshot), not qdrant-client, unless the snapshot is stale.

__all__ = ["KnowledgeIndex", "ConsistencyReport", "StoredChunks", "SCHEMA_VERSION", "ACCESS_SCHEMA", "MANIFEST_FILE",
           "open_manifest", "open_stored_chunks"]

#: Bumped whenever what the stores keep changes shape or the chunker (or the clean-up before it) cuts pages
#: differently; an index of another version is cleared and rebuilt (embeddings come from the cache). An incremental
#: run re-chunks only pages whose :attr:`core.models.Document.hash` changed, so without the bump an index built
#: before keeps the old chunks of every other page and differs from one built afresh:
#: ``tests/test_chunker.py::test_chunker_output_is_pinned_to_the_schema_version`` fails until it is bumped.
#: 9: headings read by markdown-it-py (``&nbsp;`` decoded, code spans' ``<...>`` kept).
SCHEMA_VERSION = "9"

#: The first schema whose chunks carry their read access (issue 11); older indexes are refused to readers.
ACCESS_SCHEMA = 7

log = logging.getLogger(__name__)

_S = TypeVar("_S")  # a store that _open_store opens

#: The manifest file of an index kept on this machine, in its folder.
MANIFEST_FILE = "manifest.sqlite"


def open_manifest(path: str | os.PathLike[str], qdrant_url: str | None = None, database_url: str | None = None,
                  collection: str = "chunks") -> Manifest:
    """The manifest of the index in the folder ``path``.

    With both ``qdrant_url`` and ``database_url`` (a shared index): the state database's, scoped by
    :func:`~index.identity.shared_index_id` of ``qdrant_url`` and ``collection``; nothing is made under
    ``path``. A ``path/manifest.sqlite`` that this very index kept before revision 0006 is copied in once
    (:meth:`Manifest.adopt`, when the database holds no page of the index yet) and renamed
    ``manifest.sqlite.copied-to-database``: without it, the first sync's reconciliation would delete every
    chunk the database does not list, and the cursor would not list those pages again.
    Otherwise: the SQLite file ``path/manifest.sqlite`` (created with its folder).

    Raises:
        IndexCorruptError, DiskFullError, IndexUnavailableError: as :class:`Manifest`.
    """
    local = Path(path) / MANIFEST_FILE
    if not (qdrant_url and database_url):
        return Manifest(local)
    scope = shared_index_id(qdrant_url, collection)
    manifest = Manifest(database_url=database_url, scope=scope)
    if local.is_file():
        try:
            _adopt_file(manifest, local, scope)
        except BaseException:
            manifest.close()
            raise
    return manifest


class StoredChunks(Protocol):
    """Read access to an index's stored chunks (what :func:`open_stored_chunks` returns)."""

    def chunks(self, chunk_ids: Iterable[str]) -> dict[str, Chunk]:
        """The stored chunks among ``chunk_ids`` (unknown ids are absent)."""
        ...

    def close(self) -> None:
        """Release files and clients."""
        ...


def open_stored_chunks(path: str | os.PathLike[str], dim: int, qdrant_url: str | None = None,
                       qdrant_api_key: str | None = None, collection: str = "chunks",
                       keyword_index: Literal["auto", "whoosh", "qdrant"] = "auto") -> StoredChunks | None:
    """The stored chunks (title, URL, ``updated_at``, text, ...) of the index :class:`KnowledgeIndex` would open
    with these arguments, without opening the rest, for reads beside a process that holds the index
    (``chatops report`` while ``chatops serve`` runs).

    - shared (``qdrant_url``): the collection on the server (:class:`~index.stores.QdrantHybridStore`, opened
      as a reader: nothing is made under ``path``, and a server admits any number of clients; a ``file:`` URL
      is local mode, one process at a time);
    - embedded, keyword store Whoosh: its files under ``path/whoosh`` (Whoosh readers take no lock);
    - embedded, ``keyword_index="qdrant"``: the local sparse collection under ``path/qdrant-bm25`` (local mode:
      :class:`IndexLockedError` while another process has it open).

    Args:
        dim: the embedder's vector size (a shared collection of another size is refused, as by the index).

    Returns:
        The store (close it), or ``None`` for an embedded index whose keyword store was never made (nothing is
        created then).

    Raises:
        IndexCorruptError, IndexLockedError, IndexOutdatedError, IndexUnavailableError: as :class:`KnowledgeIndex`.
    """
    if qdrant_url:
        from .stores.qdrant_hybrid import QdrantHybridStore

        return QdrantHybridStore(dim, url=qdrant_url, api_key=qdrant_api_key, collection=collection)
    path = Path(path)
    if keyword_index == "qdrant":
        from .stores.qdrant_sparse import QdrantSparseStore

        folder = path / "qdrant-bm25"
        return QdrantSparseStore(path=folder, collection=f"{collection}-bm25") if folder.is_dir() else None
    from .stores.whoosh_store import WhooshStore

    return WhooshStore(path / "whoosh") if (path / "whoosh").is_dir() else None


def _adopt_file(manifest: Manifest, local: Path, scope: str) -> None:
    """Copy ``local`` into ``manifest`` when it is the manifest of the index ``scope`` (see :func:`open_manifest`)."""
    old = Manifest(local)
    try:
        if index_id_of(old) != scope:
            return  # another index's (an embedded one of this data dir): not ours to copy
        copied = manifest.adopt(old)
    finally:
        old.close()
    if copied:
        log.warning("copied the manifest of the shared index %s (%d pages) from %s into the state database",
                    scope, copied, local)
    try:
        local.rename(local.with_name(f"{MANIFEST_FILE}.copied-to-database"))
    except OSError as exc:
        log.warning("could not rename %s after copying it into the state database (%s); it is no longer used", local, exc)


@dataclass(frozen=True, slots=True)
class ConsistencyReport:
    """Chunk ids per store (by role: the keyword store, the dense store) and in the manifest; ``ok`` when all three
    sets are equal."""

    keyword: frozenset[str]
    dense: frozenset[str]
    manifest: frozenset[str]

    @property
    def ok(self) -> bool:
        """True when both stores and the manifest hold exactly the same chunks."""
        return self.keyword == self.dense == self.manifest


def _older(recorded: str | None, version: int) -> bool:
    """True when a recorded schema version is missing, not a number, or below ``version``."""
    try:
        return int(recorded or "0") < version
    except ValueError:
        return True


class KnowledgeIndex:
    """The pair of stores plus manifest under ``path``.

    Args:
        path: the index folder.
        embedder: the dense model; its ``model_id`` is recorded, and a different model on a later
            open wipes the vectors (they are incomparable) so the next run re-embeds (a shared index: only
            a writer's, ``repair=True``; a reader raises :class:`IndexOutdatedError`).
        qdrant_url: the shared index's Qdrant server (``qdrant_api_key`` goes with it), or a ``file:`` URL
            naming a local-mode folder for that layout; ``None``: the embedded index.
        database_url: the state database (``DATABASE_URL``); with ``qdrant_url``, the manifest lives there
            (:func:`open_manifest`) and ``path`` is not created. Ignored without ``qdrant_url``.
        collection: the shared index's collection (the embedded dense store's too).
        keyword_index: the keyword (BM25) store: ``"auto"`` (default: Whoosh embedded, the collection's sparse
            vector shared), ``"whoosh"`` (embedded only) or ``"qdrant"`` (embedded: a local sparse collection).
        repair: move a damaged local store aside and start it empty instead of raising (for
            indexing runs, whose reconciliation refills it); :attr:`rebuilt` lists what was moved. A shared
            collection of an older layout is dropped and made again.
        rebuild_manifest: (full runs: ``chatops index --full``, ``chatops sync --full``) a damaged manifest file is
            moved aside (``manifest.sqlite.corrupt-<timestamp>``) and started empty instead of raising.

    Attributes:
        index_id: the index's id (:func:`index.identity.ensure_index_id`): random and kept in the manifest
            for an embedded index (a new one after :meth:`clear`), derived from ``qdrant_url`` and
            ``collection`` for a shared one.
        keyword: the keyword (BM25) store: :class:`~index.stores.WhooshStore`,
            :class:`~index.stores.QdrantSparseStore` (``keyword_index="qdrant"``, embedded) or the shared
            collection's :class:`~index.stores.HybridKeywordView`.
        dense: the dense store: :class:`~index.stores.QdrantStore` (embedded) or the shared collection's
            :class:`~index.stores.QdrantHybridStore`.
        hybrid: the shared collection's store (:class:`~index.stores.QdrantHybridStore`, also ``dense``), or
            ``None`` for an embedded index.

    Raises:
        ValueError: an unknown ``keyword_index``, or ``"whoosh"`` with ``qdrant_url``.
        IndexCorruptError, IndexLockedError, DiskFullError: from the manifest and the stores.
        IndexUnavailableError: a shared index's server or state database cannot be reached, or the database
            is not migrated.
        IndexOutdatedError: (``repair=False``) the index was built before read access was recorded, or
            (a shared index) with another embedding model or schema, or its collection was made by an older version.
    """

    def __init__(self, path: str | os.PathLike[str], embedder: Embedder, qdrant_url: str | None = None,
                 qdrant_api_key: str | None = None, collection: str = "chunks", repair: bool = False,
                 keyword_index: Literal["auto", "whoosh", "qdrant"] = "auto", database_url: str | None = None,
                 rebuild_manifest: bool = False) -> None:
        if keyword_index not in ("auto", "whoosh", "qdrant"):
            raise ValueError(f"KEYWORD_INDEX must be 'auto', 'whoosh' or 'qdrant', got {keyword_index!r}")
        if qdrant_url and keyword_index == "whoosh":
            raise ValueError("a shared index (QDRANT_URL) cannot use local Whoosh files: its keyword index is the "
                             "BM25 sparse vector of its Qdrant collection; unset KEYWORD_INDEX (or set it to auto)")
        self.path = Path(path)
        #: True when the manifest is in the state database (replicas share the index; see the module docstring).
        self.shared = bool(qdrant_url and database_url)
        if not self.shared:  # a shared index keeps its manifest in the state database, nothing here
            self.path.mkdir(parents=True, exist_ok=True)
        self.embedder = embedder
        #: Damaged stores moved aside on open (``"bm25 (moved to whoosh.corrupt-...)"``), for the run's report.
        self.rebuilt: list[str] = []
        self._where = (qdrant_url, collection)
        self.manifest = self._open_manifest(qdrant_url, database_url, collection, rebuild_manifest)
        try:
            self.keyword: WhooshStore | QdrantSparseStore | HybridKeywordView
            self.dense: QdrantStore | LocalDenseStore
            self.hybrid: QdrantHybridStore | None = None
            if qdrant_url:  # shared: one collection, both retrievers
                from .stores.qdrant_hybrid import QdrantHybridStore

                self.hybrid = QdrantHybridStore(embedder.dim, url=qdrant_url, api_key=qdrant_api_key,
                                                collection=collection, recreate=repair)
                self.dense, self.keyword = self.hybrid, self.hybrid.keyword
            elif keyword_index == "qdrant":
                from .stores.qdrant_sparse import QdrantSparseStore

                self.keyword = self._open_store(
                    "bm25", self.path / "qdrant-bm25",
                    lambda: QdrantSparseStore(path=self.path / "qdrant-bm25", collection=f"{collection}-bm25"), repair)
            else:
                from .stores.whoosh_store import WhooshStore

                self.keyword = self._open_store("bm25", self.path / "whoosh",
                                               lambda: WhooshStore(self.path / "whoosh"), repair)
            if not qdrant_url:
                self.dense = self._open_store("dense", self.path / "qdrant",
                                              lambda: self._embedded_dense(embedder.dim, collection, repair), repair)
        except BaseException:
            self.manifest.close()
            raise
        recorded = (self.manifest.get("embedding_model"), self.manifest.get("schema_version"))
        has_pages = self.manifest.counts()[0] > 0
        if not repair and (self.keyword.outdated or (has_pages and _older(recorded[1], ACCESS_SCHEMA))):
            self.close()
            raise IndexOutdatedError(
                f"the index in {self.path} was built before per-page read access was recorded, so it cannot "
                "tell who may read what and is not used; rebuild it with `chatops index --full SOURCE...` "
                "(every source), then start the bot again")
        if self.keyword.outdated or (has_pages and recorded != (embedder.model_id, SCHEMA_VERSION)):
            if self.shared and qdrant_url and not repair:  # every replica answers from it: only a writer may empty it
                self.close()
                raise IndexOutdatedError(
                    f"the shared index {shared_index_id(qdrant_url, collection)} (Qdrant collection {collection!r}) was "
                    f"built with model {recorded[0]}, "
                    f"schema {recorded[1]}; this chatops uses {embedder.model_id}, schema {SCHEMA_VERSION}: set "
                    "EMBEDDING_MODEL as the worker has it, or let the worker rebuild the index (it clears and "
                    "re-indexes it when it starts with the new model), then start this process again")
            log.warning("index %s was built with model %s, schema %s; now %s, %s: clearing it, "
                        "the next index run rebuilds it (embeddings come from the cache)",
                        self.path, *recorded, embedder.model_id, SCHEMA_VERSION)
            self.clear()
        if (self.manifest.get("embedding_model"), self.manifest.get("schema_version")) != \
                (embedder.model_id, SCHEMA_VERSION):  # a reader of a current shared index writes nothing
            self.manifest.set("embedding_model", embedder.model_id)
            self.manifest.set("schema_version", SCHEMA_VERSION)
        self.index_id = ensure_index_id(self.manifest, *self._where)
        if repair or not self.shared:  # a reader of a shared index must not undo a writer's pages in flight
            self.recover()

    def _open_manifest(self, qdrant_url: str | None, database_url: str | None, collection: str,
                       rebuild: bool) -> Manifest:
        """:func:`open_manifest`; with ``rebuild`` (a full run), a damaged manifest file of an embedded index is moved
        aside (with its SQLite journal files) and started empty: the run's reconciliation then empties the stores of
        what it no longer records, and the run indexes its sources again."""
        try:
            return open_manifest(self.path, qdrant_url, database_url, collection)
        except IndexCorruptError as exc:
            local = self.path / MANIFEST_FILE
            if not rebuild or self.shared or not local.is_file():
                raise
            moved = quarantine(local)
            for extra in ("-wal", "-shm", "-journal"):
                sidecar = local.with_name(MANIFEST_FILE + extra)
                if sidecar.exists():
                    sidecar.rename(moved.with_name(moved.name + extra))
            log.warning("the index manifest %s is damaged (%s); moved it to %s, the full run rebuilds the index",
                        local, reason(exc.__cause__ or exc), moved)
            self.rebuilt.append(f"manifest (the damaged copy is in {moved})")
            return open_manifest(self.path, qdrant_url, database_url, collection)

    def _embedded_dense(self, dim: int, collection: str, repair: bool) -> QdrantStore | LocalDenseStore:
        """The embedded dense store: local-mode Qdrant for a writer (``repair``), else the reader's
        :class:`~index.stores.LocalDenseStore` (its snapshot while current, the same store otherwise and on
        any write)."""
        if repair:
            from .stores.qdrant_store import QdrantStore

            return QdrantStore(dim, path=self.path / "qdrant", collection=collection)
        from .stores.dense_snapshot import LocalDenseStore

        return LocalDenseStore(dim, self.path / "qdrant", collection=collection)

    def _open_store(self, name: str, folder: Path, open_store: Callable[[], _S], repair: bool) -> _S:
        try:
            return open_store()
        except IndexCorruptError as exc:
            if not repair or not folder.exists():
                raise
            moved = quarantine(folder)
            log.warning("the %s store in %s is damaged (%s); moved it to %s, the run rebuilds it from the other store",
                        name, folder, reason(exc.__cause__ or exc), moved)
            self.rebuilt.append(f"{name} (the damaged copy is in {moved})")
            return open_store()

    def set_access(self, source: str, doc_id: str, access: Access) -> int:
        """Give the page ``source``/``doc_id`` a new read access in both stores and the manifest, without
        re-embedding (for a permission sync: a changed restriction or group does not change the page).

        Returns:
            The number of chunks updated: 0 for a page the index does not hold, and for one whose recorded
            access is already ``access`` (so an unchanged permission sync rewrites nothing).

        Raises:
            IndexCorruptError, IndexLockedError, DiskFullError: from the stores and the manifest.
        """
        key = f"{source}:{doc_id}"
        entry = self.manifest.page(key)
        if entry is None:
            return 0
        if entry.access is not None and (entry.access.tokens(), entry.access.unresolved) == \
                (access.tokens(), access.unresolved):
            return 0
        self.manifest.begin([key])  # a run killed half-way: recovery drops the page, the next sync re-indexes it
        n = self.keyword.set_access({key: access})
        self.dense.set_access({key: access})
        self.manifest.set_access(key, access)  # also clears the journal entry
        return n

    def damage(self) -> IndexCorruptError | None:
        """The first damage either store ran into since it was opened, else ``None`` (for readiness)."""
        return self.keyword.damage or self.dense.damage

    def recover(self) -> list[str]:
        """Undo half-written pages from an interrupted run; returns their doc keys."""
        pending = self.manifest.pending()
        if pending:
            log.warning("recovering %d page(s) from an interrupted indexing run in %s", len(pending), self.path)
            self.keyword.delete(pending)
            self.dense.delete(pending)
            self.manifest.forget(pending)
        return pending

    def clear(self) -> None:
        """Empty both stores and the manifest (``--full`` re-index); an embedded index gets a new
        :attr:`index_id` (it holds nothing, so no earlier cursor describes it)."""
        self.keyword.clear()
        self.dense.clear()
        self.manifest.clear()
        self.manifest.set("embedding_model", self.embedder.model_id)
        self.manifest.set("schema_version", SCHEMA_VERSION)
        self.index_id = ensure_index_id(self.manifest, *self._where)

    def consistency(self) -> ConsistencyReport:
        """Compare chunk ids across both stores and the manifest."""
        man = {cid for p in self.manifest.all_pages() for cid in p.chunk_ids}
        return ConsistencyReport(frozenset(self.keyword.chunk_ids()), frozenset(self.dense.chunk_ids()), frozenset(man))

    @property
    def version(self) -> int:
        """Index version: increases with every change of indexed pages."""
        return self.manifest.version

    def warm(self) -> None:
        """Prepare what the first search after a write would otherwise build (the dense store's local
        mirror, :meth:`QdrantStore.warm`, and the BM25 posting arrays, :meth:`WhooshStore.warm`); sync runs
        call it after writing, off the users' path."""
        self.dense.warm()
        self.keyword.warm()

    def stats(self) -> dict[str, int]:
        """Pages and chunks held (``{"pages": int, "chunks": int}``, from aggregate queries)."""
        pages, chunks = self.manifest.counts()
        return {"pages": pages, "chunks": chunks}

    def close(self) -> None:
        """Close both stores and the manifest (releases the local Qdrant lock)."""
        self.keyword.close()
        self.dense.close()
        self.manifest.close()
