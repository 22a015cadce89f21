"""A PostgreSQL database of a test's own on ``$CHATOPS_TEST_PG_URL`` (default
``postgresql+psycopg://postgres@127.0.0.1:5432/postgres``), created and dropped around the caller.

Skips the test when the server is unreachable, and fails it instead with ``CHATOPS_TEST_REQUIRE_PG=1``
(set by ``.ci/run``), as ``tests/test_state_store.py`` does.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import sqlalchemy as sa

__all__ = ["PG_ADMIN_URL", "pg_database", "drop_database"]

PG_ADMIN_URL = os.environ.get("CHATOPS_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")


def drop_database(url: str) -> None:
    """Drop the database of ``url``, ending its connections (``WITH (FORCE)``)."""
    admin = sa.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{sa.engine.make_url(url).database}" WITH (FORCE)'))
    finally:
        admin.dispose()


@contextmanager
def pg_database(prefix: str = "chatops_test") -> Iterator[str]:
    """The URL of a new, empty database named ``<prefix>_<10 hex digits>``; dropped on exit."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    try:
        admin = sa.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        admin.dispose()
    except Exception as exc:  # noqa: BLE001 - any failure means no server to test against
        if os.environ.get("CHATOPS_TEST_REQUIRE_PG") == "1":
            pytest.fail(f"PostgreSQL at {PG_ADMIN_URL} is required (CHATOPS_TEST_REQUIRE_PG=1) but unusable: {exc}")
        pytest.skip(f"PostgreSQL at {PG_ADMIN_URL} is not reachable: {exc}")
    url = sa.engine.make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    try:
        yield url
    finally:
        drop_database(url)
