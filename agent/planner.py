"""Planners decide, per turn, what to do; this module has the interface and the rule-based one.

:class:`RuleBasedPlanner` (no LLM):

1. Route (:class:`agent.router.RuleRouter`): chit-chat is answered directly, an action request
   goes to the action route. In a thread with history, the earlier turn's specific terms are carried
   into the question (:func:`agent.rewrite.followup_question`), and both the rewrite and the question
   as it stands are searched and judged; the better-supported one is kept. A message the router
   reads as a follow-up (a pronoun, "and ...", "what about ...") keeps the rewrite unless only the
   question as it stands is supported; any other message keeps itself unless only the rewrite is
   supported and that support covers the message's own key terms at least as well (a new question
   in an old thread is not bent towards the old topic). The turn's route says which was kept.
2. Retrieve with ``knowledge.search`` (hybrid; it expands the BM25 query with pseudo-relevance
   feedback from the dense ranking). A multi-part question is also decomposed
   (:func:`agent.rewrite.decompose`): each part is searched and the lists are fused by RRF, the
   whole question weighted 1.5.
3. Judge the evidence (:class:`agent.gate.EvidenceGate`). When it does not suffice, retry with a
   rewritten keyword query (the key words alone, then the missing key words first; the dense
   query stays the question, so the gate's cosines always measure closeness to what was asked),
   at most ``max_retries`` times, stopping early when a retry did not improve the evidence (the
   loop both planners share: :class:`agent.loop.EvidenceLoop`).
   A "what's X?" question also searches the bare term and puts passages that define it first.
   A question naming an exact term (``E42``, ``/genie``, ``ABC-123``: :mod:`tools.identifiers`) has
   the passages holding it moved to the front of the evidence, so they are inside the gate's window;
   when the gate still refuses and a code-like identifier (with a digit, ``/``, ``#``...) is held by
   passages of exactly one page, that page answers alone (single source; traced as
   ``identifier_single_page``).
4. Answer extractively with citations (:class:`agent.compose.Composer`: the passage that answers, quoted whole) or refuse. A
   multi-part question (:func:`agent.rewrite.question_parts`) is also judged part by part: each part
   is searched with the question's setting (and the part before it when it leans on it:
   :func:`agent.rewrite.part_queries`) and judged by the gate on its own search, its own cosines and
   its own key terms. When any part's gate passes, the answer covers every part that has support,
   each from its own passages, and names each part that found none ("Nothing found on: ..."), even
   when the whole question's gate passed (its support may be another part's, or a near miss of this
   one) or failed (one part answerable is an answer). When no part's gate passes, the whole
   question's verdict stands (an answer with a sentence per part, or a refusal).

The action route works with every registered side-effect tool through the contract of
:mod:`tools.actions` and knows none of them: the tool whose ``intent`` recognises the request
(:func:`tools.actions.recognise`) reads only the requester's own message (``Turn.text``, never
retrieved pages) in its ``propose``, which gives validated arguments, proposed as
``Reply.pending_action`` with a deterministic idempotency key and previewed in the reply text, or
one clarifying question. The planner never runs a side-effect tool. A question plus a request in
one message gets both: the question part goes through the knowledge route, and the request's
``background`` carries the cited answer and its source links (a meeting's description). A short
reply that completes an incomplete request earlier in the thread ("at 3pm") is joined with it,
and only with the requester's own latest earlier message (:attr:`Turn.own_history`): in a shared
thread, someone else's "book a meeting with attacker@evil.com" never becomes part of the
requester's meeting. Follow-up questions may lean on anyone's message in the thread.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Protocol

from tools.actions import ActionRequest, ActionTool, Clarification, recognise
from tools.base import ToolContext, ToolRegistry
from tools.dates import valid_timezone
from tools.fusion import reciprocal_rank_fusion
from tools.knowledge_search import Evidence, KnowledgeSearch, KnowledgeSearchArgs, SearchResult

from . import messages
from .citations import MARKER, validate_citations
from .compose import Composer, ComposerConfig, PartEvidence, Similarity
from .gate import EvidenceGate, GateConfig, GateVerdict
from .loop import Attempt, EvidenceLoop
from tools.identifiers import identifiers, is_code
from .models import PendingAction, Reply, Trace, Turn, idempotency_key
from .rewrite import (decompose, defines, definition_target, followup_question, keyword_query, part_queries,
                      question_parts)
from .router import RuleRouter, is_action_answer, split_request
from .terms import KeyTerms, chunk_terms, key_terms

__all__ = ["Planner", "FallbackPlanner", "RuleBasedPlanner", "PlannerConfig", "ActionConfig"]


class Planner(Protocol):
    """Turns a turn into a reply draft (citations not yet validated) and the evidence shown."""

    def plan(self, turn: Turn, trace: Trace) -> tuple[Reply, list[Evidence]]:
        """Plan and run the turn."""
        ...


class FallbackPlanner(Planner, Protocol):
    """A planner another one falls back to and borrows from: its evidence gate (the same thresholds and stop
    rule for both) and its action-route check (:meth:`RuleBasedPlanner.recognises_request`)."""

    @property
    def gate(self) -> EvidenceGate:
        """The evidence gate this planner judges retrieved passages with."""
        ...

    def recognises_request(self, turn: Turn) -> bool:
        """True when this planner would send ``turn`` to the action route."""
        ...


@dataclass(frozen=True, slots=True)
class PlannerConfig:
    """Knobs of the rule-based planner.

    Attributes:
        k: passages retrieved per search.
        max_retries: rewritten retries after the first search.
        topic_max_df: a word of an earlier turn is carried into a follow-up only when it occurs in at
            most this share of the indexed chunks (a word on most pages names no topic).
    """

    k: int = 30
    max_retries: int = 2
    topic_max_df: float = 0.3


@dataclass(frozen=True, slots=True)
class ActionConfig:
    """Knobs of the action route.

    Attributes:
        default_timezone: IANA zone for requesters whose ``Turn.timezone`` is empty or unknown.
    """

    default_timezone: str = "UTC"


@dataclass(slots=True)
class _Attempt(Attempt):
    """Attempt 0 of a reading of the turn, with its key terms and each query's own hits."""

    terms: KeyTerms
    searched: dict[str, list[Evidence]] = field(default_factory=dict)


@dataclass(slots=True)
class _Part:
    """A part of a multi-part question, as searched (``query``: the part, with the first part's key
    words when it leans on it) and judged by its own gate."""

    text: str
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
                 answer: ComposerConfig | None = None, config: PlannerConfig | None = None,
                 retriever: str = "hybrid", actions: ActionConfig | None = None,
                 clock: Callable[[], datetime] | None = None) -> None:
        search = tools.get("knowledge.search")
        if not isinstance(search, KnowledgeSearch):
            raise TypeError("the rule-based planner needs knowledge.search to be a KnowledgeSearch")
        self.tools = tools
        self.search = search
        self.router = RuleRouter(self._is_request)
        self.gate = EvidenceGate(gate or GateConfig(), search.analyze)
        self.answerer = Composer(answer or ComposerConfig(), search.analyze, similarity_of(search))
        self.config = config or PlannerConfig()
        self.loop = EvidenceLoop(self.gate, self.config.max_retries)
        self.retriever = retriever
        self.actions = actions or ActionConfig()
        self.clock = clock or (lambda: datetime.now(timezone.utc))

    def plan(self, turn: Turn, trace: Trace) -> tuple[Reply, list[Evidence]]:
        """Route, retrieve, judge, answer or refuse."""
        with trace.timed("route"):
            thread = tuple(h.text for h in turn.history)  # anyone's words: context for a follow-up question
            decision = self.router.route(turn.text, thread)
            request, completion = turn.text, ""
            if decision.route in {"followup", "knowledge"}:
                earlier = self._incomplete_request(turn)
                if earlier:
                    decision = type(decision)("action", "completes the requester's own request earlier in the thread")
                    request, completion = f"{earlier} {turn.text}", turn.text
            trace.route = decision.route
            trace.step("route", route=decision.route, reason=decision.reason)
        if decision.route == "empty":
            return Reply(messages.EMPTY, route="empty"), []
        if decision.route == "chitchat":
            return Reply(messages.CHITCHAT, route="chitchat"), []
        if decision.route == "action":
            return self._action(turn, trace, request, completion)
        question = turn.text
        alternative = None
        if thread and decision.route in {"followup", "knowledge"}:
            rewrite = followup_question(turn.text, thread, self._specific)
            if rewrite != turn.text:
                alternative = rewrite
                trace.step("rewrite_followup", standalone=rewrite, explicit=decision.route == "followup")
        ctx = ToolContext(user_id=turn.user_id, is_admin=turn.is_admin, timezone=turn.timezone, viewer=turn.viewer)
        return self._knowledge(question, turn, trace, decision.route, ctx, alternative=alternative)

    def recognises_request(self, turn: Turn) -> bool:
        """True when this planner would send ``turn`` to the action route: a registered action tool
        recognises the requester's own words (``turn.text``) as its request, and the message is not a
        question about how to do it. Another planner uses it to check its own routing (nothing runs
        before the requester confirms)."""
        thread = tuple(h.text for h in turn.history)
        return self.router.route(turn.text, thread).route == "action"

    def _specific(self, word: str) -> bool:
        """True when ``word`` names a topic: its analysed terms occur in at most ``topic_max_df`` of the chunks."""
        terms = self.search.analyze(word)
        if not terms:
            return False
        n = max(self.search.doc_count, 1)
        return all(self.search.doc_frequency(t) <= self.config.topic_max_df * n for t in terms)

    # -- actions -----------------------------------------------------------------------------
    def _is_request(self, text: str) -> bool:
        """True when a registered action tool recognises ``text`` as its request."""
        return recognise(self.tools, text) is not None

    def _timezone(self, turn: Turn) -> str:
        return turn.timezone if valid_timezone(turn.timezone) else self.actions.default_timezone

    def _request(self, turn: Turn, text: str, completion: str = "", background: str = "") -> ActionRequest:
        return ActionRequest(text=text, sent_at=turn.sent_at or self.clock(), timezone=self._timezone(turn),
                             history=turn.own_history, completion=completion, requester_id=turn.user_id,
                             requester_email=turn.user_email, platform=turn.platform, background=background,
                             thread_link=turn.thread_link)

    def _incomplete_request(self, turn: Turn) -> str | None:
        """The requester's own previous message when it was a request a tool could not complete and this
        short message supplies what was missing ("at 3pm", "bob@example.com"); None otherwise.

        Only the requester's words count: other people's messages in a shared thread never supply the
        title, attendees or time of someone else's request, and are skipped, not completed.
        """
        own = turn.own_history
        if not own or not is_action_answer(turn.text) or self._is_request(turn.text):
            return None
        earlier = own[-1]
        _, request = split_request(earlier, self._is_request)
        request = request or earlier
        tool = recognise(self.tools, request)
        if tool is None:
            return None
        asked = tool.propose(self._request(turn, request))
        return request if isinstance(asked, Clarification) else None

    def _action(self, turn: Turn, trace: Trace, text: str, completion: str = "") -> tuple[Reply, list[Evidence]]:
        """Propose the side-effect tool from the requester's own words (see the module docstring)."""
        question, request = split_request(text, self._is_request)
        if not request:
            question, request = "", text
        answer: Reply | None = None
        evidence: list[Evidence] = []
        if question:
            trace.step("split_request", question=question, request=request)
            ctx = ToolContext(user_id=turn.user_id, is_admin=turn.is_admin, timezone=self._timezone(turn),
                              viewer=turn.viewer)
            answer, evidence = self._knowledge(question, turn, trace, "action", ctx)
            answer = self._checked_answer(answer, evidence, trace)
        lead = f"{answer.text}\n\n" if answer else ""
        citations = answer.citations if answer else []
        searched = answer.searched if answer else []
        tool: ActionTool | None = recognise(self.tools, request)
        if tool is None:
            return Reply(lead + messages.ACTION_UNAVAILABLE, citations, route="action", searched=searched), evidence
        tz = self._timezone(turn)
        with trace.timed("action"):
            outcome = tool.propose(self._request(turn, request, completion, self._description(request, answer)))
            trace.step("extract_action", tool=tool.name, **outcome.trace)
        if isinstance(outcome, Clarification):
            return Reply(lead + _no_markers(outcome.question), citations, route="action", searched=searched), evidence
        args = outcome.args.model_dump(mode="json")
        if turn.message_id:
            basis = f"message:{turn.message_id}|{request}"
        else:  # the same words on another day (another start) are another action
            what = {k: v for k, v in args.items() if k != "description"}
            basis = f"text:{' '.join(request.lower().split())}|{json.dumps(what, sort_keys=True, default=str)}"
        key = idempotency_key(tool.name, turn.platform, turn.user_id, turn.channel_id, turn.thread_id, basis)
        pending = PendingAction(tool=tool.name, args=args, idempotency_key=key, summary=_no_markers(outcome.summary))
        trace.step("propose_action", tool=tool.name, idempotency_key=key)
        text_out = lead + _no_markers(messages.action_preview(tool.preview(outcome.args, tz), tool.words))
        return Reply(text_out, citations, route="action", pending_action=pending, searched=searched), evidence

    def _checked_answer(self, answer: Reply, evidence: list[Evidence], trace: Trace) -> Reply:
        """The question part's answer if its citations hold (the agent re-checks them), else a short note:
        a failed answer must not take the proposed meeting down with it."""
        if not answer.refused:
            check = validate_citations(answer.text, answer.citations, evidence)
            if check.ok and answer.citations:
                return answer
        return Reply(messages.question_refused_note(answer.searched), route="action", searched=answer.searched)

    @staticmethod
    def _description(request: str, answer: Reply | None) -> str:
        """The action's background (a meeting's description): the request, and the cited answer's summary
        and source links."""
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
                   ctx: ToolContext, alternative: str | None = None) -> tuple[Reply, list[Evidence]]:
        shown: dict[str, Evidence] = {}
        target = definition_target(turn.text)
        first: _Attempt
        if not alternative:
            first = self._first_attempt(question, trace, ctx, target)
        else:
            explicit = route == "followup"
            if explicit:  # the reading the router expects is searched first; when supported, it is kept
                other = self._first_attempt(alternative, trace, ctx, None)
                own = other if other.verdict.sufficient else self._first_attempt(question, trace, ctx, target)
            else:
                own = self._first_attempt(question, trace, ctx, target)
                other = self._first_attempt(alternative, trace, ctx, None)
            keep_rewrite = self._prefer_rewrite(own, other, explicit=explicit)
            trace.step("followup_choice", kept="rewrite" if keep_rewrite else "question", question=question,
                       rewrite=alternative, question_sufficient=own.verdict.sufficient,
                       rewrite_sufficient=other.verdict.sufficient)
            for e in [*own.evidence, *other.evidence]:
                shown.setdefault(e.chunk.chunk_id, e)
            if keep_rewrite:
                first, question, route = other, alternative, "followup"
            else:
                first, route = own, "knowledge"
            trace.route = route
            # the retrieval the answer stands on is the turn's first (for the eval and the trace)
            trace.queries.append({"attempt": 0, "query": question, "chosen": True, "retriever": self.retriever,
                                  "hits": [e.as_dict() for e in first.evidence]})
        terms = first.terms

        def retrieve(query: str, retry: int) -> list[Evidence]:
            # Retries rewrite the keyword (BM25) query only; the dense query stays the question, so
            # every cosine the gate reads measures closeness to what the user asked, not to a rewrite.
            return _exact_first(self._retrieve([query], trace, retry, ctx, dense_query=question), question)

        def next_query(retry: int, attempts: list[Attempt]) -> str:
            return self._next_query(retry - 1, question, terms, attempts[-1].verdict)

        run = self.loop.run(first, terms, retrieve, next_query, trace)
        attempts, best = run.attempts, run.chosen
        for a in attempts:
            for e in a.evidence:
                shown.setdefault(e.chunk.chunk_id, e)
        if not best.verdict.sufficient:
            single = self._identifier_page(question, attempts, terms)
            if single is not None:
                best = single
                trace.step("identifier_single_page", doc_id=single.evidence[0].chunk.doc_id,
                           identifiers=list(single.evidence[0].exact))
        searched = run.searched
        parts = self._parts(question, first, trace, ctx)
        for p in parts:
            for e in p.evidence:
                shown.setdefault(e.chunk.chunk_id, e)
        if any(p.verdict.sufficient for p in parts):
            return self._answer_parts(parts, trace, route, searched), list(shown.values())
        trace.gate = best.verdict.as_dict()
        if not best.verdict.sufficient:
            return Reply(messages.refusal(searched, messages.closest_page(attempts[0].evidence)), refused=True, route=route,
                         searched=searched), list(shown.values())
        with trace.timed("answer"):
            ordered = best.verdict.support + [e for e in best.evidence if e not in best.verdict.support]
            asked = [(p, key_terms(p, self.search.analyze, self.search.idf)) for p in question_parts(question)]
            # Each part reads the whole question's passages: its answer may be in one the gate did not count.
            # The gate decided *whether* to answer; *what* answers is read from every passage retrieved, since
            # the sentence that answers may sit in one the gate did not count (eval: +2 answers on dev, +2 on dev2,
            # 0 on dev3).
            draft = self.answerer.answer([PartEvidence(p, pt, ordered, True) for p, pt in asked]
                                         or [PartEvidence(question, terms, ordered, True)])
        trace.step("answer", quotes=len(draft.citations), sources=len({c.chunk_id for c in draft.citations}),
                   parts=max(1, len(asked)), unanswered=draft.unanswered)
        if not draft.text:
            trace.step("refuse", reason="no passage holds a unit that answers it")
            return Reply(messages.refusal(searched, messages.closest_page(best.evidence)), refused=True,
                         route=route, searched=searched), list(shown.values())
        reply = Reply(draft.text, draft.citations, route=route, searched=searched)
        return reply, list(shown.values())

    def _parts(self, question: str, first: _Attempt, trace: Trace, ctx: ToolContext) -> list[_Part]:
        """Each part of a multi-part ``question`` (:func:`agent.rewrite.question_parts`) searched and
        judged on its own; ``[]`` for a question of one part.

        A part is searched with the question's statements of context and, when it leans on the part
        before it, that part's key words (:func:`agent.rewrite.part_queries`); its gate reads the
        cosines to that query and its key terms, as for a question of its own.
        """
        out: list[_Part] = []
        for text, query in part_queries(question):
            ev = first.searched.get(query)
            if ev is None:
                ev = self._retrieve([query], trace, "part", ctx, into=first.searched)
            ev = _exact_first(ev, query)
            terms = key_terms(query, self.search.analyze, self.search.idf)
            with trace.timed("gate"):
                verdict = self.gate.judge(ev, terms)
            trace.step("part_gate", part=text, query=query, **verdict.as_dict())
            out.append(_Part(text, query, ev, verdict, terms))
        return out

    def _answer_parts(self, parts: list[_Part], trace: Trace, route: str, searched: list[str]) -> Reply:
        """The answer to a multi-part question of which at least one part's gate passed: each supported
        part answered from its own support, the others named, even when the whole question's gate
        passed (its support may be another part's, or a near miss of this one)."""
        supported = [p for p in parts if p.verdict.sufficient]
        need = max(1 if p.verdict.single_source else self.gate.config.min_citations for p in supported)
        support = list({e.chunk.chunk_id: e for p in supported for e in p.verdict.support}.values())
        trace.gate = GateVerdict(
            True, support, min(p.verdict.coverage for p in supported), need == 1,
            [m for p in supported for m in p.verdict.missing],
            f"{len(supported)} of {len(parts)} parts supported: "
            + "; ".join(f"{p.text!r}: {p.verdict.reason}" for p in parts), max(p.verdict.top_cosine for p in supported),
            {"parts": [{"part": p.text, "sufficient": p.verdict.sufficient} for p in parts]}).as_dict()
        with trace.timed("answer"):
            draft = self.answerer.answer(
                [PartEvidence(p.text, p.terms,
                              p.verdict.support + [e for e in p.evidence if e not in p.verdict.support],
                              p.verdict.sufficient, frozenset(e.chunk.chunk_id for e in p.verdict.support))
                 for p in parts])
        trace.step("answer", quotes=len(draft.citations), sources=len({c.chunk_id for c in draft.citations}),
                   parts=len(parts), unanswered=draft.unanswered)
        if not draft.text:
            return Reply(messages.refusal(searched, messages.closest_page(parts[0].evidence)), refused=True, route=route,
                         searched=searched)
        return Reply(draft.text, draft.citations, route=route, searched=searched)

    def _first_attempt(self, question: str, trace: Trace, ctx: ToolContext, target: str | None) -> _Attempt:
        """Search ``question`` (and its parts, fused) and judge the evidence: a turn's attempt 0."""
        with trace.timed("terms"):
            terms = key_terms(question, self.search.analyze, self.search.idf)
        # the parts as each is judged on its own (see _parts), so their hits are at hand; else decompose's
        queries = [question, *([q for _, q in part_queries(question)] or decompose(question))]
        searched: dict[str, list[Evidence]] = {}
        ev = self._retrieve(queries, trace, 0, ctx, into=searched)
        if target:
            ev = self._definitions_first(target, question, ev, trace, ctx)
        ev = _exact_first(ev, question)
        return _Attempt(question, ev, self.loop.judge(ev, terms, trace, 0), terms, searched)

    def _prefer_rewrite(self, own: _Attempt, rewrite: _Attempt, explicit: bool) -> bool:
        """Which of a thread's two readings to keep (see the module docstring)."""
        if explicit:
            return rewrite.verdict.sufficient or not own.verdict.sufficient
        if own.verdict.sufficient or not rewrite.verdict.sufficient:
            return False
        # Only the rewrite is supported: keep it when its support speaks to this message's own words.
        def covered(a: _Attempt) -> float:
            return own.terms.coverage(chunk_terms([e.chunk for e in a.verdict.support], self.search.analyze))
        mine = covered(rewrite)
        return mine > 0 and mine >= covered(own)

    def _identifier_page(self, question: str, attempts: list[Attempt], terms: KeyTerms) -> Attempt | None:
        """The single-page route for a code-like identifier (see the module docstring), or ``None``."""
        codes = [x for x in identifiers(question) if is_code(x)]
        if not codes:
            return None
        holding = [e for a in attempts for e in a.evidence if any(x in e.exact for x in codes)]
        pages = {e.chunk.doc_id for e in holding}
        if len(pages) != 1:
            return None
        support = list({e.chunk.chunk_id: e for e in holding}.values())
        own = terms.coverage(chunk_terms([e.chunk for e in support], self.search.analyze))
        verdict = GateVerdict(sufficient=True, support=support, coverage=own, single_source=True, missing=[],
                              reason=f"the identifier {codes[0]} is on one page only (single-source exception)",
                              top_cosine=max((e.cosine or 0.0) for e in support))
        return Attempt(attempts[0].query, support, verdict)

    def _definitions_first(self, term: str, question: str, evidence: list[Evidence], trace: Trace,
                           ctx: ToolContext) -> list[Evidence]:
        """For "what's X?": search the bare term too, and put passages that define it first."""
        with trace.timed("retrieve"):
            res: SearchResult = self.tools.call("knowledge.search",
                                  KnowledgeSearchArgs(query=term, k=self.config.k, retriever="bm25",
                                                      dense_query=question),
                                  ctx)
            pool = {e.chunk.chunk_id: e for e in [*evidence, *res.evidence]}
            defining = [e for e in pool.values() if defines(e.chunk.text, term)]
            ids = {e.chunk.chunk_id for e in defining}
            trace.step("definition_lookup", term=term, defining=[e.chunk.chunk_id for e in defining][:5])
        return [*defining, *(e for e in evidence if e.chunk.chunk_id not in ids)][: self.config.k]

    @staticmethod
    def _next_query(attempt_no: int, question: str, terms: KeyTerms, verdict: GateVerdict) -> str:
        """Retry 1: the key words alone; retry 2: the key words the evidence lacked, first.

        Both are the question's own words (BM25 analyses them like the index), never index stems:
        a refusal quotes what was searched.
        """
        if attempt_no == 0:
            return keyword_query(terms, question)
        missing = [t for t in verdict.missing if t in terms.weights]
        return " ".join(dict.fromkeys(terms.words([*missing, *terms.weights]))) if missing else ""

    def _retrieve(self, queries: list[str], trace: Trace, attempt: int | str, ctx: ToolContext,
                  dense_query: str | None = None, into: dict[str, list[Evidence]] | None = None) -> list[Evidence]:
        """Search each query; several (a decomposed question) are fused with RRF, the whole first.
        ``into`` (optional) receives each query's own hits, by query."""
        with trace.timed("retrieve"):
            results: list[SearchResult] = []
            for q in queries:
                args = KnowledgeSearchArgs(query=q[:4000], k=self.config.k, retriever=self.retriever,
                                           dense_query=dense_query[:4000] if dense_query else None)
                res: SearchResult = self.tools.call("knowledge.search", args, ctx)
                results.append(res)
                if into is not None:
                    into[q] = list(res.evidence)
                for k, v in res.timings_ms.items():
                    trace.add_time(f"search.{k}", v)
                trace.queries.append({"attempt": attempt, "query": q, "feedback_terms": res.feedback_terms,
                                      "retriever": self.retriever, "part_of": queries[0] if q != queries[0] else None,
                                      "hits": [e.as_dict() for e in res.evidence]})
            if len(results) == 1:
                evidence = results[0].evidence
            else:
                by_id = {e.chunk.chunk_id: e for r in reversed(results) for e in r.evidence}
                fused = reciprocal_rank_fusion({str(i): [e.chunk.chunk_id for e in r.evidence]
                                                for i, r in enumerate(results)},
                                               k=self.search.config.rrf_k, weights={"0": 1.5})
                evidence = [by_id[cid] for cid, _ in fused][: self.config.k]
                trace.queries.append({"attempt": attempt, "query": queries[0], "fused_from": len(queries),
                                      "retriever": self.retriever, "hits": [e.as_dict() for e in evidence]})
        return evidence


def similarity_of(search: KnowledgeSearch) -> Similarity:
    """``similarity(question, texts) -> cosines`` under the index's embedding model (its cache keeps each text's
    vector, so a passage is embedded once across turns)."""
    import numpy as np

    def similarity(question: str, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros(0, dtype=np.float32)
        cosines: np.ndarray = search.index.embedder.embed(list(texts)) @ search.embed_query(question)
        return cosines

    return similarity


#: Passages holding the question's identifier are moved first when there are at most this many.
_EXACT_WINDOW = 8


def _exact_first(evidence: list[Evidence], question: str) -> list[Evidence]:
    """``evidence`` with the passages holding all of the question's code-like identifiers first (then
    those holding some), each group in its own order: the gate reads the top of the list only."""
    codes = [x for x in identifiers(question) if is_code(x)]
    if not codes:
        return evidence  # an acronym ("PRs") is on many passages that do not answer: the order stands

    def held(e: Evidence) -> int:
        return sum(1 for x in codes if x in e.exact)

    holding = sum(1 for e in evidence if held(e))
    if not holding or holding > _EXACT_WINDOW:
        return evidence  # none, or so many that the fused order (BM25 weighted up) already ranks them
    full = [e for e in evidence if held(e) == len(codes)]
    some = [e for e in evidence if 0 < held(e) < len(codes)]
    rest = [e for e in evidence if not held(e)]
    return [*full, *some, *rest]


def _no_markers(text: str) -> str:
    """``text`` with any ``[n]`` turned into ``(n)``: only citations may carry markers."""
    return MARKER.sub(lambda m: f"({m[1]})", text)
