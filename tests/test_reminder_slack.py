"""``reminder.create`` on Slack end to end: the real Bolt app behind ``bot.server.create_app`` over signed
HTTP (``tests/standins/slack/``), the real agent over the session index, the real SQLite state store,
the action service wired as ``chatops serve`` wires it, with an in-memory outbox.

A mention asking for a reminder gets the generic preview (Reminder; When / What) with Confirm /
Cancel; someone else's click is refused privately; the requester's click schedules the direct message
once and replaces the preview; a second click schedules nothing new; a preview confirmed after its
expiry says so and schedules nothing.

Requests read the way people mean them, in the requester's zone (Carol's Slack profile: Auckland, a
day ahead of UTC at times), at a message time the test chooses (the event's ``ts``): the reminder's
object ("send the weekly report") is not its schedule, a true repeat ("every monday") still is;
"the 14th", "end of day Friday" and "in two hours" (across Auckland's change of clocks) resolve there.
"""

from __future__ import annotations

import itertools
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo
from typing import Any

import pytest

from app.actions import ActionService
from app.jobs import IndexJobs
from app.settings import Settings
from app.wiring import build_agent
from bot.slack import render
from bot.slack.pending import slack_handlers
from connectors.folder import FolderSource
from tests.memory_outbox import MemoryOutbox
from tests.standins.slack import BOT_USER_ID, TEAM_ID, Call, SlackHarness
from state import StateStore
from state.store import sqlite_url

ALICE, BOB, CAROL = "UALICE01", "UBOB0002", "UCAROL03"
AUCKLAND = ZoneInfo("Pacific/Auckland")
_ids = itertools.count(1)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory):
    s = StateStore(sqlite_url(tmp_path_factory.mktemp("reminder-slack-state") / "state.sqlite"))
    yield s
    s.close()


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory, wiki_index, session_wiki: Path, store: StateStore):
    settings = Settings(chatops_data_dir=tmp_path_factory.mktemp("reminder-slack-data"))
    runtime = build_agent(settings, index=wiki_index)  # not closed: the index belongs to the session
    h = SlackHarness(runtime, store, IndexJobs(runtime, store, [FolderSource(session_wiki)]))
    for user in (ALICE, BOB):
        h.standin.add_user(user, tz="Europe/Berlin")
    h.standin.add_user(CAROL, tz="Pacific/Auckland")
    yield h
    h.close()


@pytest.fixture
def wired(harness: SlackHarness, store: StateStore):
    """The action service as ``chatops serve`` wires it, with an in-memory outbox and a clock tests can move."""
    outbox, shift = MemoryOutbox(), [timedelta(0)]
    service = ActionService(store, harness.bot.runtime.tools, outbox=outbox,
                            clock=lambda: datetime.now(timezone.utc) + shift[0])
    harness.bot.use_pending_actions(*slack_handlers(service, default_timezone="Europe/Berlin"))
    return service, outbox, shift


def new_channel(h: SlackHarness) -> str:
    cid = f"CR{next(_ids):08d}"
    h.standin.add_conversation(cid, "channel", True)
    return cid


def mention(h: SlackHarness, channel: str, text: str, user: str = ALICE, sent: datetime | None = None
            ) -> dict[str, Any]:
    ts = f"{sent.timestamp():.6f}" if sent else None  # the message time the bot reads requests against
    msg = h.standin.user_message(channel, user, f"<@{BOT_USER_ID}> {text}", None, ts=ts)
    resp, _ = h.sender.event({"type": "app_mention", "user": user, "text": msg["text"], "ts": msg["ts"],
                              "channel": channel, "event_ts": msg["ts"], "team": TEAM_ID})
    assert resp.status_code == 200
    return msg


def preview_post(h: SlackHarness, channel: str, ts: str) -> Call:
    return h.standin.wait_for(lambda s: next((c for c in s.calls_to("chat.postMessage", channel=channel)
                                              if c.ok and c.params.get("thread_ts") == ts), None))


def confirm_button(blocks: list[dict]) -> dict:
    return next(e for b in blocks if b["type"] == "actions" for e in b["elements"]
                if e["action_id"].startswith(render.PENDING_CONFIRM))


def click(h: SlackHarness, who: str, button: dict, channel: str, post: Call, rkey: str) -> Call:
    message = {"type": "message", "ts": post.result["ts"], "text": post.params["text"], "blocks": post.params["blocks"]}
    resp = h.sender.click(who, button, h.standin.response_url(rkey), channel_id=channel, message=message)
    assert resp.status_code == 200 and resp.elapsed.total_seconds() < 3
    return h.standin.wait_for(lambda s: next((c for c in s.calls_to("response_url") if c.key == rkey), None))


def test_a_reminder_is_previewed_and_scheduled_once_by_its_requester(harness: SlackHarness, wired) -> None:
    service, outbox, _ = wired
    h = harness
    ch = new_channel(h)
    msg = mention(h, ch, "remind me to send the report tomorrow at 9")
    post = preview_post(h, ch, msg["ts"])
    shown = json.dumps(post.params["blocks"], ensure_ascii=False)
    assert "I can remind you:" in shown and "*Reminder*" in shown and "*What:* send the report" in shown
    assert "*When:* " in shown and ", 09:00 (Europe/Berlin)" in shown
    button = confirm_button(post.params["blocks"])
    key = button["value"]
    rec = service.get(key)
    assert rec.tool == "reminder.create" and rec.requester == ALICE and rec.status == "pending"

    bob = click(h, BOB, button, ch, post, "rem-bob")
    assert bob.params["response_type"] == "ephemeral" and bob.params.get("replace_original") is False
    assert outbox.messages == {}
    first = click(h, ALICE, button, ch, post, "rem-1")
    assert first.params["replace_original"] is True and render.PENDING_CONFIRM not in json.dumps(first.params)
    assert "Reminder set" in json.dumps(first.params["blocks"]) and first.params["text"].startswith("Reminder set")
    second = click(h, ALICE, button, ch, post, "rem-2")
    assert second.params["replace_original"] is True and "already scheduled" in second.params["text"]
    assert service.get(key).status == "done"
    assert list(outbox.messages) == [key]
    sent = outbox.messages[key]
    assert (sent["platform"], sent["user_id"], sent["channel_id"]) == ("slack", ALICE, ch)
    assert sent["text"] == "Reminder: send the report" and sent["at"] == datetime.fromisoformat(rec.args["at"])
    audit = [e for e in service.store.audit_entries(action="reminder.create") if e.target == key]
    assert sorted(e.outcome for e in audit) == ["denied", "ok"]


def test_an_expired_reminder_preview_schedules_nothing(harness: SlackHarness, wired) -> None:
    service, outbox, shift = wired
    h = harness
    ch = new_channel(h)
    msg = mention(h, ch, "remind me in 2 hours to call Bob")
    post = preview_post(h, ch, msg["ts"])
    button = confirm_button(post.params["blocks"])
    shift[0] = timedelta(hours=1, minutes=1)  # past the preview's one-hour expiry
    out = click(h, ALICE, button, ch, post, "rem-expired")
    assert out.params["replace_original"] is True
    assert "Preview expired, nothing was scheduled" in json.dumps(out.params["blocks"])
    assert service.get(button["value"]).status == "expired" and outbox.messages == {}


def test_a_confirmed_reminder_reaches_the_requester_as_a_dm_at_its_time(harness: SlackHarness, store: StateStore) -> None:
    """End to end on the real pieces: the service's outbox is the state store itself (as ``chatops serve``
    wires it), and the outbox job's delivery posts the due message to the requester's DM through the real
    Slack sender, once; before its time nothing is sent."""
    import asyncio

    from app.outbox import Outbox
    from bot.slack.config import SlackConfig
    from bot.slack.client import build_web_client
    from bot.slack.outbox import SlackDmSender
    from tests.standins.slack import BOT_TOKEN

    h = harness
    service = ActionService(store, h.bot.runtime.tools)
    h.bot.use_pending_actions(*slack_handlers(service, default_timezone="Europe/Berlin"))
    ch = new_channel(h)
    msg = mention(h, ch, "remind me in 2 hours to water the office plants")
    post = preview_post(h, ch, msg["ts"])
    button = confirm_button(post.params["blocks"])
    click(h, ALICE, button, ch, post, "rem-e2e")
    key = button["value"]
    row = store.scheduled_message(key)
    assert row is not None and row.status == "pending" and row.user_id == ALICE and row.platform == "slack"

    sender = SlackDmSender(build_web_client(SlackConfig(bot_token=BOT_TOKEN, api_url=h.standin.api_url)))
    outbox = Outbox(store, {"slack": sender})
    dms = lambda: [c.params["text"] for c in h.standin.calls_to("chat.postMessage", channel=ALICE) if c.ok]  # noqa: E731
    assert asyncio.run(outbox.deliver_due()).delivered == [] and dms() == []  # not due yet
    later = row.at + timedelta(seconds=1)
    assert asyncio.run(outbox.deliver_due(now=later)).delivered == [key]
    assert asyncio.run(outbox.deliver_due(now=later)).delivered == []
    assert dms() == ["Reminder: water the office plants"]
    assert store.scheduled_message(key).status == "delivered"  # type: ignore[union-attr]


# -- requests read the way people mean them, in the requester's zone -------------------------------------
#: Thursday 14 March 2030, 10:00 in Auckland (NZDT, UTC+13): still Wednesday the 13th in UTC.
THU_14_AKL = datetime(2030, 3, 14, 10, 0, tzinfo=AUCKLAND)


@pytest.mark.parametrize("text, sent, what, at", [
    # the object's adjective is not a schedule: one reminder, at 09:00 tomorrow in Carol's zone
    ("remind me tomorrow at 9am to send the weekly report", THU_14_AKL, "send the weekly report",
     "2030-03-15T09:00:00+13:00"),
    ("remind me about the daily standup notes tomorrow at 9", THU_14_AKL, "the daily standup notes",
     "2030-03-15T09:00:00+13:00"),
    # the 14th at 9 has passed in Auckland (not yet in UTC): next month's, after the clocks went back
    ("remind me on the 14th at 9am to renew my badge", THU_14_AKL, "renew my badge", "2030-04-14T09:00:00+12:00"),
    ("remind me end of day Friday to submit the timesheet", THU_14_AKL, "submit the timesheet",
     "2030-03-15T17:00:00+13:00"),
    # 01:30 NZDT on 7 April 2030; at 03:00 the clocks go back to 02:00 NZST: two hours later is 02:30 NZST
    ("remind me in two hours to call Bob", datetime(2030, 4, 7, 1, 30, tzinfo=AUCKLAND), "call Bob",
     "2030-04-07T02:30:00+12:00"),
])
def test_a_reminder_is_read_in_the_requesters_zone(harness: SlackHarness, wired, text: str, sent: datetime,
                                                  what: str, at: str) -> None:
    service, outbox, _ = wired
    h = harness
    ch = new_channel(h)
    msg = mention(h, ch, text, user=CAROL, sent=sent)
    post = preview_post(h, ch, msg["ts"])
    shown = json.dumps(post.params["blocks"], ensure_ascii=False)
    assert "only set one-off reminders" not in shown and f"*What:* {what}" in shown, shown
    when = datetime.fromisoformat(at)
    assert f"{when:%a %d %b %Y, %H:%M} (Pacific/Auckland)" in shown
    rec = service.get(confirm_button(post.params["blocks"])["value"])
    assert rec.tool == "reminder.create" and rec.requester == CAROL
    assert rec.args["at"] == at and rec.args["timezone"] == "Pacific/Auckland" and rec.args["text"] == what
    assert outbox.messages == {}


@pytest.mark.parametrize("text, words", [
    ("remind me every monday to send the weekly report", "every monday"),
    ("remind me to send the report weekly", "weekly"),
])
def test_a_repeating_reminder_is_still_refused(harness: SlackHarness, wired, text: str, words: str) -> None:
    service, outbox, _ = wired
    h = harness
    ch = new_channel(h)
    msg = mention(h, ch, text, user=CAROL, sent=THU_14_AKL)
    reply = h.standin.wait_for(lambda st: next((c for m in ("chat.postMessage", "chat.stream")
                                                for c in st.calls_to(m, channel=ch)
                                                if c.ok and c.params.get("thread_ts") == msg["ts"]), None))
    said = json.dumps([reply.params.get("text"), reply.params.get("blocks")], ensure_ascii=False)
    assert "only set one-off reminders" in said and f"\u201c{words}\u201d" in said, said
    assert render.PENDING_CONFIRM not in said  # no Confirm button
    assert outbox.messages == {}
