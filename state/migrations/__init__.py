"""Alembic migration scripts of the state store (run by :mod:`state.migrate`, never by hand).

``env.py`` runs the revisions on the connection :mod:`state.migrate` hands it (already inside the
transaction that holds the migration lock). ``versions/`` holds one file per revision:

- ``0001``: the schema of release ``414ee8a``, frozen (its ``metadata()`` must never change);
- ``0002``: the table ``turn_log`` (the knowledge-gap report's input);
- ``0003``: the table ``sent_replies`` (Teams: which turn a bot message answered).

A schema change is a new file ``versions/NNNN_what.py`` whose ``down_revision`` is the previous
head, with ``upgrade()`` (and ``downgrade()``) written with ``alembic.op``, plus the same change to
the tables in :mod:`state.schema`; ``tests/test_schema.py`` (and ``tests/test_migrations.py``) check that
the two agree.
"""
