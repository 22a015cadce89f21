"""The agent's entry point: ``Agent.answer(turn) -> Reply``.

It normalises the message (an empty one gets a prompt, a huge one is cut to
``max_question_chars`` with a note), asks the planner, screens the reply for credentials,
personal data and instructions planted for an assistant (:func:`agent.screen.screen_reply`:
flagged cited sentences and quotes are dropped, uncited text is redacted), then validates every
citation (:func:`agent.citations.validate_citations`): sentences whose citation fails are dropped,
and if what remains no longer has the citations the evidence gate required, the reply becomes a
refusal (saying so when the screen took the answering part). A knowledge refusal to a channel
audience (``Turn.viewer.audience == "channel"``) is always :data:`agent.messages.ACCESS_REFUSAL`,
which names nothing, so it never tells a channel that a restricted page exists. A last pass redacts anything the
scanner finds in the final text. Nothing uncited, nothing unverifiable and nothing flagged leaves
the agent, whichever planner wrote the reply.

The access context the turn was answered with (``Turn.viewer``: how many principals, the audience,
whether only public pages were used; never the principals themselves) is recorded in the trace
(step ``access``) and in the turn's log record, for audit.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from telemetry.timing import Timed, timed
from tools.knowledge_search import Evidence

from . import messages
from .citations import MARKER, validate_citations
from .models import Reply, Trace, Turn
from .planner import Planner
from .screen import ScreenResult, screen_reply, scrub_text

__all__ = ["Agent", "TurnObserver", "turn_outcome", "access_context"]

TurnObserver = Callable[[Turn, Reply], None]
"""Called with each finished turn and its final reply (metrics, the turn log); must not raise."""

log = logging.getLogger(__name__)


def turn_outcome(reply: Reply) -> str:
    """``action`` (a proposal), ``refused``, ``answered`` (cited) or ``replied`` (direct, uncited)."""
    if reply.pending_action is not None:
        return "action"
    if reply.refused:
        return "refused"
    return "answered" if reply.citations else "replied"


def access_context(turn: Turn) -> dict[str, Any]:
    """The turn's access context for audit: ``principals`` (how many; never who), ``audience`` and
    ``public_only``; ``{"principals": None, "audience": "", "public_only": None}`` without a viewer."""
    v = turn.viewer
    if v is None:
        return {"principals": None, "audience": "", "public_only": None}
    return {"principals": len(v.principals), "audience": v.audience, "public_only": v.public_only}


def _log_turn(turn: Turn, reply: Reply) -> None:
    """One INFO record per turn: ids, route, outcome, timings and the access context (principal count and
    audience, never the principals), never the message, the answer, the search terms or the gate's reason
    (which names the question's words): those are in the trace and the turn log, forgotten with the turn."""
    trace = reply.trace
    access = access_context(turn)
    fields = {"trace_id": trace.trace_id, "platform": turn.platform, "route": reply.route or trace.route,
              "outcome": turn_outcome(reply), "citations": len({c.chunk_id for c in reply.citations}),
              "timings_ms": dict(trace.timings_ms),
              "access_principals": access["principals"], "access_audience": access["audience"],
              "access_public_only": access["public_only"]}
    log.info("turn %s platform=%s route=%s outcome=%s citations=%d total_ms=%.0f audience=%s principals=%s",
             fields["trace_id"], fields["platform"], fields["route"], fields["outcome"], fields["citations"],
             trace.timings_ms.get("total", 0.0), access["audience"] or "-",
             "-" if access["principals"] is None else access["principals"], extra=fields)


class Agent:
    """Runs turns through a planner and guards the reply.

    Args:
        planner: the planner (rule-based, or the LLM one).
        min_citations: distinct validated sources an answer needs (1 when the gate's single-source
            exception applied).
        max_question_chars: longer messages are truncated to this many characters.
        observers: called with every finished turn (as the agent read it) and its final reply, after the
            turn's log record; an observer that raises is logged and skipped, the reply still goes out.
            More can be added later with :meth:`observe`.
    """

    def __init__(self, planner: Planner, min_citations: int = 2, max_question_chars: int = 4000,
                 observers: Iterable[TurnObserver] = ()) -> None:
        self.planner = planner
        self.min_citations = min_citations
        self.max_question_chars = max_question_chars
        self.observers: list[TurnObserver] = list(observers)

    def observe(self, observer: TurnObserver) -> None:
        """Call ``observer(turn, reply)`` after every later turn (see ``observers``)."""
        self.observers.append(observer)

    def answer(self, turn: Turn, progress: Callable[[str, dict[str, Any]], None] | None = None) -> Reply:
        """Answer one turn (:meth:`_answer`) in a ``chatops.turn`` span when tracing is on, with the trace id,
        platform, route and outcome as attributes (never the question or the answer); the span's clock
        (:func:`telemetry.timing.timed`) gives the trace's ``total`` milliseconds.

        ``progress`` is told every step as the trace records it (``(name, data)``, in this thread;
        :mod:`app.progress` turns them into status lines); what it raises is ignored.
        """
        with timed("chatops.turn", {"chatops.platform": turn.platform}) as clock:
            reply = self._answer(turn, progress, clock)
            clock.span.set_attributes({"chatops.trace_id": reply.trace.trace_id, "chatops.route": reply.route or "",
                                       "chatops.outcome": turn_outcome(reply)})
            return reply

    def _answer(self, turn: Turn, progress: Callable[[str, dict[str, Any]], None] | None, clock: Timed) -> Reply:
        """Answer one turn; never raises for bad input (see the module docstring). ``clock``: the turn's
        (its elapsed time is the trace's ``total``)."""
        trace = Trace(listener=progress)
        text = (turn.text or "").replace("\x00", "").strip()
        if len(text) > self.max_question_chars:
            text = text[: self.max_question_chars]
            trace.notes.append(messages.truncated_note(self.max_question_chars))
        history = tuple(replace(h, text=h.text[: self.max_question_chars])
                        for h in turn.history if h.text and h.text.strip())[-10:]
        turn = replace(turn, text=text, history=history)
        trace.step("access", **access_context(turn))
        reply, evidence = self.planner.plan(turn, trace)
        reply.trace = trace
        cited = bool(reply.citations or MARKER.search(reply.text))
        with trace.timed("screen"):
            screen = screen_reply(reply, evidence)
            trace.step("screen", **screen.as_dict())
        if cited or (not reply.text.strip() and not reply.refused):
            reply = self._guard(reply, evidence, screen)
        if reply.refused and _channel_audience(turn) and reply.route in {"knowledge", "followup"} \
                and reply.pending_action is None and not screen.categories:
            # Whatever was (or was not) found for others, a channel hears the same words (issue 11).
            trace.step("access_refusal", audience="channel")
            reply = Reply(messages.ACCESS_REFUSAL, refused=True, route=reply.route, searched=reply.searched,
                          trace=trace)
        if screen.categories and not reply.refused:
            trace.notes.append(messages.withheld_note(screen.categories))
        if trace.notes and not reply.refused:
            reply.text = f"{reply.text}\n\n_{' '.join(trace.notes)}_"
        reply.text = scrub_text(reply.text)
        trace.timings_ms["total"] = round(clock.ms, 3)
        _log_turn(turn, reply)
        for observer in self.observers:
            try:
                observer(turn, reply)
            except Exception:  # noqa: BLE001 - an observer (metrics, the turn log) never costs a user the reply
                log.exception("turn observer %r failed for trace %s", observer, trace.trace_id)
        return reply

    def _guard(self, reply: Reply, evidence: list[Evidence], screen: ScreenResult | None = None) -> Reply:
        with reply.trace.timed("validate"):
            check = validate_citations(reply.text, reply.citations, evidence)
            reply.trace.step("validate_citations", **check.as_dict())
            if not check.ok:
                bad = {c.n for c, _ in check.rejected} | set(check.dangling_markers)
                good = {c.n for c in check.valid} - bad
                kept = [s for s in re.split(r"(?<=\])\s+", reply.text) if set(map(int, MARKER.findall(s))) <= good
                        and MARKER.search(s)]
                reply.text = " ".join(kept)
                reply.citations = [c for c in check.valid if c.n in good]
                log.warning("dropped %d invalid citation(s): %s", len(bad), check.as_dict())
            # The gate counted the supporting passages (``min_citations`` of them, or one under its single-source
            # exception); the answer quotes the ones that answer, so one verifiable citation is enough here.
            need = 1 if reply.trace.gate.get("sufficient") else self.min_citations
            distinct = {c.chunk_id for c in reply.citations}
            if len(distinct) < need or not reply.text.strip():
                reason = f"only {len(distinct)} verifiable source(s), {need} needed"
                text = messages.refusal(reply.searched)
                if screen is not None and screen.removed:
                    reason += "; the rest was left out as credentials, personal data or planted instructions"
                    text = messages.withheld_refusal(screen.categories)
                reply.trace.step("refuse", reason=reason)
                reply = Reply(text, refused=True, route=reply.route, searched=reply.searched, trace=reply.trace)
        return reply


def _channel_audience(turn: Turn) -> bool:
    """Whether others than the asker will read the answer (``Turn.viewer.audience == "channel"``)."""
    return turn.viewer is not None and turn.viewer.audience == "channel"
