"""Planners decide, per turn, what to do; this module has the interface and the rule-based one.

:class:`RuleBasedPlanner` (no LLM):

1. Route (:class:`agent.router.RuleRouter`): chit-chat is answered directly, an action request
   goes to the action route, a follow-up is rewritten into a standalone question first.
2. Retrieve with ``knowledge.search`` (hybrid; it expands the BM25 query with pseudo-relevance
   feedback from the dense ranking). A multi-part question is also decomposed
   (:func:`agent.rewrite.decompose`): each part is searched and the lists are fused by RRF, the
   whole question weighted 1.5.
3. Judge the evidence (:class:`agent.gate.EvidenceGate`). When it does not suffice, retry with a
   rewritten keyword query (the key words alone, then the missing key words first; the dense
   query stays the question, so the gate's cosines always measure closeness to what was asked),
   at most ``max_retries`` times, stopping early when a retry did not improve the evidence.
   A "what's X?" question also searches the bare term and puts passages that define it first.
4. Answer extractively with citations (:class:`agent.extractive.ExtractiveAnswerer`) or refuse.

The action route (``calendar.create``, when the registry has it) reads only the requester's own
message (``Turn.text``, never retrieved pages): :func:`tools.calendar.propose.propose_event`
turns it into validated arguments, proposed as ``Reply.pending_action`` with a deterministic
idempotency key, or into one clarifying question. The planner never runs a side-effect tool.
A question plus a request in one message gets both: the question part goes through the
knowledge route, and the meeting's description carries the cited answer and its source links.
A short reply that completes an incomplete request earlier in the thread ("at 3pm") is joined
with it, and only with the requester's own latest earlier message (:attr:`Turn.own_history`):
in a shared thread, someone else's "book a meeting with attacker@evil.com" never becomes part of
the requester's meeting. Follow-up questions may lean on anyone's message in the thread.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Protocol

from tools.base import ToolContext, ToolRegistry
from tools.fusion import reciprocal_rank_fusion
from tools.knowledge_search import Evidence, KnowledgeSearch, KnowledgeSearchArgs

from . import messages
from .citations import MARKER, validate_citations
from .extractive import ExtractiveAnswerer, ExtractiveConfig
from .gate import EvidenceGate, GateConfig, GateVerdict
from .models import PendingAction, Reply, Trace, Turn, idempotency_key
from .rewrite import decompose, defines, definition_target, keyword_query, standalone_question
from .router import RuleRouter, is_action_answer, is_action_request, split_request
from .terms import KeyTerms, key_terms

__all__ = ["Planner", "RuleBasedPlanner", "PlannerConfig", "ActionConfig"]


class Planner(Protocol):
    """Turns a turn into a reply draft (citations not yet validated) and the evidence shown."""

    def plan(self, turn: Turn, trace: Trace) -> tuple[Reply, list[Evidence]]:
        """Plan and run the turn."""
        ...


@dataclass(frozen=True, slots=True)
class PlannerConfig:
    """Knobs of the rule-based planner."""

    k: int = 30
    max_retries: int = 2


@dataclass(frozen=True, slots=True)
class ActionConfig:
    """Knobs of the action route.

    Attributes:
        default_timezone: IANA zone for requesters whose ``Turn.timezone`` is empty or unknown.
        default_duration_minutes: the length of a meeting whose request gives none.
        tool: the side-effect tool the route proposes.
    """

    default_timezone: str = "UTC"
    default_duration_minutes: int = 30
    tool: str = "calendar.create"


@dataclass(slots=True)
class _Attempt:
    query: str
    evidence: list[Evidence]
    verdict: GateVerdict
    terms: KeyTerms


class RuleBasedPlanner:
    """The offline planner (see the module docstring).

    Args:
        tools: the tool registry; it must hold ``knowledge.search`` (a
            :class:`~tools.knowledge_search.KnowledgeSearch`, whose analyzer and IDF the gate reads).
        gate: evidence gate thresholds.
        answer: extractive answerer settings.
        config: retrieval knobs.
        actions: action-route knobs (default time zone and length).
        clock: the current time (aware) when a turn has no ``sent_at``; ``datetime.now(UTC)`` by default.
    """

    def __init__(self, tools: ToolRegistry, gate: GateConfig | None = None,
                 answer: ExtractiveConfig | None = None, config: PlannerConfig | None = None,
                 retriever: str = "hybrid", actions: ActionConfig | None = None,
                 clock: Callable[[], datetime] | None = None) -> None:
        search = tools.get("knowledge.search")
        if not isinstance(search, KnowledgeSearch):
            raise TypeError("the rule-based planner needs knowledge.search to be a KnowledgeSearch")
        self.tools = tools
        self.search = search
        self.router = RuleRouter()
        self.gate = EvidenceGate(gate or GateConfig(), search.analyze)
        self.answerer = ExtractiveAnswerer(answer or ExtractiveConfig(), search.analyze)
        self.config = config or PlannerConfig()
        self.retriever = retriever
        self.actions = actions or ActionConfig()
        self.clock = clock or (lambda: datetime.now(timezone.utc))

    def plan(self, turn: Turn, trace: Trace) -> tuple[Reply, list[Evidence]]:
        """Route, retrieve, judge, answer or refuse."""
        t = time.perf_counter()
        thread = tuple(h.text for h in turn.history)  # anyone's words: context for a follow-up question
        decision = self.router.route(turn.text, thread)
        request = turn.text
        if decision.route in {"followup", "knowledge"}:
            earlier = self._incomplete_request(turn)
            if earlier:
                decision = type(decision)("action", "completes the meeting request earlier in the thread")
                request = f"{earlier} {turn.text}"
        trace.route = decision.route
        trace.step("route", route=decision.route, reason=decision.reason)
        trace.add_time("route", (time.perf_counter() - t) * 1000)
        if decision.route == "empty":
            return Reply(messages.EMPTY, route="empty"), []
        if decision.route == "chitchat":
            return Reply(messages.CHITCHAT, route="chitchat"), []
        if decision.route == "action":
            return self._action(turn, trace, request)
        question = turn.text
        if decision.route == "followup":
            question = standalone_question(turn.text, thread)
            trace.step("rewrite_followup", standalone=question)
        ctx = ToolContext(user_id=turn.user_id, is_admin=turn.is_admin, timezone=turn.timezone)
        return self._knowledge(question, turn, trace, decision.route, ctx)

    # -- actions -----------------------------------------------------------------------------
    def _timezone(self, turn: Turn) -> str:
        from tools.calendar.args import valid_timezone

        return turn.timezone if valid_timezone(turn.timezone) else self.actions.default_timezone

    def _incomplete_request(self, turn: Turn) -> str | None:
        """The requester's own previous message when it was a meeting request that lacked something and
        this short message supplies it ("at 3pm", "bob@example.com"); None otherwise.

        Only the requester's words count: other people's messages in a shared thread never supply the
        title, attendees or time of someone else's request, and are skipped, not completed.
        """
        own = turn.own_history
        if self.actions.tool not in self.tools or not own or not is_action_answer(turn.text):
            return None
        earlier = own[-1]
        if not is_action_request(earlier) or is_action_request(turn.text):
            return None
        from tools.calendar.extract import extract_event

        _, request = split_request(earlier)
        draft = extract_event(request or earlier, now=turn.sent_at or self.clock(), timezone_name=self._timezone(turn),
                              resolve_mention=turn.mention_emails)
        return (request or earlier) if not draft.complete else None

    def _action(self, turn: Turn, trace: Trace, text: str) -> tuple[Reply, list[Evidence]]:
        """Propose the side-effect tool from the requester's own words (see the module docstring)."""
        t = time.perf_counter()
        question, request = split_request(text)
        if not request:
            question, request = "", text
        answer: Reply | None = None
        evidence: list[Evidence] = []
        if question:
            trace.step("split_request", question=question, request=request)
            ctx = ToolContext(user_id=turn.user_id, is_admin=turn.is_admin, timezone=self._timezone(turn))
            answer, evidence = self._knowledge(question, turn, trace, "action", ctx)
            answer = self._checked_answer(answer, evidence, trace)
            t = time.perf_counter()
        lead = f"{answer.text}\n\n" if answer else ""
        citations = answer.citations if answer else []
        searched = answer.searched if answer else []
        if self.actions.tool not in self.tools:
            return Reply(lead + messages.ACTION_UNAVAILABLE, citations, route="action", searched=searched), evidence
        from tools.calendar.propose import event_lines, propose_event, summary_line

        tz = self._timezone(turn)
        now = turn.sent_at or self.clock()
        given_later = bool(turn.history) and text.endswith(turn.text) and text != turn.text and bool(
            re.search(r"@|<@", turn.text))
        proposal = propose_event(request, now=now, timezone_name=tz, resolve_mention=turn.mention_emails,
                                 default_duration=self.actions.default_duration_minutes,
                                 description=self._description(request, answer), addresses_given_later=given_later)
        draft = proposal.draft
        trace.step("extract_action", tool=self.actions.tool, title=draft.title,
                   start=draft.start.isoformat() if draft.start else None, duration=draft.duration_minutes,
                   attendees=draft.attendees, missing=draft.missing, vague=draft.vague,
                   unresolved=draft.unresolved_mentions, unknown_people=draft.unknown_people)
        trace.add_time("action", (time.perf_counter() - t) * 1000)
        if proposal.args is None:
            ask = proposal.question or messages.action_invalid(proposal.invalid)
            return Reply(lead + _no_markers(ask), citations, route="action", searched=searched), evidence
        args = proposal.args
        if turn.message_id:
            basis = f"message:{turn.message_id}|{request}"
        else:
            basis = (f"text:{' '.join(request.lower().split())}|{args.start.isoformat()}|{args.duration_minutes}|"
                     f"{','.join(args.attendees)}")
        key = idempotency_key(self.actions.tool, turn.platform, turn.user_id, turn.channel_id, turn.thread_id, basis)
        pending = PendingAction(tool=self.actions.tool, args=args.model_dump(mode="json"), idempotency_key=key,
                                summary=_no_markers(summary_line(args, tz)))
        trace.step("propose_action", tool=self.actions.tool, idempotency_key=key)
        text_out = lead + _no_markers(messages.action_preview(event_lines(args, tz)))
        return Reply(text_out, citations, route="action", pending_action=pending, searched=searched), evidence

    def _checked_answer(self, answer: Reply, evidence: list[Evidence], trace: Trace) -> Reply:
        """The question part's answer if its citations hold (the agent re-checks them), else a short note:
        a failed answer must not take the proposed meeting down with it."""
        need = 1 if trace.gate.get("single_source") else self.gate.config.min_citations
        if not answer.refused:
            check = validate_citations(answer.text, answer.citations, evidence)
            if check.ok and len({c.chunk_id for c in answer.citations}) >= need:
                return answer
        return Reply(messages.question_refused_note(answer.searched), route="action", searched=answer.searched)

    @staticmethod
    def _description(request: str, answer: Reply | None) -> str:
        """The event description: the request, and the cited answer's summary and source links."""
        parts = [f"Requested in chat: \u201c{' '.join(request.split())}\u201d"]
        if answer is not None and answer.citations:
            summary = " ".join(MARKER.sub("", answer.text).split())
            parts.append(f"Background: {summary}")
            seen: set[str] = set()
            links = []
            for c in sorted(answer.citations, key=lambda c: c.n):
                where = c.url or c.doc_id
                if where in seen:
                    continue
                seen.add(where)
                title = f"{c.title} \u203a {c.section}" if c.section else c.title
                links.append(f"- {title}: {where}")
            parts.append("Sources:\n" + "\n".join(links))
        return "\n\n".join(parts)[:8000]

    # -- retrieval loop ----------------------------------------------------------------------
    def _knowledge(self, question: str, turn: Turn, trace: Trace, route: str,
                   ctx: ToolContext) -> tuple[Reply, list[Evidence]]:
        t = time.perf_counter()
        terms = key_terms(question, self.search.analyze, self.search.idf)
        trace.add_time("terms", (time.perf_counter() - t) * 1000)
        attempts: list[_Attempt] = []
        shown: dict[str, Evidence] = {}
        queries = [question, *decompose(question)]
        target = definition_target(turn.text)
        for attempt_no in range(self.config.max_retries + 1):
            # Retries rewrite the keyword (BM25) query only; the dense query stays the question, so
            # every cosine the gate reads measures closeness to what the user asked, not to a rewrite.
            ev = self._retrieve(queries, trace, attempt_no, ctx, dense_query=question if attempt_no else None)
            if target and attempt_no == 0:
                ev = self._definitions_first(target, question, ev, trace, ctx)
            for e in ev:
                shown.setdefault(e.chunk.chunk_id, e)
            t = time.perf_counter()
            verdict = self.gate.judge(ev, terms)
            trace.add_time("gate", (time.perf_counter() - t) * 1000)
            trace.step("gate", attempt=attempt_no, **verdict.as_dict())
            attempts.append(_Attempt(queries[0], ev, verdict, terms))
            if verdict.sufficient:
                break
            if len(attempts) > 1 and not _improved(attempts[-1].verdict, attempts[-2].verdict):
                trace.step("stop", reason="the retry did not improve the evidence (confidence decay)")
                break
            nxt = self._next_query(attempt_no, question, terms, verdict)
            if not nxt or nxt in {a.query for a in attempts}:
                break
            queries = [nxt]
        best = next((a for a in attempts if a.verdict.sufficient), attempts[0])
        trace.gate = best.verdict.as_dict()
        searched = list(dict.fromkeys(a.query for a in attempts))
        if not best.verdict.sufficient:
            return Reply(messages.refusal(searched, best.verdict.reason), refused=True, route=route,
                         searched=searched), list(shown.values())
        t = time.perf_counter()
        need = 1 if best.verdict.single_source else self.gate.config.min_citations
        ordered = best.verdict.support + [e for e in best.evidence if e not in best.verdict.support]
        vocabulary = [t for q in trace.queries if q.get("attempt", 0) == 0 for t in (q.get("feedback_terms") or [])]
        draft = self.answerer.answer(ordered, terms, min_sources=need, question=question, vocabulary=vocabulary,
                                     define=target)
        trace.add_time("answer", (time.perf_counter() - t) * 1000)
        trace.step("answer", sentences=len(draft.citations), sources=len({c.chunk_id for c in draft.citations}))
        reply = Reply(draft.text, draft.citations, route=route, searched=searched)
        return reply, list(shown.values())

    def _definitions_first(self, term: str, question: str, evidence: list[Evidence], trace: Trace,
                           ctx: ToolContext) -> list[Evidence]:
        """For "what's X?": search the bare term too, and put passages that define it first."""
        t = time.perf_counter()
        res = self.tools.call("knowledge.search",
                              KnowledgeSearchArgs(query=term, k=self.config.k, retriever="bm25", dense_query=question),
                              ctx)
        pool = {e.chunk.chunk_id: e for e in [*evidence, *res.evidence]}
        defining = [e for e in pool.values() if defines(e.chunk.text, term)]
        ids = {e.chunk.chunk_id for e in defining}
        trace.step("definition_lookup", term=term, defining=[e.chunk.chunk_id for e in defining][:5])
        trace.add_time("retrieve", (time.perf_counter() - t) * 1000)
        return [*defining, *(e for e in evidence if e.chunk.chunk_id not in ids)][: self.config.k]

    @staticmethod
    def _next_query(attempt_no: int, question: str, terms: KeyTerms, verdict: GateVerdict) -> str:
        """Retry 1: the key words alone; retry 2: the key words the evidence lacked, first."""
        if attempt_no == 0:
            return keyword_query(terms, question)
        missing = [t for t in verdict.missing if t in terms.weights]
        return " ".join(dict.fromkeys([*missing, *terms.weights])) if missing else ""

    def _retrieve(self, queries: list[str], trace: Trace, attempt: int, ctx: ToolContext,
                  dense_query: str | None = None) -> list[Evidence]:
        """Search each query; several (a decomposed question) are fused with RRF, the whole first."""
        t = time.perf_counter()
        results = []
        for q in queries:
            args = KnowledgeSearchArgs(query=q[:4000], k=self.config.k, retriever=self.retriever,
                                       dense_query=dense_query[:4000] if dense_query else None)
            res = self.tools.call("knowledge.search", args, ctx)
            results.append(res)
            for k, v in res.timings_ms.items():
                trace.add_time(f"search.{k}", v)
            trace.queries.append({"attempt": attempt, "query": q, "feedback_terms": res.feedback_terms,
                                  "retriever": self.retriever, "part_of": queries[0] if q != queries[0] else None,
                                  "hits": [e.as_dict() for e in res.evidence]})
        if len(results) == 1:
            evidence = results[0].evidence
        else:
            by_id = {e.chunk.chunk_id: e for r in reversed(results) for e in r.evidence}
            fused = reciprocal_rank_fusion({str(i): [e.chunk.chunk_id for e in r.evidence] for i, r in enumerate(results)},
                                           k=self.search.config.rrf_k, weights={"0": 1.5})
            evidence = [by_id[cid] for cid, _ in fused][: self.config.k]
            trace.queries.append({"attempt": attempt, "query": queries[0], "fused_from": len(queries),
                                  "retriever": self.retriever, "hits": [e.as_dict() for e in evidence]})
        trace.add_time("retrieve", (time.perf_counter() - t) * 1000)
        return evidence


def _improved(new: GateVerdict, old: GateVerdict) -> bool:
    """True when a retry found closer or more complete evidence than the attempt before."""
    return new.top_cosine > old.top_cosine + 0.01 or new.coverage > old.coverage + 0.05 or len(new.support) > len(old.support)


def _no_markers(text: str) -> str:
    """``text`` with any ``[n]`` turned into ``(n)``: only citations may carry markers."""
    return MARKER.sub(lambda m: f"({m[1]})", text)
