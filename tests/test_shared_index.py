"""A shared index (``QDRANT_URL``): its manifest and write journal live in the state database, so every
replica sees the same pages and none needs a local index file.

The stores talk to a Qdrant server stand-in on 127.0.0.1 (``tests/standins/qdrant/``: Qdrant's REST
wire format through ``QdrantClient(url=...)``, the points in qdrant-client's local mode); the manifest is
in a real state database, SQLite and PostgreSQL (``tests/pg.py``).

- A writer and a reader, each with its own (never created) index folder, see the same pages, id and
  version; a change by the writer is seen by the reader at once.
- A page journaled by a writer that died with the stores half-written is recovered by the next writer
  that opens the index; a reader leaves it alone (it may be a write in flight).
- A reader with another embedding model refuses the shared index instead of emptying it.
- The manifest file a shared index kept before revision 0006 is copied into the database once (else the
  first sync would delete every chunk), and another index's file is not.
- The gate's calibration of a shared index is kept in its manifest, where every replica finds it.
- The wiring opens the shared index after migrating the state database (a command that never opened the
  state store, such as ``chatops ask``, finds the tables), and ``chatops status`` and ``sources list``
  read the shared manifest without making anything under the data dir.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from app.settings import Settings
from app.wiring import open_index, open_index_manifest
from core.access import Viewer
from core.errors import IndexOutdatedError
from connectors.folder import FolderSource
from index.embeddings import CachedEmbedder
from index.identity import shared_index_id
from index.indexer import Indexer
from index.knowledge import MANIFEST_FILE, KnowledgeIndex, open_manifest
from index.manifest import Manifest, PageEntry
from state import StateStore

from tests.helpers import WIKI, WIKI_PAGES, run_chatops
from tests.pg import pg_database
from tests.standins.qdrant import QdrantStandIn

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast


@pytest.fixture
def qdrant() -> Iterator[QdrantStandIn]:
    with QdrantStandIn() as standin:
        yield standin
    assert standin.unknown == []  # every call the stores made is one the stand-in speaks


@pytest.fixture(scope="module")
def pg_state() -> Iterator[str]:
    with pg_database("chatops_shared_index") as url:
        StateStore(url).close()
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.server)])
def state_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated state database (each test writes its own collection, so its own scope)."""
    if request.param == "postgresql":
        return request.getfixturevalue("pg_state")
    url = f"sqlite:///{tmp_path / 'state.sqlite'}"
    StateStore(url).close()
    return url


@dataclass
class Shared:
    """How to open one shared index (one collection on the stand-in, its manifest in ``database_url``)."""

    qdrant_url: str
    database_url: str | None
    collection: str
    embedder: CachedEmbedder

    def open(self, folder: Path, repair: bool = False, embedder=None) -> KnowledgeIndex:
        return KnowledgeIndex(folder, embedder or self.embedder, qdrant_url=self.qdrant_url, collection=self.collection,
                              keyword_index="qdrant", repair=repair, database_url=self.database_url)


@pytest.fixture
def shared(qdrant: QdrantStandIn, state_url: str, embedder: CachedEmbedder) -> Shared:
    return Shared(qdrant.url, state_url, f"c{uuid.uuid4().hex[:12]}", embedder)


def test_replicas_see_the_same_pages_and_keep_no_local_file(shared: Shared, tmp_path: Path) -> None:
    writer = shared.open(tmp_path / "worker" / "index", repair=True)
    reader = None
    try:
        Indexer(writer).run(FolderSource(WIKI))
        reader = shared.open(tmp_path / "web" / "index")
        assert not (tmp_path / "worker").exists() and not (tmp_path / "web").exists()  # no local file at all
        assert reader.stats() == writer.stats() and reader.stats()["pages"] == WIKI_PAGES
        assert reader.index_id == writer.index_id == shared_index_id(shared.qdrant_url, shared.collection)
        assert reader.manifest.scope == reader.index_id and reader.consistency().ok
        assert reader.version == writer.version > 0
        hits = reader.keyword.search("vacation days", limit=3, viewer=Viewer.public())
        assert hits and hits[0].chunk.chunk_id in {c for p in reader.manifest.all_pages() for c in p.chunk_ids}
        # The writer removes a page: the reader knows at once (no file to copy, no restart).
        key = sorted(p.doc_key for p in writer.manifest.all_pages())[0]
        writer.keyword.delete([key])
        writer.dense.delete([key])
        writer.manifest.commit([], [key])
        assert reader.manifest.page(key) is None and reader.stats()["pages"] == WIKI_PAGES - 1
        assert reader.version == writer.version
    finally:
        writer.close()
        if reader is not None:
            reader.close()


def test_a_half_written_page_is_recovered_by_the_next_writer_not_by_a_reader(shared: Shared, tmp_path: Path) -> None:
    writer = shared.open(tmp_path / "a", repair=True)
    Indexer(writer).run(FolderSource(WIKI))
    entry = sorted(writer.manifest.all_pages(), key=lambda p: p.doc_key)[0]
    # The worker journals the page, has rewritten BM25 only, and dies before committing.
    writer.manifest.begin([entry.doc_key])
    writer.keyword.delete([entry.doc_key])
    writer.close()

    reader = shared.open(tmp_path / "b")  # a web replica: the write may still be in flight
    try:
        assert reader.manifest.pending() == [entry.doc_key]
        assert set(entry.chunk_ids) <= reader.dense.chunk_ids()
    finally:
        reader.close()

    again = shared.open(tmp_path / "c", repair=True)  # the worker restarts
    try:
        assert again.manifest.pending() == [] and again.manifest.page(entry.doc_key) is None
        assert not set(entry.chunk_ids) & (again.dense.chunk_ids() | again.keyword.chunk_ids())
        assert again.consistency().ok
        report = Indexer(again).run(FolderSource(WIKI))  # the next scan indexes it again from the source
        assert (report.added, report.unchanged) == (1, WIKI_PAGES - 1)
        assert again.manifest.page(entry.doc_key) == entry and again.consistency().ok
    finally:
        again.close()


@dataclass
class OtherModel:
    """The real embedder under another model id (as a replica configured with another EMBEDDING_MODEL)."""

    inner: CachedEmbedder
    model_id: str = "another-model"

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts) -> np.ndarray:
        return self.inner.embed(texts)


def test_a_reader_with_another_model_refuses_the_shared_index_and_leaves_it_whole(shared: Shared, tmp_path: Path) -> None:
    writer = shared.open(tmp_path / "a", repair=True)
    Indexer(writer).run(FolderSource(WIKI))
    writer.close()
    with pytest.raises(IndexOutdatedError, match="EMBEDDING_MODEL"):
        shared.open(tmp_path / "b", embedder=OtherModel(shared.embedder))
    reader = shared.open(tmp_path / "c")
    try:
        assert reader.stats()["pages"] == WIKI_PAGES and reader.consistency().ok
    finally:
        reader.close()


def test_the_manifest_file_a_shared_index_kept_before_0006_is_copied_in_once(shared: Shared, tmp_path: Path) -> None:
    folder = tmp_path / "index"
    old = Shared(shared.qdrant_url, None, shared.collection, shared.embedder).open(folder, repair=True)
    Indexer(old).run(FolderSource(WIKI))  # the release before: the manifest in folder/manifest.sqlite
    before = (old.stats(), sorted(old.manifest.all_pages(), key=lambda p: p.doc_key))
    old.close()

    index = shared.open(folder, repair=True)
    try:
        assert (index.stats(), sorted(index.manifest.all_pages(), key=lambda p: p.doc_key)) == before
        assert not (folder / MANIFEST_FILE).exists() and (folder / f"{MANIFEST_FILE}.copied-to-database").is_file()
        # Without the copy the reconciliation would delete every chunk and the cursor would not list them again.
        report = Indexer(index).run(FolderSource(WIKI))
        assert (report.unchanged, report.deleted, report.repair.dense_removed) == (WIKI_PAGES, 0, 0)
    finally:
        index.close()


def test_the_manifest_file_of_another_index_is_not_copied(shared: Shared, tmp_path: Path) -> None:
    folder = tmp_path / "index"
    embedded = Manifest(folder / MANIFEST_FILE)  # this data dir's embedded index (its own random id)
    embedded.set("index_id", uuid.uuid4().hex)
    embedded.commit([PageEntry("wiki:a", "wiki", "a", "h", ("c1",))], [])
    embedded.close()
    manifest = open_manifest(folder, shared.qdrant_url, shared.database_url, shared.collection)
    try:
        assert manifest.counts() == (0, 0) and (folder / MANIFEST_FILE).is_file()
    finally:
        manifest.close()


def test_the_gate_calibration_of_a_shared_index_is_kept_in_its_manifest(qdrant: QdrantStandIn, tmp_path: Path,
                                                                        embedder: CachedEmbedder) -> None:
    from agent.calibration import calibrate_index, index_calibration

    shared = Shared(qdrant.url, f"sqlite:///{tmp_path / 'state.sqlite'}", "chunks", embedder)
    StateStore(shared.database_url).close()
    writer = shared.open(tmp_path / "worker", repair=True)
    try:
        Indexer(writer).run(FolderSource(WIKI))
        record = calibrate_index(writer, force=True)  # as a sync does after writing
    finally:
        writer.close()
    assert record is not None and not (tmp_path / "worker").exists()
    reader = shared.open(tmp_path / "web")
    try:
        assert index_calibration(reader.manifest, reader.path) == record
    finally:
        reader.close()


def _settings(data: Path, qdrant_url: str | None) -> Settings:
    return Settings(chatops_data_dir=data, qdrant_url=qdrant_url, keyword_index="qdrant", embedding_model="local",
                    database_url=None)


def test_the_wiring_migrates_the_state_database_before_opening_a_shared_index(qdrant: QdrantStandIn, tmp_path: Path,
                                                                             embedder: CachedEmbedder) -> None:
    data = tmp_path / "data"
    settings = _settings(data, qdrant.url)  # DATABASE_URL unset: data/state.sqlite, not made yet
    index = open_index(settings, embedder=embedder)  # as `chatops ask` does, with no state store opened before
    try:
        assert index.shared and index.index_id == shared_index_id(qdrant.url, "chunks")
        assert index.manifest.scope == index.index_id
    finally:
        index.close()
    manifest = open_index_manifest(settings, create=False)
    try:
        assert manifest is not None and manifest.scope == shared_index_id(qdrant.url, "chunks")
    finally:
        manifest.close()
    assert sorted(p.name for p in data.iterdir()) == ["state.sqlite"]  # no index folder


def test_the_wiring_opens_an_embedded_manifest_file_only_when_asked_to_create_it(tmp_path: Path) -> None:
    settings = _settings(tmp_path / "data", None)
    assert open_index_manifest(settings, create=False) is None and not settings.index_dir.exists()
    manifest = open_index_manifest(settings)
    try:
        assert manifest.scope is None and (settings.index_dir / MANIFEST_FILE).is_file()
    finally:
        manifest.close()
    again = open_index_manifest(settings, create=False)
    assert again is not None
    again.close()


def test_status_and_sources_list_read_the_shared_manifest_without_local_files(qdrant: QdrantStandIn, tmp_path: Path,
                                                                            embedder: CachedEmbedder) -> None:
    state = tmp_path / "state.sqlite"
    StateStore(f"sqlite:///{state}").close()
    worker = Shared(qdrant.url, f"sqlite:///{state}", "chunks", embedder).open(tmp_path / "worker", repair=True)
    try:
        Indexer(worker).run(FolderSource(WIKI))
        chunks = worker.stats()["chunks"]
    finally:
        worker.close()
    data = tmp_path / "web"
    env = {"QDRANT_URL": qdrant.url, "DATABASE_URL": f"sqlite:///{state}", "KEYWORD_INDEX": "qdrant"}
    proc = run_chatops(["sources", "list", "--json"], data, cwd=tmp_path, **env)
    assert proc.returncode == 0, proc.stderr
    assert [(r["source"], r["pages"], r["chunks"]) for r in json.loads(proc.stdout)] == [("wiki", WIKI_PAGES, chunks)]
    proc = run_chatops(["status", "--json"], data, cwd=tmp_path, **env)
    assert proc.returncode == 0, proc.stderr
    assert [(r["source"], r["pages"]) for r in json.loads(proc.stdout)] == [("wiki", WIKI_PAGES)]
    assert not (data / "index").exists()
