"""``chatops ask`` in LLM mode against the real model (a subprocess, ``OPENAI_BASE_URL`` pointing at the
SmolLM2 server): a knowledge question, a near miss, a general question and a meeting request.

What is asserted holds for any model, however weak: the turn completes inside its budget, the reply's
citations are valid, and what it posts is grounded in what it cites or is a refusal. Answer quality is not
(``bench/llm_real.py`` measures it).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from helpers import run_chatops
from index.knowledge import KnowledgeIndex

from realmodel import TURN_BUDGET_S, assert_safe, reply_from_json

#: CLI start-up (imports, opening the index, loading the embedder) on a busy 2-core machine.
STARTUP_S = 40.0


def ask(question: str, data: Path, env: dict[str, str], embedder) -> tuple[dict, float]:
    t = time.monotonic()
    done = run_chatops(["ask", "--json", question], data, cwd=data.parent, timeout=TURN_BUDGET_S + STARTUP_S + 60,
                       **env)
    elapsed = time.monotonic() - t
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout), elapsed


def checked(obj: dict, data: Path, embedder):
    reply = reply_from_json(obj)
    index = KnowledgeIndex(data / "index", embedder)
    try:
        assert_safe(reply, index.dense.get)
    finally:
        index.close()
    return reply


def llm_calls(obj: dict) -> int:
    return int(obj["timings_ms"].get("llm_calls", 0))


def test_a_knowledge_question_completes_in_budget_grounded_or_refused(llm_env, wiki_data, embedder) -> None:
    obj, elapsed = ask("how do I declare an incident?", wiki_data, llm_env, embedder)
    assert elapsed < TURN_BUDGET_S + STARTUP_S, f"{elapsed:.1f} s"
    reply = checked(obj, wiki_data, embedder)
    assert reply.trace.queries, f"a knowledge question was answered without searching: {reply.route} {reply.text!r}"
    assert llm_calls(obj) >= 1, "the model was never asked"


def test_a_near_miss_is_refused_or_answered_only_from_its_passages(llm_env, wiki_data, embedder) -> None:
    """The wiki has no sabbatical policy; a weak model invents one, and the gate must not let it through."""
    obj, elapsed = ask("is there a sabbatical after 5 years?", wiki_data, llm_env, embedder)
    assert elapsed < TURN_BUDGET_S + STARTUP_S, f"{elapsed:.1f} s"
    reply = checked(obj, wiki_data, embedder)
    assert reply.refused or reply.citations, reply.text
    assert "sabbatical" not in reply.text.lower() or reply.refused, reply.text


@pytest.mark.xfail(strict=False, reason="a model that answers tool calls in prose is routed by the rule-based "
                   "planner, which cannot answer general questions directly (issue 23 item 4)")
def test_a_general_question_is_answered_directly_by_the_model(llm_env, wiki_data, embedder) -> None:
    obj, elapsed = ask("what does HTTP 503 mean?", wiki_data, llm_env, embedder)
    assert elapsed < TURN_BUDGET_S + STARTUP_S, f"{elapsed:.1f} s"
    reply = checked(obj, wiki_data, embedder)
    assert reply.route == "general" and not reply.trace.queries and reply.text.strip(), obj


def test_a_general_question_completes_in_budget_and_posts_nothing_ungrounded(llm_env, wiki_data, embedder) -> None:
    obj, elapsed = ask("what does HTTP 503 mean?", wiki_data, llm_env, embedder)
    assert elapsed < TURN_BUDGET_S + STARTUP_S, f"{elapsed:.1f} s"
    checked(obj, wiki_data, embedder)
    assert obj["text"].strip()


def test_a_meeting_request_proposes_a_pending_action_never_an_executed_one(llm_env, wiki_data, embedder) -> None:
    obj, elapsed = ask("set up a 30 minute meeting with bob@example.com tomorrow at 3pm about the incident retro",
                       wiki_data, llm_env, embedder)
    assert elapsed < TURN_BUDGET_S + STARTUP_S, f"{elapsed:.1f} s"
    checked(obj, wiki_data, embedder)
    pending = obj["pending_action"]
    assert pending is not None and pending["tool"] == "calendar.create", obj["text"]
    assert pending["idempotency_key"] and pending["args"]
