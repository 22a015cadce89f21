"""Retention and forgetting on a real SQLite file and a real PostgreSQL server (the ``url`` fixture of
``test_migrations.py``), through the store, the scheduler's job and the ``chatops`` subprocess.

- The purge: rows of known ages in every table it covers; what is older than its setting goes, what is
  newer stays (and each source's latest run, unsettled actions and messages, series), the counts per
  table are printed by ``chatops purge``, recorded as a run and shown by ``chatops status``.
- A retention setting of 0 is a settings error that says what to write.
- The scheduler's job runs daily at a fixed time and purges when it fires; a stop while it runs lets the
  purge finish and logs no traceback (``chatops serve`` runs it at
  start-up too: ``tests/test_slack_serve.py``).
- ``chatops forget --user ID``: asks for ``--yes``, then deletes that person's messages (others' stay,
  also an id that merely starts with theirs), turn log, feedback, actions and messages, and leaves the
  audit log with one random pseudonym where the id was.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import sqlalchemy as sa

from app.retention import RUN_SOURCE, Retention, RetentionPolicy
from bot.scheduler import RETENTION_JOB_ID, add_retention_job
from state import StateStore, TurnRecord
from tools.calendar.args import CalendarCreateArgs
from tools.calendar.local import LocalCalendar

from tests.helpers import run_chatops
from tests.test_migrations import url  # noqa: F401 - the fixture: a fresh SQLite file or PostgreSQL database

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

NOW = datetime.now(timezone.utc)


def _days(n: float) -> datetime:
    return NOW - timedelta(days=n)


def _set(store: StateStore, table: sa.Table, where, **values) -> None:
    with store.engine.begin() as conn:
        assert conn.execute(table.update().where(where).values(**values)).rowcount >= 1


def _seed_ages(store: StateStore) -> None:
    """Two rows per kind, one just past its retention (defaults: 30 / 365 / 365 days), one just within."""
    s = store
    for key, age in (("old", 31), ("new", 29)):
        s.append_history(f"teams:{key}", "hello", author="U1")
        _set(s, s.conversations, s.conversations.c.key == f"teams:{key}", updated_at=_days(age))
        s.record_turn(TurnRecord(f"t-{key}", "slack", "U1", "C1", "q", "knowledge", "answered", created_at=_days(age)))
    for trace, age in (("f-old", 366), ("f-new", 364)):
        s.add_feedback(trace, "slack", "U1", "helpful")
        _set(s, s.feedback, s.feedback.c.trace_id == trace, created_at=_days(age))
        s.remember_reply("teams", f"msg-{trace}", trace)
        _set(s, s.sent_replies, s.sent_replies.c.trace_id == trace, created_at=_days(age))
        s.audit("U1", "slack", trace)
        _set(s, s.audit_log, s.audit_log.c.action == trace, at=_days(age))
    # "i2": another replica's index; its latest (old) run of wiki stays beside i1's newer one.
    for index_id, source, ages in (("i1", "wiki", (400, 366, 10)), ("i1", "gone", (500,)), ("i2", "wiki", (380, 370))):
        for age in ages:
            run = s.start_run(source, index_id=index_id)
            s.finish_run(run, "ok", {"mode": "incremental"})
            _set(s, s.runs, s.runs.c.id == run, started_at=_days(age), finished_at=_days(age))
    for status, age in (("done", 366), ("failed", 366), ("done", 364), ("queued", 400)):
        job = s.enqueue_index_job("i1", "wiki", requested_by="slack:U1")
        if status != "queued":
            s.claim_index_job("i1", "w")
            s.finish_index_job(job, "w", status, [])
            _set(s, s.index_jobs, s.index_jobs.c.id == job, finished_at=_days(age))
    for key, status, age in (("p-done-old", "done", 366), ("p-done-new", "done", 364),
                             ("p-expired", "pending", 366), ("p-executing", "executing", 400)):
        s.create_pending(key, "calendar.create", {}, "U1", "slack")
        _set(s, s.pending, s.pending.c.key == key, status=status, updated_at=_days(age), created_at=_days(age),
             expires_at=_days(age))
    for key, status, age in (("m-delivered-old", "delivered", 366), ("m-failed-old", "failed", 366),
                             ("m-delivered-new", "delivered", 364), ("m-pending", "pending", 400)):
        s.schedule_message(key, platform="slack", user_id="U1", channel_id="", at=_days(age), text="reminder")
        _set(s, s.scheduled, s.scheduled.c.key == key, status=status, updated_at=_days(age))


def _keys(store: StateStore, table: sa.Table, column: str) -> set:
    with store.engine.connect() as conn:
        return set(conn.execute(sa.select(table.c[column])).scalars())


def test_the_purge_deletes_what_is_older_keeps_what_is_newer_and_records_the_counts(url: str,  # noqa: F811
                                                                                    tmp_path: Path) -> None:
    store = StateStore(url)
    _seed_ages(store)
    cal = LocalCalendar(url, tmp_path / "ics")
    for key in ("ev-old", "ev-new", "ev-series"):
        start = (NOW + timedelta(days=2)).replace(hour=9, minute=0, second=0, microsecond=0)
        cal.create(CalendarCreateArgs(title=key, start=start, end=start + timedelta(minutes=30),
                                      recurrence="FREQ=DAILY" if key == "ev-series" else None), event_id=key)
    for key, age in (("ev-old", 366), ("ev-new", 364), ("ev-series", 400)):
        _set(store, cal.table, cal.table.c.id == key, start=_days(age), end=_days(age) + timedelta(minutes=30))
    store.close()

    proc = run_chatops(["purge", "--json"], tmp_path / "d", cwd=tmp_path, DATABASE_URL=url,
                       CALENDAR_ICS_DIR=str(tmp_path / "ics"))
    assert proc.returncode == 0, proc.stderr
    counts = json.loads(proc.stdout)["purged"]
    assert counts == {"conversations": 1, "turn_log": 1, "feedback": 1, "sent_replies": 1, "audit_log": 1, "sync_runs": 3,
                      "pending_actions": 2, "scheduled_messages": 2, "index_jobs": 2, "conversation_references": 0,
                      "calendar_events": 1}

    store = StateStore(url)
    try:
        assert _keys(store, store.conversations, "key") == {"teams:new"}
        assert _keys(store, store.turn_log, "trace_id") == {"t-new"}
        assert _keys(store, store.feedback, "trace_id") == {"f-new"}
        assert _keys(store, store.sent_replies, "trace_id") == {"f-new"}
        assert _keys(store, store.audit_log, "action") == {"f-new"}
        assert [r.source for r in store.last_runs("wiki", limit=10, index_id="i1")] == ["wiki"]  # the 10-day-old one
        assert len(store.last_runs("gone")) == 1  # a source's latest run stays, however old
        assert len(store.last_runs("wiki", index_id="i2")) == 1  # so does each index's (another replica's)
        assert _keys(store, store.index_jobs, "status") == {"done", "queued"}  # finished within, or still queued
        assert _keys(store, store.pending, "key") == {"p-done-new", "p-executing"}
        assert _keys(store, store.scheduled, "key") == {"m-delivered-new", "m-pending"}
        assert _keys(store, cal.table, "id") == {"ev-new", "ev-series"}  # a series' stored end is its first
        assert sorted(p.name for p in (tmp_path / "ics").iterdir()) == ["ev-new.ics", "ev-series.ics"]
        run = store.last_runs(RUN_SOURCE)[0]
        assert run.status == "ok" and run.summary["mode"] == "retention" and run.summary["purged"] == counts
    finally:
        cal.close()
        store.close()
    status = run_chatops(["status"], tmp_path / "d", cwd=tmp_path, DATABASE_URL=url)
    assert status.returncode == 0, status.stderr
    assert "ok: deleted 1 conversations, 1 turn_log, 1 feedback, 1 sent_replies, 1 audit_log, 3 sync_runs" in status.stdout

    text = run_chatops(["purge"], tmp_path / "d", cwd=tmp_path, DATABASE_URL=url)  # nothing left to purge
    assert text.returncode == 0 and "  conversations: 0" in text.stdout


def test_a_retention_of_zero_days_is_a_settings_error_that_says_what_to_write(tmp_path: Path) -> None:
    proc = run_chatops(["purge"], tmp_path / "d", cwd=tmp_path, RETENTION_DAYS_AUDIT="0")
    assert proc.returncode == 2
    assert "RETENTION_DAYS_AUDIT must be a whole number of days, 1 or more (e.g. 365)" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_scheduler_purges_daily_at_a_fixed_time(tmp_path: Path) -> None:
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    store = StateStore(f"sqlite:///{tmp_path / 'state.sqlite'}")
    store.append_history("teams:old", "hi", author="U1")
    _set(store, store.conversations, store.conversations.c.key == "teams:old", updated_at=_days(31))

    async def schedule():
        scheduler = AsyncIOScheduler(timezone=timezone.utc)
        add_retention_job(scheduler, Retention(store, RetentionPolicy()), at_start=False)
        scheduler.start(paused=True)
        job = scheduler.get_job(RETENTION_JOB_ID)
        scheduler.shutdown(wait=False)
        return job

    job = asyncio.run(schedule())
    try:
        nxt = job.next_run_time
        assert (nxt.hour, nxt.minute) == (3, 17) and timedelta(0) < nxt - datetime.now(timezone.utc) <= timedelta(days=1)
        assert job.max_instances == 1 and job.coalesce
        report = asyncio.run(job.func(*job.args))  # what the scheduler runs when it fires
        assert report.status == "ok" and report.purged["conversations"] == 1
        assert store.get_history("teams:old") == []
    finally:
        store.close()


def test_forget_deletes_one_persons_records_and_leaves_a_pseudonym_in_the_audit(url: str,  # noqa: F811
                                                                               tmp_path: Path) -> None:
    s = StateStore(url)
    for author, text in (("U1", "my salary question"), ("U2", "an answer"), ("U1", "thanks")):
        s.append_history("teams:shared", text, author=author)
    s.append_history("teams:mine", "only me", author="U1")
    s.append_history("teams:other", "someone else", author="U10")  # an id that starts with U1's
    for trace, uid in (("t1", "U1"), ("t2", "U1"), ("t3", "U2")):
        s.record_turn(TurnRecord(trace, "slack", uid, "C1", "q", "knowledge", "answered"))
        s.add_feedback(trace, "slack", uid, "not_helpful")
    s.create_pending("p1", "calendar.create", {}, "U1", "slack")
    s.create_pending("p2", "calendar.create", {}, "U2", "slack")
    s.schedule_message("m1", platform="slack", user_id="U1", channel_id="", at=NOW, text="reminder")
    s.schedule_message("m2", platform="slack", user_id="U2", channel_id="", at=NOW, text="reminder")
    s.audit("U1", "slack", "calendar.create", target="p1")
    s.audit("U2", "slack", "admin.view", target="U1", detail={"user": "U1", "other": "U10"})
    s.audit("U10", "slack", "calendar.create", target="p9")
    jobs = [s.enqueue_index_job("i1", "wiki", requested_by=who) for who in ("slack:U1", "teams:U10")]
    s.close()

    proc = run_chatops(["forget", "--user", "U1"], tmp_path / "d", cwd=tmp_path, DATABASE_URL=url)
    assert proc.returncode == 2 and "run again with --yes" in proc.stderr
    proc = run_chatops(["forget", "--user", "U1", "--yes", "--json"], tmp_path / "d", cwd=tmp_path, DATABASE_URL=url)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["deleted"] == {"conversation_messages": 3, "turn_log": 2, "feedback": 2, "pending_actions": 1,
                              "scheduled_messages": 1, "conversation_references": 0}
    assert out["audit_pseudonymised"] == 2 and out["pseudonym"].startswith("forgotten-")

    s = StateStore(url)
    try:
        alias = out["pseudonym"]
        assert s.get_history_entries("teams:shared") == [type(s.get_history_entries("teams:shared")[0])("an answer", "U2")]
        assert s.get_history("teams:mine") == [] and s.get_history("teams:other") == ["someone else"]
        assert [(r.trace_id, r.user_id) for r in s.turn_records()] == [("t3", "U2")]
        assert [f["user_id"] for f in s.feedback_for("t3")] == ["U2"] and s.feedback_for("t1") == []
        assert s.get_pending("p1") is None and s.get_pending("p2") is not None
        assert s.scheduled_message("m1") is None and s.scheduled_message("m2") is not None
        assert [s.index_job(j).requested_by for j in jobs] == [f"slack:{alias}", "teams:U10"]  # the job stays
        audit = {e.action: e for e in s.audit_entries()}
        assert audit["calendar.create"].actor in {alias, "U10"}
        assert [e.actor for e in s.audit_entries(action="calendar.create")] == ["U10", alias]
        assert audit["admin.view"].target == alias and audit["admin.view"].detail == {"user": alias, "other": "U10"}
        assert audit["forget_user"].target == alias and audit["forget_user"].detail["deleted"] == out["deleted"]
        # "U1" (as a whole id) is nowhere in the database any more.
        with s.engine.connect() as conn:
            for table in s.metadata.sorted_tables:
                for row in conn.execute(sa.select(table)):
                    for value in row:
                        assert not (isinstance(value, str) and ('"U1"' in value or value == "U1")), (table.name, row)
    finally:
        s.close()


def test_a_stop_during_the_purge_lets_it_finish_and_raises_nothing(tmp_path: Path) -> None:
    import threading

    from bot.scheduler import run_retention

    store = StateStore(f"sqlite:///{tmp_path / 'state.sqlite'}")
    started, release = threading.Event(), threading.Event()

    def calendar_that_waits(before: datetime) -> int:
        started.set()
        release.wait(30)
        return 0

    async def stop_midway():
        task = asyncio.create_task(run_retention(Retention(store, RetentionPolicy(), calendar_that_waits)))
        await asyncio.to_thread(started.wait, 30)
        task.cancel()  # what the scheduler's shutdown does to a running job
        release.set()
        return await task

    try:
        assert asyncio.run(stop_midway()) is None  # no CancelledError for APScheduler to log as a traceback
        [run] = store.last_runs(RUN_SOURCE)
        assert run.status == "ok" and run.summary["purged"]["calendar_events"] == 0  # the thread finished it
    finally:
        store.close()
