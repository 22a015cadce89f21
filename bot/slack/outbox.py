"""Slack's sender for the outbox (:mod:`app.outbox`): a scheduled message becomes a direct message.

:class:`SlackDmSender` calls ``chat.postMessage`` with ``channel=<user id>``: Slack posts into the
app's DM with that user (opening it if needed; ``chat:write`` is enough, no ``im:write``). The
conversation the message was scheduled from is not used: a reminder is personal, and the channel may
since have been archived or left.

Errors are sorted for the outbox's retries:

- **permanent** (:class:`~app.outbox.PermanentDeliveryError`, the message is marked ``failed``):
  :data:`PERMANENT_ERRORS`: the user or the DM does not exist or refuses apps, or Slack refused the
  message itself;
- **retryable** (everything else: ``ratelimited`` once the client's own 429 retries are spent, HTTP
  5xx, ``internal_error``, ``fatal_error``, ``service_unavailable``, ``request_timeout``, connection
  errors, time-outs, and token problems such as ``invalid_auth`` that an admin can fix before the
  message's last attempt).
"""

from __future__ import annotations

import asyncio

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from app.outbox import PermanentDeliveryError, RetryableDeliveryError

from .client import api_error_code

__all__ = ["SlackDmSender", "PERMANENT_ERRORS"]

#: ``chat.postMessage`` errors that no later attempt can fix.
PERMANENT_ERRORS = frozenset({
    "user_not_found", "channel_not_found", "user_disabled", "cannot_dm_bot", "not_in_channel", "is_archived",
    "restricted_action", "messages_tab_disabled", "no_text", "msg_too_long", "invalid_blocks",
    "invalid_arguments", "too_many_attachments",
})


class SlackDmSender:
    """Sends outbox messages as Slack DMs (see the module docstring).

    Args:
        client: the app's Web API client (the bot token; its retry handlers wait out HTTP 429 first).
    """

    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client

    async def send(self, user_id: str, channel_id: str, text: str) -> None:
        """DM ``text`` to ``user_id`` (``channel_id`` is ignored).

        Raises:
            PermanentDeliveryError: for :data:`PERMANENT_ERRORS`.
            RetryableDeliveryError: for any other Web API error, a connection error or a time-out.
        """
        try:
            await self.client.chat_postMessage(channel=user_id, text=text)
        except SlackApiError as exc:
            code = api_error_code(exc)
            status = getattr(exc.response, "status_code", None) or getattr(exc.response, "status", "?")
            err = PermanentDeliveryError if code in PERMANENT_ERRORS else RetryableDeliveryError
            raise err(f"Slack answered {code} (HTTP {status}) to chat.postMessage", code) from exc
        except (SlackClientError, aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            raise RetryableDeliveryError(f"cannot reach Slack: {type(exc).__name__}: {exc}",
                                         type(exc).__name__) from exc
