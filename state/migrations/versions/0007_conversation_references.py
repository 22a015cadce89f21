"""Revision 0007: the table ``conversation_references`` (where a proactive message to a user goes).

A Teams bot can message a user unprompted (a reminder) only inside a conversation it already has with
them: the personal chat's conversation reference (service URL, conversation id, bot and user ids,
tenant), kept here per platform and user id when the user messages the bot, read by the outbox's Teams
sender (:class:`bot.teams.outbox.TeamsSender`).

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``conversation_references`` (primary key ``(platform, user_id)``)."""
    op.create_table(
        "conversation_references",
        sa.Column("platform", sa.String(20), nullable=False),
        sa.Column("user_id", sa.String(200), nullable=False),
        sa.Column("reference", sa.Text, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("platform", "user_id", name="pk_conversation_references"),
    )
    op.create_index("ix_conversation_references_updated_at", "conversation_references", ["updated_at"])


def downgrade() -> None:
    """Drop ``conversation_references`` (Teams users must message the bot again before reminders reach them)."""
    op.drop_table("conversation_references")
