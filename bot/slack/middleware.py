"""Bolt global middleware: drop bot messages and redelivered events before any listener runs.

Both acknowledge what they drop (HTTP 200), so Slack does not redeliver it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.middleware.async_middleware import AsyncMiddleware
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse

from state import StateStore

__all__ = ["IgnoreBotEvents", "DeduplicateEvents", "is_from_bot"]

log = logging.getLogger(__name__)


def is_from_bot(event: dict[str, Any], bot_user_id: str | None, bot_id: str | None) -> bool:
    """True for events written by a bot or an app, this one included (``bot_id``, ``bot_message``,
    our own user id or bot id, or a ``message_changed`` of a bot's message)."""
    if not isinstance(event, dict):
        return False
    if event.get("bot_id") or event.get("subtype") == "bot_message" or event.get("bot_profile"):
        return True
    if bot_user_id and event.get("user") == bot_user_id:
        return True
    if bot_id and event.get("bot_id") == bot_id:
        return True
    inner = event.get("message")
    if isinstance(inner, dict) and inner.get("bot_id"):
        return True
    return False


class IgnoreBotEvents(AsyncMiddleware):
    """Acknowledges and drops Events API events written by bots (including this app's own messages)."""

    async def async_process(self, *, req: AsyncBoltRequest, resp: BoltResponse,
                            next: Callable[[], Awaitable[BoltResponse]]) -> BoltResponse:
        """Drop bot events with a 200, pass everything else on."""
        event = req.body.get("event") if isinstance(req.body, dict) else None
        if isinstance(event, dict) and event.get("type") in {"message", "app_mention"}:
            auth = req.context.authorize_result
            if is_from_bot(event, req.context.bot_user_id, getattr(auth, "bot_id", None)):
                log.debug("ignored a bot's %s event %s", event.get("type"), req.body.get("event_id"))
                return BoltResponse(status=200, body="")
        return await next()


class DeduplicateEvents(AsyncMiddleware):
    """Answers each Events API delivery once: the ``event_id`` is claimed in the state store.

    Slack redelivers an event it believes was missed (``X-Slack-Retry-Num``); the redelivery finds the
    id already claimed and is acknowledged without being processed. If the store cannot be reached the
    event is processed anyway (a possible duplicate answer beats a silent bot) and the error is logged.
    """

    def __init__(self, store: StateStore) -> None:
        self.store = store

    async def async_process(self, *, req: AsyncBoltRequest, resp: BoltResponse,
                            next: Callable[[], Awaitable[BoltResponse]]) -> BoltResponse:
        """Drop an already-claimed event with a 200, pass everything else on."""
        body = req.body if isinstance(req.body, dict) else {}
        event_id = body.get("event_id")
        if body.get("type") == "event_callback" and isinstance(event_id, str) and event_id:
            try:
                first = await asyncio.to_thread(self.store.claim_event, event_id, "slack")
            except Exception:  # noqa: BLE001 - never lose an event to a store outage
                log.exception("could not record Slack event %s in the state store; processing it anyway", event_id)
                first = True
            if not first:
                retry = (req.headers.get("x-slack-retry-num") or ["?"])[0]
                reason = (req.headers.get("x-slack-retry-reason") or ["?"])[0]
                log.info("Slack event %s already handled; ignoring redelivery (retry %s, %s)", event_id, retry, reason)
                return BoltResponse(status=200, body="")
        return await next()
