"""Pending actions (table ``pending_actions``): side-effect tool calls waiting for their
confirmation, executed once (the move ``pending`` -> ``executing`` is one conditional ``UPDATE``).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from . import schema
from ._db import Concern, aware as _aware, now as _now

__all__ = ["PendingActions", "PendingRecord"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PendingRecord:
    """A side-effect action waiting for (or past) its confirmation.

    ``status`` is one of ``pending``, ``executing``, ``done``, ``cancelled``, ``failed``.
    """

    key: str
    tool: str
    args: dict[str, Any]
    requester: str
    platform: str
    channel_id: str
    thread_id: str
    summary: str
    status: str
    result: dict[str, Any] | None
    created_at: datetime
    expires_at: datetime
    updated_at: datetime

    @property
    def expired(self) -> bool:
        """True when the confirmation window has passed."""
        return _now() >= self.expires_at


class PendingActions(Concern):
    """Pending actions: create (idempotent by key), read, and move from one status to the next atomically."""

    pending = schema.pending_actions

    def create_pending(self, key: str, tool: str, args: dict[str, Any], requester: str, platform: str,
                       channel_id: str = "", thread_id: str = "", summary: str = "",
                       ttl: timedelta = timedelta(hours=1)) -> PendingRecord:
        """Store a pending action; a second call with the same idempotency key returns the first one."""
        now = _now()
        try:
            with self.engine.begin() as conn:
                conn.execute(self.pending.insert().values(
                    key=key, tool=tool, args=json.dumps(args, default=str), requester=requester, platform=platform,
                    channel_id=channel_id, thread_id=thread_id, summary=summary, status="pending", result=None,
                    created_at=now, expires_at=now + ttl, updated_at=now))
        except IntegrityError:
            log.info("pending action %s already exists; returning it", key)
        rec = self.get_pending(key)
        assert rec is not None
        return rec

    def get_pending(self, key: str) -> PendingRecord | None:
        """The pending action with idempotency key ``key``."""
        t = self.pending
        with self.engine.connect() as conn:
            r = conn.execute(sa.select(t).where(t.c.key == key)).mappings().first()
        return None if r is None else self._pending_record(r)

    def open_pending_for(self, requester: str, platform: str, limit: int = 10) -> list[PendingRecord]:
        """The actions ``requester`` proposed on ``platform`` that still wait for a confirmation (status
        ``pending``, window not passed), newest first, at most ``limit``."""
        t = self.pending
        q = (sa.select(t).where(t.c.requester == requester, t.c.platform == platform, t.c.status == "pending",
                                t.c.expires_at > _now())
             .order_by(t.c.created_at.desc(), t.c.key).limit(max(0, limit)))
        with self.engine.connect() as conn:
            return [self._pending_record(r) for r in conn.execute(q).mappings()]

    @staticmethod
    def _pending_record(r: Any) -> PendingRecord:
        return PendingRecord(
            key=r["key"], tool=r["tool"], args=json.loads(r["args"]), requester=r["requester"],
            platform=r["platform"], channel_id=r["channel_id"], thread_id=r["thread_id"], summary=r["summary"],
            status=r["status"], result=json.loads(r["result"]) if r["result"] else None,
            created_at=_aware(r["created_at"]), expires_at=_aware(r["expires_at"]),
            updated_at=_aware(r["updated_at"]))

    def transition_pending(self, key: str, from_status: str, to_status: str,
                           result: dict[str, Any] | None = None) -> bool:
        """Atomically move ``key`` from ``from_status`` to ``to_status``; False when it was not in
        ``from_status`` (someone else got there first: a double click, a retry, another replica)."""
        t = self.pending
        values: dict[str, Any] = {"status": to_status, "updated_at": _now()}
        if result is not None:
            values["result"] = json.dumps(result, default=str)
        with self.engine.begin() as conn:
            n = conn.execute(t.update().where(t.c.key == key, t.c.status == from_status).values(**values)).rowcount
        return n == 1

    def pending_counts(self) -> dict[str, int]:
        """Pending actions by status (``pending``, ``executing``, ``done``...), from one GROUP BY query."""
        t = self.pending
        with self.engine.connect() as conn:
            return {s: int(n) for s, n in conn.execute(sa.select(t.c.status, sa.func.count()).group_by(t.c.status))}
