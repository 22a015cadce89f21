"""Scheduled messages (table ``scheduled_messages``): the outbox, a message to a user at a time,
claimed and delivered once by :mod:`app.outbox` (each claim one conditional ``UPDATE`` with a lease).
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from . import schema
from ._db import Concern, aware as _aware, now as _now, utc as _utc

__all__ = ["Outbox", "ScheduledMessage", "MESSAGE_MAX_ATTEMPTS", "MESSAGE_RETRY_BASE", "MESSAGE_RETRY_MAX"]

log = logging.getLogger(__name__)


#: Delivery attempts of a scheduled message before it is marked ``failed`` (each claim is one attempt).
MESSAGE_MAX_ATTEMPTS = 5


#: Wait before the first retry of a scheduled message; doubled at each further attempt, up to :data:`MESSAGE_RETRY_MAX`.
MESSAGE_RETRY_BASE = timedelta(seconds=30)


MESSAGE_RETRY_MAX = timedelta(minutes=30)


@dataclass(frozen=True, slots=True)
class ScheduledMessage:
    """A message to send to a user at a given time (the outbox; delivered by :mod:`app.outbox`).

    Attributes:
        key: the caller's idempotency key (unique; scheduling the same key twice stores one message).
        platform: where to deliver it (``slack``, ``teams``, ``cli``...).
        user_id: the platform's id of the recipient.
        channel_id: the conversation the message was scheduled from ("" when none).
        at: when to send it (aware, UTC).
        text: the message, plain text.
        status: ``pending`` (waiting for ``at`` or for a retry), ``sending`` (claimed by a deliverer),
            ``delivered``, ``failed`` or ``cancelled``.
        attempts: delivery attempts so far (each claim counts one).
        error: the last delivery error ("" when none).
        created_at: when it was scheduled (aware, UTC).
    """

    key: str
    platform: str
    user_id: str
    channel_id: str
    at: datetime
    text: str
    status: str
    attempts: int
    error: str
    created_at: datetime


def _scheduled(r: Any) -> ScheduledMessage:
    return ScheduledMessage(
        key=r["key"], platform=r["platform"], user_id=r["user_id"], channel_id=r["channel_id"],
        at=_aware(r["at"]), text=r["text"], status=r["status"], attempts=int(r["attempts"]),
        error=r["error"], created_at=_aware(r["created_at"]))


class Outbox(Concern):
    """Schedule, cancel, claim, finish and list scheduled messages."""

    scheduled = schema.scheduled_messages

    def schedule_message(self, key: str, *, platform: str, user_id: str, channel_id: str, at: datetime,
                         text: str) -> bool:
        """Store a message to send to ``user_id`` on ``platform`` at ``at``; True when stored, False when
        ``key`` already exists (the first message is kept: a retried request cannot schedule twice).

        Args:
            key: the idempotency key (at most 200 characters).
            platform, user_id, channel_id: the recipient (see :class:`ScheduledMessage`).
            at: an aware datetime (stored in UTC); a time in the past is due at once.
            text: the message.

        Raises:
            ValueError: when ``at`` is naive, or ``key``, ``platform``, ``user_id`` or ``text`` is empty or too long.
        """
        when = _utc(at, "at")
        if not key or len(key) > 200:
            raise ValueError(f"a scheduled message's key must be 1-200 characters, got {len(key)}")
        if not platform or len(platform) > 20 or not user_id or len(user_id) > 200 or len(channel_id) > 200:
            raise ValueError("a scheduled message needs a platform (1-20 characters) and a user id (1-200 characters)")
        if not text:
            raise ValueError("a scheduled message needs a text")
        now = _now()
        try:
            with self.engine.begin() as conn:
                conn.execute(self.scheduled.insert().values(
                    key=key, platform=platform, user_id=user_id, channel_id=channel_id, at=when, text=text,
                    status="pending", due_at=when, attempts=0, error="", owner="", lease_until=None,
                    created_at=now, updated_at=now))
            return True
        except IntegrityError:
            log.info("scheduled message %s already exists; keeping the first", key)
            return False

    def cancel_message(self, key: str) -> bool:
        """Cancel a pending message; False when it is not pending (unknown, already sending, delivered,
        failed or cancelled)."""
        t = self.scheduled
        with self.engine.begin() as conn:
            n = conn.execute(t.update().where(t.c.key == key, t.c.status == "pending")
                             .values(status="cancelled", updated_at=_now())).rowcount
        return n == 1

    def claim_due_messages(self, now: datetime, owner: str, limit: int = 50,
                           lease: timedelta = timedelta(minutes=5), *,
                           platforms: Collection[str] | None = None, user_id: str | None = None,
                           max_attempts: int = MESSAGE_MAX_ATTEMPTS) -> list[ScheduledMessage]:
        """Claim the messages due at ``now`` for ``owner`` and return them (oldest ``at`` first).

        Due means ``pending`` with its next attempt time (``at``, or later after a failed attempt)
        at or before ``now``, or ``sending`` with a lease that expired before ``now`` (its deliverer
        crashed or hung). Each row is claimed by one conditional ``UPDATE`` (-> ``sending``,
        ``owner``, lease until ``now + lease``, one more attempt), so two deliverers (threads,
        processes, replicas) never both claim it. A message whose lease expired after
        ``max_attempts`` attempts (or a pending one that had them) is marked ``failed`` instead.

        Args:
            now: the current time (aware).
            owner: who delivers (unique per process, e.g. ``host:pid``); :meth:`finish_message` needs it.
            limit: claim at most this many.
            lease: how long the claim holds; deliver and finish well within it.
            platforms: claim only messages for these platforms (None: any), so a deliverer never
                holds messages it cannot send.
            user_id: claim only this recipient's messages (None: anyone's); the CLI shows a user only theirs.
            max_attempts: see above.

        Raises:
            ValueError: when ``now`` is naive.
        """
        now = _utc(now, "now")
        t = self.scheduled
        stale = sa.and_(t.c.status == "sending", t.c.lease_until < now)
        due = sa.or_(sa.and_(t.c.status == "pending", t.c.due_at <= now), stale)
        scope: list[sa.ColumnElement[bool]] = [t.c.platform.in_(list(platforms))] if platforms is not None else []
        if user_id is not None:
            scope.append(t.c.user_id == user_id)
        with self.engine.begin() as conn:
            conn.execute(t.update().where(due, t.c.attempts >= max_attempts, *scope).values(
                status="failed", owner="", lease_until=None, updated_at=now,
                error=sa.case((t.c.status == "sending", sa.literal(
                    f"gave up after {max_attempts} attempts; the last recorded no outcome (its deliverer stopped)")),
                    else_=t.c.error)))
        with self.engine.connect() as conn:
            keys = list(conn.execute(sa.select(t.c.key).where(due, *scope).order_by(t.c.due_at, t.c.key)
                                     .limit(limit)).scalars())
        claimed: list[str] = []
        for key in keys:
            with self.engine.begin() as conn:
                n = conn.execute(t.update().where(t.c.key == key, due, t.c.attempts < max_attempts).values(
                    status="sending", owner=owner, lease_until=now + lease, attempts=t.c.attempts + 1,
                    updated_at=now)).rowcount
            if n == 1:
                claimed.append(key)
        if not claimed:
            return []
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(t).where(t.c.key.in_(claimed), t.c.owner == owner)
                                .order_by(t.c.due_at, t.c.key)).mappings()
            return [_scheduled(r) for r in rows]

    def finish_message(self, key: str, owner: str, status: Literal["delivered", "failed", "pending"],
                       error: str = "", *, max_attempts: int = MESSAGE_MAX_ATTEMPTS) -> bool:
        """Record the outcome of ``owner``'s delivery of ``key``; False when ``owner`` no longer holds it
        (its lease expired and another deliverer claimed it, or it was never claimed).

        ``delivered`` and ``failed`` are final; ``pending`` means "try again later": the message is due
        again after :data:`MESSAGE_RETRY_BASE` doubled per attempt (at most :data:`MESSAGE_RETRY_MAX`),
        or becomes ``failed`` when it has had ``max_attempts`` attempts. ``error`` is kept (2000
        characters at most) for listings and logs.

        Raises:
            ValueError: for another ``status``.
        """
        if status not in {"delivered", "failed", "pending"}:
            raise ValueError(f"a delivery ends delivered, failed or pending, got {status!r}")
        t = self.scheduled
        now = _now()
        with self.engine.connect() as conn:
            attempts = conn.execute(sa.select(t.c.attempts).where(
                t.c.key == key, t.c.status == "sending", t.c.owner == owner)).scalar()
        if attempts is None:
            return False
        values: dict[str, Any] = {"status": status, "error": error[:2000], "owner": "", "lease_until": None,
                                  "updated_at": now}
        if status == "pending":
            if attempts >= max_attempts:
                values.update(status="failed", error=f"gave up after {attempts} attempts: {error}"[:2000])
            else:
                values["due_at"] = now + min(MESSAGE_RETRY_BASE * 2 ** max(attempts - 1, 0), MESSAGE_RETRY_MAX)
        with self.engine.begin() as conn:
            # ``attempts`` in the condition: a re-claim after this read (lease expired) makes it fail.
            n = conn.execute(t.update().where(t.c.key == key, t.c.status == "sending", t.c.owner == owner,
                                              t.c.attempts == attempts).values(**values)).rowcount
        return n == 1

    def scheduled_message(self, key: str) -> ScheduledMessage | None:
        """The scheduled message ``key``, or None."""
        t = self.scheduled
        with self.engine.connect() as conn:
            r = conn.execute(sa.select(t).where(t.c.key == key)).mappings().first()
        return _scheduled(r) if r is not None else None

    def scheduled_messages(self, user_id: str | None = None, status: str | None = None,
                           limit: int = 100) -> list[ScheduledMessage]:
        """Scheduled messages, soonest ``at`` first: all, or of one recipient, or in one status."""
        t = self.scheduled
        q = sa.select(t).order_by(t.c.at, t.c.key).limit(limit)
        if user_id is not None:
            q = q.where(t.c.user_id == user_id)
        if status is not None:
            q = q.where(t.c.status == status)
        with self.engine.connect() as conn:
            return [_scheduled(r) for r in conn.execute(q).mappings()]

    def due_message_counts(self, now: datetime) -> dict[str, int]:
        """How many messages are due at ``now`` (``pending``, next attempt time passed), by platform.

        Raises:
            ValueError: when ``now`` is naive.
        """
        now = _utc(now, "now")
        t = self.scheduled
        q = (sa.select(t.c.platform, sa.func.count()).where(t.c.status == "pending", t.c.due_at <= now)
             .group_by(t.c.platform))
        with self.engine.connect() as conn:
            return {p: int(n) for p, n in conn.execute(q)}
