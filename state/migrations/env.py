"""Alembic's environment: run the revisions on the connection that :func:`state.migrate.upgrade` passes in
``config.attributes["connection"]`` (inside its transaction, which holds the migration lock)."""

from alembic import context

connection = context.config.attributes.get("connection")
if context.is_offline_mode() or connection is None:
    raise RuntimeError("the state store's migrations run through `chatops db upgrade` (or at start-up), "
                       "not through the alembic command")
context.configure(connection=connection, target_metadata=None)
with context.begin_transaction():  # a no-op inside the caller's transaction: it commits or rolls back all
    context.run_migrations()
