"""``POST /slack/events``: Slack's HTTP requests (events, slash commands, interactivity) into the Bolt app.

Before Bolt sees a request this adapter

1. verifies Slack's signature (``X-Slack-Signature`` over ``v0:TIMESTAMP:BODY`` with the signing
   secret, by slack_sdk's ``SignatureVerifier``; a timestamp more than 5 minutes away is stale; both
   headers must be ASCII of the right form): any failure is **401** and nothing is processed (a body
   that is not UTF-8, which no Slack request is and no signature can cover, is **400**);
2. checks the body is one of Slack's shapes (a JSON event envelope, a form-encoded slash command, a
   form-encoded ``payload=`` interaction; UTF-8, JSON nested at most
   :data:`bot.jsonbody.MAX_DEPTH` levels): anything else is **400**, never a 500 with a trace;
3. claims the signature in the state store, once: a signed request replayed within the 5 minutes
   its timestamp is fresh (a slash command, a button click, an event) is answered **200** with an
   empty body and does nothing. Slack's own redeliveries of an event are signed anew, so they pass
   here and are dropped by the event-id check (:class:`bot.slack.middleware.DeduplicateEvents`).
   When the store cannot be reached the request gets **503** (Slack tries again later) rather than
   being run unguarded.

Then it dispatches to Bolt (slack_bolt's aiohttp adapter converts the request and the response).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.signature import Clock, SignatureVerifier

from ..jsonbody import JsonBodyError, parse_json
from .bot import SlackBot
from .client import api_error_code

__all__ = ["SlackHttpAdapter", "BadRequest", "check_body", "valid_signature", "EVENTS_PATH", "MAX_CLOCK_SKEW",
           "REPLAY_KEY_PREFIX"]

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
MAX_CLOCK_SKEW = 5 * 60  # seconds; older (or newer) signed requests are replays
#: The state store key of a used signature: this prefix and the signature's 64 hex digits.
REPLAY_KEY_PREFIX = "slack-sig:"


_TIMESTAMP = re.compile(r"[0-9]{1,12}", re.ASCII)  # Unix seconds; isdigit() would let "²³" through to int()
_SIGNATURE = re.compile(r"v0=[0-9a-f]{64}", re.ASCII)


class _FixedClock(Clock):
    """slack_sdk's clock, pinned to a given instant (``now`` in Unix seconds)."""

    def __init__(self, now: float) -> None:
        self._now = now

    def now(self) -> float:
        return self._now


def valid_signature(secret: str, body: bytes, timestamp: str, signature: str, now: float | None = None) -> bool:
    """True when ``signature`` is Slack's ``v0=`` HMAC-SHA256 of ``v0:TIMESTAMP:BODY`` under ``secret`` and
    ``timestamp`` (ASCII digits, Unix seconds) is within :data:`MAX_CLOCK_SKEW` of ``now``, checked by
    slack_sdk's :class:`~slack_sdk.signature.SignatureVerifier` (constant-time comparison). Slack's bodies
    are UTF-8; a body that is not cannot be verified and is not valid. Never raises, whatever the header
    values are."""
    if not secret.strip() or not _TIMESTAMP.fullmatch(timestamp) or not _SIGNATURE.fullmatch(signature):
        return False
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    verifier = SignatureVerifier(secret, _FixedClock(now) if now is not None else Clock())
    return verifier.is_valid(body=text, timestamp=timestamp, signature=signature)


class BadRequest(ValueError):
    """The body is not one of Slack's request shapes; the message says which part is wrong."""


# The fields Bolt's matchers, the middleware and the listeners read, and the JSON type each must have when
# present. Slack always sends them so; a signed body that does not is refused here rather than left to
# raise inside Bolt (a 500 and a traceback).
_ENVELOPE = {"event_id": str, "team_id": str, "api_app_id": str, "enterprise_id": str, "authorizations": list,
             "event_time": int}
_MESSAGE = {"user": str, "bot_id": str, "text": str, "ts": str, "thread_ts": str, "subtype": str, "team": str,
            "blocks": list, "bot_profile": dict}
_CONVERSATION_EVENT = {**_MESSAGE, "channel": str, "event_ts": str, "channel_type": str, "files": list,
                       "message": dict, "previous_message": dict, "assistant_thread": dict}
_CONVERSATION_EVENTS = {"message", "app_mention", "assistant_thread_started", "assistant_thread_context_changed"}
_ASSISTANT_THREAD = {"user_id": str, "channel_id": str, "thread_ts": str, "context": dict}
_INTERACTION = {"user": dict, "team": dict, "channel": dict, "container": dict, "message": dict, "view": dict,
                "enterprise": dict, "state": dict, "actions": list, "callback_id": str, "trigger_id": str,
                "response_url": str, "api_app_id": str}
_PARTS: dict[str, Mapping[str, type]] = {"user": {"id": str, "username": str, "name": str, "team_id": str},
          "team": {"id": str, "domain": str}, "channel": {"id": str, "name": str},
          "container": {"type": str, "channel_id": str, "message_ts": str, "thread_ts": str, "is_ephemeral": bool},
          "message": _MESSAGE,
          "view": {"id": str, "type": str, "callback_id": str, "state": dict, "private_metadata": str, "hash": str}}
_ACTION = {"action_id": str, "block_id": str, "value": str, "type": str, "action_ts": str}
_TYPE_NAMES = {str: "a string", int: "a number", bool: "true or false", list: "an array", dict: "an object"}


def _check_fields(obj: dict[str, Any], where: str, kinds: Mapping[str, type]) -> None:
    for name, kind in kinds.items():
        value = obj.get(name)
        wrong = not isinstance(value, kind) or (kind is int and isinstance(value, bool))
        if value is not None and wrong:
            raise BadRequest(f"{where}.{name} is not {_TYPE_NAMES[kind]}")


def _check_objects(items: Any, where: str, kinds: Mapping[str, type]) -> None:
    for i, item in enumerate(items or []):
        if not isinstance(item, dict):
            raise BadRequest(f"{where}[{i}] is not an object")
        _check_fields(item, f"{where}[{i}]", kinds)


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
        _check_fields(data, "body", _ENVELOPE)
        _check_objects(data.get("authorizations"), "authorizations", {"user_id": str, "team_id": str})
        if event["type"] in _CONVERSATION_EVENTS:
            _check_fields(event, "event", _CONVERSATION_EVENT)
            for inner in ("message", "previous_message"):
                if isinstance(event.get(inner), dict):
                    _check_fields(event[inner], f"event.{inner}", _MESSAGE)
            if isinstance(event.get("assistant_thread"), dict):
                _check_fields(event["assistant_thread"], "event.assistant_thread", _ASSISTANT_THREAD)


def _check_interaction(payload: Any) -> None:
    if not isinstance(payload, dict) or not isinstance(payload.get("type"), str):
        raise BadRequest("payload is not an interaction object")
    _check_fields(payload, "payload", _INTERACTION)
    for part, kinds in _PARTS.items():
        if isinstance(payload.get(part), dict):
            _check_fields(payload[part], f"payload.{part}", kinds)
    _check_objects(payload.get("actions"), "payload.actions", _ACTION)
    _check_response_url(payload.get("response_url"), "payload.response_url")
    if payload["type"] == "block_actions":
        actions = payload.get("actions")
        if not actions or not all(isinstance(a.get("action_id"), str) for a in actions):
            raise BadRequest("block_actions without actions (each with an action_id)")
        if not isinstance(payload.get("view"), dict) and not payload.get("response_url"):
            # a button in a message (not in a modal or the Home tab): Slack always says where to answer
            raise BadRequest("block_actions on a message without a response_url")
    view = payload.get("view")
    if isinstance(view, dict) and isinstance(view.get("state"), dict):
        values = view["state"].get("values")
        if values is not None and not (isinstance(values, dict) and all(
                isinstance(block, dict) and all(isinstance(v, dict) for v in block.values())
                for block in values.values())):
            raise BadRequest("payload.view.state.values is not an object of objects")


def _check_response_url(url: Any, where: str) -> None:
    """``url``, when given, must be an absolute http(s) address (Slack's are ``https://hooks.slack.com/...``)."""
    if url is None:
        return
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("https", "http") or not parts.netloc:
        raise BadRequest(f"{where} is not an http(s) address")


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
            data = parse_json(text)
        except JsonBodyError as exc:
            raise BadRequest(str(exc)) from None
        _check_envelope(data)
        return data
    if content_type not in ("application/x-www-form-urlencoded", ""):
        raise BadRequest(f"unsupported content type {content_type}")
    try:
        params = dict(parse_qsl(text, keep_blank_values=True, strict_parsing=bool(text), max_num_fields=200))
    except ValueError as exc:
        raise BadRequest("invalid form body") from exc  # its message quotes the field: no user text in logs
    if "payload" in params:
        try:
            payload = parse_json(params["payload"])
        except JsonBodyError as exc:
            raise BadRequest(f"payload: {exc}") from None
        _check_interaction(payload)
        return payload
    if params.get("command", "").startswith("/"):
        if not params.get("user_id"):
            raise BadRequest("slash command without user_id")
        if not params.get("response_url"):
            raise BadRequest("slash command without response_url")
        _check_response_url(params["response_url"], "response_url")
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
        """Verify, check, claim and dispatch one request from Slack (see the module docstring)."""
        raw = await request.read()
        timestamp = request.headers.get("X-Slack-Request-Timestamp", "")
        signature = request.headers.get("X-Slack-Signature", "")
        if not _TIMESTAMP.fullmatch(timestamp) or not _SIGNATURE.fullmatch(signature):
            log.warning("rejected a request to %s without a valid signature header", self.path)
            return _problem(401, "invalid signature")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            # Slack's bodies are UTF-8 and its signature covers their text: these bytes are no Slack request
            # and cannot be verified; refused as malformed, nothing processed
            log.warning("rejected a malformed request to %s: the body is not UTF-8", self.path)
            return _problem(400, "malformed request: the body is not UTF-8")
        if not valid_signature(self.secret, raw, timestamp, signature):
            log.warning("rejected a request to %s: signature mismatch or stale timestamp", self.path)
            return _problem(401, "invalid signature")
        try:
            check_body(text, request.content_type if request.body_exists else "")
            bolt_req = AsyncBoltRequest(body=text, query=request.query_string,
                                        headers={k: v for k, v in request.headers.items()})
        except (BadRequest, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            log.warning("rejected a malformed request to %s: %s", self.path, str(exc)[:200])
            return _problem(400, f"malformed request: {exc}"[:200])
        first = await self._claim(signature)
        if first is None:
            return _problem(503, "the state store is unavailable; try again later")
        if not first:
            log.warning("ignored a replayed request to %s (its signature was already used)", self.path)
            return web.Response(status=200)
        bolt_resp = await self.bot.app.async_dispatch(bolt_req)
        if bolt_resp.status == 404:
            # nothing listens for it (Bolt's answer); acknowledge so Slack does not retry forever
            return web.Response(status=200)
        return await to_aiohttp_response(bolt_resp)

    async def _claim(self, signature: str) -> bool | None:
        """Record the request's signature: True the first time, False for a replay, None when the state
        store cannot be reached (logged without a trace; the caller answers 503)."""
        try:
            return await asyncio.to_thread(self.bot.store.claim_event, REPLAY_KEY_PREFIX + signature[3:], "slack")
        except Exception as exc:  # noqa: BLE001 - any store failure: refuse rather than run unguarded
            log.error("could not record a Slack request signature in the state store (%s: %s); answered 503",
                      type(exc).__name__, str(exc)[:200])
            return None
