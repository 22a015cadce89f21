"""Exceptions raised by the connectors package.

    ChatopsError (core.errors)      base of the errors a user can fix, the index's included
    └── ConnectorError              base of the sources' errors
        ├── SourceSpecError         a source spec string or config entry is malformed
        └── SourceUnavailableError  a source cannot be read at all (missing folder, server down)

The index's and the embedding model's errors are in :mod:`core.errors`. Every message says what to do next.
"""

from __future__ import annotations

from core.errors import ChatopsError

__all__ = ["ConnectorError", "SourceSpecError", "SourceUnavailableError"]


class ConnectorError(ChatopsError):
    """Base class of every error raised by :mod:`connectors`."""


class SourceSpecError(ConnectorError, ValueError):
    """A source spec such as ``folder:PATH`` is malformed or names an unknown type."""


class SourceUnavailableError(ConnectorError):
    """A source cannot be listed at all (missing folder, unreachable server)."""
