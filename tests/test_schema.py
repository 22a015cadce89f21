"""``state/schema.py`` (the tables the code queries) and the Alembic revisions (what makes the database) agree.

The revisions are frozen copies of the tables as each release defined them, so the two can drift: a column
added to ``schema.py`` without a revision, or a revision the schema does not follow. Alembic's autogenerate
comparison (``compare_metadata``, types, nullability, indexes, unique constraints, and server defaults on PostgreSQL)
against a database migrated to the head finds either, on a SQLite file and on PostgreSQL
(``$CHATOPS_TEST_PG_URL``: skipped when unreachable, failed with ``CHATOPS_TEST_REQUIRE_PG=1``, see ``tests/pg.py``).
A second test shows the comparison catches a drift (a column the revisions lack).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from state import schema
from state.migrate import head, upgrade

from tests.pg import pg_database


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.server)])
def migrated(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of a new database brought to the head revision by the migrations alone (no store opened)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'state.sqlite'}"
        upgrade(url)
        yield url
        return
    with pg_database("chatops_schema") as url:
        upgrade(url)
        yield url


def _drift(url: str, metadata: sa.MetaData) -> list:
    """Alembic's differences between the database at ``url`` and ``metadata`` (its own ``alembic_version`` aside)."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            # Server defaults are compared on PostgreSQL only: SQLite reflects them as SQL text ('' quoted),
            # which Alembic cannot compare with the code's values.
            ctx = MigrationContext.configure(conn, opts={
                "compare_type": True, "compare_server_default": conn.dialect.name == "postgresql"})
            diff = compare_metadata(ctx, metadata)
    finally:
        engine.dispose()
    return [d for d in diff if not (d[0] == "remove_table" and d[1].name == "alembic_version")]


def test_the_schema_is_what_the_migrations_make(migrated: str) -> None:
    assert head()
    assert _drift(migrated, schema.metadata) == []


def test_a_column_the_migrations_lack_is_a_drift(migrated: str) -> None:
    md = sa.MetaData()
    for table in schema.metadata.tables.values():
        table.to_metadata(md)
    md.tables["audit_log"].append_column(sa.Column("channel_id", sa.String(200), nullable=True))
    drift = _drift(migrated, md)
    assert [(d[0], d[3].name) for d in drift] == [("add_column", "channel_id")]


def test_every_table_of_the_database_is_in_the_schema(migrated: str) -> None:
    engine = sa.create_engine(migrated)
    try:
        tables = set(sa.inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()
    assert tables == set(schema.metadata.tables)
