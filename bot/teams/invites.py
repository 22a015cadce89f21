"""Teams' :class:`tools.invites.Courier`: invitations as a file card in the attendee's personal chat with the bot.

Why a file card, not a download link: a link served by ``chatops serve`` is a bearer token (whoever has
it can fetch the file) and needs a public address; Teams' file consent card gives the file to the
attendee only. The card is Teams' documented way for a bot to send a file in a personal chat:

1. **Who is in the organisation**: ``TeamsInfo.get_member`` in the conversation the request was made in,
   with the attendee's e-mail as the member id (Teams accepts a user's AAD object id, UPN or Teams id;
   the UPN is the sign-in address, which is the e-mail in most organisations). 404: not a member there.
2. **The DM**: ``CloudAdapter.create_conversation`` opens the personal chat with that member (``POST
   /v3/conversations``: one member, the tenant); Teams refuses when the user does not have the app.
3. **The file**: a message with the invitation's text and a *file consent card*
   (``application/vnd.microsoft.teams.card.file.consent``: name, size, description, accept and decline
   contexts). The attendee presses Accept; Teams sends the bot an ``invoke`` ``fileConsent/invoke`` with an
   upload URL in the attendee's OneDrive; :meth:`TeamsCourier.consent` ``PUT``\\ s the bytes there
   (``Content-Range``) and answers with a *file info card* that opens the file. Decline uploads nothing.

The bytes wait in memory until the attendee answers (at most :data:`KEEP` and :data:`MAX_WAITING` files);
after a restart an Accept is told the invitation is no longer available. The action service calls the
courier from a worker thread, so :meth:`find` and :meth:`send_file` block: they run on the server's event
loop (recorded by :meth:`remember`), where the adapter's HTTP client lives.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from botbuilder.core import BotAdapter, InvokeResponse, TurnContext
from botbuilder.core.teams import TeamsInfo
from botbuilder.schema import (Activity, ActivityTypes, Attachment, ChannelAccount, ConversationParameters,
                               ConversationReference)
from cachetools import FIFOCache, TTLCache

from tools.invites import DeliveryError, Invitee

from .errors import status_of

__all__ = ["TeamsCourier", "FILE_CONSENT", "FILE_INFO", "KEEP", "MAX_WAITING"]

log = logging.getLogger(__name__)

FILE_CONSENT = "application/vnd.microsoft.teams.card.file.consent"
FILE_INFO = "application/vnd.microsoft.teams.card.file.info"
#: Seconds an offered file waits for the attendee's Accept.
KEEP = 7 * 24 * 3600
#: Offered files kept at once (expired ones are dropped first, then the least recently used).
MAX_WAITING = 500


@dataclass(frozen=True, slots=True)
class _Offer:
    filename: str
    data: bytes
    user_id: str
    at: float


class TeamsCourier:
    """Invitations as Teams file cards (see the module docstring).

    Args:
        adapter: the Bot Framework adapter (``TeamsWebAdapter.adapter``).
        app_id: the bot's app id (``MicrosoftAppId``; empty when unauthenticated).
        timeout: seconds one look-up or delivery may take.
    """

    platform = "teams"

    def __init__(self, adapter: BotAdapter, app_id: str = "", timeout: float = 60.0) -> None:
        self.adapter = adapter
        self.app_id = app_id
        self.timeout = timeout
        self.loop: asyncio.AbstractEventLoop | None = None
        self._references: FIFOCache[str, ConversationReference] = FIFOCache(maxsize=2000)  # the oldest out first
        self._offers: TTLCache[str, _Offer] = TTLCache(maxsize=MAX_WAITING, ttl=KEEP, timer=time.time)

    # -- fed by the bot ----------------------------------------------------------------------------
    def remember(self, activity: Activity) -> None:
        """Keep the conversation reference of ``activity`` (to look people up and open chats later) and the
        running event loop. Called by the bot for every activity."""
        self.loop = asyncio.get_running_loop()
        if activity.conversation is not None and activity.conversation.id and activity.service_url:
            ref = TurnContext.get_conversation_reference(activity)
            data = activity.channel_data if isinstance(activity.channel_data, dict) else {}
            if ref.conversation is not None and not ref.conversation.tenant_id:  # new chats need the tenant
                ref.conversation.tenant_id = activity.conversation.tenant_id or str(
                    (data.get("tenant") or {}).get("id") or "") or None
            self._references[activity.conversation.id] = ref

    def _run(self, coro: Any) -> Any:
        if self.loop is None or self.loop.is_closed():
            coro.close()
            raise DeliveryError("Teams is not connected yet")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(self.timeout)

    def _reference(self, conversation_id: str) -> ConversationReference:
        ref = self._references.get(conversation_id)
        if ref is None:
            raise DeliveryError("the conversation is unknown since the bot restarted; ask again there")
        return ref

    # -- the Courier port ----------------------------------------------------------------------------
    def find(self, emails: Sequence[str], *, conversation_id: str = "") -> dict[str, Invitee]:
        """The members among ``emails`` of the conversation ``conversation_id`` (``TeamsInfo.get_member``).

        Raises:
            DeliveryError: the conversation is unknown (a restart) or Teams did not answer.
        """
        ref = self._reference(conversation_id)
        return self._run(self._find(ref, [e.lower() for e in dict.fromkeys(emails)]))

    async def _find(self, ref: ConversationReference, emails: list[str]) -> dict[str, Invitee]:
        found: dict[str, Invitee] = {}
        failed: list[BaseException] = []

        async def look(ctx: TurnContext) -> None:
            if ctx.activity.channel_data is None:  # a continuation carries none; the conversation's roster is asked
                ctx.activity.channel_data = {}
            for email in emails:
                try:
                    member = await TeamsInfo.get_member(ctx, email)
                except Exception as exc:  # noqa: BLE001 - the connector raises several unrelated types
                    if status_of(exc) == 404:
                        continue  # not a member of this conversation
                    failed.append(exc)
                    return
                found[email] = Invitee(email=email, user_id=str(member.id), name=str(member.name or ""))

        await self.adapter.continue_conversation(ref, look, self.app_id)
        if failed:
            status = status_of(failed[0])
            log.info("Teams roster look-up failed: %s", status or repr(failed[0])[:300])
            raise DeliveryError("Teams did not say who is in the conversation "
                                f"({f'HTTP {status}' if status else type(failed[0]).__name__})")
        return found

    def send_file(self, invitee: Invitee, *, text: str, filename: str, data: bytes, conversation_id: str = "") -> None:
        """Open the personal chat with ``invitee`` and offer ``data`` as ``filename`` in a file consent card.

        Raises:
            DeliveryError: the chat could not be opened (the user does not have the app) or the card not sent.
        """
        ref = self._reference(conversation_id)
        self._run(self._send(ref, invitee, text, filename, data))

    async def _send(self, ref: ConversationReference, invitee: Invitee, text: str, filename: str, data: bytes) -> None:
        tenant = (ref.conversation.tenant_id if ref.conversation else None) or ""
        params = ConversationParameters(is_group=False, bot=ChannelAccount(id=ref.bot.id if ref.bot else ""),
                                        members=[ChannelAccount(id=invitee.user_id)], tenant_id=tenant or None,
                                        channel_data={"tenant": {"id": tenant}} if tenant else None)
        token = uuid.uuid4().hex
        failed: list[BaseException] = []

        async def offer(ctx: TurnContext) -> None:
            card = Attachment(content_type=FILE_CONSENT, name=filename, content={
                "description": text[:1000], "sizeInBytes": len(data),
                "acceptContext": {"invitation": token}, "declineContext": {"invitation": token}})
            try:
                await ctx.send_activity(Activity(type=ActivityTypes.message, text=text, attachments=[card]))
            except Exception as exc:  # noqa: BLE001
                failed.append(exc)

        self._keep(token, _Offer(filename, data, invitee.user_id, time.time()))
        try:
            await self.adapter.create_conversation(self.app_id, offer, params, ref.channel_id or "msteams",
                                                   ref.service_url, None)
        except Exception as exc:  # noqa: BLE001 - a refused chat (403), no connection...
            failed.append(exc)
        if failed:
            self._offers.pop(token, None)
            status = status_of(failed[0])
            log.info("the invitation to %s was not delivered: %s", invitee.user_id, status or type(failed[0]).__name__)
            why = "they don't have the app in Teams" if status == 403 else f"Teams answered {status or 'nothing'}"
            raise DeliveryError(f"the chat could not be opened ({why})")

    def _keep(self, token: str, item: _Offer) -> None:
        self._offers[token] = item  # kept KEEP seconds, at most MAX_WAITING (expired ones out first)

    # -- the attendee's answer -------------------------------------------------------------------------
    async def consent(self, turn_context: TurnContext) -> InvokeResponse:
        """Handle ``fileConsent/invoke``: on Accept upload the offered file to the URL Teams gives (only the
        invitee it was offered to may), then show it as a file info card; on Decline drop it. Always 200
        (the answer is said in the chat)."""
        activity = turn_context.activity
        value = activity.value if isinstance(activity.value, dict) else {}
        token = str((value.get("context") or {}).get("invitation") or "")
        offer = self._offers.get(token)
        who = activity.from_property.id if activity.from_property else ""
        if offer is None or offer.user_id != who:
            await turn_context.send_activity("This invitation is no longer available; ask the organiser to send it "
                                             "again.")
            return InvokeResponse(status=200)
        if value.get("action") != "accept":
            self._offers.pop(token, None)
            await turn_context.send_activity("OK, I didn't save the invitation.")
            return InvokeResponse(status=200)
        info = value.get("uploadInfo") or {}
        size = len(offer.data)
        try:
            async with httpx.AsyncClient(timeout=30) as http:
                r = await http.put(str(info.get("uploadUrl") or ""), content=offer.data,
                                   headers={"Content-Range": f"bytes 0-{size - 1}/{size}"})
            r.raise_for_status()
        except (httpx.HTTPError, ValueError) as exc:
            log.info("uploading an invitation to OneDrive failed: %s", type(exc).__name__)
            await turn_context.send_activity("I couldn't save the invitation in your OneDrive; press Accept again or "
                                             "ask the organiser.")
            return InvokeResponse(status=200)
        self._offers.pop(token, None)
        card = Attachment(content_type=FILE_INFO, content_url=str(info.get("contentUrl") or ""),
                          name=str(info.get("name") or offer.filename),
                          content={"uniqueId": info.get("uniqueId"), "fileType": info.get("fileType") or "ics"})
        await turn_context.send_activity(Activity(type=ActivityTypes.message, attachments=[card]))
        return InvokeResponse(status=200)
