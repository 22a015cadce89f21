"""Slack's :class:`tools.invites.Courier`: invitations delivered as a direct message with the ``.ics`` attached.

- who is in the workspace: ``users.lookupByEmail`` (scope ``users:read.email``); an unknown address
  (``users_not_found``), a deactivated account or a bot is not in it;
- the DM: ``conversations.open`` with the user (scope ``im:write``), then the file through
  ``files.uploadV2``'s flow as ``slack_sdk``'s ``files_upload_v2`` performs it
  (``files.getUploadURLExternal``, the upload to the returned URL, ``files.completeUploadExternal``
  into the DM with the message as ``initial_comment``; scope ``files:write``).

The action service calls a courier from a worker thread (:meth:`app.actions.ActionService.confirm`
runs in one), so the methods block: each runs its Web API calls on a short-lived event loop of its own
(the async client opens an HTTP session per request, so it serves any loop).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from tools.invites import DeliveryError, Invitee

from .client import api_error_code

__all__ = ["SlackCourier"]

log = logging.getLogger(__name__)


class SlackCourier:
    """Invitations as Slack DMs with a file (see the module docstring).

    Args:
        client: the app's Web API client (bot token).
        timeout: seconds one delivery (open, upload, complete) may take.
    """

    platform = "slack"

    def __init__(self, client: AsyncWebClient, timeout: float = 60.0) -> None:
        self.client = client
        self.timeout = timeout

    def _run(self, coro: Any) -> Any:
        return asyncio.run(asyncio.wait_for(coro, self.timeout))

    def find(self, emails: Sequence[str], *, conversation_id: str = "") -> dict[str, Invitee]:
        """The workspace's active people among ``emails`` (``users.lookupByEmail`` each), by lower-case e-mail
        (``conversation_id`` is not needed: the workspace is the bot token's).

        Raises:
            DeliveryError: when Slack cannot answer for an address (a missing scope, Slack down).
        """
        return self._run(self._find(emails))

    async def _find(self, emails: Sequence[str]) -> dict[str, Invitee]:
        found: dict[str, Invitee] = {}
        for email in dict.fromkeys(e.lower() for e in emails):
            try:
                resp = await self.client.users_lookupByEmail(email=email)
            except SlackApiError as exc:
                if api_error_code(exc) == "users_not_found":
                    continue
                raise DeliveryError(f"Slack answered {api_error_code(exc)} to users.lookupByEmail") from exc
            except (SlackClientError, OSError, asyncio.TimeoutError) as exc:
                raise DeliveryError(f"Slack could not be reached ({type(exc).__name__})") from exc
            user = resp.get("user") or {}
            if user.get("deleted") or user.get("is_bot") or not user.get("id"):
                continue
            about = user.get("profile") or {}
            name = about.get("real_name") or user.get("real_name") or about.get("display_name") or ""
            found[email] = Invitee(email=email, user_id=str(user["id"]), name=str(name))
        return found

    def send_file(self, invitee: Invitee, *, text: str, filename: str, data: bytes, conversation_id: str = "") -> None:
        """Open the DM with ``invitee`` and upload ``data`` as ``filename`` with ``text``.

        Raises:
            DeliveryError: naming the call Slack refused (``upload failed: ...``) or the connection problem.
        """
        self._run(self._send(invitee, text, filename, data))

    async def _send(self, invitee: Invitee, text: str, filename: str, data: bytes) -> None:
        step = "conversations.open"
        try:
            opened = await self.client.conversations_open(users=invitee.user_id)
            channel = str((opened.get("channel") or {}).get("id") or "")
            if not channel:
                raise DeliveryError("Slack opened no DM")
            step = "files.uploadV2"
            await self.client.files_upload_v2(channel=channel, content=data, filename=filename, title=filename,
                                              initial_comment=text)
        except SlackApiError as exc:
            code = api_error_code(exc)
            log.info("the invitation DM to %s failed at %s: %s", invitee.user_id, step, code)
            what = "the DM could not be opened" if step == "conversations.open" else "the upload failed"
            raise DeliveryError(f"{what}: {code}") from exc
        except (SlackClientError, OSError, asyncio.TimeoutError) as exc:  # SlackRequestError: the upload's HTTP status
            log.info("the invitation DM to %s failed at %s: %s", invitee.user_id, step, type(exc).__name__)
            what = "the DM could not be opened" if step == "conversations.open" else "the upload failed"
            raise DeliveryError(f"{what} ({type(exc).__name__})") from exc
