"""``chatops reminders``: the terminal's side of the outbox.

Messages scheduled from ``chatops ask`` (platform ``cli``) or ``chatops chat`` (``console``) cannot be
pushed to a shell, and ``chatops serve`` never delivers them (:data:`app.outbox.TERMINAL_PLATFORMS`).
This command delivers them instead: it shows the caller's (:func:`bot.cli_actions.cli_user`) due
messages once, each claimed and recorded ``delivered`` in the state store like any delivery (a second
run, or one running at the same time, does not show them again), then lists the ones still to come.
"""

from __future__ import annotations

import json
import os
import socket
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

from app.outbox import TERMINAL_PLATFORMS
from app.settings import Settings
from state import ScheduledMessage, StateStore

from .cli_actions import cli_user

__all__ = ["cli_reminders"]


def cli_reminders(settings: Settings, *, as_json: bool = False, user_id: str | None = None,
                  now: datetime | None = None) -> int:
    """Print the caller's due terminal messages (once) and their pending ones, soonest first; returns 0.

    Args:
        settings: where the state store is, and the time zone times are shown in.
        as_json: print one JSON object ``{"user", "due": [...], "scheduled": [...]}``, each item
            ``{"key", "at" (ISO 8601, UTC), "text", "platform"}``.
        user_id: whose messages (default: the operating-system user, as ``chatops ask`` records them).
        now: the current time (aware; default now).

    Raises:
        state.StateStoreError: when the state database cannot be opened.
    """
    user = user_id or cli_user()
    now = now or datetime.now(timezone.utc)
    tz = ZoneInfo(settings.default_timezone)
    owner = f"cli:{socket.gethostname()}:{os.getpid()}"
    store = StateStore(settings.state_url)
    try:
        due = store.claim_due_messages(now, owner, platforms=sorted(TERMINAL_PLATFORMS), user_id=user)
        for msg in due:
            store.finish_message(msg.key, owner, "delivered")
        upcoming = [m for m in store.scheduled_messages(user_id=user, status="pending")
                    if m.platform in TERMINAL_PLATFORMS]
    finally:
        store.close()
    if as_json:
        print(json.dumps({"user": user, "due": [_item(m) for m in due], "scheduled": [_item(m) for m in upcoming]}))
        return 0
    for msg in due:
        print(f"Due ({_when(msg, tz)}): {msg.text}")
    if upcoming:
        print("Scheduled:")
        for msg in upcoming:
            print(f"  {_when(msg, tz)}  {msg.text}  (key {msg.key})")
    elif not due:
        print(f"No reminders scheduled for {user}.")
    return 0


def _when(msg: ScheduledMessage, tz: ZoneInfo) -> str:
    return msg.at.astimezone(tz).strftime("%a %d %b %H:%M %Z")


def _item(msg: ScheduledMessage) -> dict[str, str]:
    return {"key": msg.key, "at": msg.at.isoformat(), "text": msg.text, "platform": msg.platform}
