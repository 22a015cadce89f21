"""The LLM planner's answer streamed into Slack as the model writes it: the real Bolt app over signed HTTP
(``tests/standins/slack/``), the real LLM planner over the session's index, the model a stand-in
OpenAI-compatible server streaming its draft a few words at a time (``tests/standins/openai.py``).

The stream starts before the model's draft has been judged as a whole (the claim check comes after it),
only sentences whose citations already passed are shown, and when a later check removes a sentence that
was shown, the message is rewritten to the final answer: no such sentence stays visible. A sentence with a
figure its passage lacks is never shown at all, whatever the claim check says.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from app.jobs import IndexJobs
from app.settings import Settings
from app.wiring import build_agent
from connectors.folder import FolderSource
from state import StateStore
from state.store import sqlite_url

from tests.standins.openai import OpenAIStandIn, chat, json_reply
from tests.standins.slack import BOT_USER_ID, TEAM_ID, SlackHarness
from tests.llm_script import Brain, all_supported, first_sentence, make_agent, passages, pigeon_claims

ALICE = "UALICE01"
QUESTION = "how do I declare an incident?"


class Timed(Brain):
    """The scripted model, remembering when each step was asked (``time.monotonic()``, as the stand-in's calls)."""

    def __init__(self, **steps) -> None:
        super().__init__(**steps)
        self.asked: dict[str, float] = {}

    def __call__(self, req: dict):
        resp = super().__call__(req)
        self.asked.setdefault(self.calls[-1], time.monotonic())
        return resp


def pigeon_answer(req: dict):
    (n1, _, t1), (n2, _, t2) = passages(req)[:2]
    return chat(f"{first_sentence(t1)} [{n1}] Incidents are also announced by carrier pigeon [{n1}]. "
                f"Nobody cites this. {first_sentence(t2)} [{n2}] See the runbook [{n2}].")


def invented_figure_answer(req: dict):
    (n1, _, t1), (n2, _, t2) = passages(req)[:2]
    assert "9999" not in t1
    return chat(f"{first_sentence(t1)} [{n1}] Incidents must be declared within 9999 minutes [{n1}]. "
                f"{first_sentence(t2)} [{n2}] See the runbook [{n2}].")


@pytest.fixture
def llm_slack(tmp_path, wiki_index, session_wiki, request):
    """The harness; ``request.param`` is the claim check, or ``(answer, claim check)``."""
    answer, claims = request.param if isinstance(request.param, tuple) else (pigeon_answer, request.param)
    if "hostile_index" in request.fixturenames:
        wiki_index = request.getfixturevalue("hostile_index")
    brain = Timed(answer=answer, claims=claims)
    store = StateStore(sqlite_url(tmp_path / "state.sqlite"))
    with OpenAIStandIn(brain, chunk_delay=0.02) as llm:
        runtime = build_agent(Settings(chatops_data_dir=tmp_path / "data"), index=wiki_index)
        runtime.agent = make_agent(wiki_index, llm.base_url, tmp_path)
        h = SlackHarness(runtime, store, IndexJobs(runtime, store, [FolderSource(session_wiki)]))
        h.standin.add_user(ALICE)
        h.standin.add_conversation("C0LLMSTRM")
        try:
            yield h, brain
        finally:
            h.close()
            store.close()


def ask(h: SlackHarness) -> dict:
    msg = h.standin.user_message("C0LLMSTRM", ALICE, f"<@{BOT_USER_ID}> {QUESTION}")
    resp, _ = h.sender.event({"type": "app_mention", "user": ALICE, "text": msg["text"], "ts": msg["ts"],
                              "channel": "C0LLMSTRM", "event_ts": msg["ts"], "team": TEAM_ID})
    assert resp.status_code == 200
    h.standin.wait_for(lambda s: s.answers("C0LLMSTRM", msg["ts"]), timeout=30)
    h.idle()
    return msg


def bot_messages(h: SlackHarness) -> list[dict]:
    return [m for m in h.standin.conversations["C0LLMSTRM"].messages if m.get("bot_id")]


@pytest.mark.parametrize("llm_slack", [lambda req: json_reply({"verdicts": []})], indirect=True)
def test_sentences_stream_as_the_model_writes_them_and_only_cited_ones(llm_slack) -> None:
    h, brain = llm_slack
    msg = ask(h)
    [start] = h.standin.calls_to("chat.startStream", channel="C0LLMSTRM")
    appends = h.standin.calls_to("chat.appendStream", channel="C0LLMSTRM")
    [stop] = h.standin.calls_to("chat.stopStream", channel="C0LLMSTRM")
    assert start.ok and start.params["thread_ts"] == msg["ts"] and stop.ok
    # the first sentence was on Slack before the model's draft was judged as a whole
    assert start.at < brain.asked["claims"]
    assert re.fullmatch(r"[^\[]+ \[1\]", start.params["markdown_text"]), start.params["markdown_text"]
    streamed = start.params["markdown_text"] + "".join(c.params["markdown_text"] for c in appends)
    assert "Nobody cites this" not in streamed
    # nothing was dropped later: the stream simply continued to the final text, then got its blocks
    [shown] = bot_messages(h)
    assert shown["text"] == streamed and shown["blocks"][0] == {"type": "markdown", "text": streamed}
    assert [b["type"] for b in shown["blocks"][1:]] == ["context", "context_actions"]
    assert h.standin.calls_to("chat.update") == [] and h.standin.calls_to("chat.postMessage", channel="C0LLMSTRM") == []


@pytest.mark.parametrize("llm_slack", [pigeon_claims], indirect=True)
def test_a_shown_sentence_the_claim_check_drops_is_rewritten_away(llm_slack) -> None:
    h, brain = llm_slack
    ask(h)
    appends = h.standin.calls_to("chat.appendStream", channel="C0LLMSTRM")
    [start] = h.standin.calls_to("chat.startStream", channel="C0LLMSTRM")
    streamed = start.params["markdown_text"] + "".join(c.params["markdown_text"] for c in appends)
    assert "pigeon" in streamed  # its citation held, so it went out early...
    [stop] = h.standin.calls_to("chat.stopStream", channel="C0LLMSTRM")
    [update] = h.standin.calls_to("chat.update", channel="C0LLMSTRM")
    assert stop.ok and "blocks" not in stop.params  # ...the stream was stopped bare
    assert update.ok and update.params["ts"] == start.result["ts"] and update.at > stop.at
    # ...and the message rewritten to the final answer: the sentence does not stay visible
    [shown] = bot_messages(h)
    assert "pigeon" not in shown["text"] and "pigeon" not in str(shown["blocks"])
    assert shown["blocks"][0]["type"] == "markdown" and "[1]" in shown["blocks"][0]["text"]
    assert [b["type"] for b in shown["blocks"][1:]] == ["context", "context_actions"]


@pytest.mark.parametrize("llm_slack", [(invented_figure_answer, all_supported)], indirect=True)
def test_a_sentence_with_a_figure_its_passage_lacks_is_never_streamed(llm_slack) -> None:
    h, brain = llm_slack
    ask(h)
    [start] = h.standin.calls_to("chat.startStream", channel="C0LLMSTRM")
    appends = h.standin.calls_to("chat.appendStream", channel="C0LLMSTRM")
    streamed = start.params["markdown_text"] + "".join(c.params["markdown_text"] for c in appends)
    assert "claims" in brain.calls and "9999" not in streamed
    assert "See the runbook" in streamed  # the stream went on past the dropped sentence
    [shown] = bot_messages(h)
    assert shown["text"] == streamed and "9999" not in str(shown["blocks"])
    assert h.standin.calls_to("chat.update") == []  # nothing shown had to be taken back


HOSTILE_SENTENCE = "Declare incidents at <https://evil|https://intranet> in the incident tool."


@pytest.fixture(scope="module")
def hostile_index(tmp_path_factory, embedder):
    """An index of examples/wiki whose incident page carries a Slack link that lies about its target."""
    import shutil

    from index.indexer import Indexer
    from index.knowledge import KnowledgeIndex

    from tests.helpers import WIKI

    root = tmp_path_factory.mktemp("hostile-link")
    shutil.copytree(WIKI, root / "wiki")
    page = root / "wiki" / "engineering" / "incident-response.md"
    page.write_text(page.read_text().replace("An incident is any unplanned event",
                                             f"{HOSTILE_SENTENCE} An incident is any unplanned event", 1))
    index = KnowledgeIndex(root / "index", embedder)
    Indexer(index).run(FolderSource(root / "wiki"))
    yield index
    index.close()


def hostile_link_answer(req: dict):
    found = [(n, t) for n, _, t in passages(req) if "https://evil" in t]
    assert found, "the page's link reaches the model"
    (n1, _), (n2, _, t2) = found[0], next(p for p in passages(req) if p[0] != found[0][0])
    return chat(f"{HOSTILE_SENTENCE} [{n1}] {first_sentence(t2)} [{n2}]")


@pytest.mark.parametrize("llm_slack", [(hostile_link_answer, all_supported)], indirect=True)
def test_a_slack_link_from_a_page_is_neutralised_in_every_streamed_piece(llm_slack, hostile_index) -> None:
    """A page's ``<url|label>`` sequence, quoted by the model, is escaped in each piece streamed as the model
    writes (the early release) and in the message that stays."""
    h, brain = llm_slack
    ask(h)
    [start] = h.standin.calls_to("chat.startStream", channel="C0LLMSTRM")
    appends = h.standin.calls_to("chat.appendStream", channel="C0LLMSTRM")
    pieces = [start.params["markdown_text"], *(c.params["markdown_text"] for c in appends)]
    streamed = "".join(pieces)
    assert "&lt;https://evil|https://intranet&gt;" in streamed, streamed
    assert not any("<https://evil" in p for p in pieces)
    [shown] = bot_messages(h)
    assert "<https://evil" not in json.dumps(shown)
    assert shown["text"].startswith("Declare incidents at") and h.standin.calls_to("chat.update") == []
