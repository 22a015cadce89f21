"""The state store (see the package docstring).

Every write is a short transaction. The operations that must happen once (claiming an event,
moving a pending action from one status to the next, taking a lock, claiming or finishing a
scheduled message) are single conditional statements (``INSERT`` that fails on a duplicate key,
``UPDATE ... WHERE status = :from``), so they are atomic on SQLite and PostgreSQL alike, across
threads, processes and replicas.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError, OperationalError, SQLAlchemyError

from .errors import SchemaTooNewError, StateStoreError
from . import schema
from .events import EventDedup
from .feedback import Feedback
from .turnlog import TurnLog, TurnRecord
from .actions import PendingActions, PendingRecord
from .audit import AuditTrail, AuditEntry
from .tokens import McpTokens, McpToken
from .sync import SyncState, SyncRun
from .locks import Locks
from .index_jobs import IndexJobs, IndexJob
from .groups import GroupMembers
from .conversations import Conversations, StoredMessage
from .schema import LEGACY_INDEX_ID, NO_INDEX

__all__ = ["StateStore", "StateStoreError", "LEGACY_INDEX_ID", "NO_INDEX", "IndexJob", "SchemaTooNewError", "PendingRecord", "AuditEntry", "SyncRun", "StoredMessage", "ScheduledMessage", "McpToken",
           "TurnRecord", "MESSAGE_MAX_ATTEMPTS", "MESSAGE_RETRY_BASE", "MESSAGE_RETRY_MAX", "sqlite_url"]

log = logging.getLogger(__name__)


def sqlite_url(path: str | os.PathLike[str]) -> str:
    """SQLAlchemy URL of a SQLite file (its folder is created)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{Path(path)}"


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _aware(dt: datetime | None) -> datetime | None:
    """SQLite returns naive datetimes; every time in the store is UTC."""
    if dt is not None and dt.tzinfo is None:
        return dt.replace(tzinfo=timezone.utc)
    return dt


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


def _utc(dt: datetime, name: str) -> datetime:
    """``dt`` in UTC (SQLite compares times as text, so every stored and compared time must be UTC).

    Raises:
        ValueError: when ``dt`` is naive (its time zone would be a guess).
    """
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError(f"{name} must be an aware datetime (with a time zone), got {dt!r}")
    return dt.astimezone(timezone.utc)


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _via(part: str, method: Callable[Concatenate[Any, _P], _R]) -> Callable[Concatenate[StateStore, _P], _R]:
    """A method of :class:`StateStore` that calls ``method`` of the concern held in the attribute ``part``
    (same name, signature and docstring)."""
    name = method.__name__

    @functools.wraps(method)
    def delegate(self: StateStore, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        return getattr(getattr(self, part), name)(*args, **kwargs)

    return delegate


class StateStore:
    """All persistent bot state in one database.

    Args:
        url: a SQLAlchemy URL (``sqlite:///...`` or ``postgresql+psycopg://...``).
        echo: log SQL (debugging).

    Opening runs the migrations first (:func:`state.migrate.upgrade`): a new database is created, one
    made by an older release is upgraded, one at the newest revision is left alone.

    Raises:
        SchemaTooNewError: when a newer chatops has migrated the database (upgrade chatops).
        StateStoreError: when the database cannot be reached or migrated.
    """

    def __init__(self, url: str, echo: bool = False) -> None:
        self.url = url
        kwargs: dict[str, Any] = {"echo": echo, "pool_pre_ping": True}
        if url.startswith("sqlite"):
            kwargs["connect_args"] = {"timeout": 30, "check_same_thread": False}
        try:
            self.engine = sa.create_engine(url, **kwargs)
        except (SQLAlchemyError, ImportError, ValueError) as exc:
            raise StateStoreError(f"cannot use DATABASE_URL ({_safe(url)}): {exc}") from exc
        if url.startswith("sqlite"):
            sa.event.listen(self.engine, "connect", _sqlite_pragmas)
        # The tables (one definition: state.schema), under the names callers have used.
        self.metadata = schema.metadata
        self.events = schema.processed_events
        self.feedback = schema.feedback
        self.sent_replies = schema.sent_replies
        self.turn_log = schema.turn_log
        self.pending = schema.pending_actions
        self.audit_log = schema.audit_log
        self.cursors = schema.sync_cursors
        self.runs = schema.sync_runs
        self.locks = schema.locks
        self.index_jobs = schema.index_jobs
        self.group_members = schema.group_members
        self.conversations = schema.conversations
        self.conversation_refs = schema.conversation_references
        self.scheduled = schema.scheduled_messages
        self.mcp_tokens = schema.mcp_tokens
        self.dedup = EventDedup(self.engine)
        self.answer_feedback = Feedback(self.engine)
        self.turns = TurnLog(self.engine)
        self.actions = PendingActions(self.engine)
        self.audit_trail = AuditTrail(self.engine)
        self.tokens = McpTokens(self.engine)
        self.sync = SyncState(self.engine)
        self.named_locks = Locks(self.engine)
        self.jobs = IndexJobs(self.engine)
        self.groups = GroupMembers(self.engine)
        self.chats = Conversations(self.engine)
        from .migrate import upgrade

        upgrade(url)  # the tables come from the migrations (state/migrations), never from create_all

    # -- state.events --------------------------------------------------------------------------------------
    claim_event = _via("dedup", EventDedup.claim_event)
    prune_events = _via("dedup", EventDedup.prune_events)

    # -- state.feedback ------------------------------------------------------------------------------------
    add_feedback = _via("answer_feedback", Feedback.add_feedback)
    feedback_for = _via("answer_feedback", Feedback.feedback_for)
    feedback_for_traces = _via("answer_feedback", Feedback.feedback_for_traces)
    remember_reply = _via("answer_feedback", Feedback.remember_reply)
    trace_of_reply = _via("answer_feedback", Feedback.trace_of_reply)

    # -- state.turnlog -------------------------------------------------------------------------------------
    record_turn = _via("turns", TurnLog.record_turn)
    turn_records = _via("turns", TurnLog.turn_records)

    # -- state.actions -------------------------------------------------------------------------------------
    create_pending = _via("actions", PendingActions.create_pending)
    get_pending = _via("actions", PendingActions.get_pending)
    open_pending_for = _via("actions", PendingActions.open_pending_for)
    transition_pending = _via("actions", PendingActions.transition_pending)
    pending_counts = _via("actions", PendingActions.pending_counts)

    # -- state.audit ---------------------------------------------------------------------------------------
    audit = _via("audit_trail", AuditTrail.audit)
    audit_entries = _via("audit_trail", AuditTrail.audit_entries)

    # -- state.tokens --------------------------------------------------------------------------------------
    add_mcp_token = _via("tokens", McpTokens.add_mcp_token)
    mcp_token_for = _via("tokens", McpTokens.mcp_token_for)
    mcp_tokens_list = _via("tokens", McpTokens.mcp_tokens_list)
    revoke_mcp_token = _via("tokens", McpTokens.revoke_mcp_token)

    # -- state.sync ----------------------------------------------------------------------------------------
    get_cursor = _via("sync", SyncState.get_cursor)
    set_cursor = _via("sync", SyncState.set_cursor)
    forget_source = _via("sync", SyncState.forget_source)
    adopt_legacy = _via("sync", SyncState.adopt_legacy)
    start_run = _via("sync", SyncState.start_run)
    finish_run = _via("sync", SyncState.finish_run)
    last_runs = _via("sync", SyncState.last_runs)
    last_successful_runs = _via("sync", SyncState.last_successful_runs)

    # -- state.locks ---------------------------------------------------------------------------------------
    acquire_lock = _via("named_locks", Locks.acquire_lock)
    take_over_lock = _via("named_locks", Locks.take_over_lock)
    lock_holder = _via("named_locks", Locks.lock_holder)
    release_lock = _via("named_locks", Locks.release_lock)

    # -- state.index_jobs ----------------------------------------------------------------------------------
    enqueue_index_job = _via("jobs", IndexJobs.enqueue_index_job)
    claim_index_job = _via("jobs", IndexJobs.claim_index_job)
    finish_index_job = _via("jobs", IndexJobs.finish_index_job)
    index_job = _via("jobs", IndexJobs.index_job)

    # -- state.groups --------------------------------------------------------------------------------------
    set_group_members = _via("groups", GroupMembers.set_group_members)
    groups_of = _via("groups", GroupMembers.groups_of)
    group_members_of = _via("groups", GroupMembers.group_members_of)

    # -- state.conversations -------------------------------------------------------------------------------
    get_history = _via("chats", Conversations.get_history)
    get_history_entries = _via("chats", Conversations.get_history_entries)
    append_history = _via("chats", Conversations.append_history)
    remember_conversation_reference = _via("chats", Conversations.remember_conversation_reference)
    conversation_reference = _via("chats", Conversations.conversation_reference)

    # -- scheduled messages (the outbox) ---------------------------------------------------------
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
        scope = [t.c.platform.in_(list(platforms))] if platforms is not None else []
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

    # -- health --------------------------------------------------------------------------------
    def ping(self) -> bool:
        """True when the database answers (for readiness probes)."""
        try:
            with self.engine.connect() as conn:
                conn.execute(sa.text("SELECT 1"))
            return True
        except (OperationalError, SQLAlchemyError):
            return False

    def drop_all(self) -> None:
        """Drop every table and the schema revision (tests only)."""
        self.metadata.drop_all(self.engine)
        with self.engine.begin() as conn:
            conn.execute(sa.text("DROP TABLE IF EXISTS alembic_version"))

    def close(self) -> None:
        """Release connections."""
        self.engine.dispose()

def _principal_part(text: str) -> str:
    """A source name, group name or e-mail as principals compare it: trimmed, lower case."""
    return (text or "").strip().lower()


def _scheduled(r: Any) -> ScheduledMessage:
    return ScheduledMessage(
        key=r["key"], platform=r["platform"], user_id=r["user_id"], channel_id=r["channel_id"],
        at=_aware(r["at"]), text=r["text"], status=r["status"], attempts=int(r["attempts"]),  # type: ignore[arg-type]
        error=r["error"], created_at=_aware(r["created_at"]))  # type: ignore[arg-type]


def _sqlite_pragmas(dbapi_conn, _record) -> None:  # pragma: no cover - trivial
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


def _safe(url: str) -> str:
    """The URL with any password masked, for messages and logs."""
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<unparseable URL>"


