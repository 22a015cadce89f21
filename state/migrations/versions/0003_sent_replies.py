"""Revision 0003: the table ``sent_replies`` (which turn a message the bot sent answered: Teams' feedback
invoke names only the message; h-teams, merged after 414ee8a).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``sent_replies`` and its index on ``created_at``."""
    op.create_table(
        "sent_replies",
        sa.Column("platform", sa.String(20), primary_key=True),
        sa.Column("message_id", sa.String(300), primary_key=True),
        sa.Column("trace_id", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_sent_replies_created_at", "sent_replies", ["created_at"])


def downgrade() -> None:
    """Drop ``sent_replies`` (its rows are lost)."""
    op.drop_table("sent_replies")
