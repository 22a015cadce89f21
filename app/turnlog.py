"""The turn log: each chat question to the knowledge base, its outcome and its cited pages, kept in the
state store (``turn_log``) for the knowledge-gap report.

:class:`TurnJournal` is an agent observer (:meth:`agent.agent.Agent.observe`). ``chatops serve`` attaches
it, so Slack and Teams turns are recorded; ``chatops ask``, ``chat`` and ``eval`` are not (they are the
operator's own tries, not employees' questions). Only knowledge questions and thread follow-ups are
recorded: the report is about what the wiki answers, and chit-chat or meeting requests would only store more
of people's words. What is stored is the question as the agent read it (already cut to
``MAX_QUESTION_CHARS``), the route, the outcome, the refusal's reason and the citations (page ids, titles
and links, never the quoted text); retention and ``chatops forget`` purge it like conversations.
"""

from __future__ import annotations

from agent.agent import turn_outcome
from agent.models import Reply, Turn
from state import StateStore, TurnRecord

__all__ = ["TurnJournal", "RECORDED_ROUTES", "turn_record"]

RECORDED_ROUTES = frozenset({"knowledge", "followup"})
"""Routes whose turns are recorded (questions to the knowledge base)."""


def turn_record(turn: Turn, reply: Reply) -> TurnRecord:
    """The :class:`state.TurnRecord` of a finished turn (its citations without their quotes)."""
    trace = reply.trace
    return TurnRecord(
        trace_id=trace.trace_id, platform=turn.platform, user_id=turn.user_id, channel_id=turn.channel_id or "",
        question=turn.text, route=reply.route or trace.route or "", outcome=turn_outcome(reply),
        reason=str(trace.gate.get("reason", "")) if reply.refused else "",
        citations=tuple({"n": c.n, "chunk_id": c.chunk_id, "doc_id": c.doc_id, "title": c.title, "url": c.url,
                         "section": c.section} for c in reply.citations),
        total_ms=float(trace.timings_ms.get("total", 0.0)))


class TurnJournal:
    """Records knowledge turns in the state store (see the module docstring).

    Args:
        store: the state store that holds ``turn_log``.
        routes: the routes recorded (default :data:`RECORDED_ROUTES`).
    """

    def __init__(self, store: StateStore, routes: frozenset[str] = RECORDED_ROUTES) -> None:
        self.store = store
        self.routes = routes

    def __call__(self, turn: Turn, reply: Reply) -> None:
        """Record ``turn`` when its route is one of :attr:`routes`; database errors propagate (the agent logs
        them and the reply still goes out)."""
        record = turn_record(turn, reply)
        if record.route in self.routes:
            self.store.record_turn(record)
