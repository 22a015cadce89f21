"""``chatops ask`` in LLM mode against the real model (a subprocess, ``OPENAI_BASE_URL`` pointing at the
SmolLM2 server): a knowledge question, a near miss, a general question and a meeting request.

What must hold for any model, however weak (strict tests): the turn completes inside its budget, the reply's
citations are valid, and what it posts is grounded in what it cites or is a refusal. What depends on the
machine's load (how many calls a turn can afford) and on this model's weakness (it cannot route) is asserted as
what must hold either way: a knowledge turn uses the model or its trace says why not, and a general question
that SmolLM2 misroutes proposes nothing.
Answer quality is not asserted (``bench/llm_real.py`` measures it). Each question is asked once per module.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from agent.models import Reply
from tests.helpers import run_chatops
from index.knowledge import KnowledgeIndex

from tests.llm_real.realmodel import TURN_BUDGET_S, assert_safe, reply_from_json

#: CLI start-up (imports, opening the index, loading the embedder): up to a minute on a busy 2-core machine.
STARTUP_S = 120.0

QUESTIONS = {
    "knowledge": "how do I declare an incident?",
    "near_miss": "is there a sabbatical after 5 years?",  # the wiki has no sabbatical policy
    "general": "what does HTTP 503 mean?",
    "meeting": "set up a 30 minute meeting with bob@example.com tomorrow at 3pm about the incident retro",
}

#: What SmolLM2 does with the routing decision (measured at temperature 0, the JSON-decision prompt, llama.cpp's
#: grammar from the schema): "what does HTTP 503 mean?", "hi, what can you do?" and "thanks!" all come back as
#: {"route": "action"} with no tool and made-up arguments. The bot reads an action naming no registered tool as
#: a search (``route_unknown_tool``), so this model never answers a general question directly: the stand-in
#: tests (tests/test_llm_planner.py) pin the direct answer of a model that routes it so.


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


def test_the_knowledge_turn_uses_the_model_or_its_trace_says_why_not(asked) -> None:
    """Two calls or more (routing, then the rewrite, reflection or the answer) when the model is fast enough;
    on a loaded machine SmolLM2 writes 1-5 tokens/s and a turn may skip it, but never silently: the trace names
    the step skipped for time (``llm_usage.degraded``) or the fallback and its reason."""
    obj, _, reply = asked["knowledge"]
    [usage] = [s for s in obj["trace"]["steps"] if s["step"] == "llm_usage"]
    reasons = usage["degraded"] + [s["reason"] for s in obj["trace"]["steps"] if s["step"] == "fallback"]
    why_not = [r for r in reasons if "slow" in r or "BudgetExceeded" in r or "Timeout" in r]
    assert usage["calls"] >= 2 or why_not, (usage, reasons)
    assert reply.trace.queries, "a knowledge question is searched whatever the model did"


def test_the_general_question_proposes_nothing_and_is_answered_directly_or_from_the_wiki(asked) -> None:
    """The general question (SmolLM2 routes it to an action naming no tool, see above): whatever it routes,
    the model's made-up action arguments never become a proposal, and the reply is either a direct answer (no
    search, not a refusal) or the wiki path's (searched; cited or refused, checked for grounding above)."""
    obj, _, reply = asked["general"]
    assert obj["pending_action"] is None, obj["pending_action"]
    if reply.route == "general":
        assert not reply.trace.queries and not reply.refused and reply.text.strip(), reply
    else:
        assert reply.trace.queries and (reply.refused or reply.citations), (reply.route, reply.text)
