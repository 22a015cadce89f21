"""Exceptions raised by tools.

The tree::

    ToolError                 base
    ├── ToolArgumentError     the arguments do not validate (the message lists what is wrong)
    ├── ToolPermissionError   the caller may not use this tool
    ├── ToolUnavailableError  the tool's backend is not set up (e.g. no index yet)
    └── DeliveryError         a chat platform did not deliver an invitation (:class:`tools.invites.Courier`)
"""

from __future__ import annotations

__all__ = ["ToolError", "ToolArgumentError", "ToolPermissionError", "ToolUnavailableError", "DeliveryError"]


class ToolError(Exception):
    """Base of tool errors."""


class ToolArgumentError(ToolError, ValueError):
    """Arguments failed validation.

    Attributes:
        kinds: the pydantic error types of the failures (e.g. :data:`tools.actions.TIME_PASSED`), so
            callers can tell them apart without reading the message.
    """

    def __init__(self, message: str, *, kinds: frozenset[str] = frozenset()) -> None:
        super().__init__(message)
        self.kinds = kinds


class ToolPermissionError(ToolError):
    """The caller lacks the tool's permission."""


class ToolUnavailableError(ToolError):
    """The tool cannot run here (missing index, backend not configured)."""


class DeliveryError(ToolError):
    """A chat platform did not deliver (or could not say who is in the workspace); raised by the adapters'
    :class:`tools.invites.Courier` implementations.

    Attributes:
        reason: one line for the requester (``the upload failed: file_uploads_disabled``).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
