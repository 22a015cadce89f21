"""A Teams channel in front of the bot and its action service, for the action tools' Teams tests.

The real Bot Framework adapter behind ``chatops``' own HTTP server, the Bot Connector stand-in
(``tests.standins.teams.ConnectorStandIn``) as Teams' side; each test module brings its own settings (the backend
under test and its stand-in) and the roster's members.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import httpx

from app.actions import build_action_service
from app.jobs import IndexJobs
from app.settings import Settings
from app.wiring import build_agent
from bot.server import ServerThread, create_app
from bot.teams.adapter import TeamsAuthConfig, TeamsWebAdapter
from bot.teams.bot import TeamsBot
from connectors.folder import FolderSource
from tests.helpers import WIKI
from state import StateStore
from tests.standins.teams import ConnectorStandIn

BOT = {"id": "28:bot-app-id", "name": "chatops"}
CHANNEL = {"isGroup": True, "conversationType": "channel", "tenantId": "t1",
           "id": "19:general@thread.tacv2;messageid=1700000000000"}


def channel_message(service_url: str, text: str, *, activity_id: str, user: str, name: str,
                    value: dict | None = None, reply_to: str | None = None, mention: bool = False,
                    conversation: dict | None = None, timestamp: str | None = None) -> dict:
    """A Bot Framework message activity from ``user`` (``29:...``) in the channel (or ``conversation``); its
    timestamp is now unless given (a meeting "tomorrow" must be in the future when Confirm comes)."""
    now = timestamp or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    act = {"type": "message", "id": activity_id, "timestamp": now, "serviceUrl": service_url, "channelId": "msteams",
           "from": {"id": user, "name": name, "aadObjectId": user.removeprefix("29:")},
           "conversation": conversation or CHANNEL, "recipient": BOT, "text": text, "textFormat": "plain",
           "locale": "en-US", "localTimezone": "Europe/Berlin", "channelData": {"tenant": {"id": "t1"}}}
    if mention:
        act["entities"] = [{"type": "mention", "mentioned": BOT, "text": "<at>chatops</at>"}]
    if value is not None:
        act["value"] = value
    if reply_to:
        act["replyToId"] = reply_to
    return act


@contextmanager
def teams_bot(settings: Settings, index, tmp_path: Path, members: dict[str, dict],
              timeout: float = 30) -> Iterator[SimpleNamespace]:
    """The bot with ``settings``' action tools on ``index``, served on 127.0.0.1, with the connector stand-in
    holding ``members`` (roster id -> member); yields ``http`` (a client of the bot), ``connector``, ``store`` and
    ``tools``. Every action tool is closed afterwards."""
    wiki = tmp_path / "wiki"
    shutil.copytree(WIKI, wiki)
    rt = build_agent(settings, index=index)
    store = StateStore(f"sqlite:///{tmp_path / 'state.sqlite'}")
    actions = build_action_service(settings, rt.tools, store)
    bot = TeamsBot(rt.agent, store, actions=actions, jobs=IndexJobs(rt, store, [FolderSource(wiki, name="wiki")]))
    server = ServerThread(lambda: create_app([TeamsWebAdapter(bot, TeamsAuthConfig(), allow_unauthenticated=True)]))
    try:
        with ConnectorStandIn() as connector:
            connector.members.update(members)
            server.start()
            try:
                with httpx.Client(base_url=server.url, timeout=timeout) as http:
                    yield SimpleNamespace(http=http, connector=connector, store=store, tools=rt.tools)
            finally:
                server.stop()
    finally:
        for tool in rt.tools.actions():
            close = getattr(tool, "close", None)
            if callable(close):
                close()
        store.close()


def post(t: SimpleNamespace, activity: dict) -> httpx.Response:
    """POST ``activity`` to the bot's messaging endpoint; it must be accepted."""
    r = t.http.post("/api/messages", json=activity)
    assert r.status_code in (200, 201), r.text
    return r
