"""The tables of index manifests kept in the state database (revision ``0006``; issue 12).

An index shared by replicas (``QDRANT_URL``) keeps its manifest here instead of a local
``manifest.sqlite``, so every replica sees the same pages: the pages each index holds, its write journal
and its metadata. Each row carries ``scope``, the id of the index it belongs to, so several indexes in one
database never see each other's rows. ``index_pages.chunk_count`` is the length of ``chunk_ids`` (a JSON
list), kept so counts are one portable ``SUM`` (PostgreSQL has no ``json_array_length`` on ``TEXT``).

The state store only declares them (in its metadata, so the migrated schema is checked against them);
``index.manifest.Manifest(database_url=..., scope=...)`` reads and writes them.
"""

from __future__ import annotations

import sqlalchemy as sa

__all__ = ["index_manifest_tables", "SCOPE_LENGTH"]

#: Longest scope (index id) the tables hold: a shared id is 27 characters, an embedded one 32.
SCOPE_LENGTH = 64


def index_manifest_tables(md: sa.MetaData) -> tuple[sa.Table, sa.Table, sa.Table]:
    """Declare ``index_pages``, ``index_journal`` and ``index_meta`` in ``md``; returns them in that order."""
    pages = sa.Table(
        "index_pages", md,
        sa.Column("scope", sa.String(SCOPE_LENGTH), nullable=False),
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
        sa.Index("ix_index_pages_scope_source", "scope", "source"),
    )
    journal = sa.Table(
        "index_journal", md,
        sa.Column("scope", sa.String(SCOPE_LENGTH), nullable=False),
        sa.Column("doc_key", sa.String(600), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("scope", "doc_key", name="pk_index_journal"),
    )
    meta = sa.Table(
        "index_meta", md,
        sa.Column("scope", sa.String(SCOPE_LENGTH), nullable=False),
        sa.Column("key", sa.String(100), nullable=False),
        sa.Column("value", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("scope", "key", name="pk_index_meta"),
    )
    return pages, journal, meta
