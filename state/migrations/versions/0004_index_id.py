"""Revision 0004: sync cursors and run records belong to an index (issue 12, step 1).

Several replicas share one database but each may keep its own index; a cursor describes one index.
``sync_cursors`` gets ``index_id`` as part of its key (``(index_id, source)``, constraint
``pk_sync_cursors``), ``sync_runs`` gets ``index_id`` and an index on ``(index_id, source)``.

Existing rows were written for the one index that was there, whose id the database cannot know
(ids live with the index, :mod:`index.identity`): they get the reserved id ``legacy``
(:data:`state.store.LEGACY_INDEX_ID`), and the first index that opens holding pages of a source adopts
that source's legacy cursor and runs (:meth:`state.store.StateStore.adopt_legacy`). An index without
pages of the source never adopts its cursor (it would skip every page changed before the watermark).

``sync_cursors`` is rebuilt (new table, rows copied, old dropped, new renamed) because SQLite cannot
change a primary key in place; the same steps run on PostgreSQL, in the migration's one transaction.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

LEGACY = "legacy"


def upgrade() -> None:
    """Key cursors by ``(index_id, source)``, add ``index_id`` to runs; existing rows become ``legacy``."""
    op.create_table(
        "sync_cursors_0004",
        sa.Column("index_id", sa.String(64), nullable=False, server_default=LEGACY),
        sa.Column("source", sa.String(200), nullable=False),
        sa.Column("cursor", sa.Text, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("index_id", "source", name="pk_sync_cursors"),
    )
    op.execute(sa.text("INSERT INTO sync_cursors_0004 (index_id, source, cursor, updated_at) "
                       f"SELECT '{LEGACY}', source, cursor, updated_at FROM sync_cursors"))
    op.drop_table("sync_cursors")
    op.rename_table("sync_cursors_0004", "sync_cursors")
    op.add_column("sync_runs", sa.Column("index_id", sa.String(64), nullable=False, server_default=LEGACY))
    op.create_index("ix_sync_runs_index_source", "sync_runs", ["index_id", "source"])


def downgrade() -> None:
    """Back to one cursor per source (of several indexes' cursors of a source, the latest is kept)."""
    op.drop_index("ix_sync_runs_index_source", table_name="sync_runs")
    with op.batch_alter_table("sync_runs") as batch:
        batch.drop_column("index_id")
    op.create_table(
        "sync_cursors_0003",
        sa.Column("source", sa.String(200), primary_key=True),
        sa.Column("cursor", sa.Text, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.execute(sa.text("INSERT INTO sync_cursors_0003 (source, cursor, updated_at) "
                       "SELECT c.source, c.cursor, c.updated_at FROM sync_cursors c WHERE c.updated_at = "
                       "(SELECT MAX(d.updated_at) FROM sync_cursors d WHERE d.source = c.source)"))
    op.drop_table("sync_cursors")
    op.rename_table("sync_cursors_0003", "sync_cursors")
