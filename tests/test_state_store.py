"""The state store on SQLite and on a real PostgreSQL server.

Every test runs twice: on a SQLite file in ``tmp_path`` and on a fresh PostgreSQL database created
for the session on ``$CHATOPS_TEST_PG_URL`` (default ``postgresql+psycopg://postgres@127.0.0.1:5432/postgres``,
the development and CI machines' server). PostgreSQL tests skip when the server is unreachable,
unless ``CHATOPS_TEST_REQUIRE_PG=1`` (set by ``.ci/run``), which makes them fail instead.
Covers event de-duplication (also under concurrent claims), feedback, pending actions moving
through their statuses exactly once, expiry, the audit log, sync cursors, runs and locks,
conversation history (with authors, and rows stored before authors were), and the error for an unreachable database.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa

from state import StateStore, StateStoreError

PG_ADMIN_URL = os.environ.get("CHATOPS_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database for the session, dropped at the end."""
    name = f"chatops_test_{uuid.uuid4().hex[:10]}"
    try:
        admin = sa.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:  # noqa: BLE001 - any failure means no server to test against
        if os.environ.get("CHATOPS_TEST_REQUIRE_PG") == "1":
            pytest.fail(f"PostgreSQL at {PG_ADMIN_URL} is required (CHATOPS_TEST_REQUIRE_PG=1) but unusable: {exc}")
        pytest.skip(f"PostgreSQL at {PG_ADMIN_URL} is not reachable: {exc}")
    url = sa.engine.make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    yield url
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path) -> Iterator[StateStore]:
    if request.param == "sqlite":
        s = StateStore(f"sqlite:///{tmp_path / 'state.sqlite'}")
    else:
        s = StateStore(request.getfixturevalue("pg_url"))
    yield s
    s.drop_all()
    s.close()


def test_an_event_is_claimed_once(store: StateStore) -> None:
    assert store.claim_event("Ev1", "slack") is True
    assert store.claim_event("Ev1", "slack") is False
    assert store.claim_event("Ev2", "slack") is True


def test_concurrent_claims_of_one_event_let_exactly_one_through(store: StateStore) -> None:
    wins: list[bool] = []
    lock = threading.Lock()

    def claim() -> None:
        ok = store.claim_event("EvRace", "slack")
        with lock:
            wins.append(ok)

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wins.count(True) == 1 and len(wins) == 8


def test_old_events_are_pruned(store: StateStore) -> None:
    store.claim_event("EvOld", "slack")
    assert store.prune_events(older_than=timedelta(seconds=-1)) >= 1
    assert store.claim_event("EvOld", "slack") is True


def test_feedback_is_stored_per_trace_and_user_and_replaced(store: StateStore) -> None:
    store.add_feedback("t1", "slack", "U1", "helpful")
    store.add_feedback("t1", "slack", "U2", "not_helpful")
    store.add_feedback("t1", "slack", "U1", "not_helpful")
    rows = store.feedback_for("t1")
    assert sorted((r["user_id"], r["value"]) for r in rows) == [("U1", "not_helpful"), ("U2", "not_helpful")]
    with pytest.raises(ValueError, match="helpful"):
        store.add_feedback("t1", "slack", "U1", "meh")


def test_pending_action_moves_through_statuses_exactly_once(store: StateStore) -> None:
    rec = store.create_pending("key-1", "calendar.create", {"title": "Sync", "minutes": 30}, "U1", "slack",
                               channel_id="C1", thread_id="1.2", summary="Sync, 30 min")
    assert rec.status == "pending" and rec.args == {"title": "Sync", "minutes": 30} and not rec.expired
    again = store.create_pending("key-1", "calendar.create", {"title": "Other"}, "U2", "slack")
    assert again.args == {"title": "Sync", "minutes": 30} and again.requester == "U1"
    assert store.transition_pending("key-1", "pending", "executing") is True
    assert store.transition_pending("key-1", "pending", "executing") is False  # a second click
    assert store.transition_pending("key-1", "executing", "done", result={"event_id": "E1"}) is True
    done = store.get_pending("key-1")
    assert done is not None and done.status == "done" and done.result == {"event_id": "E1"}
    assert store.get_pending("missing") is None


def test_concurrent_confirmations_execute_once(store: StateStore) -> None:
    store.create_pending("key-race", "calendar.create", {}, "U1", "slack")
    wins: list[bool] = []

    def confirm() -> None:
        wins.append(store.transition_pending("key-race", "pending", "executing"))

    threads = [threading.Thread(target=confirm) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wins.count(True) == 1


def test_pending_action_expires(store: StateStore) -> None:
    rec = store.create_pending("key-exp", "calendar.create", {}, "U1", "slack", ttl=timedelta(seconds=-1))
    assert rec.expired
    assert rec.expires_at.tzinfo is not None


def test_audit_log_keeps_who_what_when(store: StateStore) -> None:
    store.audit("U1", "slack", "reindex", target="handbook", outcome="refused", detail={"reason": "not an admin"})
    store.audit("U2", "slack", "calendar.create", target="E1", detail={"title": "Sync"})
    entries = store.audit_entries()
    assert [e.action for e in entries] == ["calendar.create", "reindex"]
    assert entries[1].outcome == "refused" and entries[1].detail == {"reason": "not an admin"}
    assert entries[0].at.tzinfo is not None
    assert [e.actor for e in store.audit_entries(action="reindex")] == ["U1"]


def test_sync_cursor_runs_and_lock(store: StateStore) -> None:
    assert store.get_cursor("wiki") is None
    store.set_cursor("wiki", {"watermark": "2026-11-01T00:00:00Z", "seen": [1, 2]})
    store.set_cursor("wiki", {"watermark": "2026-11-02T00:00:00Z"})
    assert store.get_cursor("wiki") == {"watermark": "2026-11-02T00:00:00Z"}
    run = store.start_run("wiki")
    store.finish_run(run, "ok", {"added": 3, "deleted": 1})
    failed = store.start_run("wiki")
    store.finish_run(failed, "failed", {}, error="HTTP 500")
    runs = store.last_runs("wiki")
    assert [(r.status, r.error) for r in runs] == [("failed", "HTTP 500"), ("ok", "")]
    assert runs[1].summary == {"added": 3, "deleted": 1} and runs[1].finished_at is not None
    assert store.acquire_lock("sync:wiki", "worker-a") is True
    assert store.acquire_lock("sync:wiki", "worker-b") is False
    assert store.acquire_lock("sync:wiki", "worker-a") is True  # the holder renews
    store.release_lock("sync:wiki", "worker-b")  # not the holder: no effect
    assert store.acquire_lock("sync:wiki", "worker-b") is False
    store.release_lock("sync:wiki", "worker-a")
    assert store.acquire_lock("sync:wiki", "worker-b") is True


def test_an_expired_lock_can_be_taken_over(store: StateStore) -> None:
    assert store.acquire_lock("sync:x", "crashed", ttl=timedelta(seconds=-1)) is True
    assert store.acquire_lock("sync:x", "new") is True


def test_a_dead_holders_lock_is_taken_over_in_one_atomic_swap(store: StateStore) -> None:
    asked: list[str] = []

    def dead(holder: str) -> bool:
        asked.append(holder)
        return holder.startswith("gone:")

    assert store.take_over_lock("sync:free", "me", dead) is True  # unheld: simply acquired
    assert store.lock_holder("sync:free") == "me" and asked == []
    assert store.acquire_lock("sync:alive", "alive:1") is True
    assert store.take_over_lock("sync:alive", "me", dead) is False  # a live holder keeps it
    assert store.lock_holder("sync:alive") == "alive:1" and asked == ["alive:1"]
    assert store.acquire_lock("sync:x", "gone:2") is True
    assert store.take_over_lock("sync:x", "me", dead, ttl=timedelta(minutes=5)) is True
    assert store.lock_holder("sync:x") == "me"
    assert store.acquire_lock("sync:x", "gone:2") is False  # ours now, unexpired
    store.release_lock("sync:x", "me")
    assert store.lock_holder("sync:x") is None


def test_a_lock_that_changed_hands_meanwhile_is_not_taken_over(store: StateStore) -> None:
    """The swap is conditional on the holder that was judged dead: a lock renewed by another taker
    between the read and the write stays with that taker."""
    assert store.acquire_lock("sync:y", "gone:1", ttl=timedelta(seconds=-1)) is True  # expired

    def dead_but_raced(holder: str) -> bool:
        assert store.acquire_lock("sync:y", "quicker") is True  # another process takes it first
        return True

    assert store.take_over_lock("sync:y", "me", dead_but_raced) is False
    assert store.lock_holder("sync:y") == "quicker"


def test_concurrent_take_overs_of_a_dead_lock_let_exactly_one_through(store: StateStore) -> None:
    assert store.acquire_lock("sync:z", "gone:1") is True
    barrier = threading.Barrier(6)
    wins: list[str] = []
    guard = threading.Lock()

    def take(owner: str) -> None:
        def dead(holder: str) -> bool:
            barrier.wait(timeout=10)  # every taker has read the dead holder before anyone swaps
            return holder == "gone:1"

        if store.take_over_lock("sync:z", owner, dead):
            with guard:
                wins.append(owner)

    threads = [threading.Thread(target=take, args=(f"taker-{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and store.lock_holder("sync:z") == wins[0]


def test_conversation_history_is_bounded(store: StateStore) -> None:
    for i in range(12):
        store.append_history("teams:conv1", f"message {i}", keep=10)
    hist = store.get_history("teams:conv1")
    assert hist[0] == "message 2" and hist[-1] == "message 11" and len(hist) == 10
    assert store.get_history("teams:other") == []


def test_history_keeps_each_messages_author_and_reads_old_rows(store: StateStore) -> None:
    store.append_history("teams:conv2", "book a sync with bob@example.com", author="aad-alice")
    store.append_history("teams:conv2", "what about lunch?", author="aad-bob")
    assert [(m.text, m.author) for m in store.get_history_entries("teams:conv2")] == [
        ("book a sync with bob@example.com", "aad-alice"), ("what about lunch?", "aad-bob")]
    assert store.get_history("teams:conv2") == ["book a sync with bob@example.com", "what about lunch?"]
    # A row written before authors were stored: a JSON list of strings, read with no author.
    with store.engine.begin() as conn:
        conn.execute(store.conversations.insert().values(key="teams:old", history='["an old message"]',
                                                         updated_at=datetime.now(timezone.utc)))
    assert [(m.text, m.author) for m in store.get_history_entries("teams:old")] == [("an old message", "")]
    assert store.append_history("teams:old", "a new one", author="aad-alice") == ["an old message", "a new one"]
    assert [m.author for m in store.get_history_entries("teams:old")] == ["", "aad-alice"]


def test_ping(store: StateStore) -> None:
    assert store.ping() is True


def test_unreachable_database_gives_a_clear_error() -> None:
    with pytest.raises(StateStoreError, match="DATABASE_URL"):
        StateStore("postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=2")
