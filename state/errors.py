"""The state store's exceptions::

    StateStoreError                 the database cannot be reached, created or written
     └── SchemaTooNewError          the database was migrated by a newer chatops (an unknown revision)
"""

from __future__ import annotations

__all__ = ["StateStoreError", "SchemaTooNewError"]


class StateStoreError(Exception):
    """The state database cannot be reached or written; the message says what to check."""


class SchemaTooNewError(StateStoreError):
    """The database's schema revision is unknown to this code: a newer chatops migrated it.

    Nothing was changed; the message says to upgrade chatops (never to downgrade the database).
    """
