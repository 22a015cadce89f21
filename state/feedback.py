"""Users' feedback on answers, keyed by the turn's trace id, and which turn each bot message
answered (tables ``feedback`` and ``sent_replies``; Teams' feedback invoke names only the message).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa

from . import schema
from ._db import Concern, now as _now

__all__ = ["Feedback"]


class Feedback(Concern):
    """Feedback on answers and the turn each sent reply answered."""

    feedback = schema.feedback
    sent_replies = schema.sent_replies

    def add_feedback(self, trace_id: str, platform: str, user_id: str, value: str, comment: str = "") -> None:
        """Store (or replace) a user's feedback on the turn ``trace_id``.

        Raises:
            ValueError: when ``value`` is not ``helpful`` or ``not_helpful``.
        """
        if value not in {"helpful", "not_helpful"}:
            raise ValueError(f"feedback value must be helpful or not_helpful, got {value!r}")
        t = self.feedback
        with self.engine.begin() as conn:
            conn.execute(t.delete().where(t.c.trace_id == trace_id, t.c.user_id == user_id))
            conn.execute(t.insert().values(trace_id=trace_id, platform=platform, user_id=user_id, value=value,
                                           comment=comment, created_at=_now()))

    def feedback_for(self, trace_id: str) -> list[dict[str, Any]]:
        """Feedback rows of a turn."""
        t = self.feedback
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(t).where(t.c.trace_id == trace_id).order_by(t.c.id)).mappings()
            return [dict(r) for r in rows]

    def feedback_for_traces(self, trace_ids: Iterable[str]) -> list[dict[str, Any]]:
        """Feedback rows (``trace_id``, ``platform``, ``user_id``, ``value``, ``comment``, ``created_at``)
        of the turns ``trace_ids``, in the order given, in batches of 500 ids per query."""
        ids = list(dict.fromkeys(trace_ids))
        t = self.feedback
        out: list[dict[str, Any]] = []
        with self.engine.connect() as conn:
            for i in range(0, len(ids), 500):
                q = sa.select(t).where(t.c.trace_id.in_(ids[i:i + 500])).order_by(t.c.id)
                out.extend(dict(r) for r in conn.execute(q).mappings())
        order = {trace: i for i, trace in enumerate(ids)}
        return sorted(out, key=lambda r: order[r["trace_id"]])

    def remember_reply(self, platform: str, message_id: str, trace_id: str) -> None:
        """Remember that the bot's message ``message_id`` answered the turn ``trace_id`` (the last write wins)."""
        t = self.sent_replies
        with self.engine.begin() as conn:
            conn.execute(t.delete().where(t.c.platform == platform, t.c.message_id == message_id))
            conn.execute(t.insert().values(platform=platform, message_id=message_id, trace_id=trace_id,
                                           created_at=_now()))

    def trace_of_reply(self, platform: str, message_id: str) -> str | None:
        """The trace id of the turn the bot's message ``message_id`` answered, or None when unknown."""
        t = self.sent_replies
        with self.engine.connect() as conn:
            return conn.execute(sa.select(t.c.trace_id).where(t.c.platform == platform,
                                                               t.c.message_id == message_id)).scalar()
