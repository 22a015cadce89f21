"""The scripted model of the LLM mode's stand-in tests (and bench/agent_overhead.py) over tests.standins.openai:
which step of the loop a request is, a per-step script with sensible defaults, a side-effect tool of the tests'
own, and the agent over the LLM planner."""

from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, Field

from agent.agent import Agent
from agent.llm import prompts
from agent.llm.client import PROBE_SYSTEM, LLMClient, build_openai_client
from agent.llm.planner import LLMPlanner, LLMPlannerConfig
from tools.actions import ActionWords, Clarification, Preview
from app.settings import Settings
from app.wiring import build_agent
from tests.standins.openai import Response, chat, error, json_reply, tool_call


PASSAGE = re.compile(r'<passage n="(\d+)" source="([^"]*)">\n(.*?)\n</passage>', re.S)


def kind(req: dict) -> str:
    """Which step of the loop a chat request is, by its system prompt."""
    system = req["messages"][0]["content"]
    if system.startswith(prompts.ROUTER_SYSTEM):  # followed by the registered action tools
        return "route"
    if system.startswith(prompts.ROUTE_JSON_SYSTEM):  # routing by a JSON decision (no tool calling)
        return "route_json"
    if system == PROBE_SYSTEM:
        return "probe"
    for name, prompt in [("repair", prompts.REPAIR_SYSTEM), ("rewrite", prompts.REWRITE_SYSTEM),
                         ("reflect", prompts.REFLECT_SYSTEM), ("answer", prompts.ANSWER_SYSTEM),
                         ("claims", prompts.CLAIMS_SYSTEM), ("compliance", prompts.COMPLIANCE_SYSTEM)]:
        if system == prompt:
            return name
    return "unknown"


def passages(req: dict) -> list[tuple[int, str, str]]:
    """``(n, source, text)`` of the passages in a request's last user message."""
    return [(int(n), src, text) for n, src, text in PASSAGE.findall(req["messages"][-1]["content"])]


def first_sentence(text: str) -> str:
    """The first prose sentence of a passage (skipping headings and list markers)."""
    for line in text.splitlines():
        line = line.strip().lstrip("-*0123456789. ").strip()
        if len(line) > 30 and not line.startswith(("#", "|", "`")):
            return re.split(r"(?<=[.!?])\s", line)[0]
    return text.strip().splitlines()[0]


class Brain:
    """A scripted model: per step, a callable or a fixed response; defaults behave sensibly."""

    def __init__(self, **steps) -> None:
        self.steps = steps
        self.calls: list[str] = []

    def __call__(self, req: dict) -> Response:
        step = kind(req)
        self.calls.append(step)
        handler = self.steps.get(step)
        if isinstance(handler, list):
            handler = handler.pop(0) if len(handler) > 1 else handler[0]
        if callable(handler):
            return handler(req)
        if isinstance(handler, Response):
            return handler
        return DEFAULTS[step](req)


def pigeon_claims(req: dict) -> Response:
    """A claim check that calls every claim about a "carrier pigeon" unsupported and every other claim supported."""
    body = req["messages"][-1]["content"]
    return json_reply({"verdicts": [{"claim": int(m.group(1)), "supported": "pigeon" not in m.group(2)}
                                    for m in re.finditer(r"Claim (\d+): (.*)", body)]})


def all_supported(req: dict) -> Response:
    """A claim check that calls every claim supported."""
    body = req["messages"][-1]["content"]
    return json_reply({"verdicts": [{"claim": int(n), "supported": True} for n in re.findall(r"Claim (\d+):", body)]})


def default_answer(req: dict) -> Response:
    ps = passages(req)
    return chat(" ".join(f"{first_sentence(t)} [{n}]" for n, _, t in ps[:2]))


DEFAULTS = {
    "route": lambda req: chat(None, [tool_call("knowledge_search", {"query": req["messages"][-1]["content"]})]),
    "rewrite": lambda req: json_reply({"standalone": req["messages"][1]["content"].split("Latest message: ")[1]
                                       .split("\n")[0], "sub_queries": [], "expansion": [], "hypothetical_answer": ""}),
    "reflect": lambda req: json_reply({"relevant": True, "sufficient": True, "missing": "", "next_query": ""}),
    "answer": default_answer,
    "claims": lambda req: json_reply({"verdicts": []}),
    "compliance": lambda req: json_reply({"ok": True, "reasons": []}),
    "route_json": lambda req: json_reply({"route": "search", "query": req["messages"][-1]["content"]}),
    "probe": lambda req: chat(None, [tool_call("ping", {})]),
    "unknown": lambda req: error(400, "unexpected request"),
}


class TicketArgs(BaseModel):
    """Arguments of the test's side-effect tool."""

    title: str = Field(min_length=3, description="Ticket title")
    priority: int = Field(ge=1, le=4, description="1 (highest) to 4")


class TicketCreate:
    """A side-effect tool defined by the test (the action-tool contract, LLM-only: no phrasing of its own):
    executing it would be a bug, so it raises."""

    name: ClassVar[str] = "ticket.create"
    description: ClassVar[str] = "Open an IT ticket."
    Args: ClassVar[type[BaseModel]] = TicketArgs
    side_effect: ClassVar[bool] = True
    permission: ClassVar[str] = "everyone"
    words: ClassVar[ActionWords] = ActionWords(verb="open", past="opened", done="Ticket opened")

    def intent(self, text):
        return 0.0

    def propose(self, request):
        return Clarification("What should the ticket say?")

    def preview(self, args, viewer_tz=None):
        return Preview(args.title, (("Priority", str(args.priority)),), f"Ticket: {args.title}")

    def execute(self, args, key, ctx):  # pragma: no cover - must never be reached
        raise AssertionError("a side-effect tool was executed without confirmation")

    def close(self):
        pass


def make_agent(index, base_url: str, tmp_path: Path, extra_tool=None, tools: str = "on", **cfg) -> Agent:
    """The agent over the LLM planner; ``tools="on"``: the scripted model is one that calls tools."""
    rt = build_agent(Settings(chatops_data_dir=tmp_path / "data"), index=index)
    if extra_tool is not None:
        rt.tools.register(extra_tool)
    llm = LLMClient(build_openai_client("test-key", base_url, timeout=10), max_attempts=3, retry_after_cap=1.0,
                    tools=tools)
    planner = LLMPlanner(rt.tools, llm, rt.agent.planner, LLMPlannerConfig(planner_model="small", answer_model="big", **cfg))
    return Agent(planner, min_citations=2)


def assert_citations_verbatim(reply, index) -> None:
    assert reply.citations
    for c in reply.citations:
        chunk = index.dense.get(c.chunk_id)
        assert chunk is not None and c.quote in chunk.text
    markers = {int(m) for m in re.findall(r"\[(\d+)\]", reply.text)}
    assert markers and markers <= {c.n for c in reply.citations}

