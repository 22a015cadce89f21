"""The index id (``index/identity.py``) and the cursors, runs and locks keyed by it (issue 12, step 1).

- An embedded index keeps its id across opens; a deleted and rebuilt folder, or a cleared index, gets a
  new one (it holds nothing, so no earlier cursor may describe it).
- Replicas writing one Qdrant collection derive one id from the server's URL and the collection.
- Two indexes on one state store take different locks (``sync:<index id>:<source>``): one's run does not
  make the other's busy, and each keeps its own cursor.
- Cursors recorded before revision 0004 (``legacy``) are adopted by the first index that holds the
  source's pages, never by an empty one (which lists everything from the start).
- ``chatops status`` and ``sources list`` of a data dir show the runs of its own index only, when two data
  dirs share one ``DATABASE_URL``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from connectors.folder import FolderSource
from index.identity import INDEX_ID_KEY, ensure_index_id, index_id_of, shared_index_id
from index.knowledge import KnowledgeIndex
from index.manifest import Manifest
from index.sync import SyncEngine
from state import LEGACY_INDEX_ID, StateStore
from state.store import sqlite_url

from tests.helpers import WIKI_PAGES, run_chatops, seed_embedding_cache

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast


def test_an_embedded_index_keeps_its_id_until_its_folder_is_rebuilt_or_it_is_cleared(tmp_path: Path, embedder) -> None:
    path = tmp_path / "index"
    first = KnowledgeIndex(path, embedder)
    made = first.index_id
    first.close()
    again = KnowledgeIndex(path, embedder)
    assert again.index_id == made and again.manifest.get(INDEX_ID_KEY) == made
    again.clear()  # another embedding model or schema: emptied, so a new index
    cleared = again.index_id
    assert cleared != made and again.manifest.get(INDEX_ID_KEY) == cleared
    again.close()
    shutil.rmtree(path)
    rebuilt = KnowledgeIndex(path, embedder)
    try:
        assert rebuilt.index_id not in {made, cleared}
    finally:
        rebuilt.close()


def test_replicas_of_one_qdrant_collection_derive_one_id(tmp_path: Path) -> None:
    a, b, local = (Manifest(tmp_path / name / "manifest.sqlite") for name in ("a", "b", "local"))
    try:
        made = ensure_index_id(a, "http://Qdrant.internal:6333/", "chunks")
        assert made == ensure_index_id(b, "http://qdrant.internal:6333", "chunks") == shared_index_id(
            "http://user:secret@qdrant.internal:6333", "chunks")
        assert made.startswith("qdrant-") and b.get(INDEX_ID_KEY) == made
        assert index_id_of(Manifest(tmp_path / "c" / "manifest.sqlite"), "http://qdrant.internal:6333", "chunks") == made
        assert shared_index_id("http://qdrant.internal:6333", "other") != made
        assert index_id_of(local) is None  # never opened: nothing can have been recorded for it
        own = ensure_index_id(local)
        assert own != made and index_id_of(local) == own == ensure_index_id(local)
        assert ensure_index_id(a) not in {made, own}  # a's data dir without QDRANT_URL: its local Qdrant is new
    finally:
        for m in (a, b, local):
            m.close()


def test_two_indexes_on_one_store_lock_and_keep_cursors_apart(tmp_path: Path, wiki_copy: Path, index_factory) -> None:
    store = StateStore(sqlite_url(tmp_path / "state.sqlite"))
    try:
        a = SyncEngine(index_factory(tmp_path / "a"), store)
        b = SyncEngine(index_factory(tmp_path / "b"), store)
        source = FolderSource(wiki_copy, name="handbook")
        assert a.lock_name("handbook") != b.lock_name("handbook")
        assert a.lock_name("handbook") == f"sync:{a.index.index_id}:handbook"
        assert store.acquire_lock(a.lock_name("handbook"), "replica-a:1:x")  # a's run is going on...
        assert a.run(source).status == "busy"
        done = b.run(source)  # ...and b syncs its own index meanwhile
        assert done.status == "ok" and done.summary.added == WIKI_PAGES
        store.release_lock(a.lock_name("handbook"), "replica-a:1:x")
        assert a.run(source).summary.added == WIKI_PAGES
        cursors = {e.index.index_id: store.get_cursor("handbook", index_id=e.index.index_id) for e in (a, b)}
        assert len(cursors) == 2 and all(cursors.values())
        assert [r.status for r in store.last_runs("handbook", index_id=a.index.index_id)] == ["ok"]  # busy: no run
    finally:
        store.close()


def test_legacy_cursors_go_to_the_first_index_holding_the_source_never_to_an_empty_one(
        tmp_path: Path, wiki_copy: Path, index_factory) -> None:
    store = StateStore(sqlite_url(tmp_path / "state.sqlite"))
    try:
        old = SyncEngine(index_factory(tmp_path / "old"), store)
        source = FolderSource(wiki_copy, name="handbook")
        assert old.run(source).status == "ok"
        with store.engine.begin() as conn:  # as revision 0004 left the rows of the index that was there
            conn.execute(store.cursors.update().values(index_id=LEGACY_INDEX_ID))
            conn.execute(store.runs.update().values(index_id=LEGACY_INDEX_ID))
        legacy = store.get_cursor("handbook", index_id=LEGACY_INDEX_ID)
        assert legacy is not None

        empty = SyncEngine(index_factory(tmp_path / "new"), store)  # a new replica: holds no page of handbook
        assert empty.run(source).summary.added == WIKI_PAGES
        assert store.get_cursor("handbook", index_id=LEGACY_INDEX_ID) == legacy  # not taken
        assert old.run(source).status == "ok"  # the index that holds the pages adopts it
        assert store.get_cursor("handbook", index_id=LEGACY_INDEX_ID) is None
        assert len(store.last_runs("handbook", index_id=old.index.index_id)) == 2  # its history came along
    finally:
        store.close()


def test_status_and_sources_list_show_the_runs_of_this_data_dirs_index(tmp_path: Path, wiki_index, wiki_copy: Path,
                                                                       embedding_cache_dir: Path) -> None:
    shared = {"DATABASE_URL": sqlite_url(tmp_path / "shared-state.sqlite")}
    a = seed_embedding_cache(tmp_path / "a", embedding_cache_dir / "embeddings.sqlite")
    b = tmp_path / "b"
    b.mkdir()
    indexed = run_chatops(["index", f"folder:{wiki_copy}?name=handbook"], a, cwd=tmp_path, **shared)
    assert indexed.returncode == 0, indexed.stderr
    mine = run_chatops(["status"], a, cwd=tmp_path, **shared).stdout
    assert f"handbook: {WIKI_PAGES} pages" in mine and "last run" in mine and "never run" not in mine
    theirs = run_chatops(["status"], b, cwd=tmp_path, CHATOPS_SOURCES=f"folder:{wiki_copy}?name=handbook", **shared)
    assert theirs.returncode == 0, theirs.stderr
    assert "handbook: 0 pages, 0 chunks; never run" in theirs.stdout  # a's run is not b's index's
    listed = run_chatops(["sources", "list", "--json"], b, cwd=tmp_path,
                         CHATOPS_SOURCES=f"folder:{wiki_copy}?name=handbook", **shared)
    assert '"last_run": null' in listed.stdout
