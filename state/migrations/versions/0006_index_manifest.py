"""Revision 0006: index manifests in the state database (issue 12, step 4).

An index shared by replicas (``QDRANT_URL``) keeps its manifest here, not in a local ``manifest.sqlite``:
``index_pages`` (the pages it holds, key ``(scope, doc_key)``, with ``chunk_count``), ``index_journal``
(pages whose write may have stopped half-way) and ``index_meta`` (embedding model, schema, index version,
index id). ``scope`` is the index's id (:func:`index.identity.shared_index_id`). The revision copies
nothing: the first process that opens a shared index whose rows are not here yet and finds that index's
local ``manifest.sqlite`` copies it in (:func:`index.knowledge.open_manifest`).

Frozen: the tables as :mod:`state.index_manifest` declared them at this revision.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``index_pages`` (and its index on ``(scope, source)``), ``index_journal`` and ``index_meta``."""
    op.create_table(
        "index_pages",
        sa.Column("scope", sa.String(64), nullable=False),
        sa.Column("doc_key", sa.String(600), nullable=False),
        sa.Column("source", sa.String(200), nullable=False),
        sa.Column("doc_id", sa.String(500), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("chunk_ids", sa.Text, nullable=False),
        sa.Column("chunk_count", sa.Integer, nullable=False),
        sa.Column("indexed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("sensitive_chunks", sa.Integer, nullable=True),
        sa.Column("injection_chunks", sa.Integer, nullable=True),
        sa.Column("access_tokens", sa.Text, nullable=True),
        sa.Column("access_unresolved", sa.Text, nullable=True),
        sa.PrimaryKeyConstraint("scope", "doc_key", name="pk_index_pages"),
    )
    op.create_index("ix_index_pages_scope_source", "index_pages", ["scope", "source"])
    op.create_table(
        "index_journal",
        sa.Column("scope", sa.String(64), nullable=False),
        sa.Column("doc_key", sa.String(600), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("scope", "doc_key", name="pk_index_journal"),
    )
    op.create_table(
        "index_meta",
        sa.Column("scope", sa.String(64), nullable=False),
        sa.Column("key", sa.String(100), nullable=False),
        sa.Column("value", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("scope", "key", name="pk_index_meta"),
    )


def downgrade() -> None:
    """Drop the three tables (shared indexes' manifests are lost: their next sync indexes every page again)."""
    op.drop_table("index_meta")
    op.drop_table("index_journal")
    op.drop_index("ix_index_pages_scope_source", table_name="index_pages")
    op.drop_table("index_pages")
