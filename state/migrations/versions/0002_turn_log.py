"""Revision 0002: the table ``turn_log`` (each chat question, its outcome and cited pages; commit 9c1b159).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``turn_log`` and its indexes (names as SQLAlchemy's ``index=True`` makes them)."""
    op.create_table(
        "turn_log",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("trace_id", sa.String(64), nullable=False),
        sa.Column("platform", sa.String(20), nullable=False),
        sa.Column("user_id", sa.String(200), nullable=False),
        sa.Column("channel_id", sa.String(200), nullable=False),
        sa.Column("question", sa.Text, nullable=False),
        sa.Column("route", sa.String(30), nullable=False),
        sa.Column("outcome", sa.String(20), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("citations", sa.Text, nullable=False),
        sa.Column("total_ms", sa.Float, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_turn_log_trace_id", "turn_log", ["trace_id"])
    op.create_index("ix_turn_log_user_id", "turn_log", ["user_id"])
    op.create_index("ix_turn_log_created_at", "turn_log", ["created_at"])


def downgrade() -> None:
    """Drop ``turn_log`` (its rows are lost)."""
    op.drop_table("turn_log")
