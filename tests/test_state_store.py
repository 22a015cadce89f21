"""The state store on SQLite and on a real PostgreSQL server.

Every test runs twice: on a SQLite file in ``tmp_path`` and on a fresh PostgreSQL database created
for the session on ``$CHATOPS_TEST_PG_URL`` (default ``postgresql+psycopg://postgres@127.0.0.1:5432/postgres``,
the development and CI machines' server). PostgreSQL tests skip when the server is unreachable,
unless ``CHATOPS_TEST_REQUIRE_PG=1`` (set by ``.ci/run``), which makes them fail instead.
Covers event de-duplication (also under concurrent claims), feedback, pending actions moving
through their statuses exactly once, expiry, the audit log, sync cursors, runs and locks,
conversation history (with authors, and rows stored before authors were), scheduled messages (idempotent
scheduling, cancelling, claims that two deliverers never share, lease take-over, retries with back-off, the
last attempt, the table added to an older database), and the error for an unreachable database.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

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


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.server)])
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


def test_a_sent_reply_leads_back_to_its_turn(store: StateStore) -> None:
    """What Teams' feedback invoke needs: the bot's message id -> the trace id of the turn it answered."""
    store.remember_reply("teams", "msg-1", "trace-a")
    store.remember_reply("teams", "msg-2", "trace-b")
    store.remember_reply("teams", "msg-1", "trace-c")  # the message re-sent for another turn: the last wins
    assert store.trace_of_reply("teams", "msg-1") == "trace-c" and store.trace_of_reply("teams", "msg-2") == "trace-b"
    assert store.trace_of_reply("slack", "msg-1") is None and store.trace_of_reply("teams", "nope") is None


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


def test_a_users_open_pending_actions_are_listed_newest_first(store: StateStore) -> None:
    store.create_pending("k-old", "calendar.create", {}, "U1", "slack", summary="old")
    store.create_pending("k-new", "calendar.create", {}, "U1", "slack", summary="new")
    store.create_pending("k-done", "calendar.create", {}, "U1", "slack", summary="done")
    store.transition_pending("k-done", "pending", "executing")
    store.create_pending("k-gone", "calendar.create", {}, "U1", "slack", summary="gone", ttl=timedelta(seconds=-1))
    store.create_pending("k-other", "calendar.create", {}, "U2", "slack", summary="someone else's")
    store.create_pending("k-teams", "calendar.create", {}, "U1", "teams", summary="on Teams")
    listed = store.open_pending_for("U1", "slack")
    assert {r.summary for r in listed} == {"old", "new"}
    assert [r.key for r in listed][0] == "k-new" or listed[0].created_at == listed[1].created_at
    assert [r.summary for r in store.open_pending_for("U1", "slack", limit=1)] == [listed[0].summary]
    assert store.open_pending_for("U3", "slack") == []


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
    assert store.get_cursor("wiki", index_id="i1") is None
    store.set_cursor("wiki", {"watermark": "2026-11-01T00:00:00Z", "seen": [1, 2]}, index_id="i1")
    store.set_cursor("wiki", {"watermark": "2026-11-02T00:00:00Z"}, index_id="i1")
    assert store.get_cursor("wiki", index_id="i1") == {"watermark": "2026-11-02T00:00:00Z"}
    run = store.start_run("wiki", index_id="i1")
    store.finish_run(run, "ok", {"added": 3, "deleted": 1})
    failed = store.start_run("wiki", index_id="i1")
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


# -- scheduled messages (the outbox) ---------------------------------------------------------------------------

NOW = datetime(2026, 11, 23, 9, 0, tzinfo=timezone.utc)


def _schedule(store: StateStore, key: str, at: datetime = NOW, platform: str = "slack", user: str = "U1",
              text: str = "stand-up in 5 min") -> bool:
    return store.schedule_message(key, platform=platform, user_id=user, channel_id="C1", at=at, text=text)


def test_scheduling_a_message_is_idempotent_and_stored_in_utc(store: StateStore) -> None:
    paris = datetime(2026, 11, 23, 10, 0, tzinfo=ZoneInfo("Europe/Paris"))
    assert _schedule(store, "rem-1", at=paris, text="first") is True
    assert _schedule(store, "rem-1", at=paris + timedelta(hours=1), text="second") is False  # a retried confirm
    [msg] = store.scheduled_messages()
    assert (msg.key, msg.text, msg.status, msg.attempts, msg.error) == ("rem-1", "first", "pending", 0, "")
    assert msg.at == NOW and msg.at.utcoffset() == timedelta(0) and msg.created_at.tzinfo is not None
    assert (msg.platform, msg.user_id, msg.channel_id) == ("slack", "U1", "C1")
    assert store.scheduled_message("rem-1") == msg and store.scheduled_message("nope") is None
    with pytest.raises(ValueError, match="aware"):
        _schedule(store, "rem-naive", at=datetime(2026, 11, 23, 9, 0))
    with pytest.raises(ValueError, match="text"):
        _schedule(store, "rem-empty", text="")


def test_a_cancelled_message_is_never_claimed(store: StateStore) -> None:
    _schedule(store, "rem-c")
    assert store.cancel_message("rem-c") is True
    assert store.cancel_message("rem-c") is False  # no longer pending
    assert store.cancel_message("unknown") is False
    assert store.claim_due_messages(NOW + timedelta(hours=1), "a") == []
    assert store.scheduled_message("rem-c").status == "cancelled"  # type: ignore[union-attr]
    _schedule(store, "rem-s")
    store.claim_due_messages(NOW, "a")
    assert store.cancel_message("rem-s") is False  # being sent: too late to cancel


def test_only_due_messages_are_claimed(store: StateStore) -> None:
    _schedule(store, "due", at=NOW - timedelta(minutes=1))
    _schedule(store, "now", at=NOW)
    _schedule(store, "later", at=NOW + timedelta(seconds=1))
    claimed = store.claim_due_messages(NOW, "a")
    assert [m.key for m in claimed] == ["due", "now"]
    assert all(m.status == "sending" and m.attempts == 1 for m in claimed)
    assert store.scheduled_message("later").status == "pending"  # type: ignore[union-attr]
    assert [m.key for m in store.claim_due_messages(NOW + timedelta(seconds=1), "a")] == ["later"]


def test_claims_are_limited_and_filtered_by_platform(store: StateStore) -> None:
    for i in range(3):
        _schedule(store, f"s{i}", at=NOW - timedelta(minutes=3 - i))
    _schedule(store, "t0", platform="teams")
    _schedule(store, "c0", platform="cli", at=NOW + timedelta(hours=1))
    assert store.due_message_counts(NOW) == {"slack": 3, "teams": 1}
    assert [m.key for m in store.claim_due_messages(NOW, "a", limit=2, platforms=["slack"])] == ["s0", "s1"]
    assert [m.key for m in store.claim_due_messages(NOW, "a", platforms=["slack"])] == ["s2"]
    assert store.due_message_counts(NOW) == {"teams": 1}
    assert store.claim_due_messages(NOW, "a", platforms=[]) == []
    assert [m.key for m in store.claim_due_messages(NOW, "b")] == ["t0"]


def test_claims_can_be_limited_to_one_recipient(store: StateStore) -> None:
    _schedule(store, "mine", user="alice", platform="cli")
    _schedule(store, "theirs", user="bob", platform="cli")
    assert [m.key for m in store.claim_due_messages(NOW, "cli", platforms=["cli"], user_id="alice")] == ["mine"]
    assert store.scheduled_message("theirs").status == "pending"  # type: ignore[union-attr]


def test_concurrent_deliverers_claim_each_message_once(store: StateStore) -> None:
    for i in range(20):
        _schedule(store, f"race-{i:02d}", at=NOW - timedelta(seconds=i))
    claims: dict[str, list[str]] = {}
    lock = threading.Lock()
    barrier = threading.Barrier(6)

    def deliverer(owner: str) -> None:
        barrier.wait()
        got = [m.key for m in store.claim_due_messages(NOW, owner, limit=20)]
        with lock:
            claims[owner] = got

    threads = [threading.Thread(target=deliverer, args=(f"owner-{n}",)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    keys = [k for got in claims.values() for k in got]
    assert sorted(keys) == sorted(f"race-{i:02d}" for i in range(20))  # every one claimed, none twice
    for owner, got in claims.items():
        assert all(store.finish_message(k, owner, "delivered") for k in got)
    assert {m.status for m in store.scheduled_messages()} == {"delivered"}


def test_a_message_whose_lease_expired_is_claimed_again(store: StateStore) -> None:
    _schedule(store, "lease")
    assert [m.key for m in store.claim_due_messages(NOW, "crashed", lease=timedelta(minutes=5))] == ["lease"]
    assert store.claim_due_messages(NOW + timedelta(minutes=4), "other") == []  # the lease holds
    [again] = store.claim_due_messages(NOW + timedelta(minutes=5, seconds=1), "other")
    assert (again.key, again.status, again.attempts) == ("lease", "sending", 2)
    assert store.finish_message("lease", "crashed", "delivered") is False  # no longer its message
    assert store.finish_message("lease", "other", "delivered") is True
    assert store.finish_message("lease", "other", "delivered") is False  # finished once
    assert store.scheduled_message("lease").status == "delivered"  # type: ignore[union-attr]


def test_a_message_is_retried_with_backoff_then_fails_after_the_last_attempt(store: StateStore) -> None:
    from state.store import MESSAGE_MAX_ATTEMPTS, MESSAGE_RETRY_MAX

    _schedule(store, "flaky")
    for attempt in range(1, MESSAGE_MAX_ATTEMPTS + 1):
        later = datetime.now(timezone.utc) + MESSAGE_RETRY_MAX + timedelta(seconds=1)
        [msg] = store.claim_due_messages(later if attempt > 1 else NOW, "a")
        assert msg.attempts == attempt
        assert store.finish_message("flaky", "a", "pending", error=f"ratelimited #{attempt}") is True
        msg = store.scheduled_message("flaky")  # type: ignore[assignment]
        if attempt < MESSAGE_MAX_ATTEMPTS:
            assert (msg.status, msg.error) == ("pending", f"ratelimited #{attempt}")
            assert store.claim_due_messages(datetime.now(timezone.utc), "a") == []  # not before the back-off
    assert msg.status == "failed" and msg.error == f"gave up after {MESSAGE_MAX_ATTEMPTS} attempts: ratelimited #5"
    assert store.claim_due_messages(datetime.now(timezone.utc) + timedelta(days=1), "a") == []
    assert store.scheduled_messages(status="failed") == [msg]


def test_a_permanent_failure_is_final_and_unknown_outcomes_are_refused(store: StateStore) -> None:
    _schedule(store, "gone")
    store.claim_due_messages(NOW, "a")
    with pytest.raises(ValueError, match="delivered, failed or pending"):
        store.finish_message("gone", "a", "cancelled")  # type: ignore[arg-type]
    assert store.finish_message("gone", "a", "failed", error="user_not_found") is True
    msg = store.scheduled_message("gone")
    assert msg is not None and (msg.status, msg.error, msg.attempts) == ("failed", "user_not_found", 1)
    assert store.finish_message("never-claimed", "a", "delivered") is False


def test_a_deliverer_that_keeps_crashing_makes_the_message_fail(store: StateStore) -> None:
    _schedule(store, "poison")
    t = NOW
    for _ in range(3):
        assert store.claim_due_messages(t, "a", lease=timedelta(seconds=10), max_attempts=3)
        t += timedelta(seconds=11)  # the deliverer died: no finish, the lease runs out
    assert store.claim_due_messages(t, "b", max_attempts=3) == []
    msg = store.scheduled_message("poison")
    assert msg is not None and msg.status == "failed" and msg.attempts == 3 and "gave up after 3 attempts" in msg.error


def test_scheduled_messages_are_listed_by_user_and_status(store: StateStore) -> None:
    _schedule(store, "b", at=NOW + timedelta(hours=2), user="U1")
    _schedule(store, "a", at=NOW + timedelta(hours=1), user="U1")
    _schedule(store, "x", at=NOW, user="U2")
    store.cancel_message("b")
    assert [m.key for m in store.scheduled_messages()] == ["x", "a", "b"]  # soonest first
    assert [m.key for m in store.scheduled_messages(user_id="U1")] == ["a", "b"]
    assert [m.key for m in store.scheduled_messages(user_id="U1", status="pending")] == ["a"]
    assert [m.key for m in store.scheduled_messages(limit=1)] == ["x"]


def _made_before_migrations(url: str) -> None:
    """Take the database at ``url`` back to what a build from before migrations made with ``create_all``:
    the tables of revision 0003 (0004 came after migrations existed; its downgrade runs), no revision."""
    from alembic import command

    from state.migrate import _config, _locked

    cfg = _config()
    with _locked(url) as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0003")
        conn.execute(sa.text("DROP TABLE alembic_version"))


def test_a_database_made_before_the_outbox_gets_its_table_on_open(store: StateStore) -> None:
    store.close()
    _made_before_migrations(store.url)
    store.scheduled.drop(store.engine)  # made by a release before the outbox, and so before migrations
    assert not sa.inspect(store.engine).has_table("scheduled_messages")
    again = StateStore(store.url)
    try:
        assert _schedule(again, "after-upgrade") is True
        assert [m.key for m in again.scheduled_messages()] == ["after-upgrade"]
    finally:
        again.close()


# -- group memberships (issue 11) ----------------------------------------------------------------------

def test_group_members_are_replaced_and_looked_up_by_email(store: StateStore) -> None:
    store.set_group_members("Eng", "HR", ["Ann@Example.com", " bob@example.com ", ""])
    store.set_group_members("eng", "engineering", ["bob@example.com"])
    store.set_group_members("wiki", "hr", ["ann@example.com"])
    assert store.groups_of("ANN@example.com") == {"group:eng/hr", "group:wiki/hr"}
    assert store.groups_of("bob@example.com") == {"group:eng/hr", "group:eng/engineering"}
    assert store.group_members_of("ENG", "hr") == {"ann@example.com", "bob@example.com"}
    # Replacing the set removes who is no longer listed (a user removed from a group stops matching).
    store.set_group_members("eng", "hr", ["ann@example.com"])
    assert store.groups_of("bob@example.com") == {"group:eng/engineering"}
    store.set_group_members("eng", "hr", [])
    assert store.groups_of("ann@example.com") == {"group:wiki/hr"}
    assert store.groups_of("") == frozenset() and store.groups_of("nobody@example.com") == frozenset()
    with pytest.raises(ValueError):
        store.set_group_members("eng", " ", ["x@example.com"])
    store.forget_source("eng", index_id="i1")
    assert store.groups_of("bob@example.com") == frozenset()
    assert store.groups_of("ann@example.com") == {"group:wiki/hr"}


def test_cursors_and_runs_are_kept_per_index(store: StateStore) -> None:
    # Two replicas' own indexes on one database: each has its own cursor and runs of the same source.
    store.set_cursor("wiki", {"watermark": "2026-11-01T00:00:00Z"}, index_id="replica-a")
    store.set_cursor("wiki", {"watermark": "2026-11-05T00:00:00Z"}, index_id="replica-b")
    assert store.get_cursor("wiki", index_id="replica-a") == {"watermark": "2026-11-01T00:00:00Z"}
    assert store.get_cursor("wiki", index_id="replica-b") == {"watermark": "2026-11-05T00:00:00Z"}
    store.finish_run(store.start_run("wiki", index_id="replica-a"), "ok", {"added": 1})
    store.start_run("wiki", index_id="replica-b")  # still running
    assert [r.index_id for r in store.last_runs("wiki", index_id="replica-a")] == ["replica-a"]
    assert len(store.last_runs("wiki")) == 2  # None: every index's
    assert set(store.last_successful_runs("replica-a")) == {"wiki"}
    assert store.last_successful_runs("replica-b") == {}
    # Removing the source from one index forgets that index's cursor and runs only.
    store.forget_source("wiki", index_id="replica-a")
    assert store.get_cursor("wiki", index_id="replica-a") is None and store.last_runs("wiki", index_id="replica-a") == []
    assert store.get_cursor("wiki", index_id="replica-b") is not None and len(store.last_runs("wiki")) == 1


def test_legacy_cursors_are_adopted_once_and_only_for_the_sources_asked(store: StateStore) -> None:
    from state import LEGACY_INDEX_ID

    store.set_cursor("wiki", {"watermark": "w"}, index_id=LEGACY_INDEX_ID)
    store.set_cursor("eng", {"watermark": "e"}, index_id=LEGACY_INDEX_ID)
    store.finish_run(store.start_run("wiki", index_id=LEGACY_INDEX_ID), "ok", {})
    assert store.adopt_legacy("first", ["wiki"]) == 1
    assert store.adopt_legacy("second", ["wiki"]) == 0  # already adopted: one winner
    assert store.get_cursor("wiki", index_id="first") == {"watermark": "w"}
    assert store.get_cursor("wiki", index_id="second") is None
    assert [r.index_id for r in store.last_runs("wiki")] == ["first"]
    assert store.get_cursor("eng", index_id=LEGACY_INDEX_ID) == {"watermark": "e"}  # not asked: still legacy
    assert store.adopt_legacy("second", []) == 0 and store.adopt_legacy(LEGACY_INDEX_ID, ["eng"]) == 0


def test_index_jobs_are_claimed_once_by_the_worker_of_their_index(store: StateStore) -> None:
    first = store.enqueue_index_job("index-a", "wiki", full=True, requested_by="slack:UADMIN")
    everything = store.enqueue_index_job("index-a")
    store.enqueue_index_job("index-b", "wiki")
    assert store.index_job(first).status == "queued" and store.index_job(everything).source == ""
    got: list = []
    barrier = threading.Barrier(4)

    def claim(owner: str) -> None:
        barrier.wait(timeout=30)
        got.append(store.claim_index_job("index-a", owner))

    threads = [threading.Thread(target=claim, args=(f"worker-{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    claimed = [j for j in got if j is not None]
    assert sorted(j.id for j in claimed) == [first, everything]  # each job once, the other index's left alone
    job = next(j for j in claimed if j.id == first)
    assert (job.status, job.full, job.requested_by, job.source) == ("running", True, "slack:UADMIN", "wiki")
    assert store.finish_index_job(first, "someone-else", "done", []) is False  # not the holder
    assert store.finish_index_job(first, job.owner, "done", [{"source": "wiki", "status": "ok"}]) is True
    done = store.index_job(first)
    assert done.status == "done" and done.result == [{"source": "wiki", "status": "ok"}] and done.finished_at
    assert store.claim_index_job("index-a", "worker-9") is None
    with pytest.raises(ValueError):
        store.finish_index_job(everything, "x", "queued", [])  # type: ignore[arg-type]


def test_an_index_job_left_running_by_a_dead_worker_is_claimed_again(store: StateStore) -> None:
    job = store.enqueue_index_job("index-a", "wiki")
    assert store.claim_index_job("index-a", "host:1:dead").id == job
    assert store.claim_index_job("index-a", "host:2:alive") is None  # running, and nobody says its owner is gone
    assert store.claim_index_job("index-a", "host:2:alive", is_dead=lambda owner: False) is None
    again = store.claim_index_job("index-a", "host:2:alive", is_dead=lambda owner: owner == "host:1:dead")
    assert again.id == job and again.owner == "host:2:alive"
    assert store.finish_index_job(job, "host:1:dead", "done", []) is False  # the dead one's late finish is refused
    assert store.finish_index_job(job, "host:2:alive", "done", []) is True


def test_group_principals_are_spelled_as_connectors_access_spells_them(store: StateStore) -> None:
    from core.access import Viewer, group, user

    for source, name in [("Eng", "Release-Managers"), ("wiki.2", " id-5B10AC "), ("a_b", "x y")]:
        store.set_group_members(source, name, ["Person@Example.com"])
        assert group(source, name) in store.groups_of("person@example.com")
    # What the store returns is what a viewer is built from, unchanged by normalising.
    viewer = Viewer.person({user("person@example.com"), *store.groups_of("person@example.com")})
    assert viewer.principals == {user("person@example.com"), *store.groups_of("person@example.com")}


def test_the_group_table_is_added_to_an_older_database(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    first = StateStore(url)
    first.close()
    _made_before_migrations(url)  # a database made before migrations (its start-up ran create_all)...
    first.group_members.drop(first.engine)  # ...and before group memberships existed
    first.close()
    again = StateStore(url)
    again.set_group_members("eng", "hr", ["a@example.com"])
    assert again.groups_of("a@example.com") == {"group:eng/hr"}
    again.close()
