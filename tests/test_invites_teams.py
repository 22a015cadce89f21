"""Invitations of the local calendar on Microsoft Teams, end to end: activities POSTed to ``/api/messages``
of the real Bot Framework ``CloudAdapter`` behind the real aiohttp server, replies going to the Bot
Connector stand-in (``tests/teams_standin.py``), the real agent with the default calendar backend
(``CALENDAR_BACKEND=local``), the real state store and action service.

No invitation is delivered from Teams yet (no courier is registered for it), so nothing may be claimed:
the preview card says none are sent and who should tell the attendees, Confirm books the event, the
updated card says nobody was sent an invitation, and no message reaches anyone but the thread.
"""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pytest

from app.actions import build_action_service
from app.jobs import IndexJobs
from app.settings import Settings
from app.wiring import build_agent
from bot.server import ServerThread, create_app
from bot.teams.adapter import TeamsAuthConfig, TeamsWebAdapter
from bot.teams.bot import TeamsBot
from connectors.folder import FolderSource
from helpers import WIKI
from state import StateStore
from teams_standin import ConnectorStandIn

BOT = {"id": "28:bot-app-id", "name": "chatops"}
USER = "aad-user-1"
CHANNEL = {"isGroup": True, "conversationType": "channel", "tenantId": "t1",
           "id": "19:general@thread.tacv2;messageid=1700000000000"}


def message(service_url: str, text: str, *, activity_id: str, value: dict | None = None,
            reply_to: str | None = None) -> dict:
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")  # "tomorrow" counts from the message
    act = {"type": "message", "id": activity_id, "timestamp": now, "serviceUrl": service_url,
           "channelId": "msteams", "from": {"id": f"29:{USER}", "name": "Ada Lovelace", "aadObjectId": USER},
           "conversation": CHANNEL, "recipient": BOT, "text": text, "textFormat": "plain", "locale": "en-US",
           "localTimezone": "Europe/Berlin", "channelData": {"tenant": {"id": "t1"}},
           "entities": [{"type": "mention", "mentioned": BOT, "text": "<at>chatops</at>"}]}
    if value is not None:
        act["value"] = value
        act.pop("entities")
    if reply_to:
        act["replyToId"] = reply_to
    return act


@pytest.fixture
def teams(tmp_path: Path, wiki_index):
    wiki = tmp_path / "wiki"
    shutil.copytree(WIKI, wiki)
    settings = Settings(chatops_data_dir=tmp_path / "data")
    assert settings.calendar_backend == "local"
    rt = build_agent(settings, index=wiki_index)
    store = StateStore(f"sqlite:///{tmp_path / 'state.sqlite'}")
    actions = build_action_service(settings, rt.tools, store)
    bot = TeamsBot(rt.agent, store, actions=actions, jobs=IndexJobs(rt, store, [FolderSource(wiki, name="wiki")]))
    server = ServerThread(lambda: create_app([TeamsWebAdapter(bot, TeamsAuthConfig(), allow_unauthenticated=True)]))
    with ConnectorStandIn() as connector:
        connector.members[f"29:{USER}"] = {"name": "Ada Lovelace", "email": "ada@example.com", "aadObjectId": USER}
        server.start()
        with httpx.Client(base_url=server.url, timeout=30) as http:
            yield type("T", (), {"http": http, "connector": connector, "store": store})
        server.stop()
    rt.tools.get("calendar.create").close()
    store.close()


def post(t, activity: dict) -> None:
    r = t.http.post("/api/messages", json=activity)
    assert r.status_code in (200, 201), r.text


def test_teams_claims_no_invitation_it_did_not_send(teams) -> None:
    post(teams, message(teams.connector.url, "<at>chatops</at> set up a release review with bob@example.com "
                                             "tomorrow at 3pm", activity_id="1700000000300"))
    [preview] = teams.connector.messages()
    card = preview.body["attachments"][-1]["content"]
    facts = {f["title"]: f["value"] for b in card["body"] if b["type"] == "FactSet" for f in b["facts"]}
    assert facts["Invitations"] == "none are sent from here: tell the attendees yourself"
    confirm = next(a for a in card["actions"] if a["title"] == "Confirm")

    post(teams, message(teams.connector.url, "", activity_id="c1", value=confirm["data"], reply_to="card-1"))
    rec = teams.store.get_pending(confirm["data"]["key"])
    assert rec.status == "done", rec.result
    [update] = [c for c in teams.connector.calls if c.method == "PUT"]
    shown = json.dumps(update.body, ensure_ascii=False)
    assert "Booked" in shown and "Nobody was sent an invitation from here: tell the attendees yourself." in shown
    assert "got the invitation" not in shown
    # no personal chat was opened and nothing went anywhere but the channel's thread
    assert {c.conversation_id for c in teams.connector.messages()} == {CHANNEL["id"]}
