"""Every table of the state database, in one :class:`~sqlalchemy.MetaData` (:data:`metadata`).

This is the one definition the code queries; the database itself is made by the Alembic revisions
(:mod:`state.migrations`, frozen copies: a change here is a new revision there), and
``tests/test_schema.py`` fails when the two drift (Alembic's autogenerate comparison against a database
migrated to the head, on SQLite and PostgreSQL).

Tables, by the concern (module of :mod:`state`) that reads and writes them:

- ``processed_events``: :mod:`state.events` (redelivered chat events);
- ``feedback``, ``sent_replies``: :mod:`state.feedback`;
- ``turn_log``: :mod:`state.turnlog`;
- ``pending_actions``: :mod:`state.actions`;
- ``audit_log``: :mod:`state.audit`;
- ``sync_cursors``, ``sync_runs``: :mod:`state.sync`; ``locks``: :mod:`state.locks`;
- ``index_jobs``: :mod:`state.index_jobs`;
- ``group_members``: :mod:`state.groups`;
- ``conversations``, ``conversation_references``: :mod:`state.conversations`;
- ``scheduled_messages``: :mod:`state.outbox`;
- ``mcp_tokens``: :mod:`state.tokens`;
- ``index_pages``, ``index_journal``, ``index_meta``: declared by :mod:`state.index_manifest`, read and
  written by ``index.manifest.Manifest``.

Times are ``DateTime(timezone=True)`` and always UTC (SQLite compares them as text).
"""

from __future__ import annotations

import sqlalchemy as sa

from .index_manifest import index_manifest_tables

__all__ = ["metadata", "LEGACY_INDEX_ID", "NO_INDEX", "processed_events", "feedback", "sent_replies", "turn_log",
           "pending_actions", "audit_log", "sync_cursors", "sync_runs", "locks", "index_jobs", "group_members",
           "conversations", "conversation_references", "scheduled_messages", "mcp_tokens", "index_pages",
           "index_journal", "index_meta"]

#: The index id of cursors and runs written before they were keyed by index (revision 0004); the first
#: index that holds pages of a source adopts them (:meth:`state.sync.SyncState.adopt_legacy`).
LEGACY_INDEX_ID = "legacy"
#: The index id of runs that belong to no index (the retention purge).
NO_INDEX = ""

metadata = sa.MetaData()

processed_events = sa.Table(
    "processed_events", metadata,
    sa.Column("event_id", sa.String(200), primary_key=True),
    sa.Column("platform", sa.String(20), nullable=False),
    sa.Column("received_at", sa.DateTime(timezone=True), nullable=False, index=True),
)

feedback = sa.Table(
    "feedback", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("trace_id", sa.String(64), nullable=False, index=True),
    sa.Column("platform", sa.String(20), nullable=False),
    sa.Column("user_id", sa.String(200), nullable=False),
    sa.Column("value", sa.String(20), nullable=False),
    sa.Column("comment", sa.Text, nullable=False, default=""),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.UniqueConstraint("trace_id", "user_id", name="uq_feedback_trace_user"),
)

# Which turn a message the bot sent answered (Teams' feedback invoke names only the message; revision 0003).
sent_replies = sa.Table(
    "sent_replies", metadata,
    sa.Column("platform", sa.String(20), primary_key=True),
    sa.Column("message_id", sa.String(300), primary_key=True),
    sa.Column("trace_id", sa.String(64), nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, index=True),
)

# Each chat turn's question, outcome and cited pages, the knowledge-gap report's input (revision 0002).
turn_log = sa.Table(
    "turn_log", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("trace_id", sa.String(64), nullable=False, index=True),
    sa.Column("platform", sa.String(20), nullable=False),
    sa.Column("user_id", sa.String(200), nullable=False, index=True),
    sa.Column("channel_id", sa.String(200), nullable=False, default=""),
    sa.Column("question", sa.Text, nullable=False),
    sa.Column("route", sa.String(30), nullable=False, default=""),
    sa.Column("outcome", sa.String(20), nullable=False),
    sa.Column("reason", sa.Text, nullable=False, default=""),
    sa.Column("citations", sa.Text, nullable=False, default="[]"),
    sa.Column("total_ms", sa.Float, nullable=False, default=0.0),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, index=True),
)

pending_actions = sa.Table(
    "pending_actions", metadata,
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

audit_log = sa.Table(
    "audit_log", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("at", sa.DateTime(timezone=True), nullable=False, index=True),
    sa.Column("actor", sa.String(200), nullable=False),
    sa.Column("platform", sa.String(20), nullable=False),
    sa.Column("action", sa.String(100), nullable=False),
    sa.Column("target", sa.String(500), nullable=False, default=""),
    sa.Column("outcome", sa.String(50), nullable=False),
    sa.Column("detail", sa.Text, nullable=False, default="{}"),
)

# Cursors and runs belong to one index (its id: index.identity), several of which may share this
# database (replicas with their own data dirs); revision 0004.
sync_cursors = sa.Table(
    "sync_cursors", metadata,
    sa.Column("index_id", sa.String(64), nullable=False, server_default=LEGACY_INDEX_ID),
    sa.Column("source", sa.String(200), nullable=False),
    sa.Column("cursor", sa.Text, nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint("index_id", "source", name="pk_sync_cursors"),
)

sync_runs = sa.Table(
    "sync_runs", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("index_id", sa.String(64), nullable=False, server_default=LEGACY_INDEX_ID),
    sa.Column("source", sa.String(200), nullable=False, index=True),
    sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("summary", sa.Text, nullable=False, default="{}"),
    sa.Column("error", sa.Text, nullable=False, default=""),
    sa.Index("ix_sync_runs_index_source", "index_id", "source"),
)

locks = sa.Table(
    "locks", metadata,
    sa.Column("name", sa.String(200), primary_key=True),
    sa.Column("owner", sa.String(200), nullable=False),
    sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
)

# Re-index requests left by web replicas for the worker of their index (revision 0005).
index_jobs = sa.Table(
    "index_jobs", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("index_id", sa.String(64), nullable=False),
    sa.Column("source", sa.String(200), nullable=False, server_default=""),
    sa.Column("full", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("requested_by", sa.String(200), nullable=False, server_default=""),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("owner", sa.String(200), nullable=False, server_default=""),
    sa.Column("result", sa.Text, nullable=False, server_default="[]"),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    sa.Index("ix_index_jobs_index_status", "index_id", "status"),
)

# Who belongs to the groups that pages' read access names (issue 11).
group_members = sa.Table(
    "group_members", metadata,
    sa.Column("source", sa.String(200), primary_key=True),
    sa.Column("group_name", sa.String(300), primary_key=True),
    sa.Column("email", sa.String(320), primary_key=True),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    sa.Index("ix_group_members_email", "email"),
)

conversations = sa.Table(
    "conversations", metadata,
    sa.Column("key", sa.String(500), primary_key=True),
    sa.Column("history", sa.Text, nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
)

# Where a proactive message to a user goes (revision 0007): Teams' personal-chat conversation
# references, as JSON, per platform and user id; written when the user messages the bot.
conversation_references = sa.Table(
    "conversation_references", metadata,
    sa.Column("platform", sa.String(20), nullable=False),
    sa.Column("user_id", sa.String(200), nullable=False),
    sa.Column("reference", sa.Text, nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, index=True),
    sa.PrimaryKeyConstraint("platform", "user_id", name="pk_conversation_references"),
)

scheduled_messages = sa.Table(
    "scheduled_messages", metadata,
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

# Bearer tokens of the MCP server over HTTP (revision 0008): the SHA-256 digest only, per person.
mcp_tokens = sa.Table(
    "mcp_tokens", metadata,
    sa.Column("digest", sa.String(64), primary_key=True),
    sa.Column("token_id", sa.String(16), nullable=False),
    sa.Column("email", sa.String(320), nullable=False, index=True),
    sa.Column("label", sa.String(200), nullable=False, server_default=""),
    sa.Column("created_by", sa.String(200), nullable=False, server_default=""),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
    sa.UniqueConstraint("token_id", name="uq_mcp_tokens_token_id"),
)

# Manifests of shared indexes (revision 0006): declared here so the schema is checked against them;
# read and written by index.manifest.Manifest(database_url=..., scope=...).
index_pages, index_journal, index_meta = index_manifest_tables(metadata)
