"""The state store's Alembic migrations on a real SQLite file and a real PostgreSQL server.

Each test runs on both: a SQLite file in ``tmp_path``, and a PostgreSQL database created for the test on
``$CHATOPS_TEST_PG_URL`` (as in ``tests/test_state_store.py``: skipped when the server is unreachable,
failed instead with ``CHATOPS_TEST_REQUIRE_PG=1``).

- A database created by release 414ee8a (its own DDL, frozen in ``tests/data/state_414ee8a/``; see
  ``make_ddl.py`` there), with rows in every table, is stamped at 0001, upgraded to the head, keeps every
  row, and its new ``turn_log`` works; its schema is then the code's.
- An empty database is created by the migrations, equal to the tables the code queries.
- Upgrading a database at the head changes nothing.
- A revision this code does not know stops the store with "upgrade chatops", and ``chatops db current``
  and any command say so (exit 2, no traceback).
- Stores opened at once by eight threads on one empty database migrate it once.
- An unversioned database that already has ``turn_log`` (and ``sent_replies``), built from main before
  migrations, is stamped past them, keeps its rows and gets what it lacks.
- ``chatops db current`` / ``db upgrade`` on an unversioned SQLite file.
- Revision 0006 adds the tables of shared indexes' manifests (compared with the code's like every table),
  and its downgrade drops them and nothing else.
- Revision 0007 adds ``conversation_references`` (Teams' personal chats, for reminders), and its downgrade
  drops it and nothing else.
- Revision 0008 adds ``mcp_tokens`` (the MCP server's bearer tokens, digests only), and its downgrade drops it
  and nothing else.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from state import LEGACY_INDEX_ID, SchemaTooNewError, StateStore, TurnRecord
from state.migrate import BASELINE, head, status, upgrade

from tests.helpers import run_chatops

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

PG_ADMIN_URL = os.environ.get("CHATOPS_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
DDL = Path(__file__).parent / "data" / "state_414ee8a"
T0 = datetime(2026, 10, 1, 12, 0, tzinfo=timezone.utc)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.server)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of an empty database (a new SQLite file, or a new PostgreSQL database dropped afterwards)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'state.sqlite'}"
        return
    name = f"chatops_mig_{uuid.uuid4().hex[:10]}"
    try:
        admin = sa.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:  # noqa: BLE001 - any failure means no server to test against
        if os.environ.get("CHATOPS_TEST_REQUIRE_PG") == "1":
            pytest.fail(f"PostgreSQL at {PG_ADMIN_URL} is required (CHATOPS_TEST_REQUIRE_PG=1) but unusable: {exc}")
        pytest.skip(f"PostgreSQL at {PG_ADMIN_URL} is not reachable: {exc}")
    yield sa.engine.make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def _engine(url: str) -> sa.Engine:
    return sa.create_engine(url)


def create_414ee8a_database(url: str) -> None:
    """Run release 414ee8a's DDL (frozen) on the empty database at ``url``."""
    dialect = "postgresql" if url.startswith("postgresql") else "sqlite"
    statements = [s.strip() for s in (DDL / f"{dialect}.sql").read_text().split(";\n") if s.strip()]
    engine = _engine(url)
    with engine.begin() as conn:
        for stmt in statements:
            conn.exec_driver_sql(stmt)
    engine.dispose()


#: One row for each table of release 414ee8a, as that release wrote them.
OLD_ROWS: dict[str, list[dict]] = {
    "processed_events": [{"event_id": "Ev1", "platform": "slack", "received_at": T0}],
    "feedback": [{"id": 1, "trace_id": "t1", "platform": "slack", "user_id": "U1", "value": "helpful", "comment": "",
                  "created_at": T0}],
    "pending_actions": [{"key": "k1", "tool": "calendar.create", "args": '{"title": "sync"}', "requester": "U1",
                         "platform": "slack", "channel_id": "C1", "thread_id": "", "summary": "Sync",
                         "status": "pending", "result": None, "created_at": T0, "expires_at": T0 + timedelta(hours=1),
                         "updated_at": T0}],
    "audit_log": [{"id": 1, "at": T0, "actor": "U1", "platform": "slack", "action": "calendar.create",
                   "target": "k1", "outcome": "ok", "detail": '{"n": 1}'}],
    "sync_cursors": [{"source": "wiki", "cursor": '{"watermark": "2026-10-01"}', "updated_at": T0}],
    "sync_runs": [{"id": 1, "source": "wiki", "started_at": T0, "finished_at": T0, "status": "ok",
                   "summary": '{"mode": "index", "added": 3}', "error": ""}],
    "locks": [{"name": "sync:wiki", "owner": "host:1", "expires_at": T0}],
    "conversations": [{"key": "teams:conv1", "history": '[{"text": "hi", "author": "U1"}]', "updated_at": T0}],
    "scheduled_messages": [{"key": "m1", "platform": "slack", "user_id": "U1", "channel_id": "", "at": T0,
                            "text": "stand-up", "status": "pending", "due_at": T0, "attempts": 0, "error": "",
                            "owner": "", "lease_until": None, "created_at": T0, "updated_at": T0}],
    "group_members": [{"source": "wiki", "group_name": "hr", "email": "ann@example.com", "updated_at": T0}],
}


def _dump(url: str, tables) -> dict[str, set[tuple]]:
    """Every row of ``tables`` (times as UTC), as comparable sets; with ``tables`` a mapping of table to
    column names, only those columns (the ones a later revision did not add)."""
    engine = _engine(url)
    md = sa.MetaData()
    md.reflect(engine, only=list(tables))
    out = {}
    with engine.connect() as conn:
        for name in tables:
            t = md.tables[name]
            cols = [t.c[c] for c in tables[name]] if isinstance(tables, dict) else list(t.c)
            rows = conn.execute(sa.select(*cols)).all()
            out[name] = {tuple(v.replace(tzinfo=None) if isinstance(v, datetime) and v.tzinfo is None else
                               v.astimezone(timezone.utc).replace(tzinfo=None) if isinstance(v, datetime) else v
                               for v in r) for r in rows}
    engine.dispose()
    return out


def _schema_diff(store: StateStore) -> list:
    """What differs between the database's schema and the tables the code queries (empty: none)."""
    with store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), store.metadata)
    return [d for d in diff if not (d[0] == "remove_table" and d[1].name == "alembic_version")]


def _revision(url: str) -> list[str]:
    engine = _engine(url)
    with engine.connect() as conn:
        rows = list(conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalars())
    engine.dispose()
    return rows


def test_a_database_made_by_release_414ee8a_is_upgraded_and_keeps_every_row(url: str) -> None:
    create_414ee8a_database(url)
    engine = _engine(url)
    md = sa.MetaData()
    md.reflect(engine)
    assert set(md.tables) == set(OLD_ROWS)  # every table of the release has a row below
    with engine.begin() as conn:
        for name, rows in OLD_ROWS.items():
            conn.execute(md.tables[name].insert(), rows)
    engine.dispose()
    old_columns = {name: list(rows[0]) for name, rows in OLD_ROWS.items()}
    before = _dump(url, old_columns)
    assert status(url).unversioned and status(url).current is None

    store = StateStore(url)  # start-up: stamp at 0001, upgrade to the head
    try:
        assert _revision(url) == [head()] and head() != BASELINE
        assert _dump(url, old_columns) == before  # no row lost or changed
        assert store.get_cursor("wiki", index_id=LEGACY_INDEX_ID) == {"watermark": "2026-10-01"}  # 0004: legacy
        assert _schema_diff(store) == []  # the upgraded schema is the code's
        # The old rows read back through the store...
        assert store.get_pending("k1").summary == "Sync"
        assert store.get_history_entries("teams:conv1")[0].author == "U1"
        assert store.audit_entries()[0].detail == {"n": 1}
        assert store.last_runs("wiki")[0].summary["added"] == 3
        assert store.groups_of("ann@example.com") == {"group:wiki/hr"}
        # ...and the new table works.
        store.record_turn(TurnRecord("t2", "slack", "U1", "C1", "what is the travel budget?", "knowledge", "refused",
                                     reason="no evidence"))
        assert [r.question for r in store.turn_records()] == ["what is the travel budget?"]
    finally:
        store.close()


def test_an_empty_database_is_created_by_the_migrations(url: str) -> None:
    assert status(url).current is None and not status(url).unversioned
    store = StateStore(url)
    try:
        assert _revision(url) == [head()]
        assert _schema_diff(store) == []
        assert status(url).is_head
    finally:
        store.close()


def test_upgrading_a_database_at_the_head_changes_nothing(url: str) -> None:
    store = StateStore(url)
    store.audit("U1", "slack", "x")
    store.close()
    tables = ["audit_log", "alembic_version"]
    before_rows = _dump(url, tables)
    before, after = upgrade(url)
    assert before.is_head and after == before
    again = StateStore(url)  # a second start-up
    again.close()
    assert _dump(url, tables) == before_rows


def test_a_revision_this_code_does_not_know_stops_with_upgrade_chatops(url: str, tmp_path: Path) -> None:
    StateStore(url).close()
    engine = _engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = '0099'"))
        conn.execute(sa.text("CREATE TABLE from_the_future (id INTEGER PRIMARY KEY)"))
    engine.dispose()
    with pytest.raises(SchemaTooNewError) as info:
        StateStore(url)
    assert "revision 0099" in str(info.value) and "Upgrade chatops" in str(info.value)
    assert not status(url).known and _revision(url) == ["0099"]  # nothing was changed
    for args in (["db", "upgrade"], ["status"]):
        proc = run_chatops(args, tmp_path / "d", cwd=tmp_path, DATABASE_URL=url)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "Upgrade chatops" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_chatops(["db", "current"], tmp_path / "d", cwd=tmp_path, DATABASE_URL=url)
    assert proc.returncode == 1 and "0099, unknown to this chatops" in proc.stdout


def test_stores_opened_at_once_migrate_an_empty_database_once(url: str) -> None:
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def start() -> None:
        try:
            barrier.wait(timeout=30)
            StateStore(url).close()
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert _revision(url) == [head()]


def test_db_current_and_upgrade_on_an_unversioned_sqlite_file(tmp_path: Path) -> None:
    data = tmp_path / "d"
    data.mkdir()
    create_414ee8a_database(f"sqlite:///{data / 'state.sqlite'}")
    proc = run_chatops(["db", "current"], data, cwd=tmp_path)
    assert proc.returncode == 1 and "no revision: made by chatops 414ee8a or older" in proc.stdout
    proc = run_chatops(["db", "upgrade"], data, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"upgraded from no revision to revision {head()} (head)" in proc.stdout
    proc = run_chatops(["db", "current", "--json"], data, cwd=tmp_path)
    assert proc.returncode == 0 and '"is_head": true' in proc.stdout
    proc = run_chatops(["db", "upgrade"], data, cwd=tmp_path)
    assert proc.returncode == 0 and "nothing to do" in proc.stdout


@pytest.mark.parametrize("made_by", ["9c1b159", "h-teams"])
def test_an_unversioned_database_from_main_is_stamped_past_the_tables_it_has(url: str, made_by: str) -> None:
    # Made by main after 414ee8a with create_all: turn_log (9c1b159), then sent_replies (h-teams). No revision
    # may create a table it already has, and the one it lacks is created.
    _upgrade_to(url, "0003")  # the tables main had then (0004 came after migrations existed)
    engine = _engine(url)
    md = sa.MetaData()
    md.reflect(engine, only=["turn_log", "sent_replies"])
    with engine.begin() as conn:
        conn.execute(md.tables["turn_log"].insert().values(
            trace_id="t1", platform="slack", user_id="U1", channel_id="C1", question="kept?", route="knowledge",
            outcome="answered", reason="", citations="[]", total_ms=0.0, created_at=T0))
        conn.execute(sa.text("DROP TABLE alembic_version"))
        if made_by == "9c1b159":
            conn.execute(sa.text("DROP TABLE sent_replies"))
        else:
            conn.execute(md.tables["sent_replies"].insert().values(platform="teams", message_id="m1", trace_id="t1",
                                                                   created_at=T0))
    engine.dispose()
    assert status(url).unversioned
    again = StateStore(url)
    try:
        assert _revision(url) == [head()] and _schema_diff(again) == []
        assert [r.question for r in again.turn_records()] == ["kept?"]
        assert again.trace_of_reply("teams", "m1") == (None if made_by == "9c1b159" else "t1")
    finally:
        again.close()


def _upgrade_to(url: str, revision: str) -> None:
    """Migrate the database at ``url`` to ``revision`` only (as a release at that revision left it)."""
    from alembic import command

    from state.migrate import _config, _locked

    cfg = _config()
    with _locked(url) as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


def test_a_database_at_0003_keeps_its_cursors_and_runs_as_legacy_for_the_first_index_to_adopt(url: str) -> None:
    # Revision 0004 keys cursors and runs by index; the rows already there were written for the one index
    # that was there, unknown to the database: they become "legacy", and the first index holding the
    # source's pages adopts them (index.sync.SyncEngine and app.jobs call adopt_legacy with those sources).
    _upgrade_to(url, "0003")
    assert _revision(url) == ["0003"]
    engine = _engine(url)
    md = sa.MetaData()
    md.reflect(engine, only=["sync_cursors", "sync_runs", "locks"])
    with engine.begin() as conn:
        conn.execute(md.tables["sync_cursors"].insert(), [
            {"source": "wiki", "cursor": '{"watermark": "2026-10-01T00:00:00Z"}', "updated_at": T0},
            {"source": "eng", "cursor": '{"watermark": "2026-10-02T00:00:00Z"}', "updated_at": T0}])
        conn.execute(md.tables["sync_runs"].insert(), [
            {"id": 1, "source": "wiki", "started_at": T0, "finished_at": T0, "status": "ok",
             "summary": '{"mode": "incremental", "added": 3}', "error": ""},
            {"id": 2, "source": "chatops:retention", "started_at": T0, "finished_at": T0, "status": "ok",
             "summary": '{"mode": "retention"}', "error": ""}])
        conn.execute(md.tables["locks"].insert().values(name="sync:wiki", owner="host:1:x", expires_at=T0))
    engine.dispose()
    store = StateStore(url)
    try:
        assert _revision(url) == [head()]
        assert _schema_diff(store) == []
        assert {r.index_id for r in store.last_runs()} == {LEGACY_INDEX_ID}
        assert store.get_cursor("wiki", index_id=LEGACY_INDEX_ID) == {"watermark": "2026-10-01T00:00:00Z"}
        # The index that holds wiki's pages adopts wiki's cursor and runs; eng's stay for whoever holds eng.
        assert store.adopt_legacy("index-a", ["wiki"]) == 1
        assert store.get_cursor("wiki", index_id="index-a") == {"watermark": "2026-10-01T00:00:00Z"}
        assert store.last_runs("wiki", index_id="index-a")[0].summary["added"] == 3
        assert store.get_cursor("eng", index_id=LEGACY_INDEX_ID) is not None
        # Two indexes now keep a cursor of the same source side by side (the key is index and source).
        store.set_cursor("wiki", {"watermark": "2026-11-01T00:00:00Z"}, index_id="index-b")
        assert store.get_cursor("wiki", index_id="index-a") == {"watermark": "2026-10-01T00:00:00Z"}
        assert store.last_runs("chatops:retention")[0].summary["mode"] == "retention"
    finally:
        store.close()


def test_a_database_at_0004_gets_the_job_table_and_keeps_its_rows(url: str) -> None:
    # Revision 0005 adds index_jobs (re-index requests for the worker); the cursors and runs stay as they were.
    _upgrade_to(url, "0004")
    engine = _engine(url)
    md = sa.MetaData()
    md.reflect(engine, only=["sync_cursors", "sync_runs"])
    with engine.begin() as conn:
        conn.execute(md.tables["sync_cursors"].insert().values(index_id="index-a", source="wiki",
                                                               cursor='{"watermark": "w"}', updated_at=T0))
        conn.execute(md.tables["sync_runs"].insert().values(id=1, index_id="index-a", source="wiki", started_at=T0,
                                                            finished_at=T0, status="ok", summary="{}", error=""))
    engine.dispose()
    assert not sa.inspect(_engine(url)).has_table("index_jobs")
    store = StateStore(url)
    try:
        assert _revision(url) == [head()] and _schema_diff(store) == []
        assert store.get_cursor("wiki", index_id="index-a") == {"watermark": "w"}
        assert [r.index_id for r in store.last_runs("wiki")] == ["index-a"]
        job = store.enqueue_index_job("index-a", "wiki", requested_by="slack:U1")
        assert store.claim_index_job("index-a", "worker-1").id == job
    finally:
        store.close()


def _downgrade_to(url: str, revision: str) -> None:
    """Migrate the database at ``url`` down to ``revision``."""
    from alembic import command

    from state.migrate import _config, _locked

    cfg = _config()
    with _locked(url) as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)


MANIFEST_TABLES = {"index_pages", "index_journal", "index_meta"}


def test_revision_0006_adds_the_manifest_tables_of_shared_indexes_and_its_downgrade_drops_them(url: str) -> None:
    from index.manifest import Manifest, PageEntry

    _upgrade_to(url, "0005")
    assert not MANIFEST_TABLES & set(sa.inspect(_engine(url)).get_table_names())
    store = StateStore(url)  # start-up upgrades to the head
    try:
        assert _revision(url) == [head()] and _schema_diff(store) == []  # the tables are the code's
        store.enqueue_index_job("index-a", "wiki")
    finally:
        store.close()
    m = Manifest(database_url=url, scope="qdrant-0123456789abcdef0123")
    m.commit([PageEntry("wiki:a", "wiki", "a", "h", ("c1", "c2"))], [])
    assert m.counts() == (1, 2)
    m.close()

    _downgrade_to(url, "0005")
    tables = set(sa.inspect(_engine(url)).get_table_names())
    assert not MANIFEST_TABLES & tables and "index_jobs" in tables and _revision(url) == ["0005"]
    engine = _engine(url)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT COUNT(*) FROM index_jobs")).scalar() == 1  # the rest is kept
    engine.dispose()

    StateStore(url).close()  # and up again: empty tables
    m = Manifest(database_url=url, scope="qdrant-0123456789abcdef0123")
    try:
        assert m.counts() == (0, 0) and m.version == 0
    finally:
        m.close()


def test_revision_0007_adds_conversation_references_and_its_downgrade_drops_only_it(url: str) -> None:
    _upgrade_to(url, "0006")
    assert "conversation_references" not in sa.inspect(_engine(url)).get_table_names()
    store = StateStore(url)  # start-up upgrades to the head
    try:
        assert _revision(url) == [head()] and _schema_diff(store) == []  # the table is the code's
        ref = {"serviceUrl": "https://smba.example/", "conversation": {"id": "a:1"}}
        assert store.remember_conversation_reference("teams", "aad-1", ref)
        assert store.conversation_reference("teams", "aad-1") == ref
        store.enqueue_index_job("index-a", "wiki")
    finally:
        store.close()
    _downgrade_to(url, "0006")
    tables = set(sa.inspect(_engine(url)).get_table_names())
    assert "conversation_references" not in tables and "index_jobs" in tables and _revision(url) == ["0006"]
    StateStore(url).close()  # and up again
    assert _revision(url) == [head()]


def test_revision_0008_adds_mcp_tokens_and_its_downgrade_drops_only_it(url: str) -> None:
    import hashlib

    _upgrade_to(url, "0007")
    assert "mcp_tokens" not in sa.inspect(_engine(url)).get_table_names()
    store = StateStore(url)  # start-up upgrades to the head
    try:
        assert _revision(url) == [head()] and _schema_diff(store) == []  # the table is the code's
        digest = hashlib.sha256(b"chatops_example").hexdigest()
        store.add_mcp_token(digest, digest[:12], "Ana@Example.com", label="laptop", created_by="admin")
        with pytest.raises(ValueError, match="already exists"):
            store.add_mcp_token(hashlib.sha256(b"other").hexdigest(), digest[:12], "bob@example.com")
        assert store.mcp_token_for(digest).email == "ana@example.com"  # type: ignore[union-attr]
        assert store.revoke_mcp_token(digest[:12]).active is False  # type: ignore[union-attr]
        assert store.mcp_token_for(digest).revoked_at is not None  # type: ignore[union-attr]
        assert store.revoke_mcp_token("nosuchid") is None
        store.remember_conversation_reference("teams", "aad-1", {"conversation": {"id": "a:1"}})
    finally:
        store.close()
    _downgrade_to(url, "0007")
    tables = set(sa.inspect(_engine(url)).get_table_names())
    assert "mcp_tokens" not in tables and "conversation_references" in tables and _revision(url) == ["0007"]
    StateStore(url).close()  # and up again
    assert _revision(url) == [head()]
