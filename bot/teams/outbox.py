"""Teams' sender for the outbox (:mod:`app.outbox`): a scheduled message goes into the user's personal chat.

A bot can only message a Teams user unprompted inside a conversation it already has with them, through
that conversation's *reference*. :func:`personal_reference` takes it from a message the user sends the
bot in their personal (1:1) chat, keeping only what a proactive send needs (service URL, channel id,
conversation id, type and tenant, the bot's id, the user's ids; no names, no text); :class:`TeamsBot`
stores it per user (:meth:`state.StateStore.remember_conversation_reference`, keyed by the id reminders
are addressed to: the AAD object id, else the channel account id).

:class:`TeamsSender` sends a message with the Bot Framework adapter's ``continue_conversation`` (the same
path as slow answers), as a new plain text message in the chat (``POST
/v3/conversations/{id}/activities``, not a reply to anything); the adapter's middleware puts the AI-generated label on
it as on every message. The conversation the message was scheduled from is not used (a reminder is
personal, and a channel is not a place for it).

Errors are sorted for the outbox's retries:

- **permanent** (:class:`~app.outbox.PermanentDeliveryError`, the message is marked ``failed``): no
  reference stored for the user (code :data:`NO_REFERENCE`: they never messaged the bot in a personal
  chat), or the connector answered 400, 403 or 404 (the conversation is gone, the bot was blocked or
  uninstalled, the message was refused);
- **retryable** (everything else: HTTP 429, 412, 5xx, 401 (credentials an admin can fix before the
  message's last attempt), connection errors and time-outs).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from botbuilder.core import BotAdapter, TurnContext
from botbuilder.schema import Activity, ActivityTypes, ConversationReference

from app.outbox import PermanentDeliveryError, RetryableDeliveryError
from state import StateStore
from telemetry.metrics import count_api_error, count_rate_limited

from .errors import status_of

__all__ = ["TeamsSender", "personal_reference", "PLATFORM", "NO_REFERENCE", "PERMANENT_STATUSES"]

log = logging.getLogger(__name__)

#: The platform name of scheduled messages and stored references.
PLATFORM = "teams"
#: The error code of a message to a user whose personal chat is unknown.
NO_REFERENCE = "no_conversation_reference"
#: Connector answers that no later attempt can fix.
PERMANENT_STATUSES = frozenset({400, 403, 404})


def personal_reference(activity: Activity) -> tuple[str, dict[str, Any]] | None:
    """The user id and the reference to keep for a message ``activity`` sent in a personal chat.

    Returns:
        ``(user_id, reference)``: ``user_id`` is the AAD object id, else the sender's channel account id
        (what :class:`bot.teams.bot.TeamsBot` puts in turns, so reminders are addressed to it);
        ``reference`` is a Bot Framework ``ConversationReference`` as JSON (``serviceUrl``, ``channelId``,
        ``conversation`` with ``id``, ``conversationType``, ``tenantId``; ``bot`` and ``user`` with ids
        only). None for another conversation type, or when the activity lacks the service URL, the
        conversation id or the sender.
    """
    conv, sender = activity.conversation, activity.from_property
    if conv is None or not conv.id or not activity.service_url or sender is None or not sender.id:
        return None
    if (conv.conversation_type or "personal") != "personal":
        return None
    channel_data = activity.channel_data if isinstance(activity.channel_data, dict) else {}
    tenant = conv.tenant_id or str((channel_data.get("tenant") or {}).get("id") or "")
    user: dict[str, Any] = {"id": sender.id}
    if sender.aad_object_id:
        user["aadObjectId"] = sender.aad_object_id
    reference: dict[str, Any] = {
        "serviceUrl": activity.service_url, "channelId": activity.channel_id or "msteams",
        "conversation": {"id": conv.id, "conversationType": "personal", **({"tenantId": tenant} if tenant else {})},
        "user": user,
    }
    if activity.recipient is not None and activity.recipient.id:
        reference["bot"] = {"id": activity.recipient.id}
    return sender.aad_object_id or sender.id, reference


class TeamsSender:
    """Sends outbox messages into Teams users' personal chats (see the module docstring).

    Args:
        adapter: the Bot Framework adapter (``TeamsWebAdapter.adapter``: its credentials and middleware).
        store: where the users' conversation references are kept.
        app_id: the bot's app id (``MicrosoftAppId``; empty when unauthenticated).
    """

    def __init__(self, adapter: BotAdapter, store: StateStore, app_id: str = "") -> None:
        self.adapter = adapter
        self.store = store
        self.app_id = app_id

    async def send(self, user_id: str, channel_id: str, text: str) -> None:
        """Send ``text`` into ``user_id``'s personal chat (``channel_id`` is ignored).

        Raises:
            PermanentDeliveryError: no stored reference (code :data:`NO_REFERENCE`), or HTTP 400/403/404.
            RetryableDeliveryError: any other connector failure (429, 412, 5xx, 401, network, time-out).
        """
        stored = await asyncio.to_thread(self.store.conversation_reference, PLATFORM, user_id)
        if stored is None:
            raise PermanentDeliveryError(
                "no personal chat with this Teams user is known: they must message the bot once (in a personal "
                "chat) before it can send them reminders", NO_REFERENCE)
        reference = ConversationReference().deserialize(stored)
        failure: list[BaseException] = []

        async def deliver(ctx: TurnContext) -> None:
            # Caught here: an exception leaving the turn would reach the adapter's on_turn_error, which
            # tells the user "something went wrong", a message of its own.
            ctx.activity.id = None  # a new message in the chat, not a reply to the continuation activity
            try:
                await ctx.send_activity(Activity(type=ActivityTypes.message, text=text))
            except Exception as exc:  # noqa: BLE001 - the connector raises several unrelated types
                failure.append(exc)

        try:
            await self.adapter.continue_conversation(reference, deliver, self.app_id)
        except Exception as exc:  # noqa: BLE001 - getting a token or building the client can fail too
            failure.append(exc)
        if failure:
            raise _classify(failure[0]) from failure[0]


def _classify(exc: BaseException) -> PermanentDeliveryError | RetryableDeliveryError:
    """The outbox's error for a failed send (see the module docstring), counted in the metrics."""
    status = status_of(exc)
    if status == 429:
        count_rate_limited(PLATFORM, "reminder")
    count_api_error(PLATFORM, "reminder", str(status or type(exc).__name__))
    if status is None:
        return RetryableDeliveryError(f"cannot reach the Bot Connector: {type(exc).__name__}: {str(exc)[:200]}",
                                      type(exc).__name__)
    err = PermanentDeliveryError if status in PERMANENT_STATUSES else RetryableDeliveryError
    return err(f"the Bot Connector answered HTTP {status} to a proactive message", f"http_{status}")
