"""Permissions through the real Slack app (issue 11): who is asking and who will see the answer.

Signed events and slash commands reach the real Bolt app (``SlackHarness``); the Web API is the stand-in,
whose ``users.info`` gives e-mails, a guest (``is_restricted``) and a Slack Connect user (another
``team_id``). The index holds tests/acl_corpus: a public handbook and an HR folder whose audience is
the static group ``hr`` (Hana). Asserted: the viewer of each turn (DM, public channel, private
channel, guest, external user, ephemeral ``/kb``, ``CHANNEL_ACCESS=members``); that the restricted
passages are never among the evidence the planner was handed (the turn's retrieved hits) outside a
reader's own DM; that a channel refusal names nothing; and that "Share in channel" refuses to post
an answer citing the HR page.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import threading
from pathlib import Path

import pytest

from agent.messages import ACCESS_REFUSAL
from agent.models import Reply, Turn
from app.access import AccessPolicy
from app.jobs import IndexJobs
from app.settings import Settings
from app.wiring import build_agent
from bot.slack import render
from core.access import Access, Viewer
from connectors.folder import FolderSource
from index.indexer import Indexer
from index.knowledge import KnowledgeIndex
from tests.standins.slack import BOT_USER_ID, TEAM_ID, SlackHarness
from state import StateStore
from state.store import sqlite_url

CORPUS = Path(__file__).parent / "acl_corpus"
HANA, IVAN, BOB, GUEST, EXT = "UHANA001", "UIVAN002", "UBOB0003", "UGUEST04", "UEXT0005"
HR_GROUP = "group:chatops/hr"
QUESTION = "what is the salary band for a senior engineer?"
_ids = itertools.count(1)


class RecordingAgent:
    def __init__(self, agent) -> None:
        self.agent = agent
        self.seen: list[tuple[Turn, Reply]] = []
        self._lock = threading.Lock()

    def answer(self, turn: Turn, progress=None) -> Reply:
        reply = self.agent.answer(turn, progress)
        with self._lock:
            self.seen.append((turn, reply))
        return reply


def evidence_docs(reply: Reply) -> set[str]:
    """The documents of every passage retrieved for the planner this turn (the trace's hits) or cited."""
    return {h["doc_id"] for q in reply.trace.queries for h in q["hits"]} | {c.doc_id for c in reply.citations}


@pytest.fixture(scope="module")
def acl(tmp_path_factory: pytest.TempPathFactory, embedder):
    data = tmp_path_factory.mktemp("acl-slack")
    index = KnowledgeIndex(data / "index", embedder)
    Indexer(index).run(FolderSource(CORPUS / "handbook", name="handbook"))
    Indexer(index).run(FolderSource(CORPUS / "hr", name="hr", access=Access.only([HR_GROUP])))
    store = StateStore(sqlite_url(data / "state.sqlite"))
    runtime = build_agent(Settings(chatops_data_dir=data), index=index)
    recorder = RecordingAgent(runtime.agent)
    policy = AccessPolicy(static_groups={"hr": frozenset({"uhana001@example.com", "uivan002@example.com"})})
    runtime = dataclasses.replace(runtime, agent=recorder, access=policy)
    h = SlackHarness(runtime, store, IndexJobs(runtime, store, []))
    for u in (HANA, IVAN, BOB):
        h.standin.add_user(u)
    h.standin.add_user(GUEST, is_restricted=True)
    h.standin.add_user(EXT, team_id="T0OTHERORG")
    h.standin.add_user(BOT_USER_ID, is_bot=True)  # conversations.members lists the bot too
    h.recorder = recorder  # type: ignore[attr-defined]
    yield h
    h.close()
    store.close()
    index.close()


def conversation(h: SlackHarness, kind: str, people: list[str] | None = None) -> str:
    cid = f"{ {'channel': 'C', 'group': 'G', 'im': 'D'}[kind]}A{next(_ids):07d}"
    h.standin.add_conversation(cid, kind, people=people)
    return cid


def ask(h: SlackHarness, user: str, kind: str, people: list[str] | None = None) -> tuple[Turn, Reply, str]:
    cid = conversation(h, kind, people)
    text = QUESTION if kind == "im" else f"<@{BOT_USER_ID}> {QUESTION}"
    ts = h.standin.user_message(cid, user, text)["ts"]
    event = {"type": "message" if kind == "im" else "app_mention", "user": user, "text": text, "ts": ts,
             "channel": cid, "event_ts": ts, "team": TEAM_ID, "channel_type": kind if kind == "im" else None}
    resp, _ = h.sender.event({k: v for k, v in event.items() if v is not None})
    assert resp.status_code == 200
    found = h.standin.wait_for(lambda s: [x for x in h.recorder.seen if x[0].channel_id == cid] or None, timeout=30)
    h.idle()
    posted = " ".join(json.dumps(c.params) for c in h.standin.answers(cid))
    return found[0][0], found[0][1], posted


def test_a_reader_gets_the_restricted_page_in_a_dm(acl: SlackHarness) -> None:
    turn, reply, posted = ask(acl, HANA, "im")
    assert turn.viewer == Viewer(frozenset({"user:uhana001@example.com", HR_GROUP}), False, "dm")
    assert "salary-bands.md" in {c.doc_id for c in reply.citations}, reply.text
    assert "98,000" in posted


@pytest.mark.parametrize("who, kind", [(HANA, "channel"), (HANA, "group"), (BOB, "im"), (GUEST, "im"),
                                       (EXT, "im")])
def test_nobody_else_and_no_channel_gets_a_restricted_passage(acl: SlackHarness, who: str, kind: str) -> None:
    turn, reply, posted = ask(acl, who, kind)
    assert turn.viewer is not None
    if who == HANA:  # a reader, but in a channel: public pages only
        # (an app_mention in a G... conversation has no channel_type: unknown kind, public only too)
        assert turn.viewer == Viewer.public("channel") and turn.channel_kind in {"channel", ""}
    elif who == BOB:
        assert turn.viewer == Viewer(frozenset({"user:ubob0003@example.com"}), False, "dm")
    else:  # a guest, a Slack Connect user
        assert turn.viewer == Viewer.public("dm")
    # the planner was never handed an HR passage, so nothing of it can be cited or quoted
    assert "salary-bands.md" not in evidence_docs(reply), evidence_docs(reply)
    assert "98,000" not in posted and "Salary bands" not in posted
    assert reply.refused
    if kind != "im":  # a channel refusal names nothing
        assert reply.text == ACCESS_REFUSAL
    else:  # a DM gets the usual refusal (what was searched, never a page)
        assert "couldn't find anything in the knowledge base" in reply.text and QUESTION in reply.text


def test_members_mode_uses_what_every_member_may_read(acl: SlackHarness) -> None:
    conv = acl.bot.conversations
    old = conv.access
    conv.access = dataclasses.replace(old, channel_access="members")
    try:
        turn, reply, _ = ask(acl, HANA, "channel", people=[HANA, IVAN])
        assert turn.viewer == Viewer(frozenset({HR_GROUP}), False, "channel")
        assert "salary-bands.md" in evidence_docs(reply)
        turn, reply, _ = ask(acl, HANA, "channel", people=[HANA, IVAN, BOB])
        assert turn.viewer == Viewer.public("channel")  # nothing in common but public
        assert "salary-bands.md" not in evidence_docs(reply)
        turn, reply, _ = ask(acl, HANA, "group", people=[HANA, GUEST])
        assert turn.viewer == Viewer.public("channel")
        assert "salary-bands.md" not in evidence_docs(reply)
    finally:
        conv.access = old


def test_an_ephemeral_kb_answer_uses_the_askers_access_and_share_refuses_it(acl: SlackHarness) -> None:
    h = acl
    ch = conversation(h, "channel")
    url = h.standin.response_url("acl-kb")
    resp = h.sender.command(QUESTION, HANA, ch, url)
    assert resp.status_code == 200
    [(turn, reply)] = h.standin.wait_for(lambda s: [x for x in h.recorder.seen if x[0].channel_id == ch] or None)
    h.idle()
    assert turn.viewer is not None and turn.viewer.audience == "dm" and HR_GROUP in turn.viewer.principals
    assert "salary-bands.md" in {c.doc_id for c in reply.citations}, reply.text
    # Share in channel: the answer cites the HR page, which not everyone in the channel may read
    share_url = h.standin.response_url("acl-share")
    value = render.share_value(reply.trace.trace_id, QUESTION)
    h.sender.click(HANA, {"action_id": "share:channel", "value": value, "type": "button"}, share_url,
                   channel_id=ch, ephemeral=True)
    h.idle()
    calls = [c for c in h.standin.calls if c.method == "response_url" and c.key == "acl-share"]
    assert calls, "the user was told nothing"
    assert all(c.params.get("response_type") != "in_channel" for c in calls)
    said = json.dumps([c.params for c in calls])
    assert "didn't share this answer" in said and "98,000" not in said
