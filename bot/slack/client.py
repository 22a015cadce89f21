"""The Slack Web API client, and Web API errors in plain words.

The client talks to ``SLACK_API_URL`` (Slack's by default; the tests' stand-in otherwise) and retries
with slack_sdk's handlers: HTTP 429 after the ``Retry-After`` seconds Slack asked for (up to
:data:`RATE_LIMIT_RETRIES` times), and dropped or refused connections (up to
:data:`CONNECTION_RETRIES` times, with back-off). Every 429 and every call that fails for good is counted
(``chatops_chat_api_rate_limited_total``, ``chatops_chat_api_errors_total``: :mod:`telemetry.metrics`).
"""

from __future__ import annotations

from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncConnectionErrorRetryHandler, AsyncRateLimitErrorRetryHandler
from slack_sdk.http_retry.builtin_interval_calculators import BackoffRetryIntervalCalculator
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from telemetry.metrics import count_api_error, count_rate_limited

from .config import SlackConfig

__all__ = ["build_web_client", "MeteredWebClient", "api_error_code", "describe_api_error", "RATE_LIMIT_RETRIES",
           "CONNECTION_RETRIES", "CHANNEL_ERRORS", "FORMAT_ERRORS"]

RATE_LIMIT_RETRIES = 3
CONNECTION_RETRIES = 2

#: Errors that mean "the bot cannot write to that conversation"; the user is told how to fix it.
CHANNEL_ERRORS = frozenset({"not_in_channel", "channel_not_found", "is_archived", "restricted_action",
                            "restricted_action_read_only_channel", "restricted_action_thread_only_channel",
                            "restricted_action_non_threadable_channel", "team_access_not_granted",
                            "cannot_reply_to_message", "message_limit_exceeded"})

#: Errors that mean "Slack refused the message's format"; the answer is sent again as plain text.
FORMAT_ERRORS = frozenset({"invalid_blocks", "invalid_blocks_format", "msg_too_long", "too_many_attachments",
                           "no_text", "invalid_arguments"})

_DESCRIPTIONS = {
    "not_in_channel": "I'm not a member of that channel. Invite me with `/invite @chatops` and ask again.",
    "channel_not_found": "Slack couldn't find that conversation for me (it may be private: invite me first).",
    "is_archived": "That channel is archived, so I can't post there.",
    "restricted_action": "The workspace doesn't allow me to post in that channel.",
    "restricted_action_read_only_channel": "That channel is read-only for apps.",
    "restricted_action_thread_only_channel": "That channel only allows replies in threads.",
    "restricted_action_non_threadable_channel": "That channel doesn't allow threads.",
    "team_access_not_granted": "I haven't been granted access to that workspace.",
    "cannot_reply_to_message": "Slack won't let me reply to that message.",
    "message_limit_exceeded": "That conversation has reached Slack's message limit.",
    "ratelimited": "Slack is rate-limiting me right now; try again in a minute.",
    "invalid_auth": "My Slack token is not valid; an admin needs to check SLACK_BOT_TOKEN.",
    "not_authed": "My Slack token is missing; an admin needs to set SLACK_BOT_TOKEN.",
    "account_inactive": "My Slack app was uninstalled or deactivated; an admin needs to reinstall it.",
    "token_revoked": "My Slack token was revoked; an admin needs to reinstall the app.",
    "missing_scope": "My Slack app lacks a permission; an admin needs to reinstall it from manifest.yml.",
}


class _RateLimitCounter(AsyncRetryHandler):
    """Never retries: counts each HTTP 429 in ``chatops_chat_api_rate_limited_total`` (slack_sdk asks every
    handler about every response, in order, so this one sits first and the real handlers still retry)."""

    async def can_retry_async(self, *, state: RetryState, request: HttpRequest, response: HttpResponse | None = None,
                              error: Exception | None = None) -> bool:
        if response is not None and response.status_code == 429:
            count_rate_limited("slack", request.url.rstrip("/").rsplit("/", 1)[-1])
        return False


class MeteredWebClient(AsyncWebClient):
    """``AsyncWebClient`` that counts each failed call (after the retries) in ``chatops_chat_api_errors_total``
    by method and Slack's error code (:func:`api_error_code`)."""

    async def api_call(self, api_method: str, **kwargs: Any) -> AsyncSlackResponse:
        """The Web API call (see ``AsyncWebClient.api_call``); a ``SlackApiError`` is counted and re-raised."""
        try:
            return await super().api_call(api_method, **kwargs)
        except SlackApiError as exc:
            count_api_error("slack", api_method, api_error_code(exc))
            raise


def build_web_client(config: SlackConfig) -> AsyncWebClient:
    """An ``AsyncWebClient`` for ``config.api_url`` with the bot token and the retry handlers; it counts 429s
    and failed calls (:class:`MeteredWebClient`)."""
    return MeteredWebClient(
        token=config.bot_token,
        base_url=config.api_url,
        timeout=30,
        retry_handlers=[
            _RateLimitCounter(),
            AsyncConnectionErrorRetryHandler(max_retry_count=CONNECTION_RETRIES,
                                             interval_calculator=BackoffRetryIntervalCalculator(backoff_factor=0.5)),
            AsyncRateLimitErrorRetryHandler(max_retry_count=RATE_LIMIT_RETRIES),
        ],
    )


def api_error_code(exc: BaseException) -> str:
    """Slack's error code of a :class:`SlackApiError` (``not_in_channel``...), else the exception's class name."""
    if isinstance(exc, SlackApiError):
        resp = exc.response
        code = resp.get("error") if hasattr(resp, "get") else None
        if not code and getattr(resp, "status_code", 200) == 429:
            code = "ratelimited"
        return str(code or f"http_{getattr(resp, 'status_code', 'error')}")
    return type(exc).__name__


def describe_api_error(code: str) -> str:
    """One sentence a user can act on for a Web API error code (a generic one for unknown codes)."""
    return _DESCRIPTIONS.get(code, f"Slack answered `{code}` when I tried to reply.")
