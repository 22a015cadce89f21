"""Refusals that help (issue 22, item 4), end to end: ``chatops ask`` as a subprocess and a signed Slack DM event
through the real Bolt app (``tests/standins/slack/``), over a real index of a two-page wiki.

A question the pages cannot answer is refused with: that nothing found answers it; the closest page (title and
link) the asker may read; who to ask when that page names an owner ("Owner: ...") and a channel; never the gate's
reasons ("not found: ...", index stems), which go to the trace and ``--json`` only.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path

import pytest

from agent.messages import refusal
from agent.models import Reply, Turn
from agent.messages import closest_page
from app.jobs import IndexJobs
from app.settings import Settings
from app.wiring import build_agent
from connectors.folder import FolderSource
from core.models import Chunk
from index.indexer import Indexer
from index.knowledge import KnowledgeIndex
from state import StateStore
from state.store import sqlite_url
from tools.knowledge_search import Evidence

from tests.helpers import run_chatops, seed_embedding_cache
from tests.standins.slack import SlackHarness

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

HEALTH = """# Health plans

Owner: People Operations

Northwind Loop offers two health plans, Basic and Plus. Premiums are deducted from payroll each month.

## Enrolling

Open HR Links and choose Benefits, then pick the Basic or the Plus plan. Ask in #ask-people if you have questions.
"""

WIFI = """# Office wifi

The office network is called Northwind-Guest. Printers are on the second floor next to the kitchen.
"""

#: The health page is closest (sick leave is a people topic), and no page states a number of days.
QUESTION = "how many sick days do I get per year?"
BOB = "UBOB0001"


def assert_helpful_refusal(text: str) -> None:
    assert text.startswith("I couldn't find anything in the knowledge base that answers this"), text
    assert "The closest page I found is Health plans (" in text and "health-plans.md" in text, text
    assert "People Operations as its owner" in text and "#ask-people" in text, text
    assert "not found" not in text and "passage" not in text, text  # the gate's reasons are not for the employee


@pytest.fixture(scope="module")
def wiki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("refusal") / "wiki"
    folder.mkdir()
    (folder / "health-plans.md").write_text(HEALTH, encoding="utf-8")
    (folder / "office-wifi.md").write_text(WIFI, encoding="utf-8")
    return folder


def test_chatops_ask_refuses_naming_the_closest_page_its_owner_and_channel(
        tmp_path: Path, wiki: Path, embedder, embedding_cache_dir: Path) -> None:
    data = seed_embedding_cache(tmp_path / "data", embedding_cache_dir / "embeddings.sqlite")
    indexed = run_chatops(["index", f"folder:{wiki}"], data, cwd=tmp_path)
    assert indexed.returncode == 0, indexed.stderr
    printed = run_chatops(["ask", QUESTION], data, cwd=tmp_path)
    assert printed.returncode == 0, printed.stderr
    assert_helpful_refusal(printed.stdout)
    as_json = json.loads(run_chatops(["ask", "--json", QUESTION], data, cwd=tmp_path).stdout)
    assert as_json["refused"] and as_json["trace"]["gate"]["reason"]  # the reason: in --json only
    assert_helpful_refusal(as_json["text"])


class RecordingAgent:
    """The real agent, keeping each reply it gave (by the turn's text)."""

    def __init__(self, agent) -> None:
        self.agent = agent
        self.replies: dict[str, Reply] = {}
        self._lock = threading.Lock()

    def answer(self, turn: Turn, progress=None) -> Reply:
        reply = self.agent.answer(turn, progress) if progress is not None else self.agent.answer(turn)
        with self._lock:
            self.replies[turn.text] = reply
        return reply


def test_a_slack_dm_refusal_names_the_closest_page_its_owner_and_channel(
        tmp_path_factory: pytest.TempPathFactory, wiki: Path, embedder) -> None:
    idx = KnowledgeIndex(tmp_path_factory.mktemp("refusal-index") / "index", embedder)
    data = tmp_path_factory.mktemp("refusal-slack")
    store = StateStore(sqlite_url(data / "state.sqlite"))
    try:
        assert Indexer(idx).run(FolderSource(wiki)).added == 2
        runtime = build_agent(Settings(chatops_data_dir=data), index=idx)
        recorder = RecordingAgent(runtime.agent)
        h = SlackHarness(dataclasses.replace(runtime, agent=recorder), store,
                         IndexJobs(runtime, store, [FolderSource(wiki)]))
        try:
            h.standin.add_user(BOB)
            dm = "DREFUSE01"
            h.standin.add_conversation(dm, "im", True)
            msg = h.standin.user_message(dm, BOB, QUESTION)
            resp, _ = h.sender.event({"type": "message", "user": BOB, "text": msg["text"], "ts": msg["ts"],
                                      "channel": dm, "event_ts": msg["ts"], "channel_type": "im"})
            assert resp.status_code == 200
            h.standin.wait_for(lambda s: s.answers(dm, msg["ts"]), timeout=30)
            h.idle()
            reply = recorder.replies[QUESTION]
            assert reply.refused
            assert_helpful_refusal(reply.text)
            posted = " ".join(json.dumps(c.params) for c in h.standin.answers(dm, msg["ts"]))
            assert "People Operations" in posted and "#ask-people" in posted and "not found" not in posted
        finally:
            h.close()
    finally:
        store.close()
        idx.close()


# -- the owner and channel a page names, read from the passages retrieved of it ----------------------------------

def _ev(doc: str, text: str, n: int) -> Evidence:
    chunk = Chunk(f"c{n:031d}", "folder", doc, doc.removesuffix(".md").title(), (), f"file:///{doc}", text)
    return Evidence(chunk, 1.0 / n, {}, {}, 0.4)


@pytest.mark.parametrize("line, owner", [("Owner: Platform team", "Platform team"),
                                         ("**DRI:** Jane Doe", "Jane Doe"),
                                         ("| Maintainer | @jane |", "@jane"),
                                         ("Owners: <!channel>", ""),  # Slack mention syntax never reaches a reply
                                         ("Contact us today: the desk", ""),  # prose, not a labelled line
                                         ("The runbook has no owner.", "")])
def test_the_owner_is_a_labelled_line_of_a_passage_of_the_closest_page(line: str, owner: str) -> None:
    evidence = [_ev("runbook.md", "Restart the service.", 1), _ev("other.md", "Owner: Someone Else", 2),
                _ev("runbook.md", f"Intro.\n{line}\nMore text.", 3)]
    assert closest_page(evidence) == ("Runbook", "file:///runbook.md", "", owner)
    text = refusal(["restart"], closest_page(evidence))
    assert (f"It names {owner} as its owner" in text) == bool(owner) and "Someone Else" not in text
    assert closest_page([]) is None
