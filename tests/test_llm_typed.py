"""Typed outputs and limited models (issue 23 items 2 and 4), through ``chatops ask --json`` and a signed
Slack event, against the stand-in OpenAI-compatible server on 127.0.0.1 (``tests/standins/openai.py``)
scripted the way real servers and small models answer.

Covers: JSON in code fences, with prose around it and trailing commas, read without a repair; an invalid
reply repaired in one round; an invalid reply twice ending in the step's deterministic fallback, recorded
as ``invalid_output``; a tool call written in the text (``<tool_call>`` chat-template form); a routing reply
that is JSON but no tool call searching instead of being posted; a server that ignores ``tools`` detected
by one probe and routed by a JSON decision (remembered: the next turn asks no probe); a server rejecting
``tools`` with a 400; ``json_schema`` answered 500 (llama-cpp-python) falling back to ``json_object`` with
the schema, remembered; a model measured too slow asked again once its measurements expire; a timed-out
call counted; a slow model losing reflection first and, slower still,
taking the extractive answer before the budget is spent; and in Slack, with a slow model, the ack within
3 s and the first visible progress within 2 s.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from agent.models import Turn
from app.jobs import IndexJobs
from app.settings import Settings
from app.wiring import build_agent
from connectors.folder import FolderSource
from state import StateStore
from state.store import sqlite_url

from tests.helpers import public_viewer, run_chatops, indexed_data_dir
from agent.llm.latency import MAX_AGE_S, LatencyMeter
from agent.llm.prompts import REWRITE_SCHEMA
from tests.standins.openai import OpenAIStandIn, chat, json_reply
from tests.standins.slack import BOT_USER_ID, TEAM_ID, SlackHarness
from tests.llm_script import DEFAULTS, Brain, kind

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

QUESTION = "how do I declare an incident?"


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, wiki_index, embedding_cache_dir: Path,
            session_wiki: Path) -> Path:
    """A data dir holding the wiki's index (``chatops index``), for ``chatops ask`` runs."""
    return indexed_data_dir(tmp_path_factory.mktemp("typed") / "data", embedding_cache_dir / "embeddings.sqlite",
                            f"folder:{session_wiki}", timeout=600)  # a busy machine


def ask(data: Path, llm: OpenAIStandIn, question: str = QUESTION, **env: str) -> dict:
    """``chatops ask --json QUESTION`` with the LLM mode pointed at ``llm``; the reply as printed."""
    proc = run_chatops(["ask", "--json", question], data, cwd=data.parent, timeout=180,
                       OPENAI_BASE_URL=llm.base_url, OPENAI_API_KEY="k", PLANNER_MODEL="small", ANSWER_MODEL="big",
                       **env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def steps(reply: dict, name: str) -> list[dict]:
    return [s for s in reply["trace"]["steps"] if s["step"] == name]


def usage(reply: dict) -> dict:
    [u] = steps(reply, "llm_usage")
    return u


def rewrite_of(req: dict) -> dict:
    return DEFAULTS["rewrite"](req).body["choices"][0]["message"]["content"]


def assert_cited_answer(reply: dict) -> None:
    assert not reply["refused"] and reply["citations"], reply["text"]
    assert "without the language model" not in reply["text"], steps(reply, "fallback")
    assert re.search(r"\[\d+\]", reply["text"])


# -- tolerant reading, repair, fallback ------------------------------------------------------------

def test_json_in_fences_and_prose_with_trailing_commas_is_read_without_repair(indexed) -> None:
    def rewrite(req):
        data = json.loads(rewrite_of(req))
        data["expansion"] = ["severity", "on-call"]
        body = json.dumps(data)[:-1] + ",}"  # a trailing comma, as small models write
        return chat(f"Here is the rewrite you asked for:\n```json\n{body}\n```\nLet me know if you need more.")

    reflect = chat('Sure. {"relevant": true, "sufficient": true, "missing": "", "next_query": "",} Hope this helps.')
    brain = Brain(rewrite=rewrite, reflect=reflect)
    with OpenAIStandIn(brain) as llm:
        reply = ask(indexed, llm)
    assert_cited_answer(reply)
    assert steps(reply, "output_repair") == [] and steps(reply, "invalid_output") == []
    [rw] = steps(reply, "rewrite")
    assert rw["expansion"] == ["severity", "on-call"] and rw["standalone"] == QUESTION
    assert steps(reply, "reflect")[0]["sufficient"] is True
    assert brain.calls.count("rewrite") == 1 and brain.calls.count("reflect") == 1


def test_an_invalid_reply_gets_one_repair_round(indexed) -> None:
    reflect = [chat("The passages look relevant and sufficient to me."),
               json_reply({"relevant": True, "sufficient": True, "missing": "", "next_query": ""})]
    brain = Brain(reflect=reflect)
    with OpenAIStandIn(brain) as llm:
        reply = ask(indexed, llm)
        repair = [r for r in llm.chat_requests() if kind(r) == "reflect"][1]
    assert_cited_answer(reply)
    [fix] = steps(reply, "output_repair")
    assert fix["output"] == "reflection" and "no JSON" in fix["error"]
    assert steps(reply, "invalid_output") == [] and steps(reply, "reflect")[0]["relevant"] is True
    # the repair round shows the model its reply and what was wrong with it, with the schema
    assert repair["messages"][-2] == {"role": "assistant", "content": "The passages look relevant and sufficient to me."}
    assert "could not be used" in repair["messages"][-1]["content"] and '"next_query"' in repair["messages"][-1]["content"]


def test_an_invalid_reply_twice_takes_the_steps_fallback_and_is_recorded(indexed) -> None:
    # The rewrite misses its required field twice: the question is searched as asked. The claim check answers
    # prose twice: its verdicts are unusable, the deterministic grounding check stands alone.
    brain = Brain(rewrite=json_reply({"query": "incident"}), claims=chat("All claims look fine to me."))
    with OpenAIStandIn(brain) as llm:
        reply = ask(indexed, llm, LLM_TOOLS="on")  # no tool probe: all eight calls of the turn for the steps
    assert_cited_answer(reply)
    invalid = {s["output"]: s for s in steps(reply, "invalid_output")}
    assert set(invalid) == {"rewrite", "claims"} and all(s["repaired"] for s in invalid.values())
    assert "standalone" in invalid["rewrite"]["error"]
    assert brain.calls.count("rewrite") == 2 and brain.calls.count("claims") == 2
    assert steps(reply, "rewrite") == [] and reply["trace"]["queries"][0]["query"] == QUESTION
    assert steps(reply, "claim_check") == []


# -- routing: tool calls in the text, JSON that is no call, servers without tools ----------------------

def test_a_tool_call_written_in_the_text_is_a_tool_call(indexed) -> None:
    route = chat('<tool_call>\n{"name": "knowledge_search", "arguments": {"query": "declare an incident severity"}}'
                 "\n</tool_call>")
    # A chat template that writes its calls in the text (the server passes no native tool_calls back): the
    # probe's call of ping in the text counts as calling tools, and so does the routing call's.
    brain = Brain(route=route, probe=chat('<tool_call>\n{"name": "ping", "arguments": {}}\n</tool_call>'))
    with OpenAIStandIn(brain, tools="ignored") as llm:
        reply = ask(indexed, llm)
    assert reply["route"] == "knowledge"
    assert_cited_answer(reply)
    assert steps(reply, "tools_probe")[0]["supported"] is True and brain.calls[:2] == ["probe", "route"]
    assert steps(reply, "tool_call_in_content")[0]["names"] == ["knowledge_search"]
    assert steps(reply, "route")[0]["search"] == "declare an incident severity"


def test_a_routing_reply_that_is_json_but_no_tool_call_searches(indexed) -> None:
    brain = Brain(route=chat('```json\n{"response": "Open the incident channel."}\n```'))
    with OpenAIStandIn(brain) as llm:
        reply = ask(indexed, llm)
    assert reply["route"] == "knowledge" and "{" not in reply["text"]
    assert_cited_answer(reply)
    assert steps(reply, "route_json_not_tool_call") and steps(reply, "route")[0]["search"] == QUESTION


def test_a_server_that_ignores_tools_is_detected_by_a_cheap_probe_first_and_routed_by_json(indexed) -> None:
    brain = Brain(route=chat("To declare an incident, you should contact your manager."),
                  probe=chat("Pong! I am a helpful assistant and I am always happy to help you with anything."))
    with OpenAIStandIn(brain, tools="ignored") as llm:
        reply = ask(indexed, llm, LLM_TOOLS="auto")
        probe, route_json = [r for r in llm.chat_requests() if kind(r) in ("probe", "route_json")][:2]
    # the probe first (a few tokens of prompt, a short max_tokens), never the long routing prompt with tools
    assert brain.calls[:2] == ["probe", "route_json"] and "route" not in brain.calls
    assert probe["max_tokens"] <= 32 and sum(len(m["content"]) for m in probe["messages"]) < 100
    assert steps(reply, "tools_probe")[0]["supported"] is False
    assert reply["route"] == "knowledge" and steps(reply, "route")[0]["source"] == "llm_json"
    assert_cited_answer(reply)
    assert "tools" not in route_json and route_json["response_format"]["type"] == "json_schema"
    assert len(route_json["messages"][0]["content"]) < 1200  # a short routing prompt for a slow model


def test_a_model_found_without_tools_is_remembered_per_server_and_model(wiki_index, tmp_path) -> None:
    brain = Brain(route=chat("Hello! How can I help?"))
    with OpenAIStandIn(brain, tools="ignored") as llm:
        rt = build_agent(Settings(chatops_data_dir=tmp_path / "d", openai_base_url=llm.base_url,
                                  planner_model="small"), index=wiki_index)
        first = rt.agent.answer(Turn(viewer=public_viewer(), text=QUESTION))
        n = len(brain.calls)
        second = rt.agent.answer(Turn(viewer=public_viewer(), text="how do I request time off?"))
    assert brain.calls[:2] == ["probe", "route_json"]
    assert brain.calls[n] == "route_json" and "probe" not in brain.calls[n:] and "route" not in brain.calls[n:]
    assert not first.refused and not second.refused and second.route == "knowledge"


def test_what_a_server_can_do_is_kept_in_the_data_dir_for_the_next_process(indexed) -> None:
    # llama-cpp-python's profile: tools ignored, json_schema answered 500. The first `chatops ask` finds out
    # both (a probe, a 500); the second, a new process on the same data dir, asks neither again and starts
    # with the latency the first measured.
    brain = Brain(route=chat("Let me help."))
    with OpenAIStandIn(brain, tools="ignored", json_schema_status=500) as llm:
        first = ask(indexed, llm)
        n = len(llm.chat_requests())
        second = ask(indexed, llm, question="how do I request time off?")
        later = llm.chat_requests()[n:]
        kept = json.loads((indexed / "llm-servers.json").read_text())[f"{llm.base_url} small"]
    assert brain.calls[:2] == ["probe", "route_json"] and steps(first, "tools_probe")
    assert usage(first)["failed"] == 1  # the json_schema request answered 500, once
    assert kept["tools"] is False and kept["json_format"] == "json_object" and kept["latency"]["calls"]
    assert steps(second, "tools_probe") == [] and kind(later[0]) == "route_json"
    assert all("tools" not in r and (r.get("response_format") or {}).get("type") != "json_schema" for r in later)
    assert usage(second)["failed"] == 0
    assert_cited_answer(first)
    assert not second["refused"] and steps(second, "route")[0]["source"] == "llm_json"


def test_a_model_measured_too_slow_is_asked_again_once_its_measurements_expire(indexed) -> None:
    # A previous process measured the model at 30 s a call of 20 tokens (a load spike): while that is recent,
    # no call fits the turn and none is sent; five minutes later the measurements are forgotten and the model,
    # fast again, is asked and measured afresh (before, a model once measured too slow was never asked again,
    # in that process or any later one: SmolLM2 under a load of 13 lost every later turn of a dev set).
    def slow_entry(at: float) -> dict:
        return {"tools": True, "json_format": "json_schema",
                "latency": {"calls": [[30.0, 20, 400]] * 4, "prompt_chars": 6400, "prompt_tokens": 1600,
                            "measured_at": at}}

    def remember(llm: OpenAIStandIn, at: float) -> None:
        path = indexed / "llm-servers.json"
        kept = json.loads(path.read_text()) if path.is_file() else {}
        kept.update({f"{llm.base_url} small": slow_entry(at), f"{llm.base_url} big": slow_entry(at)})
        path.write_text(json.dumps(kept))

    brain = Brain()
    with OpenAIStandIn(brain) as llm:
        remember(llm, time.time() - 60)
        recent = ask(indexed, llm)
        assert llm.chat_requests() == [] and usage(recent)["calls"] == 0
        assert "not sent" in steps(recent, "fallback")[0]["reason"] and recent["citations"]  # the extractive answer
        remember(llm, time.time() - MAX_AGE_S - 1)
        started = time.time()
        expired = ask(indexed, llm)
        kept = json.loads((indexed / "llm-servers.json").read_text())[f"{llm.base_url} small"]["latency"]
    assert usage(expired)["calls"] >= 2 and brain.calls[:2] == ["route", "rewrite"], usage(expired)
    assert_cited_answer(expired)
    assert kept["measured_at"] >= started and [30.0, 20, 400] not in kept["calls"]


def test_measurements_are_forgotten_after_max_age_within_a_process() -> None:
    now = [1000.0]
    meter = LatencyMeter(max_age_s=300, clock=lambda: now[0])
    meter.observe("m", 12.0, 20, timed_out=True)
    meter.observe("m", 30.0, 20, prompt_tokens=400, prompt_chars=1600)
    assert meter.estimate_ms("m", 20) >= 12_000 and meter.affordable_tokens("m", 10) == 6
    now[0] += 299
    assert meter.estimate_ms("m", 20) >= 12_000  # still recent
    now[0] += 2
    assert meter.estimate_ms("m", 20) == 0 and meter.affordable_tokens("m", 10) is None
    assert meter.snapshot("m")["calls"] == []


def test_an_unreadable_capability_file_is_found_out_again_and_rewritten(indexed) -> None:
    (indexed / "llm-servers.json").write_text("{not json")
    brain = Brain()
    with OpenAIStandIn(brain) as llm:
        reply = ask(indexed, llm)
    assert_cited_answer(reply)
    assert brain.calls[:2] == ["probe", "route"] and steps(reply, "tools_probe")[0]["supported"] is True
    assert json.loads((indexed / "llm-servers.json").read_text())[f"{llm.base_url} small"]["tools"] is True


def test_max_tokens_stays_within_what_the_time_left_allows_on_a_single_slot_server(indexed) -> None:
    # A llama.cpp-like server: one slot, 20 tokens/s, and a model that writes to max_tokens every time. Each
    # call's max_tokens is lowered to what it writes in the time left, so no call outlives the turn, none
    # times out and none queues behind an abandoned one; the model still answers the turn.
    def long(step):
        return lambda req: (lambda r: (r.body["usage"].update(completion_tokens=600), r)[1])(DEFAULTS[step](req))

    brain = Brain(**{k: long(k) for k in ("rewrite", "reflect", "answer", "claims", "compliance")},
                  probe=chat("pong " * 32, completion_tokens=32))
    budget_s, reserve_s = 20.0, 3.0
    with OpenAIStandIn(brain, tools="ignored", single_slot=True, token_delay=0.05) as llm:
        t = time.monotonic()
        reply = ask(indexed, llm, TURN_BUDGET_MS=str(int(budget_s * 1000)), LLM_FALLBACK_RESERVE_MS=str(int(reserve_s * 1000)))
        reqs = llm.chat_requests()
    u = usage(reply)
    start = reqs[0]["_at"]  # the turn's budget started before its first call
    for r in reqs:
        # what the request may write, at the server's speed, ends before the turn's LLM budget does
        assert r["_at"] + r["max_tokens"] * 0.05 <= start + budget_s - reserve_s + 0.5, (kind(r), r["max_tokens"])
        assert r["_done"] - r["_at"] < budget_s  # no request waited behind an abandoned generation
    assert u["timeouts"] == 0 and u["capped"] >= 1 and steps(reply, "fallback") == [], u
    assert brain.calls[:2] == ["probe", "route_json"] and "answer" in brain.calls
    assert_cited_answer(reply)
    assert reply["timings_ms"]["total"] < budget_s * 1000 and time.monotonic() - t < 120


def test_a_server_rejecting_tools_is_routed_by_json(indexed) -> None:
    brain = Brain()
    with OpenAIStandIn(brain, tools="rejected") as llm:
        reply = ask(indexed, llm)
    assert steps(reply, "tools_probe")[0]["supported"] is False  # the probe got the 400
    assert brain.calls[0] == "route_json" and "route" not in brain.calls  # the 400 never reached the model
    assert reply["route"] == "knowledge"
    assert_cited_answer(reply)
    assert usage(reply)["failed"] == 1


def test_json_schema_answered_500_falls_back_to_json_object_with_the_schema(indexed) -> None:
    brain = Brain()
    with OpenAIStandIn(brain, json_schema_status=500) as llm:
        reply = ask(indexed, llm)
        structured = [r for r in llm.chat_requests() if r.get("response_format")]
    assert_cited_answer(reply)
    forms = [r["response_format"]["type"] for r in structured]
    assert forms[0] == "json_schema" and set(forms[1:]) == {"json_object"}  # found out once, remembered
    assert structured[1]["response_format"]["schema"]["required"][0] == "standalone"
    # no length or count limits reach the server (llama.cpp's grammar for maxLength 200 killed its server)
    assert REWRITE_SCHEMA["properties"]["sub_queries"]["maxItems"] and "maxItems" not in json.dumps(structured)
    assert usage(reply)["failed"] == 1 and steps(reply, "fallback") == []


def test_json_by_prompt_when_structured_output_is_off(indexed) -> None:
    brain = Brain()
    with OpenAIStandIn(brain) as llm:
        reply = ask(indexed, llm, LLM_JSON_SCHEMA="off")
        rewrite = [r for r in llm.chat_requests() if kind(r) == "rewrite"][0]
    assert_cited_answer(reply)
    assert "response_format" not in rewrite
    assert "matching this JSON schema" in rewrite["messages"][-1]["content"]


# -- time: timeouts counted, degradation before the budget is spent --------------------------------------

def test_a_timed_out_call_is_counted_and_the_turn_ends_within_its_budget(indexed) -> None:
    def slow_answer(req):
        time.sleep(10)
        return DEFAULTS["answer"](req)

    brain = Brain(answer=slow_answer)
    with OpenAIStandIn(brain) as llm:
        t = time.monotonic()
        reply = ask(indexed, llm, TURN_BUDGET_MS="9000", LLM_FALLBACK_RESERVE_MS="3000", LLM_MAX_ATTEMPTS="1")
        took = time.monotonic() - t
    u = usage(reply)
    assert u["timeouts"] == 1 and u["calls"] == len(brain.calls)
    assert steps(reply, "fallback") and reply["citations"]  # the extractive answer
    assert reply["timings_ms"]["total"] < 9000 + 1000, reply["timings_ms"]  # the reserve paid for the extractive answer
    assert took < 60


def test_a_slow_model_loses_reflection_first(indexed) -> None:
    # Every call waits 6 s before its reply, plus 0.01 s per token: reflection (~6.6 s at the measured rate)
    # and the answer (~8 s) no longer fit in what the route (~6.4 s) and the rewrite (200 tokens, ~8 s) leave
    # of the budget, the answer alone does. The fixed cost per call makes the window reflection falls in
    # (~6.6 s) wider than the few seconds a loaded machine adds before the first call: about 11 s are left
    # after the rewrite (seen: 13.0 s left with a 29 s budget), 3 s from either edge.
    def rewrite(req):
        return chat(rewrite_of(req), completion_tokens=200)

    brain = Brain(rewrite=rewrite)
    with OpenAIStandIn(brain, delay=6.0, token_delay=0.01) as llm:
        reply = ask(indexed, llm, TURN_BUDGET_MS="27000", LLM_FALLBACK_RESERVE_MS="1000", LLM_TOOLS="on")
    degraded = usage(reply)["degraded"]
    assert "rewrite" in brain.calls and "reflect" not in brain.calls and "answer" in brain.calls, (brain.calls, usage(reply))
    assert degraded and degraded[0].startswith("skipped reflection: model too slow"), degraded
    assert_cited_answer(reply)
    assert reply["timings_ms"]["total"] < 27000


def test_a_model_too_slow_for_the_answer_takes_the_extractive_answer_before_the_budget(indexed) -> None:
    brain = Brain()
    with OpenAIStandIn(brain, delay=5.0) as llm:  # 5 s a call: after routing, no other call fits the 10 s
        reply = ask(indexed, llm, TURN_BUDGET_MS="12000", LLM_FALLBACK_RESERVE_MS="2000", LLM_TOOLS="on")
    degraded = usage(reply)["degraded"]
    assert brain.calls == ["route"]
    assert [d.split(":")[0] for d in degraded] == ["skipped query rewriting", "skipped reflection",
                                                   "skipped generation"], degraded
    assert "model too slow" in degraded[-1]  # the answer's measured cost, not a spent budget, sent it extractive
    assert steps(reply, "degrade")[0]["to"] == "extractive" and steps(reply, "fallback")
    assert reply["citations"] and not reply["refused"]
    assert reply["timings_ms"]["total"] < 12000 - 2000, reply["timings_ms"]


# -- Slack: a slow, limited model behind a signed event ------------------------------------------------

def test_slack_acks_and_shows_progress_in_time_with_a_slow_limited_model(tmp_path, wiki_index, session_wiki) -> None:
    brain = Brain(route=chat("To declare an incident, ask around."))
    store = StateStore(sqlite_url(tmp_path / "state.sqlite"))
    with OpenAIStandIn(brain, tools="ignored", json_schema_status=500, delay=1.5) as llm:
        runtime = build_agent(Settings(chatops_data_dir=tmp_path / "data", openai_base_url=llm.base_url,
                                       turn_budget_ms=12000), index=wiki_index)
        h = SlackHarness(runtime, store, IndexJobs(runtime, store, [FolderSource(session_wiki)]))
        try:
            h.standin.add_user("UALICE01")
            h.standin.add_conversation("C0SLOW")
            msg = h.standin.user_message("C0SLOW", "UALICE01", f"<@{BOT_USER_ID}> {QUESTION}")
            sent = time.monotonic()
            resp, _ = h.sender.event({"type": "app_mention", "user": "UALICE01", "text": msg["text"],
                                      "ts": msg["ts"], "channel": "C0SLOW", "event_ts": msg["ts"], "team": TEAM_ID})
            acked = time.monotonic() - sent
            assert resp.status_code == 200
            h.standin.wait_for(lambda s: s.answers("C0SLOW", msg["ts"]), timeout=60)
            h.idle()
            visible = [c for c in h.standin.calls if c.method in ("reactions.add", "assistant.threads.setStatus",
                                                                   "chat.postMessage", "chat.startStream") and c.ok]
            [answer] = h.standin.answers("C0SLOW", msg["ts"])
        finally:
            h.close()
            store.close()
    assert acked < 3.0
    assert visible and visible[0].at - sent < 2.0, [(c.method, c.at - sent) for c in visible]
    assert answer.at - sent < 12 + 3
    assert brain.calls[:2] == ["probe", "route_json"]
    assert "[1]" in json.dumps(answer.params)
