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
   Retrieval without Relevance Labels"). The gate judges the question as asked (a follow-up: the standalone
   question), never the hypothetical passage nor, for a message that stands alone, the model's rewording of
   it, which is searched as one more query. A standalone question that keeps none of the message's topic
   words, or states a number neither the message nor the thread holds, is not a rewrite of it: the whole
   rewrite is dropped and the question is searched as asked (``rewrite_rejected`` in the trace).
3. **Retrieve** the judged question, the model's standalone question when it differs, and each sub-query with
   ``knowledge.search``, and the judged question on its own as well (no hypothetical passage, no model
   keywords; its list first) when the model gave either; fuse the lists by RRF.
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

The parts: :mod:`.routing` (step 1), :mod:`.steps` (the structured calls: rewrite, reflection, claim
check, compliance, and the latency predictions that skip them), :mod:`.citing` (markers, quotes and
grounding of the draft), :mod:`.proposals` (an action call to a pending action) and
:mod:`.plan_config`; this module is the loop that runs them.
"""

from __future__ import annotations

import logging
from typing import Any

from tools.base import ToolContext, ToolRegistry
from tools.errors import ToolArgumentError
from tools.knowledge_search import Evidence, KnowledgeSearch, KnowledgeSearchArgs, SearchResult

from .. import messages
from ..gate import EvidenceGate
from ..loop import Attempt, EvidenceLoop, merge
from ..models import Reply, Trace, Turn
from ..messages import closest_page
from ..planner import FallbackPlanner
from ..terms import KeyTerms, key_terms
from . import prompts
from .budget import BudgetExceeded, TurnBudget
from .citing import SENTENCE, Citer, masked
from .client import LLMClient, LLMError
from .compliance import reasons, redact, scan
from .plan_config import STEP_PROMPT_CHARS, STEP_TOKENS, LLMPlannerConfig
from .proposals import propose_call
from .release import SentenceRelease
from .routing import Router
from .steps import StructuredSteps, others
from .turn_cache import ExpiringCache, text_key

__all__ = ["LLMPlanner", "LLMPlannerConfig", "STEP_TOKENS", "STEP_PROMPT_CHARS", "TooSlow", "DraftUnsupported"]

log = logging.getLogger(__name__)


class TooSlow(BudgetExceeded):
    """The model is measured too slow for the answer within the turn's budget: take the extractive answer."""


class DraftUnsupported(Exception):
    """No sentence of the model's draft could be tied to the passages it cites (grounding and claim check),
    although the gate found that those passages answer: the extractive answer, quotes only, is posted instead.
    A weak model's wording is no reason to refuse what the sources say."""


class LLMPlanner:
    """See the module docstring.

    Args:
        tools: the registry (``knowledge.search`` required; side-effect tools become pending actions).
        llm: the budgeted client.
        fallback: the rule-based planner (its gate and its action-route check are reused: :class:`FallbackPlanner`).
        config: models and budgets.
    """

    def __init__(self, tools: ToolRegistry, llm: LLMClient, fallback: FallbackPlanner,
                 config: LLMPlannerConfig | None = None) -> None:
        search = tools.get("knowledge.search")
        if not isinstance(search, KnowledgeSearch):
            raise TypeError("the LLM planner needs knowledge.search to be a KnowledgeSearch")
        self.tools: ToolRegistry = tools
        self.search: KnowledgeSearch = search
        self.llm: LLMClient = llm
        self.fallback: FallbackPlanner = fallback
        self.gate: EvidenceGate = fallback.gate
        self.config: LLMPlannerConfig = config or LLMPlannerConfig()
        # The rule planner's gate and stop rule; retries pool their hits with the evidence so far, and the
        # model is asked even when the gate passed (it may find that the passages do not answer).
        self.loop: EvidenceLoop = EvidenceLoop(self.gate, self.config.max_retries, merge_k=search.config.rrf_k,
                                 ask_when_sufficient=True)
        self.steps: StructuredSteps = StructuredSteps(llm, self.config)
        self.router: Router = Router(tools, llm, self.steps, self.config)
        self.citer: Citer = Citer(search.analyze)
        self._answers: ExpiringCache[tuple[Reply, list[Evidence]]] = ExpiringCache(self.config.answer_cache_ttl_s)

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
        decision = self.router.route(turn, trace, budget)
        if decision["actions"] and others(turn):
            # Actions come only from a routing call that saw the requester's words alone.
            trace.step("route_again_without_others",
                       reason="an action was proposed in a thread with other participants")
            alone = self.router.route(turn, trace, budget, with_others=False)
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
            pending = (propose_call(self.tools, self.llm, self.config.planner_model, call, turn, ctx, trace, budget)
                       or pending)
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
        """Whether the fallback planner sends this turn to the action route."""
        return self.fallback.recognises_request(turn)

    # -- knowledge -----------------------------------------------------------------------------
    def _not_a_rewrite(self, turn: Turn, asked: KeyTerms, standalone: str) -> str:
        """Why the model's standalone question is not a rewrite of the turn's message ("" when it is one): it keeps
        none of the message's topic words (its key terms the corpus holds, :attr:`agent.terms.KeyTerms.specific`;
        a message without any keeps nothing to check), or it holds a number neither the message nor the thread
        holds (a rewrite resolves what the message leans on; it adds no fact). ``asked``: the message's key terms."""
        got = set(self.search.analyze(standalone))
        if asked.specific and not any(t in got for t in asked.specific):
            return "it shares no topic word with the message"
        said = set(self.search.analyze(" ".join([turn.text, *(h.text for h in turn.history)])))
        made_up = sorted(t for t in got - said if any(ch.isdigit() for ch in t))
        if made_up:
            return f"it states a number nobody wrote ({', '.join(made_up[:3])})"
        return ""

    def _knowledge(self, turn: Turn, query: str, trace: Trace, budget: TurnBudget,
                   ctx: ToolContext) -> tuple[Reply, list[Evidence]]:
        if ctx.viewer is None:
            raise ValueError("knowledge.search needs the asker's access context (Turn.viewer); none was given")
        rw = self.steps.rewrite(turn, query, trace, budget)
        asked = key_terms(turn.text.strip(), self.search.analyze, self.search.idf)
        why_not = self._not_a_rewrite(turn, asked, rw["standalone"])
        if why_not:
            # A follow-up's standalone question is what the gate judges: a "rewrite" sharing no topic word with the
            # message (SmolLM2 wrote a timestamp for "how long do we keep slack DMs?") or stating a figure nobody
            # wrote would make it judge another question.
            trace.step("rewrite_rejected", standalone=rw["standalone"][:200],
                       reason=f"{why_not}; the question is searched as asked")
            rw = self.steps.as_asked(turn, query)
        # What the gate judges (its key terms, the cosines it reads) is the question as the user asked it; only a
        # follow-up needs the model's standalone question (it resolves what the message leans on). Elsewhere the
        # standalone is one more search: SmolLM2 wrote figures into it ("the desk setup budget of $500", a phone
        # number), and judged, those made answerable questions near misses.
        question = rw["standalone"] if turn.history else turn.text.strip() or rw["standalone"]
        # Answers are cached per access set: one computed for a reader never reaches someone who may not read it.
        cache_key = f"{text_key(question)}:{self.search.index.version}:{ctx.viewer.cache_key()}"
        cached = self._answers.get(cache_key)
        if cached is not None:
            trace.step("answer_cache", hit=True)
            reply, evidence = cached
            return Reply(reply.text, list(reply.citations), route=trace.route, searched=list(reply.searched)), evidence
        terms = asked if question == turn.text.strip() else key_terms(question, self.search.analyze, self.search.idf)
        queries = [question, *([rw["standalone"]] if rw["standalone"] != question else []), *rw["sub_queries"]]
        evidence = self._retrieve(queries, rw, question, trace, attempt=0, ctx=ctx)
        first = Attempt(question, evidence, self.loop.judge(evidence, terms, trace, 0))

        def retrieve(query: str, retry: int) -> list[Evidence]:
            return self._retrieve([query], {"expansion": [], "hypothetical_answer": ""}, question, trace, retry, ctx)

        def reflect(retry: int, attempts: list[Attempt]) -> str | None:
            last = attempts[-1]
            reflection = self.steps.reflect(question, last.evidence, trace, budget)
            if reflection is None or (reflection.sufficient and last.verdict.sufficient):
                return None
            return reflection.next_query.strip()

        run = self.loop.run(first, terms, retrieve, reflect, trace)
        evidence, verdict, searched = run.chosen.evidence, run.chosen.verdict, run.searched
        trace.gate = verdict.as_dict()
        if not verdict.sufficient:
            return Reply(messages.refusal(searched, closest_page(evidence)), refused=True, route=trace.route,
                         searched=searched), evidence
        shown = verdict.support + [e for e in evidence if e not in verdict.support]
        if not self.steps.fits("generation", budget, "answer", passages=shown):
            trace.step("degrade", to="extractive", reason=budget.degraded[-1])
            raise TooSlow(budget.degraded[-1])
        reply = self._generate(question, shown, trace, budget, searched)
        if not reply.refused:
            self._answers.put(cache_key, (reply, evidence))
        return reply, evidence

    def _retrieve(self, queries: list[str], rw: dict[str, Any], question: str, trace: Trace, attempt: int,
                  ctx: ToolContext) -> list[Evidence]:
        with trace.timed("retrieve"):
            lists: list[list[Evidence]] = []
            # The model's expansion keywords replace offline pseudo-relevance feedback when it gave some, and its
            # hypothetical passage is the first query's dense query. The question is also searched on its own (the
            # offline planner's search), its list fused first: HyDE keeps the query's own embedding beside the
            # hypothetical documents' (Gao et al. 2022), so a weak model's passage or keywords add
            # candidates without taking the question's own away.
            expansion = rw.get("expansion", [])[:6]
            hyde = rw.get("hypothetical_answer") or None
            searches = [(q, expansion, hyde if i == 0 else None) for i, q in enumerate(queries)]
            if expansion or hyde:
                searches.insert(0, (queries[0], [], None))
            for q, more_terms, dense_query in searches:
                args = KnowledgeSearchArgs(query=q[:4000], k=self.config.k, expansion=more_terms,
                                           dense_query=dense_query, cosine_to=question[:4000], prf=not more_terms)
                res: SearchResult = self.tools.call("knowledge.search", args, ctx)
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

    # -- generation ------------------------------------------------------------------------------
    def _generate(self, question: str, evidence: list[Evidence], trace: Trace, budget: TurnBudget,
                  searched: list[str]) -> Reply:
        n_passages = self.config.passages if budget.allows("full context", tokens=4000) else max(2, self.config.passages // 2)
        shown = evidence[:n_passages]
        passages = prompts.format_passages([(i + 1, e.chunk.title, e.chunk.section, masked(e.chunk.text))
                                            for i, e in enumerate(shown)])
        extra = ""
        text = ""
        for fix_round in range(3):
            # The first draft is streamed when someone listens: its sentences go out as they pass the checks
            # one sentence allows (agent.llm.release); the whole draft is still judged below.
            release = (SentenceRelease(shown, SENTENCE, self.citer.cite_sentence, trace.emit_text)
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
            problems = self.steps.compliance_reasons(text, budget, trace)
            if not problems:
                break
            trace.step("compliance", round=fix_round, ok=False, reasons=problems)
            extra = ("\n\nYour previous draft was rejected: " + "; ".join(problems) +
                     ". Write it again without that content.")
        else:
            return Reply(messages.COMPLIANCE_REFUSAL, route=trace.route, searched=searched, refused=True)
        sentences, citations = self.citer.cite(text, shown, trace)
        if (self.config.claim_check and citations and budget.allows("claim check", tokens=3000)
                and self.steps.fits("claim check", budget, "claims")):
            sentences, citations = self.steps.check_claims(sentences, citations, shown, trace, budget)
        body = " ".join(s for s, _ in sentences).strip()
        if not body or not citations:
            raise DraftUnsupported("no statement of the model's draft could be tied to a source")
        return Reply(body, citations, route=trace.route, searched=searched)

    def _comply(self, text: str, trace: Trace) -> str:
        """A direct answer (no sources to rewrite from): redact what the compliance scan finds."""
        findings = scan(text)
        if findings:
            trace.step("compliance", ok=False, reasons=reasons(findings), action="redacted")
            return redact(text, findings)
        return text
