"""Revision 0001: the state store's schema of release 414ee8a, frozen.

A database made by that release (``create_all``, no ``alembic_version``) is stamped at this revision
by :func:`state.migrate.upgrade` (after creating any of these tables it lacks, as that release's start-up
did); a new database runs :func:`upgrade`. :func:`metadata` was copied from ``git show
414ee8a:state/store.py`` and must never change: later changes are later revisions.

Revision ID: 0001
Revises: (none)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def metadata() -> sa.MetaData:
    """The tables of release 414ee8a, as its ``StateStore.__init__`` defined them."""
    md = sa.MetaData()
    sa.Table(
        "processed_events", md,
        sa.Column("event_id", sa.String(200), primary_key=True),
        sa.Column("platform", sa.String(20), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False, index=True),
    )
    sa.Table(
        "feedback", md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("trace_id", sa.String(64), nullable=False, index=True),
        sa.Column("platform", sa.String(20), nullable=False),
        sa.Column("user_id", sa.String(200), nullable=False),
        sa.Column("value", sa.String(20), nullable=False),
        sa.Column("comment", sa.Text, nullable=False, default=""),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("trace_id", "user_id", name="uq_feedback_trace_user"),
    )
    sa.Table(
        "pending_actions", md,
        sa.Column("key", sa.String(100), primary_key=True),
        sa.Column("tool", sa.String(100), nullable=False),
        sa.Column("args", sa.Text, nullable=False),
        sa.Column("requester", sa.String(200), nullable=False),
        sa.Column("platform", sa.String(20), nullable=False),
        sa.Column("channel_id", sa.String(200), nullable=False, default=""),
        sa.Column("thread_id", sa.String(200), nullable=False, default=""),
        sa.Column("summary", sa.Text, nullable=False, default=""),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("result", sa.Text, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    sa.Table(
        "audit_log", md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False, index=True),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("platform", sa.String(20), nullable=False),
        sa.Column("action", sa.String(100), nullable=False),
        sa.Column("target", sa.String(500), nullable=False, default=""),
        sa.Column("outcome", sa.String(50), nullable=False),
        sa.Column("detail", sa.Text, nullable=False, default="{}"),
    )
    sa.Table(
        "sync_cursors", md,
        sa.Column("source", sa.String(200), primary_key=True),
        sa.Column("cursor", sa.Text, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    sa.Table(
        "sync_runs", md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("source", sa.String(200), nullable=False, index=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("summary", sa.Text, nullable=False, default="{}"),
        sa.Column("error", sa.Text, nullable=False, default=""),
    )
    sa.Table(
        "locks", md,
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    sa.Table(
        "conversations", md,
        sa.Column("key", sa.String(500), primary_key=True),
        sa.Column("history", sa.Text, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    sa.Table(
        "scheduled_messages", md,
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("platform", sa.String(20), nullable=False),
        sa.Column("user_id", sa.String(200), nullable=False),
        sa.Column("channel_id", sa.String(200), nullable=False, default=""),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        # When the next attempt may start: ``at`` at first, later than it after a failed attempt.
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False, default=0),
        sa.Column("error", sa.Text, nullable=False, default=""),
        sa.Column("owner", sa.String(200), nullable=False, default=""),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Index("ix_scheduled_messages_status_due", "status", "due_at"),
        sa.Index("ix_scheduled_messages_user", "user_id", "status"),
    )
    sa.Table(
        "group_members", md,
        sa.Column("source", sa.String(200), primary_key=True),
        sa.Column("group_name", sa.String(300), primary_key=True),
        sa.Column("email", sa.String(320), primary_key=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Index("ix_group_members_email", "email"),
    )
    return md


def upgrade() -> None:
    """Create the 414ee8a tables (a new, empty database)."""
    metadata().create_all(op.get_bind())


def downgrade() -> None:
    """Drop them all (every row is lost)."""
    metadata().drop_all(op.get_bind())
