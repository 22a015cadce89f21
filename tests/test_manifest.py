"""The index manifest's API, the same on its three homes: a SQLite file (an embedded index), the state
database on SQLite and on PostgreSQL (a shared index, ``Manifest(database_url=..., scope=...)``).

- Every method behaves the same on the three (pages, counts, journal, access, flags, metadata, version,
  clear), run once per home.
- In the state database, indexes (scopes) never see each other's rows.
- Two writers on their own connections bump the index version at once: no bump lost, no deadlock, no error.
- A database that is not migrated, unreachable, dropped while in use or damaged gives a clear
  :class:`IndexError_` saying what to do, never a raw database error.

PostgreSQL: one database for the module on ``$CHATOPS_TEST_PG_URL`` (see ``tests/pg.py``), each test in
a scope of its own.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from core.access import Access
from core.errors import IndexCorruptError, IndexUnavailableError
from index.manifest import Manifest, PageEntry
from state import StateStore

from tests.pg import drop_database, pg_database

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

HOMES = ["file", "sqlite-db", pytest.param("postgres-db", marks=pytest.mark.server)]
PUBLIC = Access.everyone()


@pytest.fixture(scope="module")
def pg_state() -> Iterator[str]:
    """A PostgreSQL state database migrated to the head, for the module."""
    with pg_database("chatops_manifest") as url:
        StateStore(url).close()
        yield url


def _sqlite_state(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'state.sqlite'}"
    StateStore(url).close()  # migrates: the manifest's tables come from revision 0006
    return url


def _database(home: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return _sqlite_state(tmp_path) if home == "sqlite-db" else request.getfixturevalue("pg_state")


def _open(home: str, request: pytest.FixtureRequest, tmp_path: Path, scope: str | None = None) -> Manifest:
    if home == "file":
        return Manifest(tmp_path / "index" / "manifest.sqlite")
    return Manifest(database_url=_database(home, request, tmp_path), scope=scope or f"test-{uuid.uuid4().hex}")


@pytest.fixture(params=HOMES)
def manifest(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Manifest]:
    m = _open(request.param, request, tmp_path)
    yield m
    m.close()


def page(source: str, doc_id: str, chunks: int = 2, access: Access | None = PUBLIC, h: str = "h1",
         sensitive: int | None = 0, injection: int | None = 0) -> PageEntry:
    key = f"{source}:{doc_id}"
    return PageEntry(key, source, doc_id, h, tuple(f"{key}#{i}" for i in range(chunks)), sensitive, injection, access)


def test_pages_round_trip_with_their_counts_flags_and_access(manifest: Manifest) -> None:
    entries = [page("wiki", "a", 3), page("wiki", "b", 1, Access(principals=frozenset({"user:ann@example.com"}))),
               page("eng", "c", 4, Access.nobody("the restriction could not be read"), sensitive=1, injection=2),
               page("eng", "d", 0, None, sensitive=None, injection=None)]
    manifest.commit(entries, [])
    assert manifest.pages_of("wiki") == {"a": entries[0], "b": entries[1]}
    assert manifest.page("eng:c") == entries[2] and manifest.page("eng:d") == entries[3]
    assert manifest.page("eng:zzz") is None and manifest.pages_of("nobody") == {}
    assert sorted(manifest.all_pages(), key=lambda e: e.doc_key) == sorted(entries, key=lambda e: e.doc_key)
    assert manifest.counts() == (4, 8)
    assert manifest.counts_by_source() == {"wiki": (2, 4), "eng": (2, 4)}
    # Readable by nobody: an unresolved access, and a page recorded before access control.
    assert manifest.unresolved_access() == 2 and manifest.unresolved_access("eng") == 2
    assert manifest.unresolved_access("wiki") == 0


def test_an_empty_manifest_counts_nothing(manifest: Manifest) -> None:
    assert manifest.counts() == (0, 0) and manifest.counts_by_source() == {} and manifest.all_pages() == []
    assert manifest.version == 0 and manifest.pending() == [] and manifest.unresolved_access() == 0


def test_a_commit_replaces_and_deletes_pages_and_bumps_the_version_once(manifest: Manifest) -> None:
    manifest.commit([page("wiki", "a"), page("wiki", "b")], [])
    assert manifest.version == 1
    manifest.commit([page("wiki", "a", 5, h="h2")], ["wiki:b"])
    assert manifest.version == 2
    assert manifest.pages_of("wiki") == {"a": page("wiki", "a", 5, h="h2")} and manifest.counts() == (1, 5)
    manifest.commit([], [])  # nothing changed: no new version
    assert manifest.version == 2


def test_the_journal_holds_pages_until_they_are_committed_or_forgotten(manifest: Manifest) -> None:
    manifest.begin(["wiki:a", "wiki:b", "wiki:c"])
    manifest.begin(["wiki:a"])  # journaled again (a retried batch): still one entry
    manifest.begin([])
    assert sorted(manifest.pending()) == ["wiki:a", "wiki:b", "wiki:c"]
    manifest.commit([page("wiki", "a")], ["wiki:b"])
    assert manifest.pending() == ["wiki:c"]
    manifest.commit([page("wiki", "c")], [])
    manifest.begin(["wiki:c"])
    manifest.forget(["wiki:c"])
    assert manifest.pending() == [] and list(manifest.pages_of("wiki")) == ["a"]
    version = manifest.version
    manifest.forget([])
    assert manifest.version == version


def test_set_access_records_the_access_clears_the_journal_and_bumps_the_version(manifest: Manifest) -> None:
    manifest.commit([page("wiki", "a")], [])
    manifest.begin(["wiki:a"])
    version = manifest.version
    restricted = Access(principals=frozenset({"group:wiki/hr"}))
    manifest.set_access("wiki:a", restricted)
    assert manifest.page("wiki:a").access == restricted and manifest.pending() == []
    assert manifest.version == version + 1
    manifest.set_access("wiki:a", Access.nobody("gone"))
    assert manifest.unresolved_access("wiki") == 1


def test_set_flags_changes_only_the_flag_counts(manifest: Manifest) -> None:
    manifest.commit([page("wiki", "a", sensitive=None, injection=None)], [])
    manifest.set_flags("wiki:a", 2, 1)
    got = manifest.page("wiki:a")
    assert (got.sensitive_chunks, got.injection_chunks) == (2, 1) and got.chunk_ids == page("wiki", "a").chunk_ids


def test_metadata_is_read_written_and_overwritten(manifest: Manifest) -> None:
    assert manifest.get("embedding_model") is None and manifest.get("embedding_model", "none") == "none"
    manifest.set("embedding_model", "minilm")
    manifest.set("embedding_model", "other")
    assert manifest.get("embedding_model") == "other"


def test_clear_forgets_everything_but_the_version_keeps_growing(manifest: Manifest) -> None:
    manifest.commit([page("wiki", "a"), page("eng", "b")], [])
    manifest.begin(["wiki:z"])
    manifest.set("embedding_model", "minilm")
    before = manifest.version
    manifest.clear()
    assert manifest.counts() == (0, 0) and manifest.pending() == [] and manifest.get("embedding_model") is None
    # An answer cache keyed by the version never meets an earlier number with other pages behind it.
    assert manifest.version == before + 1
    manifest.commit([page("wiki", "a")], [])
    assert manifest.version == before + 2


@pytest.mark.parametrize("home", ["sqlite-db", "postgres-db"])
def test_indexes_sharing_a_database_never_see_each_others_rows(home: str, request: pytest.FixtureRequest,
                                                               tmp_path: Path) -> None:
    url = _database(home, request, tmp_path)
    a = Manifest(database_url=url, scope=f"a-{uuid.uuid4().hex}")
    b = Manifest(database_url=url, scope=f"b-{uuid.uuid4().hex}")
    try:
        a.commit([page("wiki", "a", 3), page("wiki", "b", 1)], [])
        a.begin(["wiki:c"])
        a.set("embedding_model", "minilm")
        b.commit([page("wiki", "a", 7)], [])  # the same doc key in another index
        assert b.pages_of("wiki") == {"a": page("wiki", "a", 7)} and b.counts() == (1, 7)
        assert b.counts_by_source() == {"wiki": (1, 7)} and b.pending() == [] and b.get("embedding_model") is None
        assert b.version == 1 and a.version == 1
        b.set_access("wiki:b", Access.nobody("x"))  # a's page of that key is not b's
        b.set_flags("wiki:a", 9, 9)
        b.forget(["wiki:b", "wiki:c"])
        b.clear()
        assert a.counts() == (2, 4) and a.pending() == ["wiki:c"] and a.get("embedding_model") == "minilm"
        assert a.page("wiki:b").access == Access.everyone() and a.page("wiki:a").sensitive_chunks == 0
        assert a.unresolved_access() == 0 and b.counts() == (0, 0)
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("home", ["sqlite-db", "postgres-db"])
def test_concurrent_writers_lose_no_version_bump_and_never_deadlock(home: str, request: pytest.FixtureRequest,
                                                                    tmp_path: Path) -> None:
    # Two sources syncing at once in one worker: each writes through its own connections.
    url = _database(home, request, tmp_path)
    scope = f"race-{uuid.uuid4().hex}"
    writers = [Manifest(database_url=url, scope=scope) for _ in range(2)]
    rounds = 25
    barrier = threading.Barrier(len(writers))
    errors: list[BaseException] = []

    def sync(m: Manifest, source: str) -> None:
        try:
            barrier.wait(timeout=30)
            for i in range(rounds):
                m.begin([f"{source}:{i}"])
                m.commit([page(source, str(i))], [])  # one bump
                if i % 5 == 4:
                    m.set_access(f"{source}:{i}", Access.nobody("x"))  # one bump
                    m.set("embedding_model", "minilm")  # the same metadata row from both writers
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=sync, args=(m, f"src{n}")) for n, m in enumerate(writers)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads), "a writer is stuck (deadlock?)"
        assert errors == []
        assert writers[0].version == len(writers) * (rounds + rounds // 5)
        assert writers[1].counts() == (len(writers) * rounds, len(writers) * rounds * 2)
        assert writers[0].pending() == []
    finally:
        for m in writers:
            m.close()


@pytest.mark.parametrize("kwargs", [
    {}, {"path": "m.sqlite", "database_url": "sqlite://"}, {"database_url": "sqlite://"},
    {"database_url": "sqlite://", "scope": ""}, {"database_url": "sqlite://", "scope": "x" * 65},
    {"path": "m.sqlite", "scope": "x"},
])
def test_exactly_one_home_and_a_scope_only_with_the_database(kwargs: dict) -> None:
    with pytest.raises(ValueError, match="Manifest takes exactly one|scope"):
        Manifest(**kwargs)


def test_a_database_without_the_tables_says_to_run_db_upgrade(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.sqlite'}"
    sa.create_engine(url).connect().close()  # an empty database: never migrated
    with pytest.raises(IndexUnavailableError, match=r"index_pages.*run `chatops db upgrade`"):
        Manifest(database_url=url, scope="s")


def test_an_unreachable_database_says_to_check_database_url() -> None:
    with pytest.raises(IndexUnavailableError, match="cannot use the state database .*check DATABASE_URL"):
        Manifest(database_url="postgresql+psycopg://postgres@127.0.0.1:1/nothing", scope="s")


@pytest.mark.server
def test_a_database_gone_while_in_use_gives_the_clear_error_on_the_next_call() -> None:
    with pg_database("chatops_manifest_gone") as url:
        StateStore(url).close()
        m = Manifest(database_url=url, scope="s")
        m.commit([page("wiki", "a")], [])
        drop_database(url)  # ends the manifest's connections too
        try:
            for call in (m.counts, lambda: m.commit([page("wiki", "b")], []), m.pending):
                with pytest.raises(IndexUnavailableError, match="check DATABASE_URL"):
                    call()
        finally:
            m.close()


def test_a_damaged_sqlite_state_database_is_reported_as_damaged(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    path.write_bytes(b"this is not a database " * 200)
    with pytest.raises(IndexCorruptError, match="state database .*damaged.*restore the state database"):
        Manifest(database_url=f"sqlite:///{path}", scope="s")
