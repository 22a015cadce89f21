"""Conversations (tables ``conversations``, ``conversation_references``): the history of platforms
that do not keep threads (Teams), each message with its author, and where a platform reaches a user
unprompted (Teams' personal chats; read by the outbox's Teams sender).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from . import schema
from ._db import Concern, aware as _aware, now as _now

__all__ = ["Conversations", "StoredMessage", "history_entries"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """One message of a stored conversation history.

    Attributes:
        text: the message.
        author: the platform's id of who wrote it; "" for rows written before authors were stored
            (callers must then treat the message as someone else's: fail closed).
    """

    text: str
    author: str = ""


def history_entries(raw: str | None) -> list[StoredMessage]:
    """Decode the ``conversations.history`` column: a JSON list whose items are either a string (the
    old format, author unknown) or ``{"text": ..., "author": ...}``; anything else is skipped."""
    try:
        items = json.loads(raw) if raw else []
    except ValueError:
        log.warning("a stored conversation history is not JSON; starting it afresh")
        return []
    out: list[StoredMessage] = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, str):
            out.append(StoredMessage(item))
        elif isinstance(item, dict) and isinstance(item.get("text"), str):
            out.append(StoredMessage(item["text"], str(item.get("author") or "")))
    return out


class Conversations(Concern):
    """Conversation histories and conversation references."""

    conversations = schema.conversations
    conversation_refs = schema.conversation_references

    def get_history(self, key: str) -> list[str]:
        """Stored conversation history: the messages' texts, oldest first (see :meth:`get_history_entries`)."""
        return [m.text for m in self.get_history_entries(key)]

    def get_history_entries(self, key: str) -> list[StoredMessage]:
        """Stored conversation history with each message's author, oldest first.

        The ``history`` column holds a JSON list; items written before authors were stored are plain
        strings and come back with ``author == ""`` (no schema change, so no migration is needed).
        """
        t = self.conversations
        with self.engine.connect() as conn:
            v = conn.execute(sa.select(t.c.history).where(t.c.key == key)).scalar()
        return history_entries(v)

    def append_history(self, key: str, message: str, keep: int = 10, author: str = "") -> list[str]:
        """Append a message written by ``author`` (a platform user id; "" when unknown) to a
        conversation, keeping the last ``keep``; returns the history's texts."""
        hist = [*self.get_history_entries(key), StoredMessage(message, author)][-keep:]
        t = self.conversations
        raw = json.dumps([{"text": m.text, "author": m.author} for m in hist])
        with self.engine.begin() as conn:
            conn.execute(t.delete().where(t.c.key == key))
            conn.execute(t.insert().values(key=key, history=raw, updated_at=_now()))
        return [m.text for m in hist]

    def remember_conversation_reference(self, platform: str, user_id: str, reference: dict[str, Any], *,
                                        refresh: timedelta = timedelta(days=1)) -> bool:
        """Keep ``reference`` (a JSON-serialisable dict) as where ``platform`` reaches ``user_id`` unprompted.

        Written when there is none, when it differs from the stored one, or when the stored one is older
        than ``refresh`` (``updated_at`` is when the user was last seen, which retention reads, without a
        write per message). Two writers at once: the last one wins.

        Returns:
            True when a row was written.

        Raises:
            ValueError: when ``platform`` (1-20 characters) or ``user_id`` (1-200) is empty or too long.
        """
        if not platform or len(platform) > 20 or not user_id or len(user_id) > 200:
            raise ValueError("a conversation reference needs a platform (1-20 characters) and a user id (1-200)")
        raw = json.dumps(reference, sort_keys=True, separators=(",", ":"))
        t = self.conversation_refs
        where = sa.and_(t.c.platform == platform, t.c.user_id == user_id)
        now = _now()
        with self.engine.begin() as conn:
            row = conn.execute(sa.select(t.c.reference, t.c.updated_at).where(where)).first()
            seen = _aware(row.updated_at) if row is not None else None
            if row is not None and row.reference == raw and seen is not None and now - seen < refresh:
                return False
            if row is not None:
                conn.execute(t.update().where(where).values(reference=raw, updated_at=now))
                return True
        try:
            with self.engine.begin() as conn:
                conn.execute(t.insert().values(platform=platform, user_id=user_id, reference=raw, updated_at=now))
        except IntegrityError:  # another writer inserted it meanwhile
            with self.engine.begin() as conn:
                conn.execute(t.update().where(where).values(reference=raw, updated_at=now))
        return True

    def conversation_reference(self, platform: str, user_id: str) -> dict[str, Any] | None:
        """The reference kept for ``user_id`` on ``platform`` (:meth:`remember_conversation_reference`), or None
        (none kept, or not a JSON object)."""
        t = self.conversation_refs
        with self.engine.connect() as conn:
            raw = conn.execute(sa.select(t.c.reference).where(t.c.platform == platform,
                                                              t.c.user_id == user_id)).scalar()
        try:
            ref = json.loads(raw) if raw else None
        except ValueError:
            log.warning("the stored %s conversation reference of a user is not JSON; ignoring it", platform)
            return None
        return ref if isinstance(ref, dict) else None
