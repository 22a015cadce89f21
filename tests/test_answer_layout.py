"""Lists and tables in answers, end to end on each platform (issue 22, item 2), over a one-page wiki whose page
holds a numbered list with its lead-in and a table.

- Slack: signed ``app_mention`` events through the real Bolt app (``tests/standins/slack/``); the answer in
  the thread, streamed and, with streaming off, posted with ``chat.postMessage``.
- Teams: activities through the real Bot Framework adapter (``tests/standins/teams.py``); the answer card of a
  channel mention, and the streamed text of a personal chat.
- Terminal: ``chatops ask`` as a subprocess (``--json`` for the reply's text, then as printed).

The agent is the real one over a real index of the page; a recording wrapper keeps each reply so the
assertions can name the lists and tables its text holds (:func:`bot.markdown_blocks.parse_blocks`) and check
that the platform received each as a list or a table (never a Markdown delimiter row or a pipe-led line). When
the answer composer quotes no list or table for these questions, what is checked is that the text reached the
platform through its renderer, and the test fails rather than passing on nothing.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import threading
from pathlib import Path

import httpx
import pytest

from agent.models import Reply, Turn
from app.jobs import IndexJobs
from app.settings import Settings
from app.wiring import build_agent
from bot.console import render_text
from bot.markdown_blocks import ListBlock, Table, chat_markdown, list_lines, parse_blocks, plain_inline, table_lines
from bot.server import ServerThread, create_app
from bot.slack import render
from bot.teams.adapter import TeamsAuthConfig, TeamsWebAdapter
from bot.teams.bot import TeamsBot
from connectors.folder import FolderSource
from index.indexer import Indexer
from index.knowledge import KnowledgeIndex
from state import StateStore
from state.store import sqlite_url

from tests.helpers import run_chatops, seed_embedding_cache
from tests.standins.slack import BOT_USER_ID, TEAM_ID, SlackHarness
from tests.standins.teams import ConnectorStandIn

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

PAGE = """# Health plans

Northwind Loop offers two health plans. Premiums are deducted from payroll each month.

| Plan | Monthly premium | Deductible |
|---|--:|--:|
| Basic | $12 | $1,500 |
| Plus | $48 | $500 |

## Enrolling

To enrol in a health plan, do the following:

1. Open HR Links and choose *Benefits*.
2. Pick the Basic or the Plus plan.
3. Submit the form within 30 days of your start date.

Ask in #ask-people if you have questions.
"""

#: One question the numbered list answers, one a table row answers.
QUESTIONS = ("how do I enrol in a health plan?", "what is the monthly premium of the Plus plan?")
ALICE = "UALICE01"
_ids = itertools.count(1)


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


@pytest.fixture(scope="module")
def wiki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("layout") / "wiki"
    (folder / "people").mkdir(parents=True)
    (folder / "people" / "health-plans.md").write_text(PAGE, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory, wiki: Path, embedder):
    idx = KnowledgeIndex(tmp_path_factory.mktemp("layout-index") / "index", embedder)
    report = Indexer(idx).run(FolderSource(wiki))
    assert report.added == 1 and not report.errors, report
    yield idx
    idx.close()


def structures(text: str) -> tuple[list[ListBlock], list[Table]]:
    blocks = parse_blocks(text)
    return [b for b in blocks if isinstance(b, ListBlock)], [b for b in blocks if isinstance(b, Table)]


def assert_no_markdown_table(shown: str) -> None:
    """No Markdown table syntax reached the reader: no pipe-led line, no delimiter row."""
    for line in shown.splitlines():
        assert not line.lstrip().startswith("|") and "|---" not in line and "|:--" not in line, line


def assert_chat_rendering(text: str, shown: str) -> int:
    """``shown`` (Slack's markdown, a Teams message's text) holds each list of ``text`` as a Markdown list and
    each table as aligned columns or "Header: value" lines; returns how many lists and tables there were."""
    assert_no_markdown_table(shown)
    lists, tables = structures(text)
    for block in lists:
        for line in list_lines(block, lambda item: chat_markdown(item).split("\n")[0]):
            assert f"\n{line}" in f"\n{shown}", (line, shown)
    for table in tables:
        columns = "\n".join(table_lines(table))
        records = [f"**{plain_inline(table.header.cells[0])}:** {row.cells[0]}" for row in table.rows]
        assert columns in shown or all(r in shown for r in records), (table, shown)
    return len(lists) + len(tables)


def assert_something_to_render(found: int, replies: list[str]) -> None:
    """The composer quotes a list with its lead-in and a table row under its header for these questions."""
    assert found, (f"the answer composer quoted no list or table for {QUESTIONS}: "
                   + " / ".join(repr(r[:100]) for r in replies))


# -- Slack ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def slack(tmp_path_factory: pytest.TempPathFactory, index, wiki: Path):
    data = tmp_path_factory.mktemp("layout-slack")
    store = StateStore(sqlite_url(data / "state.sqlite"))
    runtime = build_agent(Settings(chatops_data_dir=data), index=index)
    recorder = RecordingAgent(runtime.agent)
    runtime = dataclasses.replace(runtime, agent=recorder)
    h = SlackHarness(runtime, store, IndexJobs(runtime, store, [FolderSource(wiki)]))
    h.standin.add_user(ALICE)
    h.recorder = recorder  # type: ignore[attr-defined]
    yield h
    h.close()
    store.close()


def ask_slack(h: SlackHarness, question: str) -> tuple[Reply, dict]:
    channel = f"CL{next(_ids):07d}"
    h.standin.add_conversation(channel, "channel", True)
    msg = h.standin.user_message(channel, ALICE, f"<@{BOT_USER_ID}> {question}")
    resp, _ = h.sender.event({"type": "app_mention", "user": ALICE, "text": msg["text"], "ts": msg["ts"],
                              "channel": channel, "event_ts": msg["ts"], "team": TEAM_ID})
    assert resp.status_code == 200
    [post] = h.standin.wait_for(lambda s: s.answers(channel, msg["ts"]), timeout=30)
    h.idle()
    return h.recorder.replies[question], post


def test_slack_shows_the_answers_lists_and_tables_as_such_streamed_and_posted(slack: SlackHarness) -> None:
    found, texts = 0, []
    for stream in (True, False):
        slack.bot.conversations.stream_answers = stream
        try:
            for question in QUESTIONS:
                reply, post = ask_slack(slack, question)
                assert post.method == ("chat.stream" if stream else "chat.postMessage")
                shown = post.params["blocks"][0]
                assert shown["type"] == "markdown"
                # what Slack received is the reply's text through the renderer...
                assert shown == render.answer_messages(reply)[0]["blocks"][0]
                # ...holding each list as a list and each table as columns or Header: value lines
                found += assert_chat_rendering(reply.text, shown["text"])
                texts.append(reply.text)
        finally:
            slack.bot.conversations.stream_answers = True
    assert_something_to_render(found, texts)


# -- Teams ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def teams(tmp_path_factory: pytest.TempPathFactory, index):
    data = tmp_path_factory.mktemp("layout-teams")
    store = StateStore(sqlite_url(data / "state.sqlite"))
    runtime = build_agent(Settings(chatops_data_dir=data), index=index)
    recorder = RecordingAgent(runtime.agent)
    bot = TeamsBot(recorder, store, stream_interval=0.05)
    server = ServerThread(lambda: create_app([TeamsWebAdapter(bot, TeamsAuthConfig(), allow_unauthenticated=True)]))
    with ConnectorStandIn() as connector:
        server.start()
        with httpx.Client(base_url=server.url, timeout=30) as http:
            yield type("T", (), {"http": http, "connector": connector, "recorder": recorder})
        server.stop()
    store.close()


def ask_teams(t, question: str, personal: bool) -> tuple[Reply, dict]:
    n = next(_ids)
    conversation = ({"conversationType": "personal", "tenantId": "t1", "id": f"a:personal-layout-{n}"} if personal
                    else {"isGroup": True, "conversationType": "channel", "tenantId": "t1",
                          "id": f"19:layout@thread.tacv2;messageid={n}"})
    activity = {"type": "message", "id": f"layout-{n}", "timestamp": "2026-11-21T10:00:00.000Z",
                "serviceUrl": t.connector.url, "channelId": "msteams",
                "from": {"id": "29:aad-ada", "name": "Ada Lovelace", "aadObjectId": "aad-ada"},
                "conversation": conversation, "recipient": {"id": "28:bot-app-id", "name": "chatops"},
                "text": question if personal else f"<at>chatops</at> {question}", "textFormat": "plain",
                "locale": "en-US", "channelData": {"tenant": {"id": "t1"}}}
    if not personal:
        activity["entities"] = [{"type": "mention", "mentioned": {"id": "28:bot-app-id", "name": "chatops"},
                                 "text": "<at>chatops</at>"}]
    assert t.http.post("/api/messages", json=activity).status_code in (200, 201)
    [sent] = [c for c in t.connector.messages() if c.conversation_id == conversation["id"]]
    return t.recorder.replies[question], sent.body


def card_elements(body: dict) -> list[dict]:
    [card] = [a["content"] for a in body["attachments"] if a["contentType"] == "application/vnd.microsoft.card.adaptive"]
    return card["body"]


def test_teams_shows_the_answers_lists_and_tables_as_such_in_the_card_and_the_streamed_text(teams) -> None:
    found, texts = 0, []
    for question in QUESTIONS:
        # a channel: one card, whose elements show the reply's blocks
        reply, body = ask_teams(teams, question, personal=False)
        elements = card_elements(body)
        lists, tables = structures(reply.text)
        shown_text = "\n".join(e["text"] for e in elements if e["type"] == "TextBlock")
        assert_no_markdown_table(shown_text)
        grids = [e for e in elements if e["type"] == "Table"]
        assert len(grids) == len(tables)
        for grid, table in zip(grids, tables):
            header = [c["items"][0]["text"] for c in grid["rows"][0]["cells"]]
            assert header[:-1] == list(table.header.cells[:-1]) and header[-1].startswith(table.header.cells[-1])
            assert len(grid["rows"]) == 1 + len(table.rows)
        for block in lists:
            assert any(e["type"] == "TextBlock" and e["text"].startswith(f"{block.start}. " if block.ordered else "- ")
                       for e in elements)
        version = [a["content"]["version"] for a in body["attachments"]][0]
        assert version == ("1.5" if tables else "1.4")
        # a personal chat: the streamed text is the final message's text
        reply, body = ask_teams(teams, question, personal=True)
        assert body["text"] == chat_markdown(reply.text.strip())
        found += assert_chat_rendering(reply.text, body["text"])
        texts.append(reply.text)
    assert_something_to_render(found, texts)


# -- the terminal ----------------------------------------------------------------------------------------------
def test_chatops_ask_prints_the_answers_lists_line_by_line_and_tables_in_columns(
        tmp_path: Path, wiki: Path, index, embedding_cache_dir: Path) -> None:
    data = seed_embedding_cache(tmp_path / "data", embedding_cache_dir / "embeddings.sqlite")
    indexed = run_chatops(["index", f"folder:{wiki}"], data, cwd=tmp_path)
    assert indexed.returncode == 0, indexed.stderr
    found, texts = 0, []
    for question in QUESTIONS:
        asked = run_chatops(["ask", "--json", question], data, cwd=tmp_path)
        assert asked.returncode == 0, asked.stderr
        text = json.loads(asked.stdout)["text"]
        printed = run_chatops(["ask", question], data, cwd=tmp_path)
        assert printed.returncode == 0, printed.stderr
        answer = printed.stdout.split("\n\nSources:\n")[0].strip("\n")
        assert answer == render_text(text)
        assert_no_markdown_table(answer)
        lists, tables = structures(text)
        for table in tables:
            assert "\n".join(table_lines(table)) in answer
        for block in lists:
            assert "\n".join(list_lines(block, lambda item: render_text(item), bullet="\u2022")) in answer
        found += len(lists) + len(tables)
        texts.append(text)
    assert_something_to_render(found, texts)
