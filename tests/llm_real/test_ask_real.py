"""``chatops ask`` in LLM mode against the real model (a subprocess, ``OPENAI_BASE_URL`` pointing at the
SmolLM2 server): a knowledge question, a near miss, a general question and a meeting request.

What must hold for any model, however weak (strict tests): the turn completes inside its budget, the reply's
citations are valid, and what it posts is grounded in what it cites or is a refusal. What today's LLM mode
does not yet do with a model that ignores ``tools`` and answers slowly (route through the model, answer a
general question directly) is an ``xfail(strict=False)`` test with the reason (issue 23 items 2 and 4).
Answer quality is not asserted (``bench/llm_real.py`` measures it). Each question is asked once per module.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from agent.models import Reply
from helpers import run_chatops
from index.knowledge import KnowledgeIndex

from realmodel import TURN_BUDGET_S, assert_safe, reply_from_json

#: CLI start-up (imports, opening the index, loading the embedder): up to a minute on a busy 2-core machine.
STARTUP_S = 120.0

QUESTIONS = {
    "knowledge": "how do I declare an incident?",
    "near_miss": "is there a sabbatical after 5 years?",  # the wiki has no sabbatical policy
    "general": "what does HTTP 503 mean?",
    "meeting": "set up a 30 minute meeting with bob@example.com tomorrow at 3pm about the incident retro",
}

PROSE_ROUTING = ("the server ignores `tools` (found out once by a probe of 32 tokens, kept in the data dir) and "
                 "routing is by a JSON decision; on a loaded 2-core machine SmolLM2 writes 3-20 tokens/s, so the "
                 "answer over six passages is often predicted not to fit the 17 s left and the turn takes the "
                 "extractive answer before its budget is spent; on a quiet one the knowledge turn makes 2 or more calls")


@pytest.fixture(scope="module")
def asked(llm_env: dict[str, str], wiki_data: Path, embedder) -> dict[str, tuple[dict, float, Reply]]:
    """Each question asked once through ``chatops ask --json``: (the JSON, seconds, the reply), checked later."""
    out = {}
    for name, question in QUESTIONS.items():
        t = time.monotonic()
        done = run_chatops(["ask", "--json", question], wiki_data, cwd=wiki_data.parent,
                           timeout=TURN_BUDGET_S + STARTUP_S, **llm_env)
        elapsed = time.monotonic() - t
        assert done.returncode == 0, f"{name}: {done.stderr[-3000:]}"
        obj = json.loads(done.stdout)
        out[name] = (obj, elapsed, reply_from_json(obj))
    return out


@pytest.fixture(scope="module")
def lookup(asked, wiki_data: Path, embedder):
    """The CLI's index, opened once the subprocesses are done: chunk id -> stored chunk."""
    index = KnowledgeIndex(wiki_data / "index", embedder)
    yield index.dense.get
    index.close()


@pytest.mark.parametrize("name", list(QUESTIONS))
def test_every_turn_completes_in_budget_and_posts_only_what_its_passages_hold(asked, lookup, name: str) -> None:
    obj, elapsed, reply = asked[name]
    # the turn's own time (the CLI's start-up is not the user's wait in Slack or Teams)
    assert obj["timings_ms"]["total"] < TURN_BUDGET_S * 1000 + 5000, (elapsed, obj["timings_ms"])
    assert reply.text.strip()
    assert_safe(reply, lookup, knowledge=name in ("knowledge", "near_miss"))


def test_the_knowledge_question_is_searched_and_answered_from_the_wiki_or_refused(asked) -> None:
    _, _, reply = asked["knowledge"]
    assert reply.trace.queries, f"answered without searching: {reply.route} {reply.text!r}"
    assert reply.refused or reply.citations


def test_the_near_miss_posts_no_sabbatical_policy(asked) -> None:
    """A weak model invents one (it described a parental-leave policy for a question its passages did not
    answer); whatever it wrote, nothing about a sabbatical may be posted unless a passage says it."""
    _, _, reply = asked["near_miss"]
    assert reply.refused or "sabbatical" not in reply.text.lower(), reply.text


def test_the_meeting_request_proposes_a_pending_action_and_executes_nothing(asked) -> None:
    obj, _, _ = asked["meeting"]
    pending = obj["pending_action"]
    assert pending is not None and pending["tool"] == "calendar.create", obj["text"]
    assert pending["idempotency_key"] and pending["args"]


def test_tool_support_is_found_out_by_one_probe_and_kept_for_the_next_processes(asked, wiki_data: Path) -> None:
    """llama-cpp-python's server ignores ``tools``: one cheap probe (in the first ``chatops ask`` that needs
    it) finds that out; it is kept in the data dir, so no later process probes or sends ``tools`` again.
    (A call may still time out when the loaded machine slows the server tenfold between two calls: the
    turn then ends inside its budget, which the test above checks.)"""
    probed = [name for name, (obj, _, _) in asked.items()
              if any(s["step"] == "tools_probe" for s in obj["trace"]["steps"])]
    assert len(probed) <= 1, probed  # none when another module's process found out first
    kept = json.loads((wiki_data / "llm-servers.json").read_text())
    [entry] = [v for k, v in kept.items() if k.endswith(" smollm2-135m-instruct")]
    assert entry["tools"] is False and entry["latency"]["calls"]
    for name, (obj, _, _) in asked.items():
        [u] = [s for s in obj["trace"]["steps"] if s["step"] == "llm_usage"]
        sent_tools = [s for s in obj["trace"]["steps"] if s["step"] in ("tools_unsupported", "tool_call_in_content")]
        assert u["calls"] <= 8 and not sent_tools, (name, u, sent_tools)


@pytest.mark.xfail(strict=False, reason=PROSE_ROUTING)
def test_the_knowledge_turn_really_uses_the_model(asked) -> None:
    obj, _, _ = asked["knowledge"]
    assert obj["timings_ms"].get("llm_calls", 0) >= 2, obj["timings_ms"]


@pytest.mark.xfail(strict=False, reason=PROSE_ROUTING + "; the rule-based planner searches a general question")
def test_the_general_question_is_answered_directly_by_the_model(asked) -> None:
    _, _, reply = asked["general"]
    assert reply.route == "general" and not reply.trace.queries and not reply.refused, reply
