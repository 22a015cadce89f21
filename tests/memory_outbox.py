"""An in-memory outbox for tests: :class:`tools.outbox.Outbox`'s two methods, as the state store has them."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Any


class MemoryOutbox:
    """An in-memory :class:`tools.outbox.Outbox` (the state store implements the same two methods)."""

    def __init__(self) -> None:
        self.messages: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def schedule_message(self, key: str, *, platform: str, user_id: str, channel_id: str, at: datetime,
                         text: str) -> bool:
        assert at.utcoffset() == timedelta(0), "the port takes aware UTC times"
        with self._lock:
            if key in self.messages:
                return False
            self.messages[key] = {"platform": platform, "user_id": user_id, "channel_id": channel_id, "at": at,
                                  "text": text, "status": "pending"}
            return True

    def cancel_message(self, key: str) -> bool:
        with self._lock:
            msg = self.messages.get(key)
            if not msg or msg["status"] != "pending":
                return False
            msg["status"] = "cancelled"
            return True
