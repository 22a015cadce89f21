"""Permissions through the real Teams adapter (issue 11).

Activities go through the real Bot Framework ``CloudAdapter``; the Bot Connector (replies and the
roster: e-mail, ``userRole``, ``tenantId``) is the stand-in. The index holds tests/acl_corpus (a
public handbook and an HR folder readable by the static group ``hr``, Ada). Asserted on the turn the
agent is handed and on the evidence its planner retrieved: Ada's personal chat uses her own access
and cites the HR page; the same question in a channel, from a guest, or from someone of another
tenant is answered from public pages only, and no HR passage reaches the planner.
"""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pytest

from agent.models import Reply, Turn
from app.access import AccessPolicy
from app.settings import Settings
from app.wiring import build_agent
from bot.server import ServerThread, create_app
from bot.teams.adapter import TeamsAuthConfig, TeamsWebAdapter
from bot.teams.bot import TeamsBot
from core.access import Access, Viewer
from connectors.folder import FolderSource
from index.indexer import Indexer
from index.knowledge import KnowledgeIndex
from state import StateStore
from tests.standins.teams import ConnectorStandIn

CORPUS = Path(__file__).parent / "acl_corpus"
BOT = {"id": "28:bot-app-id", "name": "chatops"}
ADA = {"id": "29:ada", "name": "Ada Lovelace", "aadObjectId": "aad-ada"}
GUS = {"id": "29:gus", "name": "Gus Guest", "aadObjectId": "aad-gus"}
EXT = {"id": "29:ext", "name": "Ed External", "aadObjectId": "aad-ext"}
CHANNEL = {"isGroup": True, "conversationType": "channel", "tenantId": "t1",
           "id": "19:general@thread.tacv2;messageid=1700000000000"}
QUESTION = "what is the salary band for a senior engineer?"


class RecordingAgent:
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
def teams(tmp_path: Path, embedder):
    index = KnowledgeIndex(tmp_path / "index", embedder)
    Indexer(index).run(FolderSource(CORPUS / "handbook", name="handbook"))
    Indexer(index).run(FolderSource(CORPUS / "hr", name="hr", access=Access.only(["group:chatops/hr"])))
    rt = build_agent(Settings(chatops_data_dir=tmp_path / "data"), index=index)
    recorder = RecordingAgent(rt.agent)
    store = StateStore(f"sqlite:///{tmp_path / 'state.sqlite'}")
    bot = TeamsBot(recorder, store, access=AccessPolicy(static_groups={"hr": frozenset({"ada@example.com",
                                                                                        "gus@example.com",
                                                                                        "ed@example.com"})}))
    server = ServerThread(lambda: create_app([TeamsWebAdapter(bot, TeamsAuthConfig(), allow_unauthenticated=True)]))
    with ConnectorStandIn() as connector:
        connector.members = {
            ADA["id"]: {"name": ADA["name"], "email": "ada@example.com", "userRole": "user", "tenantId": "t1"},
            GUS["id"]: {"name": GUS["name"], "email": "gus@example.com", "userRole": "guest", "tenantId": "t1"},
            EXT["id"]: {"name": EXT["name"], "email": "ed@example.com", "userRole": "user", "tenantId": "t2"}}
        server.start()
        with httpx.Client(base_url=server.url, timeout=30) as http:
            yield type("T", (), {"http": http, "connector": connector, "recorder": recorder})
        server.stop()
    store.close()
    index.close()


def send(t, sender: dict, conversation: dict, n: int) -> tuple[Turn, Reply]:
    text = f"<at>chatops</at> {QUESTION}" if conversation is CHANNEL else QUESTION
    act = {"type": "message", "id": f"acl-{n}", "timestamp": datetime.now(timezone.utc).isoformat(),
           "serviceUrl": t.connector.url, "channelId": "msteams", "from": sender, "conversation": conversation,
           "recipient": BOT, "text": text, "textFormat": "plain", "locale": "en-GB",
           "channelData": {"tenant": {"id": "t1"}},
           "entities": [{"type": "mention", "mentioned": BOT, "text": "<at>chatops</at>"}]
           if conversation is CHANNEL else []}
    assert t.http.post("/api/messages", json=act).status_code in (200, 201)
    return t.recorder.seen[-1]


def hr_evidence(reply: Reply) -> bool:
    return any(h["doc_id"] == "salary-bands.md" for q in reply.trace.queries for h in q["hits"]) or \
        any(c.doc_id == "salary-bands.md" for c in reply.citations)


def test_teams_viewers_and_the_evidence_their_planner_gets(teams) -> None:
    personal = {"conversationType": "personal", "tenantId": "t1", "id": "a:personal"}
    turn, reply = send(teams, ADA, personal, 1)
    assert turn.viewer == Viewer(frozenset({"user:ada@example.com", "group:chatops/hr"}), False, "dm")
    assert "salary-bands.md" in {c.doc_id for c in reply.citations}, reply.text

    turn, reply = send(teams, ADA, CHANNEL, 2)
    assert turn.viewer == Viewer.public("channel") and not hr_evidence(reply) and reply.refused

    for n, who in ((3, GUS), (4, EXT)):  # a guest; someone of another tenant (both listed in hr, still public)
        turn, reply = send(teams, who, personal, n)
        assert turn.viewer == Viewer.public("dm"), who
        assert not hr_evidence(reply) and reply.refused
