"""A signed Slack mention answered by streaming, and a Teams message, in LLM mode against the real model:
the real Bolt app over signed HTTP (``tests/standins/slack/``) and the real Bot Framework adapter
(``tests/standins/teams.py``), the LLM planner wired from the settings (``app.wiring.build_agent``) exactly as
``chatops serve`` wires it for ``OPENAI_BASE_URL``.

For any model: the turn completes within its budget, the user sees progress at once and the answer in the
end, every citation in it is valid, and what is posted is grounded or a refusal.
"""

from __future__ import annotations

import re
import time

from agent.models import Reply
from app.jobs import IndexJobs
from app.settings import Settings
from app.wiring import build_agent
from connectors.folder import FolderSource
from state import StateStore
from state.store import sqlite_url

from tests.llm_real.realmodel import TURN_BUDGET_S, assert_safe
from tests.standins.slack import BOT_USER_ID, TEAM_ID, SlackHarness
from tests.test_teams import message
import tests.test_teams_native as native

make_teams = native.make_teams  # the fixture: a server with Teams wired from the settings

ALICE = "UALICE01"
CHANNEL = "C0LLMREAL"
QUESTION = "how do I declare an incident?"


def llm_settings(llm_env: dict[str, str], **extra) -> dict:
    return {"openai_base_url": llm_env["OPENAI_BASE_URL"], "openai_api_key": llm_env["OPENAI_API_KEY"],
            "planner_model": llm_env["PLANNER_MODEL"], "answer_model": llm_env["ANSWER_MODEL"], **extra}


def test_a_slack_mention_is_answered_by_streaming_within_budget(llm_env, tmp_path, wiki_index, session_wiki) -> None:
    runtime = build_agent(Settings(chatops_data_dir=tmp_path / "data", **llm_settings(llm_env)), index=wiki_index)
    assert type(runtime.agent.planner).__name__ == "LLMPlanner"
    replies: list[Reply] = []
    runtime.agent.observe(lambda turn, reply: replies.append(reply))
    store = StateStore(sqlite_url(tmp_path / "state.sqlite"))
    h = SlackHarness(runtime, store, IndexJobs(runtime, store, [FolderSource(session_wiki)]))
    try:
        h.standin.add_user(ALICE)
        h.standin.add_conversation(CHANNEL)
        msg = h.standin.user_message(CHANNEL, ALICE, f"<@{BOT_USER_ID}> {QUESTION}")
        t = time.monotonic()
        resp, _ = h.sender.event({"type": "app_mention", "user": ALICE, "text": msg["text"], "ts": msg["ts"],
                                  "channel": CHANNEL, "event_ts": msg["ts"], "team": TEAM_ID})
        assert resp.status_code == 200 and time.monotonic() - t < 3, "Slack's 3 s ack"
        h.standin.wait_for(lambda s: s.answers(CHANNEL, msg["ts"]), timeout=TURN_BUDGET_S + 30)
        answered = time.monotonic() - t
        h.idle()
    finally:
        h.close()
        store.close()
    [reply] = replies
    assert answered < TURN_BUDGET_S + 15, f"{answered:.1f} s"
    assert_safe(reply, wiki_index.dense.get, knowledge=True)
    # progress was visible in the thread before the answer (a status, or the stream itself)
    assert h.standin.calls_to("assistant.threads.setStatus") or h.standin.calls_to("chat.startStream")
    shown = [m for m in h.standin.conversations[CHANNEL].messages if m.get("bot_id")]
    assert shown and shown[-1]["text"].strip()
    if not reply.refused:  # the posted text is the reply's, every marker one of its citations
        assert set(map(int, re.findall(r"\[(\d+)\]", shown[-1]["text"]))) <= {c.n for c in reply.citations}


def test_a_teams_message_is_answered_within_budget(llm_env, make_teams, wiki_index) -> None:
    t = make_teams(**llm_settings(llm_env))
    assert type(t.agent.agent.planner).__name__ == "LLMPlanner"
    start = time.monotonic()
    resp = t.http.post("/api/messages", json=message(t.connector.url, QUESTION, activity_id="real-1"))
    assert resp.status_code in (200, 201, 202)

    def answered():
        return [m for m in t.connector.messages() if m.body.get("replyToId") == "real-1"]

    deadline = start + TURN_BUDGET_S + 30
    while not answered() and time.monotonic() < deadline:
        time.sleep(0.2)
    [answer] = answered()
    elapsed = time.monotonic() - start
    [reply] = t.agent.replies
    assert elapsed < TURN_BUDGET_S + 15, f"{elapsed:.1f} s"
    assert_safe(reply, wiki_index.dense.get, knowledge=True)
    assert answer.body.get("text") or answer.card_text()
    assert t.connector.typing() or t.connector.streams, "no progress was shown while the model worked"


