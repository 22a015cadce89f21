"""The Teams seam, from the raw activity to the :class:`agent.models.Turn` the agent receives.

Activities are POSTed to ``/api/messages`` through the real Bot Framework ``CloudAdapter`` behind the real
aiohttp server; the Bot Connector (replies and the roster, ``GET .../members/{id}``) is the stand-in.
A recording agent wraps the real one. Asserted on the turn: the requester's e-mail (from the roster), the
message id (the activity id), the message time (the activity's ``timestamp``), the thread, the channel
kind and the mentions (``<at>Name</at>`` resolved to the roster's e-mail, else ``@Name``); and that a
meeting request mentioning someone previews that person's e-mail, with "tomorrow" counted from the
activity's time rather than the server's clock.
"""

from __future__ import annotations

import dataclasses
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import httpx
import pytest

from agent.models import Reply, Turn
from app.actions import build_action_service
from app.settings import Settings
from app.wiring import build_agent
from bot.server import ServerThread, create_app
from bot.teams.adapter import TeamsAuthConfig, TeamsWebAdapter
from bot.teams.bot import TeamsBot
from state import StateStore
from tests.standins.teams import ConnectorStandIn

BOT = {"id": "28:bot-app-id", "name": "chatops"}
ADA = {"id": "29:ada", "name": "Ada Lovelace", "aadObjectId": "aad-ada"}
BOB = {"id": "29:bob", "name": "Bob Jones"}
EVE = {"id": "29:eve", "name": "Eve Unlisted"}
CHANNEL = {"isGroup": True, "conversationType": "channel", "tenantId": "t1",
           "id": "19:general@thread.tacv2;messageid=1700000000000"}


class RecordingAgent:
    """The real agent, keeping each turn it is handed and its reply."""

    def __init__(self, agent) -> None:
        self.agent = agent
        self.seen: list[tuple[Turn, Reply]] = []
        self._lock = threading.Lock()

    def answer(self, turn: Turn) -> Reply:
        reply = self.agent.answer(turn)
        with self._lock:
            self.seen.append((turn, reply))
        return reply


@pytest.fixture
def teams(tmp_path: Path, wiki_index):
    settings = Settings(chatops_data_dir=tmp_path / "data")
    rt = build_agent(settings, index=wiki_index)
    recorder = RecordingAgent(rt.agent)
    rt = dataclasses.replace(rt, agent=recorder)
    store = StateStore(f"sqlite:///{tmp_path / 'state.sqlite'}")
    actions = build_action_service(settings, rt.tools, store)
    bot = TeamsBot(rt.agent, store, actions=actions)
    server = ServerThread(lambda: create_app([TeamsWebAdapter(bot, TeamsAuthConfig(), allow_unauthenticated=True)]))
    with ConnectorStandIn() as connector:
        connector.members = {ADA["id"]: {"name": ADA["name"], "aadObjectId": ADA["aadObjectId"],
                                         "email": "ada@example.com", "userPrincipalName": "ada@corp.example"},
                             BOB["id"]: {"name": BOB["name"], "email": "bob@example.com"}}
        server.start()
        with httpx.Client(base_url=server.url, timeout=30) as http:
            yield type("T", (), {"http": http, "connector": connector, "recorder": recorder, "store": store})
        server.stop()
    store.close()


def activity(t, text: str, *, activity_id: str, sent: datetime, conversation: dict, mentions: list[dict]) -> dict:
    return {
        "type": "message", "id": activity_id, "timestamp": sent.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
        "serviceUrl": t.connector.url, "channelId": "msteams", "from": ADA, "conversation": conversation,
        "recipient": BOT, "text": text, "textFormat": "plain", "locale": "en-GB", "localTimezone": "Europe/Berlin",
        "channelData": {"tenant": {"id": "t1"}},
        "entities": [{"type": "mention", "mentioned": m, "text": f"<at>{m['name']}</at>"} for m in mentions],
    }


def test_a_channel_message_reaches_the_agent_with_every_field(teams) -> None:
    sent = datetime(2026, 3, 2, 9, 30, tzinfo=timezone.utc)
    act = activity(teams, "<at>chatops</at> how do I declare an incident? cc <at>Bob Jones</at> <at>Eve Unlisted</at>",
                   activity_id="1700000000123", sent=sent, conversation=CHANNEL, mentions=[BOT, BOB, EVE])
    assert teams.http.post("/api/messages", json=act).status_code in (200, 201)
    [(turn, _)] = teams.recorder.seen
    assert turn.platform == "teams" and turn.user_id == "aad-ada"
    assert turn.user_email == "ada@example.com"  # the roster's e-mail, not the userPrincipalName
    assert turn.message_id == "1700000000123"
    assert turn.sent_at == sent
    assert turn.thread_id == CHANNEL["id"] and turn.channel_id == CHANNEL["id"]
    assert turn.channel_kind == "channel"
    assert turn.locale == "en-GB" and turn.timezone == "Europe/Berlin"
    # the bot's mention is gone, Bob's is his e-mail, Eve (not in the roster) keeps her name
    assert turn.text == "how do I declare an incident? cc bob@example.com @Eve Unlisted"
    assert turn.mention_emails == {BOB["id"]: "bob@example.com"}
    assert {c.activity_id for c in teams.connector.lookups} == {ADA["id"], BOB["id"], EVE["id"]}


def test_a_meeting_request_mentioning_someone_previews_their_email_from_the_message_time(teams) -> None:
    # a message time days away from the server's clock: "tomorrow" must count from the message
    sent = (datetime.now(timezone.utc) + timedelta(days=9)).replace(hour=8, minute=0, second=0, microsecond=0)
    personal = {"conversationType": "personal", "tenantId": "t1", "id": "a:personal-ada"}
    act = activity(teams, "book a 30 min sync with <at>Bob Jones</at> tomorrow at 3pm", activity_id="act-42",
                   sent=sent, conversation=personal, mentions=[BOB])
    assert teams.http.post("/api/messages", json=act).status_code in (200, 201)
    [(turn, reply)] = teams.recorder.seen
    assert turn.channel_kind == "dm" and turn.message_id == "act-42" and turn.sent_at == sent
    assert reply.pending_action is not None, reply.text
    args = reply.pending_action.args
    assert args["attendees"] == ["bob@example.com"]
    start = datetime.fromisoformat(args["start"]).astimezone(ZoneInfo("Europe/Berlin"))
    expected_day = sent.astimezone(ZoneInfo("Europe/Berlin")).date() + timedelta(days=1)
    assert (start.date(), start.hour, start.minute) == (expected_day, 15, 0)
    card = [c for c in teams.connector.messages() if c.body.get("attachments")][-1]
    assert "bob@example.com" in str(card.body["attachments"])
    # the key is the activity's: a second activity with the same words is another request
    act2 = activity(teams, "book a 30 min sync with <at>Bob Jones</at> tomorrow at 3pm", activity_id="act-43",
                    sent=sent, conversation=personal, mentions=[BOB])
    teams.http.post("/api/messages", json=act2)
    keys = [r.pending_action.idempotency_key for _, r in teams.recorder.seen]
    assert len(keys) == 2 and keys[0] != keys[1]
