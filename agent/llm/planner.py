"""The tool-first LLM planner (OpenAI tool calling), with the rule-based planner as its fallback.

One turn:

1. **Route** by tool calling: the model sees the registry's tools (``knowledge_search`` and every
   action tool, listed with their descriptions in the prompt too) and may also answer directly (chit-chat, general knowledge). Routing
   decisions are cached by the normalised question (no history) for ``route_cache_ttl_s``. Calls are read
   from native ``tool_calls`` and from JSON in the text (``<tool_call>`` chat-template forms); a reply that
   is JSON but no tool call searches. Whether the model calls tools is found out before its first routing
   call by a probe of a few tokens (the server rejects ``tools``, or the model answers the probe in prose;
   remembered per server and model in the data dir, see :class:`agent.llm.client.LLMClient`); a model
   without tool calling is routed by a short JSON decision (:class:`agent.llm.structured.Route`).
2. **Rewrite** (structured output): a standalone question from the thread history, sub-queries
   for a multi-part question, expansion keywords for the vocabulary gap, and a hypothetical
   answer passage used as the dense query (HyDE; Gao et al. 2022, "Precise Zero-Shot Dense
   Retrieval without Relevance Labels"). Cosines the gate reads are always measured against the
   standalone question, never against the hypothetical passage.
3. **Retrieve** each query with ``knowledge.search``; fuse the lists by RRF.
4. **Reflect** (structured output: relevant? sufficient? missing? next query?) and retry at
   most ``max_retries`` times with the suggested query, each retry's hits pooled with the evidence
   so far, in the rule-based planner's loop (:class:`agent.loop.EvidenceLoop`: its gate, its stop
   rule when a retry did not improve the evidence). The gate must pass as well; otherwise the reply
   is the plain "no sources" refusal.
5. **Generate** with ``[n]`` markers over numbered, delimited passages; quotes are the verbatim
   sentence of the cited passage closest to each claim. A sentence with a figure, time, date,
   identifier or name that none of its cited passages holds is dropped (:mod:`agent.grounding`; the
   same check for the streamed sentences and the final draft, whatever the model says after), then a
   **claim check** (one batched judge call) drops sentences their passage does not support. A draft
   left with no sentence is not a refusal: the gate found that the passages answer, so the turn takes the
   extractive answer, whose every sentence is a verified quote (:class:`DraftUnsupported`).
6. **Compliance**: a deterministic scan (:mod:`screening`: secrets, personal data, planted
   instructions) plus a model check for unsafe advice; a flagged draft is regenerated with the
   reasons at most twice, else a safe reply. Passages reach the model with what :mod:`screening`
   flags replaced by ``[left out: <kind>]``, and quotes never cover a flagged span. The agent's
   exit screens the reply again, whichever path (this loop or the fallback) wrote it.

Side-effect tools are never executed: a call of an action tool (:mod:`tools.actions`) becomes a
pending action summarised by the tool's own preview (arguments still invalid after one repair propose
nothing, and the rule-based planner answers the turn), and a request that a registered tool's own intent
recognises (the rule planner's action route) is proposed by the rule planner when the model searched or
answered it instead (a weak model does); and
only a call from the routing step counts (that step sees the user's own message and history,
never retrieved text). In a shared thread, other people's messages reach the model only as one
quoted context block (:func:`agent.llm.prompts.format_others`), never as the user's turns; and
when the routing step proposes a side-effect call while such a block was shown, the step is run
again on the requester's own messages alone and only that call's actions count, so nobody else's
words can supply an action's title, attendees or time.

Every structured step's reply is validated into a pydantic model (:mod:`agent.llm.structured`); one
that does not validate gets one repair round, then the step's deterministic fallback (no rewrite, no
reflection, the claim check and the compliance model check skipped, routing by search), recorded as
``invalid_output`` in the trace.

Budgets (:class:`agent.llm.budget.TurnBudget`) bound calls, tokens and time; near the limit the
loop skips reflection, the claim check and the compliance model call, and the trace says so. The
wall-time budget keeps ``fallback_reserve_ms`` for the rule-based answer, and each optional step
first predicts its time from the model's measured latency (:class:`agent.llm.latency.LatencyMeter`):
a slow model loses reflection first, then the rewrite, and when even the answer would not fit, the
turn takes the extractive answer before the budget is spent. Any
LLM failure (timeouts, 429s beyond the budget, malformed output) falls back to the rule-based
planner's answer for the same turn.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

from cachetools import TTLCache
from pydantic import BaseModel

from tools.base import ToolContext, ToolRegistry
from tools.errors import ToolArgumentError
from tools.knowledge_search import Evidence, KnowledgeSearch, KnowledgeSearchArgs

from .. import messages
from ..gate import EvidenceGate
from ..grounding import Fact, ungrounded
from ..loop import Attempt, EvidenceLoop, merge
from ..models import Citation, PendingAction, Reply, Trace, Turn, idempotency_key
from ..planner import Planner, closest_page
from ..terms import key_terms
from ..text import display_text, sentence_spans
from . import prompts
from .budget import BudgetExceeded, TurnBudget
from .client import LLMClient, LLMError, LLMResult, ToolsUnsupported
from .structured import Claims, ComplianceVerdict, Reflection, Rewrite, Route, loads_tolerant
from .release import SentenceRelease
from ..screen import chunk_findings, span_flagged
from .compliance import reasons, redact, scan

__all__ = ["LLMPlanner", "LLMPlannerConfig"]

log = logging.getLogger(__name__)

_MARKERS = re.compile(r"(?:\s*\[(\d{1,2})\])+")
_SENTENCE = re.compile(r"[^.!?]*?[.!?]?(?:\s*\[\d{1,2}\])+[.!?]?|[^.!?]+[.!?]+")


@dataclass(frozen=True, slots=True)
class LLMPlannerConfig:
    """Models, sizes and budgets of the LLM planner."""

    planner_model: str = "gpt-4o-mini"
    answer_model: str = "gpt-4o-mini"
    k: int = 16
    passages: int = 6
    max_retries: int = 2
    claim_check: bool = True
    compliance_model_check: bool = True
    budget_ms: float = 20_000
    budget_tokens: int = 12_000
    budget_calls: int = 8
    route_cache_ttl_s: float = 3600
    answer_cache_ttl_s: float = 3600
    fallback_reserve_ms: float = 3000


#: Completion tokens each call usually writes, for predicting its time from the measured latency.
STEP_TOKENS = {"route": 40, "rewrite": 120, "reflect": 60, "answer": 200, "claims": 40, "compliance": 20}

#: Characters each call's prompt usually has (six passages of ~800 characters for reflection and the answer).
STEP_PROMPT_CHARS = {"route": 1600, "rewrite": 1400, "reflect": 5800, "answer": 5800, "claims": 3000,
                     "compliance": 1400}


class TooSlow(BudgetExceeded):
    """The model is measured too slow for the answer within the turn's budget: take the extractive answer."""


class DraftUnsupported(Exception):
    """No sentence of the model's draft could be tied to the passages it cites (grounding and claim check),
    although the gate found that those passages answer: the extractive answer, quotes only, is posted instead.
    A weak model's wording is no reason to refuse what the sources say."""


class _TTLCache:
    """A small LRU cache whose entries expire after ``ttl`` seconds (``cachetools.TTLCache`` on the monotonic
    clock, behind a lock: turns run on several threads)."""

    def __init__(self, ttl: float, size: int = 512) -> None:
        self._d: TTLCache[str, Any] = TTLCache(maxsize=size, ttl=ttl, timer=time.monotonic)
        self._lock = threading.Lock()

    def get(self, key: str) -> Any:
        with self._lock:
            return self._d.get(key)

    def put(self, key: str, value: Any) -> None:
        with self._lock:
            self._d[key] = value


def _norm(text: str) -> str:
    return hashlib.sha256(re.sub(r"\W+", " ", text.lower()).strip().encode()).hexdigest()


def _others(turn: Turn, last: int = 6) -> tuple[str, ...]:
    """Other participants' messages among the thread's last ``last`` messages, oldest first."""
    return tuple(h.text for h in turn.history[-last:] if not h.from_requester)


def _tool_fn_name(name: str) -> str:
    return name.replace(".", "_")


class LLMPlanner:
    """See the module docstring.

    Args:
        tools: the registry (``knowledge.search`` required; side-effect tools become pending actions).
        llm: the budgeted client.
        fallback: the rule-based planner (its gate and analyzer are reused).
        config: models and budgets.
    """

    def __init__(self, tools: ToolRegistry, llm: LLMClient, fallback: Planner, config: LLMPlannerConfig | None = None) -> None:
        search = tools.get("knowledge.search")
        if not isinstance(search, KnowledgeSearch):
            raise TypeError("the LLM planner needs knowledge.search to be a KnowledgeSearch")
        self.tools = tools
        self.search = search
        self.llm = llm
        self.fallback = fallback
        self.gate: EvidenceGate = fallback.gate  # type: ignore[attr-defined]
        self.config = config or LLMPlannerConfig()
        # The rule planner's gate and stop rule; retries pool their hits with the evidence so far, and the
        # model is asked even when the gate passed (it may find that the passages do not answer).
        self.loop = EvidenceLoop(self.gate, self.config.max_retries, merge_k=search.config.rrf_k,
                                 ask_when_sufficient=True)
        self._routes = _TTLCache(self.config.route_cache_ttl_s)
        self._answers = _TTLCache(self.config.answer_cache_ttl_s)

    # -- entry point ---------------------------------------------------------------------------
    def plan(self, turn: Turn, trace: Trace) -> tuple[Reply, list[Evidence]]:
        """Run the loop; on any LLM failure, the rule-based planner answers instead."""
        cfg = self.config
        budget = TurnBudget(max(1000.0, cfg.budget_ms - cfg.fallback_reserve_ms), cfg.budget_tokens, cfg.budget_calls)
        try:
            if not turn.text.strip():
                return self.fallback.plan(turn, trace)
            return self._plan(turn, trace, budget)
        except DraftUnsupported as exc:
            trace.step("fallback", reason=str(exc))
            trace.notes.append("answered with quotes: the language model's draft could not be tied to its sources")
            trace.queries.clear()
            return self.fallback.plan(turn, trace)
        except (LLMError, BudgetExceeded, ToolArgumentError, ValueError, KeyError, TypeError) as exc:
            # The message may echo the user's words (a server's error quoting the prompt, a validation error
            # quoting the model's arguments): it goes to the trace, the log gets its type only.
            log.warning("LLM planner failed (%s); answering with the rule-based planner (trace %s)",
                        type(exc).__name__, trace.trace_id)
            trace.step("fallback", reason=f"{type(exc).__name__}: {exc}"[:300])
            trace.notes.append("answered without the language model")
            trace.queries.clear()
            return self.fallback.plan(turn, trace)
        finally:
            trace.steps.append({"step": "llm_usage", **budget.usage.as_dict(), "degraded": budget.degraded})
            trace.timings_ms["llm_calls"] = budget.usage.calls
            trace.timings_ms["llm_tokens"] = budget.usage.total_tokens
            trace.timings_ms["llm_timeouts"] = budget.usage.timeouts

    def _plan(self, turn: Turn, trace: Trace, budget: TurnBudget) -> tuple[Reply, list[Evidence]]:
        ctx = ToolContext(user_id=turn.user_id, is_admin=turn.is_admin, timezone=turn.timezone, viewer=turn.viewer)
        decision = self._route(turn, trace, budget)
        if decision["actions"] and _others(turn):
            # Actions come only from a routing call that saw the requester's words alone.
            trace.step("route_again_without_others",
                       reason="an action was proposed in a thread with other participants")
            alone = self._route(turn, trace, budget, with_others=False)
            decision = {**decision, "actions": alone["actions"], "content": alone["content"],
                        "search": decision["search"] if decision["search"] is not None else alone["search"]}
        if not decision["actions"] and self._tool_recognises(turn):
            # A weak model searches or answers an explicit request (SmolLM2 routed "set up a meeting with
            # bob tomorrow at 3pm" to search). The registered tool's own intent recognises it: the rule
            # planner proposes it, answering a question asked beside it; nothing runs before Confirm.
            trace.step("route_action_by_tool_intent", model_route="search" if decision["search"] is not None
                       else "answer")
            return self.fallback.plan(turn, trace)
        pending = None
        for call in decision["actions"]:
            pending = self._propose(call, turn, ctx, trace, budget) or pending
        if decision["actions"] and pending is None and decision["search"] is None:
            # The model asked for an action whose arguments stayed invalid after one repair (SmolLM2 routes
            # "thanks!" to an action with made-up arguments): the rule planner proposes what the tools' own
            # phrasings recognise, or answers, instead of a reply about an action nobody will see.
            trace.step("action_not_proposed", tools=[c["tool"] for c in decision["actions"]])
            return self.fallback.plan(turn, trace)
        if decision["search"] is None:
            route = "action" if decision["actions"] else ("chitchat" if decision["chitchat"] else "general")
            trace.route = route
            text = decision["content"] or (pending.summary if pending else messages.CHITCHAT)
            if pending:
                text = f"I can set that up. {pending.summary}. Confirm to create it."
            reply = Reply(self._comply(text, trace), route=route, pending_action=pending)
            return reply, []
        trace.route = "followup" if turn.history else "knowledge"
        reply, evidence = self._knowledge(turn, decision["search"], trace, budget, ctx)
        if pending is not None:
            reply.pending_action = pending
        return reply, evidence

    # -- routing -------------------------------------------------------------------------------
    def _tool_recognises(self, turn: Turn) -> bool:
        """Whether the fallback planner, when it can tell, sends this turn to the action route."""
        check = getattr(self.fallback, "recognises_request", None)
        return bool(check(turn)) if callable(check) else False

    def _tool_specs(self) -> list[dict]:
        return [{"type": "function", "function": {"name": _tool_fn_name(s["name"]), "description": s["description"],
                                                  "parameters": s["parameters"]}} for s in self.tools.schemas()]

    def _route(self, turn: Turn, trace: Trace, budget: TurnBudget, with_others: bool = True) -> dict:
        """One routing call: the system prompt, other participants' messages as one quoted block (when
        ``with_others``), the requester's own earlier messages as user turns, then the message."""
        key = _norm(turn.text) if not turn.history else None
        cached = self._routes.get(key) if key else None
        if cached is not None:
            trace.step("route", source="cache", **{k: v for k, v in cached.items() if k != "actions"})
            return cached
        actions = [(_tool_fn_name(t.name), t.description) for t in self.tools.actions()]
        msgs = [{"role": "system", "content": prompts.router_system(actions)}]
        others = _others(turn) if with_others else ()
        if others:
            msgs.append({"role": "user", "content": prompts.format_others(others)})
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

    def _route_by_tools(self, turn: Turn, msgs: list[dict], trace: Trace, budget: TurnBudget) -> dict | None:
        """Route by tool calling; None when the model turns out not to call tools (route by JSON instead)."""
        model = self.config.planner_model
        try:
            res = self.llm.chat(model, msgs, budget, tools=self._tool_specs(), max_tokens=300,
                                reserve_s=self._answer_reserve_s("route", budget))
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

    def _from_tool_calls(self, res: LLMResult, turn: Turn, trace: Trace) -> dict:
        names = {_tool_fn_name(n): n for n in self.tools.names()}
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

    def _route_by_json(self, turn: Turn, msgs: list[dict], trace: Trace, budget: TurnBudget) -> dict:
        """Route by a JSON decision (:class:`Route`) for a model that does not call tools; an invalid decision
        (after one repair) searches."""
        actions = [(_tool_fn_name(t.name), t.description) for t in self.tools.actions()]
        route_msgs = [{"role": "system", "content": prompts.route_json_system(actions)}, *msgs[1:]]
        got = self._ask("route", Route, route_msgs, prompts.ROUTE_SCHEMA, trace, budget, max_tokens=200,
                        before_answer="route")
        decision: dict[str, Any] = {"search": None, "actions": [], "content": "", "chitchat": False}
        if got is None or got.route == "search" or (got.route == "answer" and not got.answer.strip()):
            decision["search"] = (got.query.strip() if got is not None else "") or turn.text
            return decision
        if got.route == "answer":
            decision["content"] = got.answer.strip()
            return decision
        names = {_tool_fn_name(n): n for n in self.tools.names()}
        names.update({n: n for n in self.tools.names()})
        tool = names.get(got.tool)
        if tool is None or not self.tools.get(tool).side_effect:
            trace.step("route_unknown_tool", tool=got.tool)
            decision["search"] = turn.text
            return decision
        decision["actions"].append({"tool": tool, "arguments": json.dumps(got.arguments)})
        return decision

    # -- structured calls ------------------------------------------------------------------------
    def _ask(self, step: str, out: type[BaseModel], msgs: list[dict], schema: dict, trace: Trace,
             budget: TurnBudget, max_tokens: int = 400, before_answer: str | None = None) -> Any:
        """One structured call validated into ``out``; one repair round on an invalid reply, then None
        (the caller's deterministic fallback), recorded as ``invalid_output``. ``before_answer`` (the step's
        key in :data:`STEP_TOKENS`): the answer's predicted time is kept free (the call's ``max_tokens`` is
        lowered to what fits before it; see :meth:`_answer_reserve_s`)."""
        model = self.config.planner_model
        reserve_s = self._answer_reserve_s(before_answer, budget) if before_answer else 0.0
        res = self.llm.chat(model, msgs, budget, schema=schema, schema_name=step, max_tokens=max_tokens,
                            reserve_s=reserve_s)
        try:
            return _validated(out, res)
        except ValueError as exc:
            error = _short_error(exc)
        trace.step("output_repair", output=step, error=error)
        if not budget.allows(f"{step} repair", tokens=1500):
            trace.step("invalid_output", output=step, error=error, repaired=False)
            return None
        fix = self.llm.chat(model, [*msgs, {"role": "assistant", "content": res.content[:2000]},
                                    {"role": "user", "content": prompts.repair_output(error, schema)}],
                            budget, schema=schema, schema_name=step, max_tokens=max_tokens, reserve_s=reserve_s)
        try:
            return _validated(out, fix)
        except ValueError as exc:
            trace.step("invalid_output", output=step, error=_short_error(exc), repaired=True)
            return None

    def _predict_ms(self, *calls: str, passages: list[Evidence] | None = None) -> float:
        """Milliseconds ``calls`` (keys of :data:`STEP_TOKENS`) take at the models' measured latency, their
        prompts of the usual size (:data:`STEP_PROMPT_CHARS`) or, for reflection and the answer, over
        ``passages`` when given."""
        def chars(c: str) -> int:
            if passages is not None and c in ("reflect", "answer"):
                return 1000 + sum(len(e.chunk.text) + 120 for e in passages[: self.config.passages])
            return STEP_PROMPT_CHARS[c]

        return sum(self.llm.latency.estimate_ms(self.config.answer_model if c == "answer" else self.config.planner_model,
                                                STEP_TOKENS[c], chars(c)) for c in calls)

    def _answer_reserve_s(self, step: str, budget: TurnBudget) -> float:
        """Seconds a ``step`` before the answer leaves free for it: the answer's predicted time when the step
        and the answer both fit the time left, else none (the answer will not fit whatever the step writes,
        and a routing call squeezed to nothing would leave the model unused)."""
        answer_ms = self._predict_ms("answer")
        if self._predict_ms(step) + answer_ms <= budget.remaining_ms:
            return answer_ms / 1000
        return 0.0

    def _fits(self, step: str, budget: TurnBudget, *calls: str, passages: list[Evidence] | None = None) -> bool:
        """Whether ``calls`` (keys of :data:`STEP_TOKENS`) fit the time left at the model's measured latency;
        records the degradation when they do not."""
        need = self._predict_ms(*calls, passages=passages)
        if need <= budget.remaining_ms:
            return True
        budget.degraded.append(f"skipped {step}: model too slow (~{need:.0f} ms needed, "
                               f"{budget.remaining_ms:.0f} ms left)")
        return False

    def _propose(self, call: dict, turn: Turn, ctx: ToolContext, trace: Trace, budget: TurnBudget) -> PendingAction | None:
        """Validate a side-effect call's arguments and turn it into a pending action (never run it)."""
        tool = self.tools.get(call["tool"])
        raw = call["arguments"]
        for attempt in range(2):
            try:
                value = json.loads(raw or "{}")
                if not isinstance(value, dict):  # a repair answered in prose is read as null
                    raise ToolArgumentError(f"the arguments must be a JSON object, not {type(value).__name__}")
                args = self.tools.validate(call["tool"], value)
                break
            except (json.JSONDecodeError, ToolArgumentError) as exc:
                trace.step("tool_arguments_invalid", tool=call["tool"], attempt=attempt, error=str(exc)[:300])
                if attempt or not budget.allows("argument repair"):
                    return None
                fix = self.llm.chat(self.config.planner_model, [
                    {"role": "system", "content": prompts.REPAIR_SYSTEM},
                    {"role": "user", "content": turn.text},
                    {"role": "user", "content": f"Your arguments for {_tool_fn_name(call['tool'])} were invalid: {exc}. "
                                                "Reply with corrected arguments as a JSON object only."}],
                    budget, schema=tool.Args.model_json_schema(), schema_name="arguments")
                raw = json.dumps(fix.data)
        key = idempotency_key(turn.platform, turn.user_id, turn.channel_id, turn.thread_id,
                              turn.message_id or turn.text, call["tool"])
        summary = tool.preview(args, ctx.timezone or None).summary or call["tool"]
        pending = PendingAction(call["tool"], _dump(args), key, summary)
        trace.step("pending_action", tool=call["tool"], key=pending.idempotency_key)
        return pending

    # -- knowledge -----------------------------------------------------------------------------
    def _knowledge(self, turn: Turn, query: str, trace: Trace, budget: TurnBudget,
                   ctx: ToolContext) -> tuple[Reply, list[Evidence]]:
        if ctx.viewer is None:
            raise ValueError("knowledge.search needs the asker's access context (Turn.viewer); none was given")
        rw = self._rewrite(turn, query, trace, budget)
        question = rw["standalone"]
        # Answers are cached per access set: one computed for a reader never reaches someone who may not read it.
        cache_key = f"{_norm(question)}:{self.search.index.version}:{ctx.viewer.cache_key()}"
        cached = self._answers.get(cache_key)
        if cached is not None:
            trace.step("answer_cache", hit=True)
            reply, evidence = cached
            return Reply(reply.text, list(reply.citations), route=trace.route, searched=list(reply.searched)), evidence
        terms = key_terms(question, self.search.analyze, self.search.idf)
        queries = [question, *rw["sub_queries"]]
        evidence = self._retrieve(queries, rw, question, trace, attempt=0, ctx=ctx)
        first = Attempt(question, evidence, self.loop.judge(evidence, terms, trace, 0))

        def retrieve(query: str, retry: int) -> list[Evidence]:
            return self._retrieve([query], {"expansion": [], "hypothetical_answer": ""}, question, trace, retry, ctx)

        def reflect(retry: int, attempts: list[Attempt]) -> str | None:
            last = attempts[-1]
            reflection = self._reflect(question, last.evidence, trace, budget)
            if reflection is None or (reflection["sufficient"] and last.verdict.sufficient):
                return None
            return reflection["next_query"].strip()

        run = self.loop.run(first, terms, retrieve, reflect, trace)
        evidence, verdict, searched = run.chosen.evidence, run.chosen.verdict, run.searched
        trace.gate = verdict.as_dict()
        if not verdict.sufficient:
            return Reply(messages.refusal(searched, closest_page(evidence)), refused=True, route=trace.route,
                         searched=searched), evidence
        shown = verdict.support + [e for e in evidence if e not in verdict.support]
        if not self._fits("generation", budget, "answer", passages=shown):
            trace.step("degrade", to="extractive", reason=budget.degraded[-1])
            raise TooSlow(budget.degraded[-1])
        reply = self._generate(question, shown, trace, budget, searched)
        if not reply.refused:
            self._answers.put(cache_key, (reply, evidence))
        return reply, evidence

    def _rewrite(self, turn: Turn, query: str, trace: Trace, budget: TurnBudget) -> dict:
        # A follow-up question may lean on anyone's message in the thread (context, not instructions).
        base = {"standalone": query if not turn.history else f"{turn.history[-1].text} {turn.text}",
                "sub_queries": [], "expansion": [], "hypothetical_answer": ""}
        if not budget.allows("query rewriting", reserve=1) or not self._fits("query rewriting", budget, "rewrite", "answer"):
            return base
        history = "\n".join(f"- {h}" for h in turn.own_history[-6:]) or "(none)"
        others = _others(turn)
        context = f"{prompts.format_others(others)}\n\n" if others else ""
        got = self._ask("rewrite", Rewrite, [
            {"role": "system", "content": prompts.REWRITE_SYSTEM},
            {"role": "user", "content": f"{context}Conversation history (earlier user messages):\n{history}\n\n"
                                        f"Latest message: {turn.text}\nSearch query proposed: {query}"}],
            prompts.REWRITE_SCHEMA, trace, budget, before_answer="rewrite")
        if got is None:
            return base
        out = {
            "standalone": got.standalone[:1000],
            "sub_queries": [q[:500] for q in got.sub_queries][:4],
            "expansion": [t[:60] for t in got.expansion][:6],
            "hypothetical_answer": got.hypothetical_answer[:1500],
        }
        trace.step("rewrite", **out)
        return out

    def _retrieve(self, queries: list[str], rw: dict, question: str, trace: Trace, attempt: int,
                  ctx: ToolContext) -> list[Evidence]:
        with trace.timed("retrieve"):
            lists: list[list[Evidence]] = []
            for i, q in enumerate(queries):
                # The model's expansion keywords replace offline pseudo-relevance feedback when it gave some.
                expansion = rw.get("expansion", [])[:6]
                args = KnowledgeSearchArgs(query=q[:4000], k=self.config.k, expansion=expansion,
                                           dense_query=(rw.get("hypothetical_answer") or None) if i == 0 else None,
                                           cosine_to=question[:4000], prf=not expansion)
                res = self.tools.call("knowledge.search", args, ctx)
                lists.append(res.evidence)
                trace.queries.append({"attempt": attempt, "query": q, "feedback_terms": res.feedback_terms,
                                      "expansion": args.expansion, "hyde": bool(args.dense_query),
                                      "retriever": "hybrid",
                                      "hits": [e.as_dict() for e in res.evidence]})
                for k, v in res.timings_ms.items():
                    trace.add_time(f"search.{k}", v)
            evidence = lists[0]
            for more in lists[1:]:
                evidence = merge(evidence, more, self.search.config.rrf_k)
            if len(lists) > 1:
                trace.queries.append({"attempt": attempt, "query": queries[0], "fused_from": len(lists),
                                      "retriever": "hybrid", "hits": [e.as_dict() for e in evidence]})
        return evidence

    def _reflect(self, question: str, evidence: list[Evidence], trace: Trace, budget: TurnBudget) -> dict | None:
        if (not budget.allows("reflection", tokens=2500, reserve=1)
                or not self._fits("reflection", budget, "reflect", "answer", passages=evidence)):
            return None
        passages = prompts.format_passages([(i + 1, e.chunk.title, e.chunk.section, _masked(e.chunk.text))
                                            for i, e in enumerate(evidence[: self.config.passages])])
        got = self._ask("reflection", Reflection, [
            {"role": "system", "content": prompts.REFLECT_SYSTEM},
            {"role": "user", "content": f"{passages}\n\nQuestion: {question}"}],
            prompts.REFLECT_SCHEMA, trace, budget, max_tokens=200, before_answer="reflect")
        if got is None:
            return None
        verdict = got.model_dump()
        trace.step("reflect", **verdict)
        return verdict

    # -- generation ------------------------------------------------------------------------------
    def _generate(self, question: str, evidence: list[Evidence], trace: Trace, budget: TurnBudget,
                  searched: list[str]) -> Reply:
        n_passages = self.config.passages if budget.allows("full context", tokens=4000) else max(2, self.config.passages // 2)
        shown = evidence[:n_passages]
        passages = prompts.format_passages([(i + 1, e.chunk.title, e.chunk.section, _masked(e.chunk.text))
                                            for i, e in enumerate(shown)])
        extra = ""
        text = ""
        for fix_round in range(3):
            # The first draft is streamed when someone listens: its sentences go out as they pass the checks
            # one sentence allows (agent.llm.release); the whole draft is still judged below.
            release = (SentenceRelease(shown, _SENTENCE, self._cite_sentence, trace.emit_text)
                       if fix_round == 0 and trace.listener is not None else None)
            res = self.llm.chat(self.config.answer_model, [
                {"role": "system", "content": prompts.ANSWER_SYSTEM},
                {"role": "user", "content": f"{passages}\n\nQuestion: {question}{extra}"}], budget, max_tokens=600,
                on_delta=release.feed if release is not None else None)
            text = res.content.strip()
            if text.upper().startswith("INSUFFICIENT") or not text:
                trace.step("refuse", reason="the model found that the passages do not answer it")
                return Reply(messages.refusal(searched, closest_page(evidence)), refused=True,
                             route=trace.route, searched=searched)
            problems = self._compliance_reasons(text, budget, trace)
            if not problems:
                break
            trace.step("compliance", round=fix_round, ok=False, reasons=problems)
            extra = ("\n\nYour previous draft was rejected: " + "; ".join(problems) +
                     ". Write it again without that content.")
        else:
            return Reply(messages.COMPLIANCE_REFUSAL, route=trace.route, searched=searched, refused=True)
        sentences, citations = self._cite(text, shown, trace)
        if (self.config.claim_check and citations and budget.allows("claim check", tokens=3000)
                and self._fits("claim check", budget, "claims")):
            sentences, citations = self._check_claims(sentences, citations, shown, trace, budget)
        body = " ".join(s for s, _ in sentences).strip()
        if not body or not citations:
            raise DraftUnsupported("no statement of the model's draft could be tied to a source")
        return Reply(body, citations, route=trace.route, searched=searched)

    def _cite(self, text: str, shown: list[Evidence], trace: Trace | None = None
              ) -> tuple[list[tuple[str, set[int]]], list[Citation]]:
        """Split the draft into sentences with their markers; renumber markers by first use and
        attach, per (sentence, passage), the passage's verbatim sentence closest to the claim. Sentences
        dropped as ungrounded (see :meth:`_cite_sentence`) are recorded in ``trace`` (step ``grounding``)."""
        numbers: dict[int, int] = {}
        citations: list[Citation] = []
        out: list[tuple[str, set[int]]] = []
        dropped: list[tuple[str, list[Fact]]] = []
        for m in _SENTENCE.finditer(text.replace("\n", " ")):
            cited = self._cite_sentence(m.group(0), shown, numbers, dropped)
            if cited is not None:
                out.append((cited[0], cited[1]))
                citations.extend(cited[2])
        if dropped and trace is not None:
            trace.step("grounding", dropped=[s for s, _ in dropped],
                       facts=[[f"{f.kind}:{f.text}" for f in facts] for _, facts in dropped])
        return out, citations

    def _cite_sentence(self, raw: str, shown: list[Evidence], numbers: dict[int, int],
                       dropped: list[tuple[str, list[Fact]]] | None = None
                       ) -> tuple[str, set[int], list[Citation]] | None:
        """One sentence of a draft, cited: ``(text with its markers renumbered at the end, its numbers,
        its citations)``, or None when it cites no passage shown (an uncited sentence is dropped: nothing
        uncited leaves the agent) or when it is not grounded: a figure, time, date, identifier or name of it
        is in none of the passages it cites (:func:`agent.grounding.ungrounded`; title, section and text as
        the model was shown them), whatever the claim check says later; such a sentence and its missing
        facts are appended to ``dropped``. This is the one check both the streamed release
        (:class:`agent.llm.release.SentenceRelease`) and the final draft go through. ``numbers`` (passage
        -> marker, by first use) is updated only for a sentence kept."""
        raw = raw.strip()
        if not raw:
            return None
        marks = [int(x) for x in re.findall(r"\[(\d{1,2})\]", raw)]
        claim = _MARKERS.sub("", raw).strip()
        valid = [x for x in dict.fromkeys(marks) if 1 <= x <= len(shown)]
        if not valid or not claim:
            return None
        missing = ungrounded(claim, [_as_shown(shown[x - 1]) for x in valid])
        if missing:
            if dropped is not None:
                dropped.append((claim, missing))
            return None
        new_marks = []
        citations = []
        for x in valid:
            if x not in numbers:
                numbers[x] = len(numbers) + 1
            n = numbers[x]
            new_marks.append(n)
            chunk = shown[x - 1].chunk
            citations.append(Citation(n, chunk.chunk_id, chunk.doc_id, chunk.title, chunk.url, chunk.section,
                                      self._quote(claim, chunk.text)))
        return f"{claim} " + "".join(f"[{n}]" for n in new_marks), set(new_marks), citations

    def _quote(self, claim: str, text: str) -> str:
        want = set(self.search.analyze(claim))
        best, score = "", -1.0
        for span in sentence_spans(text, min_chars=15):
            if span_flagged(text, span.start, span.end):
                continue  # never quote a credential, personal data or a planted instruction
            have = set(self.search.analyze(span.text))
            s = len(want & have) / (len(want | have) or 1)
            if s > score:
                best, score = span.text, s
        return best or text[:200]

    def _check_claims(self, sentences, citations, shown, trace, budget):
        by_n = {c.n: c for c in citations}
        items = []
        for i, (s, marks) in enumerate(sentences, start=1):
            srcs = "\n".join(f"[{n}] {display_text(_masked(next(e.chunk.text for e in shown if e.chunk.chunk_id == by_n[n].chunk_id)))[:1200]}"
                             for n in sorted(marks))
            items.append(f"Claim {i}: {_MARKERS.sub('', s).strip()}\nCited passages:\n{srcs}")
        got = self._ask("claims", Claims, [
            {"role": "system", "content": prompts.CLAIMS_SYSTEM},
            {"role": "user", "content": "\n\n".join(items)}], prompts.CLAIMS_SCHEMA, trace, budget)
        if got is None:
            return sentences, citations  # no usable verdicts: the deterministic grounding check stands alone
        verdicts = {v.claim: v.supported for v in got.verdicts}
        kept = [(s, m) for i, (s, m) in enumerate(sentences, start=1) if verdicts.get(i, True)]
        dropped = len(sentences) - len(kept)
        trace.step("claim_check", checked=len(sentences), dropped=dropped)
        used = set().union(*(m for _, m in kept)) if kept else set()
        return kept, [c for c in citations if c.n in used]

    # -- compliance ------------------------------------------------------------------------------
    def _compliance_reasons(self, text: str, budget: TurnBudget, trace: Trace) -> list[str]:
        found = reasons(scan(text))
        if (found or not self.config.compliance_model_check or not budget.allows("compliance check", tokens=1200)
                or not self._fits("compliance check", budget, "compliance")):
            return found
        got = self._ask("compliance", ComplianceVerdict, [
            {"role": "system", "content": prompts.COMPLIANCE_SYSTEM},
            {"role": "user", "content": text}], prompts.COMPLIANCE_SCHEMA, trace, budget, max_tokens=200)
        if got is None or got.ok:
            return []  # an unusable verdict: the deterministic scan (above) is the check
        return [r for r in got.reasons][:5] or ["flagged by the reviewer"]

    def _comply(self, text: str, trace: Trace) -> str:
        """A direct answer (no sources to rewrite from): redact what the compliance scan finds."""
        findings = scan(text)
        if findings:
            trace.step("compliance", ok=False, reasons=reasons(findings), action="redacted")
            return redact(text, findings)
        return text


def _as_shown(e: Evidence) -> str:
    """A passage as the model was shown it: title, section and text (what leaves the agent is checked against)."""
    c = e.chunk
    return f"{c.title}\n{c.section}\n{_masked(c.text)}"


def _masked(text: str) -> str:
    """A passage as the model sees it: credentials, personal data and planted instructions left out."""
    found = chunk_findings(text)
    return redact(text, found) if found else text


def _json_value(text: str) -> Any:
    """The JSON value a reply consists of (fences and prose around it allowed), or None."""
    if "{" not in (text or "") and "[" not in (text or ""):
        return None
    try:
        value = loads_tolerant(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _validated(out: type[BaseModel], res: LLMResult) -> Any:
    if res.data is None:
        raise ValueError("the reply held no JSON object")
    return out.model_validate(res.data)


def _short_error(exc: Exception) -> str:
    return " ".join(str(exc).split())[:300]


def _dump(args: BaseModel) -> dict:
    return args.model_dump(mode="json")
