"""The outbox's delivery (``app/outbox.py``), Slack's DM sender (``bot/slack/outbox.py``) and the scheduler's
outbox job (``bot/scheduler.py``), on a real SQLite state store and the Slack stand-in's Web API.

Covers: a due message becomes one DM (``chat.postMessage`` with ``channel=<user id>``) and later runs do not
send it again; messages not yet due wait; two deliverers running at once send each message once; Slack's
permanent errors fail a message, its retryable ones (server error, rate limit, no connection) retry it, and a
sender that hangs or breaks is retried too; messages for a platform without a sender stay pending with one
warning; the scheduler job delivers a due message on its own and survives a broken store; ``chatops reminders``
shows the caller's due terminal messages once and lists the rest.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from app.outbox import Outbox, deliver_due
from bot.scheduler import OUTBOX_INTERVAL_SECONDS, OUTBOX_JOB_ID, add_outbox_job, run_outbox, stop_scheduler
from bot.slack.client import RATE_LIMIT_RETRIES, build_web_client
from bot.slack.config import SlackConfig
from bot.slack.outbox import SlackDmSender
from state import StateStore
from state.store import MESSAGE_RETRY_MAX, sqlite_url

from tests.helpers import run_chatops
from tests.standins.slack import BOT_TOKEN, SlackStandin, manifest_scopes

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

ALICE = "UALICE01"
BOB = "UBOB0002"


@pytest.fixture
def standin():
    s = SlackStandin(BOT_TOKEN, scopes=manifest_scopes()).start()
    s.add_user(ALICE)
    s.add_user(BOB)
    yield s
    s.stop()


@pytest.fixture
def store(tmp_path: Path):
    s = StateStore(sqlite_url(tmp_path / "state.sqlite"))
    yield s
    s.close()


def _sender(standin: SlackStandin) -> SlackDmSender:
    return SlackDmSender(build_web_client(SlackConfig(bot_token=BOT_TOKEN, api_url=standin.api_url)))


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _schedule(store: StateStore, key: str, user: str = ALICE, at: datetime | None = None, text: str = "",
              platform: str = "slack") -> None:
    assert store.schedule_message(key, platform=platform, user_id=user, channel_id="C0TEAM01",
                                  at=at or _now() - timedelta(seconds=1), text=text or f"Reminder: {key}")


def _dms(standin: SlackStandin, user: str = ALICE) -> list[str]:
    return [c.params["text"] for c in standin.calls_to("chat.postMessage", channel=user) if c.ok]


def test_a_due_message_is_delivered_once_as_a_slack_dm(standin: SlackStandin, store: StateStore) -> None:
    _schedule(store, "rem-due", text="Reminder: send the release notes")
    _schedule(store, "rem-later", at=_now() + timedelta(hours=1))
    outbox = Outbox(store, {"slack": _sender(standin)})
    report = asyncio.run(outbox.deliver_due())
    assert report.delivered == ["rem-due"] and not (report.retrying or report.failed or report.lost)
    assert _dms(standin) == ["Reminder: send the release notes"]
    dm = standin.conversations["D" + ALICE[1:]]  # posting to a user id lands in the app's DM with them
    assert [m["text"] for m in dm.messages] == ["Reminder: send the release notes"]
    assert store.scheduled_message("rem-due").status == "delivered"  # type: ignore[union-attr]
    assert asyncio.run(outbox.deliver_due()).delivered == []  # delivered once
    assert asyncio.run(deliver_due(store, {"slack": _sender(standin)})).delivered == []
    assert _dms(standin) == ["Reminder: send the release notes"]
    assert store.scheduled_message("rem-later").status == "pending"  # type: ignore[union-attr]
    report = asyncio.run(outbox.deliver_due(now=_now() + timedelta(hours=1, seconds=1)))
    assert report.delivered == ["rem-later"] and len(_dms(standin)) == 2


def test_two_deliverers_at_once_send_each_message_once(standin: SlackStandin, store: StateStore) -> None:
    for i in range(12):
        _schedule(store, f"race-{i:02d}", user=(ALICE, BOB)[i % 2])

    async def both() -> list:
        a = Outbox(store, {"slack": _sender(standin)}, owner="replica-a")
        b = Outbox(store, {"slack": _sender(standin)}, owner="replica-b")
        return await asyncio.gather(a.deliver_due(), b.deliver_due())

    reports = asyncio.run(both())
    delivered = [k for r in reports for k in r.delivered]
    assert sorted(delivered) == [f"race-{i:02d}" for i in range(12)]
    sent = _dms(standin, ALICE) + _dms(standin, BOB)
    assert sorted(sent) == sorted(f"Reminder: race-{i:02d}" for i in range(12))  # each once


def test_slack_errors_fail_or_retry_the_message(standin: SlackStandin, store: StateStore) -> None:
    outbox = Outbox(store, {"slack": _sender(standin)})
    _schedule(store, "rem-nobody", user="UGONE999")  # not a user of the workspace: channel_not_found
    report = asyncio.run(outbox.deliver_due())
    gone = store.scheduled_message("rem-nobody")
    assert report.failed == ["rem-nobody"] and gone is not None
    assert gone.status == "failed" and "channel_not_found" in gone.error and gone.attempts == 1

    _schedule(store, "rem-flaky")
    standin.fail_next("chat.postMessage", "internal_error")
    report = asyncio.run(outbox.deliver_due())
    flaky = store.scheduled_message("rem-flaky")
    assert report.retrying == ["rem-flaky"] and flaky is not None
    assert (flaky.status, flaky.attempts) == ("pending", 1) and "internal_error" in flaky.error
    assert asyncio.run(outbox.deliver_due()).delivered == []  # not before the back-off
    standin.rate_limit_next("chat.postMessage", retry_after=0, count=RATE_LIMIT_RETRIES + 1)
    later = _now() + MESSAGE_RETRY_MAX + timedelta(seconds=1)
    report = asyncio.run(outbox.deliver_due(now=later))
    flaky = store.scheduled_message("rem-flaky")
    assert report.retrying == ["rem-flaky"] and flaky is not None and "ratelimited" in flaky.error
    report = asyncio.run(outbox.deliver_due(now=later + MESSAGE_RETRY_MAX))
    assert report.delivered == ["rem-flaky"] and _dms(standin) == ["Reminder: rem-flaky"]
    assert store.scheduled_message("rem-flaky").attempts == 3  # type: ignore[union-attr]


def test_no_connection_to_slack_is_retried(store: StateStore) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]  # nothing listens there once the socket is closed
    sender = SlackDmSender(build_web_client(SlackConfig(bot_token=BOT_TOKEN, api_url=f"http://127.0.0.1:{closed}/api/")))
    _schedule(store, "rem-offline")
    report = asyncio.run(Outbox(store, {"slack": sender}).deliver_due())
    msg = store.scheduled_message("rem-offline")
    assert report.retrying == ["rem-offline"] and msg is not None and msg.status == "pending"
    assert "cannot reach Slack" in msg.error


class _Hangs:
    async def send(self, user_id: str, channel_id: str, text: str) -> None:
        await asyncio.sleep(30)


class _Breaks:
    async def send(self, user_id: str, channel_id: str, text: str) -> None:
        raise RuntimeError("a bug in the sender")


def test_a_sender_that_hangs_or_breaks_is_retried_without_stopping_the_others(standin: SlackStandin,
                                                                               store: StateStore) -> None:
    _schedule(store, "rem-hang", platform="hangs")
    _schedule(store, "rem-bug", platform="breaks")
    _schedule(store, "rem-ok")
    outbox = Outbox(store, {"hangs": _Hangs(), "breaks": _Breaks(), "slack": _sender(standin)}, send_timeout=0.2)
    report = asyncio.run(outbox.deliver_due())
    assert sorted(report.retrying) == ["rem-bug", "rem-hang"] and report.delivered == ["rem-ok"]
    assert "no answer within 0.2 s" in store.scheduled_message("rem-hang").error  # type: ignore[union-attr]
    assert store.scheduled_message("rem-bug").error == "RuntimeError: a bug in the sender"  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="below the lease"):
        Outbox(store, {}, send_timeout=600)


def test_messages_for_a_platform_without_a_sender_wait_with_one_warning(standin: SlackStandin, store: StateStore,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    _schedule(store, "rem-teams", user="aad-alice", platform="teams")
    _schedule(store, "rem-cli", user="alice", platform="cli")
    _schedule(store, "rem-slack")
    outbox = Outbox(store, {"slack": _sender(standin)})
    with caplog.at_level(logging.WARNING, logger="app.outbox"):
        first = asyncio.run(outbox.deliver_due())
        second = asyncio.run(outbox.deliver_due())
    assert first.delivered == ["rem-slack"] and first.waiting == {"teams": 1, "cli": 1} == second.waiting
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2  # once per platform, not once per run
    assert any("for teams are due, but this process has no teams sender" in w for w in warnings)
    assert any("the CLI shows them" in w for w in warnings)
    for key in ("rem-teams", "rem-cli"):
        msg = store.scheduled_message(key)
        assert msg is not None and (msg.status, msg.attempts) == ("pending", 0)  # never claimed


def test_the_scheduler_job_delivers_a_due_message_on_its_own(standin: SlackStandin, store: StateStore) -> None:
    outbox = Outbox(store, {"slack": _sender(standin)})

    async def run() -> None:
        scheduler = AsyncIOScheduler(timezone=timezone.utc)
        scheduler.start()
        try:
            add_outbox_job(scheduler, outbox, interval_seconds=0.2)
            job = scheduler.get_job(OUTBOX_JOB_ID)
            assert job is not None and job.max_instances == 1 and job.coalesce is True
            _schedule(store, "rem-job", at=_now() + timedelta(seconds=0.5), text="Reminder: stand-up")
            for _ in range(100):
                if _dms(standin):
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.6)  # a few more runs: nothing sent twice
        finally:
            scheduler.shutdown(wait=False)

    asyncio.run(run())
    assert _dms(standin) == ["Reminder: stand-up"]
    assert store.scheduled_message("rem-job").status == "delivered"  # type: ignore[union-attr]

    default = AsyncIOScheduler(timezone=timezone.utc)
    add_outbox_job(default, outbox)
    assert default.get_job(OUTBOX_JOB_ID).trigger.interval == timedelta(seconds=OUTBOX_INTERVAL_SECONDS) \
        == timedelta(seconds=30)


class _Slow:
    """A sender that takes ``seconds`` to answer; ``sent`` lists what it finished sending."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.sent: list[str] = []

    async def send(self, user_id: str, channel_id: str, text: str) -> None:
        await asyncio.sleep(self.seconds)
        self.sent.append(text)


@pytest.mark.parametrize("drain_seconds, recorded", [(5.0, "delivered"), (0.05, "sending")])
def test_stopping_the_scheduler_lets_a_delivery_in_flight_record_its_outcome(store: StateStore, drain_seconds: float,
                                                                           recorded: str) -> None:
    """A stop while a message is being sent waits (up to ``drain_seconds``) for its outcome; without the wait
    the job is cancelled after the send and the message stays claimed, to be sent again after its lease."""
    slow = _Slow(0.5)
    outbox = Outbox(store, {"slow": slow})
    _schedule(store, "rem-slow", platform="slow")

    async def run() -> bool:
        scheduler = AsyncIOScheduler(timezone=timezone.utc)
        scheduler.start()
        add_outbox_job(scheduler, outbox, interval_seconds=60)
        for _ in range(100):  # the first run starts right away; wait until it has claimed the message
            msg = store.scheduled_message("rem-slow")
            if msg is not None and msg.status != "pending":
                break
            await asyncio.sleep(0.02)
        await stop_scheduler(scheduler, outbox, drain_seconds)
        return await outbox.drain(0)

    idle = asyncio.run(run())
    msg = store.scheduled_message("rem-slow")
    assert msg is not None and msg.status == recorded
    assert idle is (recorded == "delivered")


def test_the_outbox_job_survives_a_broken_store(store: StateStore, caplog: pytest.LogCaptureFixture) -> None:
    store.scheduled.drop(store.engine)  # every query of the outbox now fails
    with caplog.at_level(logging.ERROR, logger="bot.scheduler"):
        assert asyncio.run(run_outbox(Outbox(store, {}))) is None
    assert "delivering the scheduled messages failed; retrying at the next run" in caplog.text


def test_chatops_reminders_shows_due_ones_once_and_lists_the_rest(tmp_path: Path) -> None:
    from bot.cli_actions import cli_user

    data = tmp_path / "data"
    me = cli_user()
    s = StateStore(sqlite_url(data / "state.sqlite"))
    try:
        _schedule(s, "cli-due", user=me, platform="cli", text="Reminder: water the plants")
        _schedule(s, "cli-later", user=me, platform="console", at=datetime(2031, 1, 6, 8, 30, tzinfo=timezone.utc),
                  text="Reminder: renew the certificate")
        _schedule(s, "slack-mine", user=me, text="Reminder: a Slack one")  # not the terminal's to show
        _schedule(s, "cli-theirs", user="someone-else", platform="cli", text="Reminder: not yours")
    finally:
        s.close()
    first = run_chatops(["reminders"], data, tmp_path, DEFAULT_TIMEZONE="Europe/Paris")
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == [
        first.stdout.splitlines()[0], "Scheduled:",
        "  Mon 06 Jan 09:30 CET  Reminder: renew the certificate  (key cli-later)"]
    assert first.stdout.startswith("Due (") and first.stdout.splitlines()[0].endswith("): Reminder: water the plants")
    again = run_chatops(["reminders", "--json"], data, tmp_path)
    body = json.loads(again.stdout)
    assert body["user"] == me and body["due"] == []  # shown once
    assert [i["key"] for i in body["scheduled"]] == ["cli-later"] and body["scheduled"][0]["at"].startswith("2031-01-06T08:30")
    s = StateStore(sqlite_url(data / "state.sqlite"))
    try:
        assert s.scheduled_message("cli-due").status == "delivered"  # type: ignore[union-attr]
        assert s.scheduled_message("cli-theirs").status == "pending"  # type: ignore[union-attr]
        assert s.scheduled_message("slack-mine").status == "pending"  # type: ignore[union-attr]
    finally:
        s.close()
    nothing = run_chatops(["reminders"], tmp_path / "empty", tmp_path)
    assert nothing.returncode == 0 and nothing.stdout.strip() == f"No reminders scheduled for {me}."
