"""The LLM planner's caches (routing decisions, answers): expiring entries keyed by normalised text."""

from __future__ import annotations

import hashlib
import re
import threading
import time
from typing import Generic, TypeVar

_V = TypeVar("_V")

from cachetools import TTLCache

__all__ = ["ExpiringCache", "text_key"]


class ExpiringCache(Generic[_V]):
    """A small LRU cache whose entries expire after ``ttl`` seconds (``cachetools.TTLCache`` on the monotonic
    clock, behind a lock: turns run on several threads), of values of one type."""

    def __init__(self, ttl: float, size: int = 512) -> None:
        self._d: TTLCache[str, _V] = TTLCache(maxsize=size, ttl=ttl, timer=time.monotonic)
        self._lock = threading.Lock()

    def get(self, key: str) -> _V | None:
        """The value under ``key``, or None when absent or expired."""
        with self._lock:
            return self._d.get(key)

    def put(self, key: str, value: _V) -> None:
        """Keep ``value`` under ``key`` for the cache's ``ttl``."""
        with self._lock:
            self._d[key] = value


def text_key(text: str) -> str:
    """A cache key for ``text``: the SHA-256 of its lower-cased words (punctuation and spacing ignored)."""
    return hashlib.sha256(re.sub(r"\W+", " ", text.lower()).strip().encode()).hexdigest()
