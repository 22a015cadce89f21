"""Teams reminders: the outbox's Teams sender (``bot/teams/outbox.py``) with the real Bot Framework
``CloudAdapter`` behind the real aiohttp server, and a stand-in Bot Connector on 127.0.0.1.

Activities are POSTed to ``/api/messages`` as Teams sends them; the outbox runs on the server's event
loop with the adapter the server uses, as in ``chatops serve``. Covers: a personal-chat message keeps the
chat's conversation reference (ids and the service URL only; a channel message keeps none; an unchanged
one is not rewritten); a reminder booked in Teams (proposed, confirmed with the card's button) is
delivered at its time as a message POSTed into the user's personal chat, with the AI label, once; a
user who never messaged the bot gets ``failed`` with a reason saying so, without any call; a connector
503 leaves the message pending for a retry that then delivers it, a 403 fails it; ``chatops forget
--user`` removes the reference, and the retention purge removes an old one unless a message to its user
is still waiting; ``chatops serve`` with Teams delivers a due Teams reminder on its own.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from agent.models import PendingAction, Turn
from app.actions import build_action_service
from app.outbox import Outbox
from app.settings import Settings
from app.wiring import build_agent
from bot.server import ServerThread, create_app
from bot.teams.adapter import TeamsAuthConfig, TeamsWebAdapter
from bot.teams.bot import TeamsBot
from bot.teams.outbox import NO_REFERENCE, TeamsSender
from tests.helpers import WIKI, public_viewer, run_chatops, wait_for
from state import StateStore
from state.retention import Cutoffs, purge
from tests.standins.teams import ConnectorStandIn
from tests.test_teams import BOT, CHANNEL, USER, message

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

NOBODY = "aad-never-wrote"


@pytest.fixture
def teams(tmp_path: Path, wiki_index):
    """A running server with the Teams adapter (unauthenticated), the stand-in connector, and an outbox
    with the Teams sender on the adapter the server uses."""
    settings = Settings(chatops_data_dir=tmp_path / "data")
    rt = build_agent(settings, index=wiki_index)
    url = f"sqlite:///{tmp_path / 'state.sqlite'}"
    store = StateStore(url)
    actions = build_action_service(settings, rt.tools, store)
    web = TeamsWebAdapter(TeamsBot(rt.agent, store, actions=actions), TeamsAuthConfig(), allow_unauthenticated=True)
    server = ServerThread(lambda: create_app([web]))
    outbox = Outbox(store, {"teams": TeamsSender(web.adapter, store)})
    with ConnectorStandIn() as connector:
        server.start()

        def deliver(now: datetime):
            return asyncio.run_coroutine_threadsafe(outbox.deliver_due(now), server.loop).result(60)

        with httpx.Client(base_url=server.url, timeout=30) as http:
            yield type("T", (), {"http": http, "connector": connector, "store": store, "actions": actions,
                                 "deliver": staticmethod(deliver), "url": url, "tmp": tmp_path})
        server.stop()
    store.close()


def _post(t, activity: dict) -> None:
    r = t.http.post("/api/messages", json=activity)
    assert r.status_code in (200, 201), r.text


def _schedule(t, key: str, user: str, at: datetime, text: str = "Reminder: send the report") -> None:
    """As the reminder tool schedules (``ctx.platform``, ``ctx.user_id``, the conversation it came from)."""
    assert t.store.schedule_message(key, platform="teams", user_id=user, channel_id=CHANNEL["id"], at=at, text=text)


def _now() -> datetime:
    return datetime.now(timezone.utc)


def test_a_personal_message_keeps_the_chats_reference_with_ids_only(teams) -> None:
    _post(teams, message(teams.connector.url, "help", activity_id="p1"))
    ref = teams.store.conversation_reference("teams", USER)
    assert ref == {"serviceUrl": teams.connector.url, "channelId": "msteams",
                   "conversation": {"id": f"a:personal-{USER}", "conversationType": "personal", "tenantId": "t1"},
                   "bot": {"id": BOT["id"]}, "user": {"id": f"29:{USER}", "aadObjectId": USER}}
    assert "Ada" not in json.dumps(ref) and "help" not in json.dumps(ref)  # no name, no text
    # the same reference again is not rewritten; a changed one (a new service URL) is
    assert not teams.store.remember_conversation_reference("teams", USER, ref)
    _post(teams, {**message("https://smba.example.net/emea/", "help", activity_id="p2")})
    assert teams.store.conversation_reference("teams", USER)["serviceUrl"] == "https://smba.example.net/emea/"
    # a channel message keeps nothing (a reminder never goes to a channel)
    _post(teams, message(teams.connector.url, "<at>chatops</at> help", activity_id="p3", user="aad-chan",
                         conversation=CHANNEL, mention=True))
    assert teams.store.conversation_reference("teams", "aad-chan") is None


def test_a_reminder_booked_in_teams_is_delivered_into_the_personal_chat_at_its_time(teams) -> None:
    _post(teams, message(teams.connector.url, "help", activity_id="h1"))  # the user has written to the bot
    at = (_now() + timedelta(hours=2)).replace(microsecond=0)
    key = "r" * 26
    teams.actions.propose(PendingAction("reminder.create", {"text": "send the report", "at": at.isoformat(),
                                                            "timezone": "Europe/Berlin"}, key, "Reminder"),
                          Turn(viewer=public_viewer(), text="remind me", platform="teams", user_id=USER,
                               channel_id=CHANNEL["id"]))
    _post(teams, message(teams.connector.url, "", activity_id="h2", value={"action": "action_confirm", "key": key},
                         reply_to="card-1"))
    booked = teams.store.scheduled_message(key)
    assert booked is not None and booked.platform == "teams" and booked.user_id == USER, booked
    sent_before = len(teams.connector.messages())

    early = teams.deliver(at - timedelta(minutes=1))
    assert not early.delivered and len(teams.connector.messages()) == sent_before  # not yet due

    report = teams.deliver(at + timedelta(seconds=1))
    assert report.delivered == [key] and teams.store.scheduled_message(key).status == "delivered"
    [sent] = teams.connector.messages()[sent_before:]
    assert sent.method == "POST" and sent.path.endswith("/activities")  # a new message, not a reply
    assert sent.conversation_id == f"a:personal-{USER}" and sent.activity_id is None
    assert sent.body["text"] == "Reminder: send the report" and not sent.body.get("replyToId")
    assert sent.body["conversation"]["id"] == f"a:personal-{USER}"
    assert any(e.get("additionalType") == ["AIGeneratedContent"] for e in sent.body["entities"])  # the AI label

    again = teams.deliver(at + timedelta(minutes=5))
    assert not again.delivered and len(teams.connector.messages()) == sent_before + 1  # once


def test_a_user_who_never_messaged_the_bot_fails_with_the_reason(teams) -> None:
    _schedule(teams, "never", NOBODY, _now() - timedelta(seconds=1))
    report = teams.deliver(_now())
    assert report.failed == ["never"] and not report.retrying
    msg = teams.store.scheduled_message("never")
    assert msg.status == "failed" and msg.attempts == 1
    assert NO_REFERENCE in msg.error and "must message the bot once" in msg.error
    assert teams.connector.calls == []  # nothing was tried


def test_a_connector_503_is_retried_later_and_a_403_fails(teams) -> None:
    _post(teams, message(teams.connector.url, "help", activity_id="s1"))
    sent_before = len(teams.connector.messages())
    _schedule(teams, "busy", USER, _now() - timedelta(seconds=1))
    teams.connector.failures = [(503, {})]
    first = teams.deliver(_now())
    assert first.retrying == ["busy"] and not first.delivered
    msg = teams.store.scheduled_message("busy")
    assert msg.status == "pending" and "HTTP 503" in msg.error
    assert len(teams.connector.messages()) == sent_before + 1  # the one refused
    assert not teams.deliver(_now()).delivered  # waits out its back-off
    later = teams.deliver(_now() + timedelta(minutes=2))
    assert later.delivered == ["busy"] and teams.store.scheduled_message("busy").status == "delivered"
    assert teams.connector.messages()[-1].body["text"] == "Reminder: send the report"

    _schedule(teams, "blocked", USER, _now() - timedelta(seconds=1))
    teams.connector.failures = [(403, {})]  # e.g. the user blocked the bot: no later attempt helps
    assert teams.deliver(_now()).failed == ["blocked"]
    assert "HTTP 403" in teams.store.scheduled_message("blocked").error


def test_forget_and_retention_remove_the_reference(teams) -> None:
    for user in (USER, "aad-old-1", "aad-old-2"):
        _post(teams, message(teams.connector.url, "help", activity_id=f"f-{user}", user=user))
    refs = teams.store.conversation_refs
    with teams.store.engine.begin() as conn:  # two users last seen 40 days ago
        conn.execute(refs.update().where(refs.c.user_id.in_(["aad-old-1", "aad-old-2"]))
                     .values(updated_at=_now() - timedelta(days=40)))
    _schedule(teams, "later", "aad-old-2", _now() + timedelta(days=60))  # still to be sent to aad-old-2
    counts = purge(teams.store, Cutoffs(conversations=_now() - timedelta(days=30),
                                        audit=_now() - timedelta(days=365), feedback=_now() - timedelta(days=365)))
    assert counts["conversation_references"] == 1
    assert teams.store.conversation_reference("teams", "aad-old-1") is None
    assert teams.store.conversation_reference("teams", "aad-old-2") is not None  # kept for its reminder

    proc = run_chatops(["forget", "--user", USER, "--yes", "--json"], teams.tmp / "d", cwd=teams.tmp,
                       DATABASE_URL=teams.url)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["deleted"]["conversation_references"] == 1
    assert teams.store.conversation_reference("teams", USER) is None
    with teams.store.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(refs)).scalar() == 1  # aad-old-2's


def test_chatops_serve_with_teams_delivers_a_due_teams_reminder(tmp_path, embedding_cache_dir) -> None:
    """The real ``chatops serve`` process, Teams only: a user writes, a reminder of theirs falls due, the
    outbox job sends it into their personal chat (no 'no sender' warning)."""
    from tests.chatops_procs import Replica
    from tests.helpers import seed_embedding_cache

    data = seed_embedding_cache(tmp_path / "serve", embedding_cache_dir / "embeddings.sqlite")
    wiki = tmp_path / "wiki"
    shutil.copytree(WIKI, wiki)
    with ConnectorStandIn() as connector:
        serve = Replica("serve", tmp_path, {"TEAMS_ALLOW_UNAUTHENTICATED": "true",
                                            "CHATOPS_SOURCES": f"folder:{wiki}?name=handbook"})
        try:
            wait_for(serve.listening, 90, "the server")
            r = httpx.post(serve.url + "/api/messages", timeout=60,
                           json=message(connector.url, "help", activity_id="sv-1"))
            assert r.status_code in (200, 201)
            store = StateStore(f"sqlite:///{data / 'state.sqlite'}")
            try:
                store.schedule_message("sv-rem", platform="teams", user_id=USER, channel_id="", at=_now(),
                                       text="Reminder: stand-up")
            finally:
                store.close()
            # the outbox job runs every 30 s
            sent = wait_for(lambda: [c for c in connector.messages() if c.body.get("text") == "Reminder: stand-up"],
                            60, "the reminder")
            assert sent[0].conversation_id == f"a:personal-{USER}"
        finally:
            code = serve.stop()
    output = serve.log()
    assert code == 0, output[-3000:]
    assert "no teams sender" not in output and "scheduled message sv-rem delivered on teams" in output
