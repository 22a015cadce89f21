"""The state store (see the package docstring): one facade over the concerns, on one engine.

Each concern is a small class in its own module over its tables of :mod:`state.schema`:

=========================  =======================  ===================================================
attribute                  class                    tables
=========================  =======================  ===================================================
``dedup``                  :class:`~state.events.EventDedup`             ``processed_events``
``answer_feedback``        :class:`~state.feedback.Feedback`             ``feedback``, ``sent_replies``
``turns``                  :class:`~state.turnlog.TurnLog`               ``turn_log``
``actions``                :class:`~state.actions.PendingActions`        ``pending_actions``
``audit_trail``            :class:`~state.audit.AuditTrail`              ``audit_log``
``sync``                   :class:`~state.sync.SyncState`                ``sync_cursors``, ``sync_runs``
``named_locks``            :class:`~state.locks.Locks`                   ``locks``
``jobs``                   :class:`~state.index_jobs.IndexJobs`          ``index_jobs``
``groups``                 :class:`~state.groups.GroupMembers`           ``group_members``
``chats``                  :class:`~state.conversations.Conversations`   ``conversations``, ``conversation_references``
``outbox``                 :class:`~state.outbox.Outbox`                 ``scheduled_messages``
``tokens``                 :class:`~state.tokens.McpTokens`              ``mcp_tokens``
=========================  =======================  ===================================================

:class:`StateStore` opens the engine, migrates the database, and exposes every concern's methods under
the names callers have always used (``store.claim_event(...)`` is ``store.dedup.claim_event(...)``), and
the tables under their old attribute names (``store.pending``, ``store.runs``...); new code may use a
concern directly.

Every write is a short transaction. The operations that must happen once (claiming an event,
moving a pending action from one status to the next, taking a lock, claiming or finishing a
scheduled message) are single conditional statements (``INSERT`` that fails on a duplicate key,
``UPDATE ... WHERE status = :from``), so they are atomic on SQLite and PostgreSQL alike, across
threads, processes and replicas.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

import sqlalchemy as sa
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from . import schema
from ._db import open_engine, sqlite_url
from .actions import PendingActions, PendingRecord
from .audit import AuditEntry, AuditTrail
from .conversations import Conversations, StoredMessage
from .errors import SchemaTooNewError, StateStoreError
from .events import EventDedup
from .feedback import Feedback
from .groups import GroupMembers
from .index_jobs import IndexJob, IndexJobs
from .locks import Locks
from .outbox import MESSAGE_MAX_ATTEMPTS, MESSAGE_RETRY_BASE, MESSAGE_RETRY_MAX, Outbox, ScheduledMessage
from .schema import LEGACY_INDEX_ID, NO_INDEX
from .sync import SyncRun, SyncState
from .tokens import McpToken, McpTokens
from .turnlog import TurnLog, TurnRecord

__all__ = ["StateStore", "StateStoreError", "LEGACY_INDEX_ID", "NO_INDEX", "IndexJob", "SchemaTooNewError", "PendingRecord", "AuditEntry", "SyncRun", "StoredMessage", "ScheduledMessage", "McpToken",
           "TurnRecord", "MESSAGE_MAX_ATTEMPTS", "MESSAGE_RETRY_BASE", "MESSAGE_RETRY_MAX", "sqlite_url"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _via(part: str, method: Callable[Concatenate[Any, _P], _R]) -> Callable[Concatenate[StateStore, _P], _R]:
    """A method of :class:`StateStore` that calls ``method`` of the concern held in the attribute ``part``
    (same name, signature and docstring)."""
    name = method.__name__

    @functools.wraps(method)
    def delegate(self: StateStore, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        bound: Callable[_P, _R] = getattr(getattr(self, part), name)  # the concern's own method, bound
        return bound(*args, **kwargs)

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

    # The tables (one definition: state.schema), under the names callers have used.
    metadata = schema.metadata
    events = schema.processed_events
    feedback = schema.feedback
    sent_replies = schema.sent_replies
    turn_log = schema.turn_log
    pending = schema.pending_actions
    audit_log = schema.audit_log
    cursors = schema.sync_cursors
    runs = schema.sync_runs
    locks = schema.locks
    index_jobs = schema.index_jobs
    group_members = schema.group_members
    conversations = schema.conversations
    conversation_refs = schema.conversation_references
    scheduled = schema.scheduled_messages
    mcp_tokens = schema.mcp_tokens

    def __init__(self, url: str, echo: bool = False) -> None:
        self.url = url
        self.engine = open_engine(url, echo=echo)
        self.dedup = EventDedup(self.engine)
        self.answer_feedback = Feedback(self.engine)
        self.turns = TurnLog(self.engine)
        self.actions = PendingActions(self.engine)
        self.audit_trail = AuditTrail(self.engine)
        self.sync = SyncState(self.engine)
        self.named_locks = Locks(self.engine)
        self.jobs = IndexJobs(self.engine)
        self.groups = GroupMembers(self.engine)
        self.chats = Conversations(self.engine)
        self.outbox = Outbox(self.engine)
        self.tokens = McpTokens(self.engine)
        from .migrate import upgrade

        upgrade(url)  # the tables come from the migrations (state/migrations), never from create_all

    # -- events (state.events) -------------------------------------------------------------------
    claim_event = _via("dedup", EventDedup.claim_event)
    prune_events = _via("dedup", EventDedup.prune_events)

    # -- feedback and sent replies (state.feedback) ----------------------------------------------
    add_feedback = _via("answer_feedback", Feedback.add_feedback)
    feedback_for = _via("answer_feedback", Feedback.feedback_for)
    feedback_for_traces = _via("answer_feedback", Feedback.feedback_for_traces)
    remember_reply = _via("answer_feedback", Feedback.remember_reply)
    trace_of_reply = _via("answer_feedback", Feedback.trace_of_reply)

    # -- turn log (state.turnlog) ----------------------------------------------------------------
    record_turn = _via("turns", TurnLog.record_turn)
    turn_records = _via("turns", TurnLog.turn_records)

    # -- pending actions (state.actions) ---------------------------------------------------------
    create_pending = _via("actions", PendingActions.create_pending)
    get_pending = _via("actions", PendingActions.get_pending)
    open_pending_for = _via("actions", PendingActions.open_pending_for)
    transition_pending = _via("actions", PendingActions.transition_pending)
    pending_counts = _via("actions", PendingActions.pending_counts)

    # -- audit (state.audit) ---------------------------------------------------------------------
    audit = _via("audit_trail", AuditTrail.audit)
    audit_entries = _via("audit_trail", AuditTrail.audit_entries)

    # -- MCP bearer tokens (state.tokens) --------------------------------------------------------
    add_mcp_token = _via("tokens", McpTokens.add_mcp_token)
    mcp_token_for = _via("tokens", McpTokens.mcp_token_for)
    mcp_tokens_list = _via("tokens", McpTokens.mcp_tokens_list)
    revoke_mcp_token = _via("tokens", McpTokens.revoke_mcp_token)

    # -- sync cursors and runs (state.sync) ------------------------------------------------------
    get_cursor = _via("sync", SyncState.get_cursor)
    set_cursor = _via("sync", SyncState.set_cursor)
    forget_source = _via("sync", SyncState.forget_source)
    adopt_legacy = _via("sync", SyncState.adopt_legacy)
    start_run = _via("sync", SyncState.start_run)
    finish_run = _via("sync", SyncState.finish_run)
    last_runs = _via("sync", SyncState.last_runs)
    last_successful_runs = _via("sync", SyncState.last_successful_runs)

    # -- locks (state.locks) ---------------------------------------------------------------------
    acquire_lock = _via("named_locks", Locks.acquire_lock)
    take_over_lock = _via("named_locks", Locks.take_over_lock)
    lock_holder = _via("named_locks", Locks.lock_holder)
    release_lock = _via("named_locks", Locks.release_lock)

    # -- index jobs (state.index_jobs) -----------------------------------------------------------
    enqueue_index_job = _via("jobs", IndexJobs.enqueue_index_job)
    claim_index_job = _via("jobs", IndexJobs.claim_index_job)
    finish_index_job = _via("jobs", IndexJobs.finish_index_job)
    index_job = _via("jobs", IndexJobs.index_job)

    # -- group memberships (state.groups) --------------------------------------------------------
    set_group_members = _via("groups", GroupMembers.set_group_members)
    groups_of = _via("groups", GroupMembers.groups_of)
    group_members_of = _via("groups", GroupMembers.group_members_of)

    # -- conversations and conversation references (state.conversations) -------------------------
    get_history = _via("chats", Conversations.get_history)
    get_history_entries = _via("chats", Conversations.get_history_entries)
    append_history = _via("chats", Conversations.append_history)
    remember_conversation_reference = _via("chats", Conversations.remember_conversation_reference)
    conversation_reference = _via("chats", Conversations.conversation_reference)

    # -- scheduled messages, the outbox (state.outbox) -------------------------------------------
    schedule_message = _via("outbox", Outbox.schedule_message)
    cancel_message = _via("outbox", Outbox.cancel_message)
    claim_due_messages = _via("outbox", Outbox.claim_due_messages)
    finish_message = _via("outbox", Outbox.finish_message)
    scheduled_message = _via("outbox", Outbox.scheduled_message)
    scheduled_messages = _via("outbox", Outbox.scheduled_messages)
    due_message_counts = _via("outbox", Outbox.due_message_counts)

    # -- health ----------------------------------------------------------------------------------
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
