"""Which chat events were already handled: a redelivered event (Slack retries, Bot Framework
replays) is claimed once (table ``processed_events``).
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.exc import IntegrityError

from . import schema
from ._db import Concern, now as _now

__all__ = ["EventDedup"]


class EventDedup(Concern):
    """Claims of chat event ids; the claim is one ``INSERT`` that fails on a duplicate key, so of two
    deliveries (threads, processes, replicas) exactly one wins."""

    events = schema.processed_events

    def claim_event(self, event_id: str, platform: str) -> bool:
        """Record ``event_id``; True the first time, False for a duplicate (already claimed)."""
        try:
            with self.engine.begin() as conn:
                conn.execute(self.events.insert().values(event_id=event_id, platform=platform, received_at=_now()))
            return True
        except IntegrityError:
            return False

    def prune_events(self, older_than: timedelta = timedelta(days=2)) -> int:
        """Forget event ids older than ``older_than`` (Slack retries within minutes); returns the count."""
        with self.engine.begin() as conn:
            return conn.execute(self.events.delete().where(self.events.c.received_at < _now() - older_than)).rowcount
