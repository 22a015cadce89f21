"""The LLM planner's routing step: search, answer directly, or call an action tool.

By tool calling when the model supports it (the registry's tools, read from native ``tool_calls`` and
from JSON in the text), else by a short JSON decision (:class:`agent.llm.structured.Route`). A decision is
a dict: ``search`` (the query, or None), ``actions`` (``{"tool", "arguments"}`` calls of side-effect
tools), ``content`` (a direct answer) and ``chitchat``. Decisions without actions are cached by the
normalised question when the turn has no history.
"""

from __future__ import annotations

import json
from typing import Any

from tools.base import ToolRegistry

from ..models import Trace, Turn
from . import prompts
from .budget import TurnBudget
from .client import LLMClient, LLMResult, ToolsUnsupported
from .plan_config import LLMPlannerConfig
from .steps import StructuredSteps, others
from .structured import Route, loads_tolerant
from .turn_cache import ExpiringCache, text_key

__all__ = ["Router", "tool_fn_name"]


def tool_fn_name(name: str) -> str:
    """A tool's name as a function name the model can call (``knowledge.search`` -> ``knowledge_search``)."""
    return name.replace(".", "_")


class Router:
    """Routes turns with the model.

    Args:
        tools: the registry whose tools the model may call.
        llm: the budgeted client.
        steps: the structured calls (routing by JSON is one, with its repair round).
        config: the planner model and the decision cache's lifetime.
    """

    def __init__(self, tools: ToolRegistry, llm: LLMClient, steps: StructuredSteps, config: LLMPlannerConfig) -> None:
        self.tools = tools
        self.llm = llm
        self.steps = steps
        self.config = config
        self._routes: ExpiringCache[dict[str, Any]] = ExpiringCache(config.route_cache_ttl_s)

    def _tool_specs(self) -> list[dict[str, Any]]:
        return [{"type": "function", "function": {"name": tool_fn_name(s["name"]), "description": s["description"],
                                                  "parameters": s["parameters"]}} for s in self.tools.schemas()]

    def route(self, turn: Turn, trace: Trace, budget: TurnBudget, with_others: bool = True) -> dict[str, Any]:
        """One routing call: the system prompt, other participants' messages as one quoted block (when
        ``with_others``), the requester's own earlier messages as user turns, then the message."""
        key = text_key(turn.text) if not turn.history else None
        cached = self._routes.get(key) if key else None
        if cached is not None:
            trace.step("route", source="cache", **{k: v for k, v in cached.items() if k != "actions"})
            return cached
        actions = [(tool_fn_name(t.name), t.description) for t in self.tools.actions()]
        msgs = [{"role": "system", "content": prompts.router_system(actions)}]
        thread = others(turn) if with_others else ()
        if thread:
            msgs.append({"role": "user", "content": prompts.format_others(thread)})
        for h in turn.own_history[-6:]:
            msgs.append({"role": "user", "content": h})
        msgs.append({"role": "user", "content": turn.text})
        model = self.config.planner_model
        decision = None
        if self.llm.tools_supported(model) is None:
            # Unknown yet (auto, and neither this process nor one before it found out): a probe of a few
            # tokens first, not a routing prompt a model without tool calling answers in prose, slowly.
            supported = self.llm.probe_tools(model, budget)
            trace.step("tools_probe", model=model, supported=supported)
        if self.llm.tools_supported(model) is not False:
            decision = self._route_by_tools(turn, msgs, trace, budget)
        if decision is None:
            decision = self._route_by_json(turn, msgs, trace, budget)
        if decision["search"] is None and not decision["actions"] and not decision["content"]:
            decision["search"] = turn.text  # an empty answer: retrieve rather than say nothing
        trace.step("route", source="llm" if self.llm.tools_supported(model) is not False else "llm_json",
                   search=decision["search"], actions=[a["tool"] for a in decision["actions"]],
                   direct=decision["search"] is None and not decision["actions"])
        if key and not decision["actions"]:
            self._routes.put(key, decision)
        return decision

    def _route_by_tools(self, turn: Turn, msgs: list[dict[str, Any]], trace: Trace,
                        budget: TurnBudget) -> dict[str, Any] | None:
        """Route by tool calling; None when the model turns out not to call tools (route by JSON instead)."""
        model = self.config.planner_model
        try:
            res = self.llm.chat(model, msgs, budget, tools=self._tool_specs(), max_tokens=300,
                                reserve_s=self.steps.answer_reserve_s("route", budget))
        except ToolsUnsupported as exc:
            trace.step("tools_unsupported", model=model, how="rejected", error=str(exc)[:200])
            return None
        if res.tool_calls:
            if not any(c.native for c in res.tool_calls):
                trace.step("tool_call_in_content", names=[c.name for c in res.tool_calls])
            return self._from_tool_calls(res, turn, trace)
        if _json_value(res.content) is not None:
            # JSON but no tool call: never posted as an answer; the search is the safe reading.
            trace.step("route_json_not_tool_call", content=res.content[:200])
            return {"search": turn.text, "actions": [], "content": "", "chitchat": False}
        return {"search": None, "actions": [], "content": res.content.strip(), "chitchat": False}

    def _from_tool_calls(self, res: LLMResult, turn: Turn, trace: Trace) -> dict[str, Any]:
        names = {tool_fn_name(n): n for n in self.tools.names()}
        names.update({n: n for n in self.tools.names()})
        decision: dict[str, Any] = {"search": None, "actions": [], "content": res.content.strip(), "chitchat": False}
        if any(not c.native for c in res.tool_calls):
            decision["content"] = ""  # the text was the call
        for call in res.tool_calls:
            tool = names.get(call.name)
            if tool is None:
                trace.step("route_unknown_tool", tool=call.name)
                continue
            if tool == "knowledge.search":
                try:
                    args = json.loads(call.arguments or "{}")
                except json.JSONDecodeError:
                    args = {}
                decision["search"] = str((args.get("query") if isinstance(args, dict) else None) or turn.text)
            elif self.tools.get(tool).side_effect:
                decision["actions"].append({"tool": tool, "arguments": call.arguments})
        return decision

    def _route_by_json(self, turn: Turn, msgs: list[dict[str, Any]], trace: Trace,
                       budget: TurnBudget) -> dict[str, Any]:
        """Route by a JSON decision (:class:`Route`) for a model that does not call tools; an invalid decision
        (after one repair) searches."""
        actions = [(tool_fn_name(t.name), t.description) for t in self.tools.actions()]
        route_msgs = [{"role": "system", "content": prompts.route_json_system(actions)}, *msgs[1:]]
        got = self.steps.ask("route", Route, route_msgs, prompts.ROUTE_SCHEMA, trace, budget, max_tokens=200,
                             before_answer="route")
        decision: dict[str, Any] = {"search": None, "actions": [], "content": "", "chitchat": False}
        if got is None or got.route == "search" or (got.route == "answer" and not got.answer.strip()):
            decision["search"] = (got.query.strip() if got is not None else "") or turn.text
            return decision
        if got.route == "answer":
            decision["content"] = got.answer.strip()
            return decision
        names = {tool_fn_name(n): n for n in self.tools.names()}
        names.update({n: n for n in self.tools.names()})
        tool = names.get(got.tool)
        if tool is None or not self.tools.get(tool).side_effect:
            trace.step("route_unknown_tool", tool=got.tool)
            decision["search"] = turn.text
            return decision
        decision["actions"].append({"tool": tool, "arguments": json.dumps(got.arguments)})
        return decision


def _json_value(text: str) -> Any:
    """The JSON value a reply consists of (fences and prose around it allowed), or None."""
    if "{" not in (text or "") and "[" not in (text or ""):
        return None
    try:
        value = loads_tolerant(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
