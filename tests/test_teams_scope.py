"""Per-channel scope in Teams: ``channels:`` keyed by a Teams conversation id, through the real adapter.

Activities go through the real Bot Framework ``CloudAdapter`` (the Bot Connector is the stand-in), over an index
of two public folder sources of tests/acl_corpus (``handbook``: vacation and equipment; ``hr``: salary bands).
The channel ``19:hr@thread.tacv2`` is scoped to ``hr``; a message in one of its threads (whose conversation id
carries ``;messageid=``) is searched in ``hr`` only: the vacation page never reaches the planner. The same
question in an unlisted channel cites the vacation page (the control).
"""

from __future__ import annotations

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
from app.config import parse_config
from connectors.folder import FolderSource
from index.indexer import Indexer
from index.knowledge import KnowledgeIndex
from state import StateStore
from tests.standins.teams import ConnectorStandIn
from tests.test_access_teams import BOT, CORPUS, RecordingAgent

ADA = {"id": "29:ada", "name": "Ada Lovelace", "aadObjectId": "aad-ada"}
QUESTION = "how many vacation days do employees get per year?"
HR_CHANNEL = "19:hr@thread.tacv2"


@pytest.fixture
def teams(tmp_path: Path, embedder):
    index = KnowledgeIndex(tmp_path / "index", embedder)
    Indexer(index).run(FolderSource(CORPUS / "handbook", name="handbook"))
    Indexer(index).run(FolderSource(CORPUS / "hr", name="hr"))
    rt = build_agent(Settings(chatops_data_dir=tmp_path / "data"), index=index)
    recorder = RecordingAgent(rt.agent)
    store = StateStore(f"sqlite:///{tmp_path / 'state.sqlite'}")
    config = parse_config({"channels": {HR_CHANNEL: {"sources": ["hr"]}}}, extra_sources=["handbook", "hr"])
    bot = TeamsBot(recorder, store, access=AccessPolicy(channels=config.channels))
    server = ServerThread(lambda: create_app([TeamsWebAdapter(bot, TeamsAuthConfig(), allow_unauthenticated=True)]))
    with ConnectorStandIn() as connector:
        connector.members = {ADA["id"]: {"name": ADA["name"], "email": "ada@example.com", "userRole": "user",
                                         "tenantId": "t1"}}
        server.start()
        with httpx.Client(base_url=server.url, timeout=30) as http:
            yield type("T", (), {"http": http, "connector": connector, "recorder": recorder})
        server.stop()
    store.close()
    index.close()


def ask_in(t, channel: str, n: int) -> tuple[Turn, Reply]:
    conversation = {"isGroup": True, "conversationType": "channel", "tenantId": "t1",
                    "id": f"{channel};messageid=170000000000{n}"}
    act = {"type": "message", "id": f"scope-{n}", "timestamp": datetime.now(timezone.utc).isoformat(),
           "serviceUrl": t.connector.url, "channelId": "msteams", "from": ADA, "conversation": conversation,
           "recipient": BOT, "text": f"<at>chatops</at> {QUESTION}", "textFormat": "plain", "locale": "en-GB",
           "channelData": {"tenant": {"id": "t1"}},
           "entities": [{"type": "mention", "mentioned": BOT, "text": "<at>chatops</at>"}]}
    assert t.http.post("/api/messages", json=act).status_code in (200, 201)
    return t.recorder.seen[-1]


def evidence_docs(reply: Reply) -> set[str]:
    return {h["doc_id"] for q in reply.trace.queries for h in q["hits"]} | {c.doc_id for c in reply.citations}


def test_a_teams_channel_scoped_by_its_conversation_id_searches_only_its_sources(teams) -> None:
    turn, reply = ask_in(teams, "19:general@thread.tacv2", 1)  # unlisted: every source
    assert turn.viewer.sources is None and "vacation.md" in {c.doc_id for c in reply.citations}, reply.text
    turn, reply = ask_in(teams, HR_CHANNEL, 2)  # a thread of the hr channel: hr only
    assert turn.viewer.sources == frozenset({"hr"})
    assert evidence_docs(reply) <= {"salary-bands.md"} and "27 vacation days" not in reply.text
