"""The turn log (table ``turn_log``): each chat turn's question, outcome and cited pages, the
knowledge-gap report's input (:mod:`app.report`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from . import schema
from ._db import Concern, aware as _aware, now as _now, utc as _utc

__all__ = ["TurnLog", "TurnRecord"]


@dataclass(frozen=True)
class TurnRecord:
    """One answered (or refused) turn as the knowledge-gap report reads it (table ``turn_log``).

    Attributes:
        trace_id: the turn's trace id (feedback rows carry the same id).
        platform, user_id, channel_id: where it was asked and by whom.
        question: the user's message as the agent read it (users' words: purged after
            ``RETENTION_DAYS_CONVERSATIONS`` and by ``chatops forget``).
        route: the route taken (``knowledge``, ``followup``, ``action``, ``chitchat``...).
        outcome: ``answered``, ``refused``, ``replied`` (uncited) or ``action``.
        reason: why a refusal refused (the gate's reason), else empty.
        citations: the cited pages, ``[{"n", "chunk_id", "doc_id", "title", "url", "section"}]``.
        total_ms: the agent's time for the turn, in milliseconds.
        created_at: when the turn was answered (UTC).
    """

    trace_id: str
    platform: str
    user_id: str
    channel_id: str
    question: str
    route: str
    outcome: str
    reason: str = ""
    citations: tuple[dict[str, Any], ...] = ()
    total_ms: float = 0.0
    created_at: datetime | None = None


class TurnLog(Concern):
    """Appends and reads of the turn log."""

    turn_log = schema.turn_log

    def record_turn(self, record: TurnRecord) -> None:
        """Append one turn to ``turn_log`` (``created_at`` defaults to now, UTC).

        Raises:
            ValueError: for a naive ``record.created_at``.
        """
        with self.engine.begin() as conn:
            conn.execute(self.turn_log.insert().values(
                trace_id=record.trace_id, platform=record.platform, user_id=record.user_id,
                channel_id=record.channel_id, question=record.question, route=record.route,
                outcome=record.outcome, reason=record.reason, citations=json.dumps(list(record.citations)),
                total_ms=float(record.total_ms),
                created_at=_utc(record.created_at, "created_at") if record.created_at else _now()))

    def turn_records(self, since: datetime | None = None, until: datetime | None = None,
                     outcome: str | None = None, limit: int | None = None) -> list[TurnRecord]:
        """Turns recorded in ``[since, until)`` (either bound optional), optionally of one ``outcome``,
        oldest first, at most ``limit``.

        Raises:
            ValueError: for a naive ``since`` or ``until``.
        """
        t = self.turn_log
        q = sa.select(t).order_by(t.c.created_at, t.c.id)
        if since is not None:
            q = q.where(t.c.created_at >= _utc(since, "since"))
        if until is not None:
            q = q.where(t.c.created_at < _utc(until, "until"))
        if outcome is not None:
            q = q.where(t.c.outcome == outcome)
        if limit is not None:
            q = q.limit(limit)
        with self.engine.connect() as conn:
            rows = conn.execute(q).mappings().all()
        return [TurnRecord(trace_id=r["trace_id"], platform=r["platform"], user_id=r["user_id"],
                           channel_id=r["channel_id"], question=r["question"], route=r["route"],
                           outcome=r["outcome"], reason=r["reason"],
                           citations=tuple(json.loads(r["citations"] or "[]")), total_ms=r["total_ms"],
                           created_at=_aware(r["created_at"])) for r in rows]
