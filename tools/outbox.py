"""The outbox port: messages a side-effect tool schedules for later delivery (a reminder's DM).

A tool that sends something later never talks to a chat platform: it stores the message through
this port, given in :attr:`tools.base.ToolContext.outbox`. The state store
(:class:`state.StateStore`) implements it, and the scheduler delivers what is due.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, runtime_checkable

__all__ = ["Outbox"]


@runtime_checkable
class Outbox(Protocol):
    """Where scheduled messages are kept until they are due."""

    def schedule_message(self, key: str, *, platform: str, user_id: str, channel_id: str, at: datetime,
                         text: str) -> bool:
        """Store one message to deliver at `at` (aware UTC); False when `key` is already scheduled (idempotent)."""
        ...

    def cancel_message(self, key: str) -> bool:
        """Cancel the pending message `key`; False when it is not pending (unknown, sent, cancelled)."""
        ...
