"""The state store: what the bot must remember across requests, restarts and replicas.

SQLAlchemy over SQLite under the data dir by default, PostgreSQL when ``DATABASE_URL`` is set. The
schema comes from Alembic migrations (:mod:`state.migrate`, scripts in :mod:`state.migrations`), run
when a :class:`~state.store.StateStore` opens the database and by ``chatops db upgrade``.
Every table is defined once, in :mod:`state.schema`; each concern below is a small class in its own module
over its tables (:mod:`state.events`, :mod:`state.feedback`, :mod:`state.turnlog`, :mod:`state.actions`,
:mod:`state.audit`, :mod:`state.sync`, :mod:`state.locks`, :mod:`state.index_jobs`, :mod:`state.groups`,
:mod:`state.conversations`, :mod:`state.outbox`, :mod:`state.tokens`), all on the one engine that
:class:`state.store.StateStore` opens; the store is a facade exposing their methods.
It knows nothing of Slack, Teams, the agent or the connectors; each of them keeps its records
here through :class:`state.store.StateStore`:

- processed events (de-duplication of redelivered chat events),
- feedback on answers, keyed by the turn's trace id,
- pending actions (side-effect tool calls waiting for confirmation, executed once),
- the audit log,
- sync cursors and run summaries per index and source (several indexes may share the database), and
  cross-process locks,
- the members of each source's groups (``set_group_members``, ``groups_of``: who belongs to the groups
  that pages' read access names, issue 11),
- conversation history for platforms that do not keep threads (Teams), each message with its author,
- conversation references (``remember_conversation_reference``: where a platform reaches a user
  unprompted, Teams' personal chats; read by the outbox's Teams sender),
- scheduled messages (the outbox: a message to a user at a time, claimed and delivered once by
  :mod:`app.outbox`),
- re-index requests a web replica leaves for the worker of its index (``enqueue_index_job``,
  ``claim_index_job``, ``finish_index_job``),
- the manifests of indexes shared by replicas (``QDRANT_URL``): their pages, write journal and metadata,
  per index id (tables of :mod:`state.index_manifest`, used by ``index.manifest.Manifest``),
- the MCP server's bearer tokens (``add_mcp_token``, ``mcp_token_for``, ``mcp_tokens_list``,
  ``revoke_mcp_token``: SHA-256 digests only, issue 28),
- the turn log (``record_turn``, ``turn_records``: each chat turn's question, outcome and cited pages,
  the knowledge-gap report's input).

:mod:`state.retention` deletes what is past its retention (``purge``) and what one person wrote
(``forget_user``, the audit log keeping a pseudonym).
"""

import importlib
from typing import TYPE_CHECKING

from .errors import SchemaTooNewError, StateStoreError

if TYPE_CHECKING:  # the type checker sees the lazily imported names below as what they are
    from .store import (
        LEGACY_INDEX_ID,
        NO_INDEX,
        AuditEntry,
        IndexJob,
        McpToken,
        PendingRecord,
        ScheduledMessage,
        StateStore,
        StoredMessage,
        SyncRun,
        TurnRecord,
    )

__all__ = ["StateStore", "LEGACY_INDEX_ID", "NO_INDEX", "IndexJob", "StateStoreError", "SchemaTooNewError", "PendingRecord", "AuditEntry", "SyncRun", "StoredMessage",
           "ScheduledMessage", "TurnRecord", "McpToken"]

# The store's names are imported on first use (PEP 562): the index's manifest needs only
# state.index_manifest's table definitions, and `chatops ask` never opens the state store.
_STORE_NAMES = frozenset({"LEGACY_INDEX_ID", "NO_INDEX", "AuditEntry", "IndexJob", "PendingRecord", "ScheduledMessage",
                          "StateStore", "StoredMessage", "SyncRun", "TurnRecord", "McpToken"})


def __getattr__(name: str) -> object:
    if name in _STORE_NAMES:
        return getattr(importlib.import_module(".store", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
