"""The Slack seam, from the raw payload to the :class:`agent.models.Turn` the agent receives.

Signed Events API requests reach the real Bolt app over HTTP (``SlackHarness``); only the Slack Web API
is the stand-in (``users.info`` gives each user's e-mail, display name and zone). A recording agent
wraps the real one and keeps every turn, so the assertions are on what the agent was handed: the
requester's e-mail, the message id (the event's ``ts``), the message time (that ``ts`` as UTC), the
thread, the channel kind and the mentions resolved to e-mails. Then the promise the README makes:
"book a 30 min sync with <@U...> tomorrow at 3pm" ends in a preview whose attendee is that user's
e-mail, and the same message redelivered (same ``ts``, another ``event_id``) proposes the same key.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from agent.models import Reply, Turn
from app.jobs import IndexJobs
from app.settings import Settings
from app.wiring import build_agent
from bot.slack import render
from connectors.folder import FolderSource
from tests.standins.slack import BOT_USER_ID, TEAM_ID, SlackHarness
from state import StateStore
from state.store import sqlite_url

ALICE, BOB, CAROL = "UALICE01", "UBOB0002", "UCAROL03"
_ids = itertools.count(1)


class RecordingAgent:
    """The real agent, keeping each turn it is handed and the reply it gave."""

    def __init__(self, agent) -> None:
        self.agent = agent
        self.seen: list[tuple[Turn, Reply]] = []
        self._lock = threading.Lock()

    def answer(self, turn: Turn, progress=None) -> Reply:
        reply = self.agent.answer(turn, progress)
        with self._lock:
            self.seen.append((turn, reply))
        return reply

    def turns(self, text_part: str) -> list[tuple[Turn, Reply]]:
        with self._lock:
            return [(t, r) for t, r in self.seen if text_part in t.text]


@pytest.fixture(scope="module")
def seam(tmp_path_factory: pytest.TempPathFactory, wiki_index, session_wiki: Path):
    from app.actions import build_action_service
    from bot.slack.pending import slack_handlers

    data = tmp_path_factory.mktemp("slack-seam")
    store = StateStore(sqlite_url(data / "state.sqlite"))
    settings = Settings(chatops_data_dir=data)
    runtime = build_agent(settings, index=wiki_index)  # not closed: the index belongs to the session
    recorder = RecordingAgent(runtime.agent)
    runtime = dataclasses.replace(runtime, agent=recorder)
    h = SlackHarness(runtime, store, IndexJobs(runtime, store, [FolderSource(session_wiki)]))
    for user, tz in ((ALICE, "Europe/Paris"), (BOB, "America/New_York"), (CAROL, "Asia/Tokyo")):
        h.standin.add_user(user, tz=tz)
    service = build_action_service(settings, runtime.tools, store)
    h.bot.use_pending_actions(*slack_handlers(service))
    h.recorder = recorder  # type: ignore[attr-defined]
    h.service = service  # type: ignore[attr-defined]
    yield h
    h.close()
    store.close()


def channel(h: SlackHarness, kind: str) -> str:
    cid = f"{ {'channel': 'C', 'group': 'G', 'im': 'D', 'mpim': 'G'}[kind]}S{next(_ids):07d}"
    h.standin.add_conversation(cid, kind)
    return cid


def deliver(h: SlackHarness, event: dict, event_id: str | None = None) -> None:
    resp, _ = h.sender.event(event, event_id)
    assert resp.status_code == 200, resp.text


def wait_turn(h: SlackHarness, text_part: str, n: int = 1) -> list[tuple[Turn, Reply]]:
    got = h.standin.wait_for(lambda s: t if len(t := h.recorder.turns(text_part)) >= n else None, timeout=30)
    h.idle()
    return got


def test_a_mention_in_a_channel_reaches_the_agent_with_every_field(seam: SlackHarness) -> None:
    h = seam
    ch = channel(h, "channel")
    msg = h.standin.user_message(ch, ALICE, f"<@{BOT_USER_ID}> who owns the release checklist? ask <@{CAROL}> too")
    deliver(h, {"type": "app_mention", "user": ALICE, "text": msg["text"], "ts": msg["ts"], "channel": ch,
                "event_ts": msg["ts"], "team": TEAM_ID})
    [(turn, _)] = wait_turn(h, "release checklist")
    assert turn.platform == "slack" and turn.user_id == ALICE and turn.channel_id == ch
    assert turn.user_email == "ualice01@example.com"  # users.info with users:read.email
    assert turn.message_id == msg["ts"]
    assert turn.sent_at == datetime.fromtimestamp(float(msg["ts"]), tz=timezone.utc)
    assert turn.sent_at.tzinfo is not None
    assert turn.thread_id == msg["ts"]  # a top-level mention starts its own thread
    assert turn.channel_kind == "channel"
    assert turn.timezone == "Europe/Paris" and turn.locale == "en-US"
    # the bot's own mention is gone; Carol's is her e-mail; the structured list says who it was
    assert turn.text == "who owns the release checklist? ask ucarol03@example.com too"
    assert turn.mention_emails == {CAROL: "ucarol03@example.com"}


def test_a_dm_and_a_thread_reply_carry_their_kind_thread_and_resolved_history(seam: SlackHarness) -> None:
    h = seam
    dm = channel(h, "im")
    msg = h.standin.user_message(dm, BOB, "what is the on-call rotation?")
    deliver(h, {"type": "message", "user": BOB, "text": msg["text"], "ts": msg["ts"], "channel": dm,
                "event_ts": msg["ts"], "channel_type": "im"})
    [(turn, _)] = wait_turn(h, "on-call rotation")
    assert (turn.channel_kind, turn.thread_id, turn.message_id) == ("dm", msg["ts"], msg["ts"])
    assert turn.user_email == "ubob0002@example.com" and turn.timezone == "America/New_York"

    # a private channel's thread: an earlier message mentioning Carol is history with her e-mail
    grp = channel(h, "group")
    root = h.standin.user_message(grp, ALICE, f"<@{BOT_USER_ID}> planning the offsite with <@{CAROL}>")
    reply = h.standin.user_message(grp, ALICE, f"<@{BOT_USER_ID}> where is the travel policy?", root["ts"])
    deliver(h, {"type": "app_mention", "user": ALICE, "text": reply["text"], "ts": reply["ts"], "channel": grp,
                "event_ts": reply["ts"], "thread_ts": root["ts"], "channel_type": "group"})
    [(turn, _)] = wait_turn(h, "travel policy")
    assert turn.thread_id == root["ts"] and turn.message_id == reply["ts"]
    assert turn.channel_kind == "channel"  # Slack's "group" is a private channel
    assert [(m.text, m.author_id, m.from_requester) for m in turn.history] == [
        ("planning the offsite with ucarol03@example.com", ALICE, True)]


def test_a_meeting_with_a_mention_previews_the_mentioned_email_and_a_redelivery_keeps_the_key(
        seam: SlackHarness) -> None:
    h = seam
    ch = channel(h, "channel")
    text = f"<@{BOT_USER_ID}> book a 30 min sync with <@{BOB}> tomorrow at 3pm"
    msg = h.standin.user_message(ch, ALICE, text)
    event = {"type": "app_mention", "user": ALICE, "text": text, "ts": msg["ts"], "channel": ch,
             "event_ts": msg["ts"], "team": TEAM_ID}
    deliver(h, event, "EvSEAM00001")
    [(turn, first)] = wait_turn(h, "30 min sync")
    assert "ubob0002@example.com" in turn.text and "<@" not in turn.text
    assert first.pending_action is not None, first.text
    args = first.pending_action.args
    assert args["attendees"] == ["ubob0002@example.com"] and args["duration_minutes"] == 30
    # "tomorrow" counts from the message's time, in the requester's zone (users.info tz)
    sent = datetime.fromtimestamp(float(msg["ts"]), tz=ZoneInfo("Europe/Paris"))
    start = datetime.fromisoformat(args["start"]).astimezone(ZoneInfo("Europe/Paris"))
    assert (start.date(), start.hour, start.minute) == (sent.date() + timedelta(days=1), 15, 0)

    posted = h.standin.wait_for(lambda s: p if (p := [c for c in s.calls_to("chat.postMessage", channel=ch)
                                                       if c.ok and c.params.get("thread_ts") == msg["ts"]]) else None)
    blocks = json.dumps(posted[0].params["blocks"])
    assert "ubob0002@example.com" in blocks and render.PENDING_CONFIRM in blocks

    # Slack redelivers the same message under another event id: same ts, same proposal
    deliver(h, event, "EvSEAM00002")
    _, (again_turn, again) = wait_turn(h, "30 min sync", 2)
    assert again_turn.message_id == turn.message_id == msg["ts"]
    assert again.pending_action is not None
    assert again.pending_action.idempotency_key == first.pending_action.idempotency_key
    record = h.service.get(first.pending_action.idempotency_key)
    assert record.status == "pending" and record.args["attendees"] == ["ubob0002@example.com"]


def test_a_kb_command_turn_has_no_message_id_and_the_command_time(seam: SlackHarness) -> None:
    h = seam
    ch = channel(h, "channel")
    before = datetime.now(timezone.utc)
    resp = h.sender.command("what is the expense limit for hotels?", CAROL, ch, h.standin.response_url("seam-kb"))
    assert resp.status_code == 200
    [(turn, _)] = wait_turn(h, "expense limit")
    assert turn.message_id == "" and turn.thread_id == ""
    assert before <= turn.sent_at <= datetime.now(timezone.utc)
    assert turn.channel_kind == "channel" and turn.user_email == "ucarol03@example.com"
    assert turn.timezone == "Asia/Tokyo"
