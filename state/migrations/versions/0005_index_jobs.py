"""Revision 0005: the table ``index_jobs`` (re-index requests a web replica leaves for the worker; issue 12, step 3).

A ``chatops serve --role web`` process never writes the index: ``/kb reindex`` there stores a job, and the
``chatops worker`` that writes the index (the same ``index_id``) claims it with one conditional ``UPDATE``
(``queued`` -> ``running``), runs it and records the outcome.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``index_jobs`` and its index on ``(index_id, status)``."""
    op.create_table(
        "index_jobs",
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
    )
    op.create_index("ix_index_jobs_index_status", "index_jobs", ["index_id", "status"])


def downgrade() -> None:
    """Drop ``index_jobs`` (queued requests are lost)."""
    op.drop_table("index_jobs")
