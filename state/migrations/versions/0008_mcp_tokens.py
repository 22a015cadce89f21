"""Revision 0008: the table ``mcp_tokens`` (bearer tokens for ``chatops mcp`` over HTTP, issue 28).

An admin issues a token for one person (``chatops mcp token create --user EMAIL``); an AI assistant sends it
with every request to the MCP server, which answers with that person's access. Only the token's SHA-256
digest is kept (the token itself is shown once), with a short id to list and revoke it by, the person's
e-mail, a label, who issued it and when, when it was last used and when it was revoked.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``mcp_tokens`` (primary key ``digest``, unique ``token_id``, index on ``email``)."""
    op.create_table(
        "mcp_tokens",
        sa.Column("digest", sa.String(64), primary_key=True),
        sa.Column("token_id", sa.String(16), nullable=False),
        sa.Column("email", sa.String(320), nullable=False),
        sa.Column("label", sa.String(200), nullable=False, server_default=""),
        sa.Column("created_by", sa.String(200), nullable=False, server_default=""),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.UniqueConstraint("token_id", name="uq_mcp_tokens_token_id"),
    )
    op.create_index("ix_mcp_tokens_email", "mcp_tokens", ["email"])


def downgrade() -> None:
    """Drop ``mcp_tokens`` (every issued token stops working)."""
    op.drop_table("mcp_tokens")
