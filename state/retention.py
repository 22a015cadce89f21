"""What the state store forgets: rows past their retention (:func:`purge`) and one person (:func:`forget_user`).

Both work on a :class:`~state.store.StateStore`'s tables and return counts per table; the schedule,
the settings and the run record are the application's (:mod:`app.retention`).
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass, field
from datetime import datetime

import sqlalchemy as sa

from ._db import utc as _utc
from .conversations import history_entries as _history_entries
from .store import StateStore

__all__ = ["Cutoffs", "purge", "ForgetReport", "forget_user", "SETTLED_ACTIONS", "SETTLED_MESSAGES"]

#: Pending actions that are over (an expired ``pending`` one is over too); ``executing`` ones are kept.
SETTLED_ACTIONS = ("done", "cancelled", "failed")
#: Scheduled messages that are over (``cancelled`` too: it will never be sent, and it holds a user's text).
SETTLED_MESSAGES = ("delivered", "failed", "cancelled")


@dataclass(frozen=True, slots=True)
class Cutoffs:
    """Rows older than these (aware) times are purged.

    Attributes:
        conversations: conversation histories (by their last message), ``turn_log`` rows and conversation
            references (by when the user was last seen; kept while a message to that user waits to be sent).
        audit: the audit log; runs (except each index's latest run of each source); settled pending actions,
            scheduled messages (by their last change) and finished re-index jobs (``index_jobs``).
        feedback: feedback on answers, and which turn each bot message answered (``sent_replies``: what
            feedback given later on that message needs).
    """

    conversations: datetime
    audit: datetime
    feedback: datetime


def purge(store: StateStore, cutoffs: Cutoffs) -> dict[str, int]:
    """Delete what is older than ``cutoffs``, in one transaction.

    Returns:
        Rows deleted per table: ``conversations``, ``turn_log``, ``feedback``, ``sent_replies``, ``audit_log``,
        ``sync_runs``, ``pending_actions``, ``scheduled_messages``, ``index_jobs``, ``conversation_references``
        (every key, 0 when none).

    Raises:
        ValueError: for a naive cutoff.
    """
    conv = _utc(cutoffs.conversations, "conversations cutoff")
    audit = _utc(cutoffs.audit, "audit cutoff")
    fb = _utc(cutoffs.feedback, "feedback cutoff")
    s = store
    runs = s.runs
    # Each index keeps its latest run of each source (replicas with their own index share this table):
    # `chatops status` and /readyz's first-sync check of every replica read their own.
    latest = sa.select(sa.func.max(runs.c.id)).group_by(runs.c.index_id, runs.c.source).scalar_subquery()
    pa = s.pending
    sm = s.scheduled
    cr = s.conversation_refs
    # A reference stays while a message to its user is still to be sent (a reminder may be booked for
    # later than the conversations' retention); the first purge after the message is sent or fails deletes it.
    waiting = sa.select(sm.c.user_id).where(sm.c.platform == cr.c.platform, sm.c.user_id == cr.c.user_id,
                                            sm.c.status.in_(("pending", "sending")))
    statements = {
        "conversations": s.conversations.delete().where(s.conversations.c.updated_at < conv),
        "turn_log": s.turn_log.delete().where(s.turn_log.c.created_at < conv),
        "feedback": s.feedback.delete().where(s.feedback.c.created_at < fb),
        "sent_replies": s.sent_replies.delete().where(s.sent_replies.c.created_at < fb),
        "audit_log": s.audit_log.delete().where(s.audit_log.c.at < audit),
        "sync_runs": runs.delete().where(sa.func.coalesce(runs.c.finished_at, runs.c.started_at) < audit,
                                         runs.c.id.not_in(latest)),
        "pending_actions": pa.delete().where(sa.or_(
            sa.and_(pa.c.status.in_(SETTLED_ACTIONS), pa.c.updated_at < audit),
            sa.and_(pa.c.status == "pending", pa.c.expires_at < audit))),
        "scheduled_messages": sm.delete().where(sm.c.status.in_(SETTLED_MESSAGES), sm.c.updated_at < audit),
        "index_jobs": s.index_jobs.delete().where(s.index_jobs.c.status.in_(("done", "failed")),
                                                  s.index_jobs.c.finished_at < audit),
        "conversation_references": cr.delete().where(cr.c.updated_at < conv, ~sa.exists(waiting)),
    }
    with s.engine.begin() as conn:
        return {name: int(conn.execute(stmt).rowcount or 0) for name, stmt in statements.items()}


@dataclass(frozen=True, slots=True)
class ForgetReport:
    """What :func:`forget_user` did.

    Attributes:
        pseudonym: what now stands for the person in the audit log (random, linked to nothing).
        deleted: rows deleted per table (``conversation_messages`` counts messages inside histories).
        pseudonymised: audit entries whose actor, target or detail named the person.
    """

    pseudonym: str
    deleted: dict[str, int] = field(default_factory=dict)
    pseudonymised: int = 0


def new_pseudonym() -> str:
    """A fresh pseudonym, ``forgotten-`` and 12 random hex digits (not derived from the user id, so a
    list of ids cannot be hashed to find who it was)."""
    return "forgotten-" + secrets.token_hex(6)


def forget_user(store: StateStore, user_id: str, pseudonym: str | None = None) -> ForgetReport:
    """Delete what ``user_id`` (a Slack or Teams user id, or ``mcp:<email>`` for an AI assistant's user) wrote or
    asked for, in one transaction.

    Deleted: their messages inside conversation histories (other authors' messages stay; a history left
    empty is deleted), their ``turn_log`` rows, their feedback, their pending actions (``requester``)
    and scheduled messages (``user_id``), and the conversation references that let the bot message them
    (``conversation_references``). The audit log keeps what was done, with ``user_id`` replaced by
    ``pseudonym`` wherever it appears (actor, target, detail); so do the re-index jobs they asked for
    (``index_jobs.requested_by``). For ``mcp:<email>`` the person's MCP bearer tokens are deleted too
    (``mcp_tokens``, counted only then).

    Raises:
        ValueError: for an empty or blank ``user_id``.
    """
    uid = (user_id or "").strip()
    if not uid:
        raise ValueError("name the user to forget: a Slack (U...) or Teams user id")
    alias = pseudonym or new_pseudonym()
    s = store
    deleted: dict[str, int] = {}
    touched = 0
    needle = f"%{_like_escape(uid)}%"
    with s.engine.begin() as conn:
        removed = 0
        t = s.conversations
        for key, raw in conn.execute(sa.select(t.c.key, t.c.history).where(t.c.history.like(needle, escape="\\"))):
            entries = _history_entries(raw)
            kept = [m for m in entries if m.author != uid]
            if len(kept) == len(entries):
                continue
            removed += len(entries) - len(kept)
            if kept:
                conn.execute(t.update().where(t.c.key == key).values(
                    history=json.dumps([{"text": m.text, "author": m.author} for m in kept])))
            else:
                conn.execute(t.delete().where(t.c.key == key))
        deleted["conversation_messages"] = removed
        deleted["turn_log"] = conn.execute(s.turn_log.delete().where(s.turn_log.c.user_id == uid)).rowcount
        deleted["feedback"] = conn.execute(s.feedback.delete().where(s.feedback.c.user_id == uid)).rowcount
        deleted["pending_actions"] = conn.execute(s.pending.delete().where(s.pending.c.requester == uid)).rowcount
        deleted["scheduled_messages"] = conn.execute(s.scheduled.delete().where(s.scheduled.c.user_id == uid)).rowcount
        deleted["conversation_references"] = conn.execute(
            s.conversation_refs.delete().where(s.conversation_refs.c.user_id == uid)).rowcount
        if uid.startswith("mcp:"):  # an AI assistant's user (``mcp:<email>``): their bearer tokens stop working
            deleted["mcp_tokens"] = conn.execute(
                s.mcp_tokens.delete().where(s.mcp_tokens.c.email == uid[4:].strip().lower())).rowcount
        j = s.index_jobs  # who asked for a re-index (``platform:user``): the job stays, the person does not
        conn.execute(j.update().where(j.c.requested_by.like(f"%:{_like_escape(uid)}", escape="\\"))
                     .values(requested_by=sa.func.replace(j.c.requested_by, uid, alias)))
        a = s.audit_log
        rows = conn.execute(sa.select(a.c.id, a.c.actor, a.c.target, a.c.detail).where(sa.or_(
            a.c.actor == uid, a.c.target.like(needle, escape="\\"), a.c.detail.like(needle, escape="\\")))).all()
        whole = re.compile(rf"(?<![A-Za-z0-9]){re.escape(uid)}(?![A-Za-z0-9])")  # not inside a longer id
        for row_id, actor, target, detail in rows:
            values = {"actor": alias if actor == uid else actor, "target": whole.sub(alias, target),
                      "detail": whole.sub(alias, detail)}
            if values != {"actor": actor, "target": target, "detail": detail}:
                conn.execute(a.update().where(a.c.id == row_id).values(**values))
                touched += 1
    return ForgetReport(alias, {k: int(v or 0) for k, v in deleted.items()}, touched)


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
