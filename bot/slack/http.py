"""``POST /slack/events``: Slack's HTTP requests (events, slash commands, interactivity) into the Bolt app.

Before Bolt sees a request this adapter

1. verifies Slack's signature (``X-Slack-Signature`` over ``v0:TIMESTAMP:BODY`` with the signing
   secret; a timestamp more than 5 minutes away is stale): any failure is **401** and nothing is
   processed;
2. checks the body is one of Slack's shapes (a JSON event envelope, a form-encoded slash command, a
   form-encoded ``payload=`` interaction): anything else is **400**, never a 500 with a trace.

Then it dispatches to Bolt (slack_bolt's aiohttp adapter converts the request and the response).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.request.async_request import AsyncBoltRequest

from .bot import SlackBot
from .client import api_error_code

__all__ = ["SlackHttpAdapter", "BadRequest", "check_body", "valid_signature", "EVENTS_PATH", "MAX_CLOCK_SKEW"]

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
MAX_CLOCK_SKEW = 5 * 60  # seconds; older (or newer) signed requests are replays


def valid_signature(secret: str, body: bytes, timestamp: str, signature: str, now: float | None = None) -> bool:
    """True when ``signature`` is Slack's ``v0=`` HMAC-SHA256 of ``v0:TIMESTAMP:BODY`` under ``secret`` and
    ``timestamp`` is within :data:`MAX_CLOCK_SKEW` of ``now`` (the raw bytes are signed, whatever they hold)."""
    if not secret or not timestamp.isdigit() or not signature.startswith("v0="):
        return False
    if abs((time.time() if now is None else now) - int(timestamp)) > MAX_CLOCK_SKEW:
        return False
    expected = "v0=" + hmac.new(secret.encode(), b"v0:" + timestamp.encode() + b":" + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, signature)


class BadRequest(ValueError):
    """The body is not one of Slack's request shapes; the message says which part is wrong."""


def _check_envelope(data: Any) -> None:
    if not isinstance(data, dict):
        raise BadRequest("the JSON body is not an object")
    kind = data.get("type")
    if not isinstance(kind, str) or not kind:
        raise BadRequest("the JSON body has no type")
    if kind == "url_verification" and not isinstance(data.get("challenge"), str):
        raise BadRequest("url_verification without a challenge")
    if kind == "event_callback":
        event = data.get("event")
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            raise BadRequest("event_callback without an event object")
        if not isinstance(data.get("event_id", ""), str):
            raise BadRequest("event_id is not a string")


def _check_interaction(payload: Any) -> None:
    if not isinstance(payload, dict) or not isinstance(payload.get("type"), str):
        raise BadRequest("payload is not an interaction object")
    if not isinstance(payload.get("user", {}), dict):
        raise BadRequest("payload.user is not an object")
    if payload["type"] == "block_actions":
        actions = payload.get("actions")
        if not isinstance(actions, list) or not actions or not all(isinstance(a, dict) for a in actions):
            raise BadRequest("block_actions without actions")


def check_body(text: str, content_type: str) -> dict[str, Any]:
    """Parse a Slack request body the way Bolt will, checking its shape.

    Returns:
        The parsed body (the event envelope, the slash command's fields, or the interaction payload).

    Raises:
        BadRequest: for anything that is not a Slack request shape.
    """
    stripped = text.lstrip()
    if content_type == "application/json" or stripped.startswith("{") or stripped.startswith("["):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise BadRequest(f"invalid JSON: {exc.msg}") from exc
        _check_envelope(data)
        return data
    if content_type not in ("application/x-www-form-urlencoded", ""):
        raise BadRequest(f"unsupported content type {content_type}")
    try:
        params = dict(parse_qsl(text, keep_blank_values=True, strict_parsing=bool(text), max_num_fields=200))
    except ValueError as exc:
        raise BadRequest(f"invalid form body: {exc}") from exc
    if "payload" in params:
        try:
            payload = json.loads(params["payload"])
        except ValueError as exc:
            raise BadRequest(f"payload is not JSON: {exc.msg}") from exc
        _check_interaction(payload)
        return payload
    if params.get("command", "").startswith("/"):
        if not params.get("user_id"):
            raise BadRequest("slash command without user_id")
        return params
    if params.get("ssl_check") == "1":
        return params
    raise BadRequest("neither an event, a slash command nor an interaction")


def _problem(status: int, message: str) -> web.Response:
    return web.json_response({"ok": False, "error": message}, status=status)


class SlackHttpAdapter:
    """The Slack web adapter for :func:`bot.server.create_app`: one route, a readiness check, start and stop.

    Args:
        bot: the Slack bot (its Bolt app handles what passes the checks).
        path: the route (``/slack/events``, as in manifest.yml).
    """

    name = "slack"

    def __init__(self, bot: SlackBot, path: str = EVENTS_PATH) -> None:
        self.bot = bot
        self.path = path
        self.secret = bot.config.signing_secret

    def routes(self) -> list[web.RouteDef]:
        """``POST /slack/events``."""
        return [web.post(self.path, self.handle)]

    async def start(self) -> None:
        """Start the bot's upkeep and check the token with ``auth.test`` (logged; the server starts either
        way and /readyz tells)."""
        await self.bot.start()
        try:
            await self.bot.check_auth()
        except Exception as exc:  # noqa: BLE001
            log.error("Slack auth.test failed at start-up (%s); check SLACK_BOT_TOKEN and SLACK_API_URL",
                      api_error_code(exc))

    async def stop(self) -> None:
        """Finish background work."""
        await self.bot.close()

    async def ready(self) -> tuple[bool, str]:
        """Ready once ``auth.test`` succeeded."""
        return await self.bot.ready()

    async def handle(self, request: web.Request) -> web.Response:
        """Verify, check and dispatch one request from Slack (see the module docstring)."""
        raw = await request.read()
        timestamp = request.headers.get("X-Slack-Request-Timestamp", "")
        signature = request.headers.get("X-Slack-Signature", "")
        if not timestamp.isdigit() or not signature:
            log.warning("rejected a request to %s without a valid signature header", self.path)
            return _problem(401, "invalid signature")
        if not valid_signature(self.secret, raw, timestamp, signature):
            log.warning("rejected a request to %s: signature mismatch or stale timestamp", self.path)
            return _problem(401, "invalid signature")
        try:
            text = raw.decode("utf-8")
            check_body(text, request.content_type if request.body_exists else "")
            bolt_req = AsyncBoltRequest(body=text, query=request.query_string,
                                        headers={k: v for k, v in request.headers.items()})
        except (BadRequest, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("rejected a malformed request to %s: %s", self.path, exc)
            return _problem(400, f"malformed request: {exc}"[:200])
        bolt_resp = await self.bot.app.async_dispatch(bolt_req)
        if bolt_resp.status == 404:
            # nothing listens for it (Bolt's answer); acknowledge so Slack does not retry forever
            return web.Response(status=200)
        return await to_aiohttp_response(bolt_resp)
