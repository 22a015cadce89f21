"""A stand-in for Slack on 127.0.0.1: its Web API, ``response_url``\\ s and Socket Mode, plus a client that
sends requests to the bot exactly as Slack does (signed JSON events, form-encoded slash commands,
``payload=`` interactions).

The Web API answers in Slack's wire format: HTTP 200 with ``{"ok": true, ...}`` or
``{"ok": false, "error": "..."}``, and rate limits as HTTP 429 with ``Retry-After``. It checks the bearer
token (``not_authed`` / ``invalid_auth``), the scopes granted by ``manifest.yml`` (``missing_scope``,
per method and, for ``conversations.replies``, per conversation type), channel membership
(``not_in_channel``, ``channel_not_found``), Block Kit limits (``invalid_blocks``), and keeps the
messages posted so ``conversations.replies`` returns real threads. Every call is recorded.

Used by tests/test_slack_*.py and bench/slack_load.py.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode

import httpx
from aiohttp import WSMsgType, web

from bot.server import ServerThread

__all__ = ["SlackStandin", "SlackSender", "SlackHarness", "Call", "METHOD_SCOPES", "HISTORY_SCOPES", "MEMBERS_SCOPES",
           "TEAM_ID", "BOT_USER_ID",
           "BOT_TOKEN", "APP_TOKEN", "SIGNING_SECRET", "manifest_scopes", "manifest_home_tab",
           "BOT_ID", "sign", "feedback_action"]

TEAM_ID = "T0STANDIN"
BOT_USER_ID = "U0BOTUSER"
BOT_ID = "B0BOTID"
APP_ID = "A0STANDIN"

#: Bot-token scopes each Web API method needs (any one of them), as Slack documents them.
METHOD_SCOPES: dict[str, frozenset[str]] = {
    "auth.test": frozenset(),
    "chat.postMessage": frozenset({"chat:write"}),
    "chat.postEphemeral": frozenset({"chat:write"}),
    "chat.update": frozenset({"chat:write"}),
    "chat.delete": frozenset({"chat:write"}),
    "chat.startStream": frozenset({"chat:write"}),
    "chat.appendStream": frozenset({"chat:write"}),
    "chat.stopStream": frozenset({"chat:write"}),
    "reactions.add": frozenset({"reactions:write"}),
    "reactions.remove": frozenset({"reactions:write"}),
    "users.info": frozenset({"users:read"}),
    "users.lookupByEmail": frozenset({"users:read.email"}),
    "conversations.open": frozenset({"im:write", "mpim:write", "channels:manage", "groups:write"}),
    "files.getUploadURLExternal": frozenset({"files:write"}),
    "files.completeUploadExternal": frozenset({"files:write"}),
    "assistant.threads.setStatus": frozenset({"assistant:write", "chat:write"}),
    "assistant.threads.setSuggestedPrompts": frozenset({"assistant:write"}),
    "assistant.threads.setTitle": frozenset({"assistant:write"}),
    "views.open": frozenset(),     # no scope: a trigger_id from the user's click is the permission
    "views.publish": frozenset(),  # no scope (the Home tab must be enabled in the app's settings)
    "conversations.replies": frozenset(),  # per conversation type: HISTORY_SCOPES
    "conversations.history": frozenset(),  # per conversation type: HISTORY_SCOPES
    "conversations.members": frozenset(),  # per conversation type: MEMBERS_SCOPES
}
#: ``conversations.replies``/``history`` scope per conversation type.
HISTORY_SCOPES = {"channel": "channels:history", "group": "groups:history", "im": "im:history",
                  "mpim": "mpim:history"}
#: ``conversations.members`` scope per conversation type.
MEMBERS_SCOPES = {"channel": "channels:read", "group": "groups:read", "im": "im:read", "mpim": "mpim:read"}
#: Methods called with the app-level token (scopes of the app token, not the bot's).
APP_TOKEN_METHODS = {"apps.connections.open"}


def sign(secret: str, body: bytes, timestamp: int | None = None) -> dict[str, str]:
    """Slack's request signing headers for ``body`` (``v0=`` HMAC-SHA256 of ``v0:TIMESTAMP:BODY``)."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    base = b"v0:" + ts.encode() + b":" + body
    sig = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": sig}


@dataclass
class Call:
    """One request the stand-in received.

    Attributes:
        method: the Web API method (``chat.postMessage``), ``response_url``, ``socket_ack``, or ``chat.stream``
            (a stream that stopped: the message as shown, recorded after its ``chat.stopStream``).
        params: form, query and JSON parameters merged (``blocks`` decoded when sent as a JSON string).
        status: the HTTP status answered.
        result: the JSON answered (Web API) or None.
        at: ``time.monotonic()`` when received.
        key: the response_url key (``response_url`` calls).
    """

    method: str
    params: dict[str, Any]
    status: int = 200
    result: dict[str, Any] | None = None
    at: float = field(default_factory=time.monotonic)
    key: str = ""

    @property
    def ok(self) -> bool:
        """True when the call succeeded."""
        return self.status == 200 and (self.result is None or bool(self.result.get("ok")))


@dataclass
class Conversation:
    """A stand-in conversation: its type (channel, group, im, mpim), whether the bot is a member, its
    messages (oldest first) and the bot's reactions by message ts."""

    kind: str  # channel | group | im | mpim
    member: bool = True
    messages: list[dict[str, Any]] = field(default_factory=list)
    reactions: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    people: list[str] = field(default_factory=list)  # user ids conversations.members lists


def _feedback_buttons_problem(e: dict[str, Any]) -> str | None:
    """Why Slack would refuse a ``feedback_buttons`` element, or None."""
    for side in ("positive_button", "negative_button"):
        b = e.get(side)
        if not isinstance(b, dict):
            return f"feedback_buttons needs a {side}"
        text = b.get("text") or {}
        if text.get("type") != "plain_text" or not text.get("text") or len(text["text"]) > 75:
            return f"feedback_buttons {side} text must be plain_text of 1-75 characters"
        if not b.get("value") or len(b["value"]) > 2000:
            return f"feedback_buttons {side} value must be 1-2000 characters"
    return None


def _block_problem(blocks: Any, surface: str = "message") -> str | None:
    """Why Slack would refuse these blocks (a subset of its checks), or None. ``surface``: ``message``,
    ``modal`` or ``home`` (input blocks only in views; 100 blocks in views)."""
    if not isinstance(blocks, list):
        return "blocks is not a list"
    if len(blocks) > (50 if surface == "message" else 100):
        return "too many blocks"
    action_ids: set[str] = set()
    markdown_total = 0
    for b in blocks:
        if not isinstance(b, dict) or not isinstance(b.get("type"), str):
            return "a block without a type"
        if len(b.get("block_id", "")) > 255:
            return "block_id too long"
        t = b["type"]
        if t == "section":
            text = (b.get("text") or {}).get("text", "")
            if not text and not b.get("fields"):
                return "section without text"
            if len(text) > 3000:
                return "section text over 3000 characters"
            fields = b.get("fields") or []
            if len(fields) > 10 or any(len(f.get("text", "")) > 2000 for f in fields):
                return "section fields over the limits"
        elif t == "markdown":
            text = b.get("text")
            if not isinstance(text, str) or not text or len(text) > 12000:
                return "markdown text must be 1-12000 characters"
            markdown_total += len(text)
            if markdown_total > 12000:
                return "markdown blocks over 12000 characters together"
        elif t == "context":
            els = b.get("elements") or []
            if not els or len(els) > 10:
                return "context needs 1-10 elements"
            if any(len(e.get("text", "")) > 3000 for e in els):
                return "context element text too long"
        elif t == "context_actions":
            els = b.get("elements") or []
            if not els or len(els) > 5:
                return "context_actions needs 1-5 elements"
            for e in els:
                if e.get("type") not in {"feedback_buttons", "icon_button"}:
                    return f"context_actions cannot hold {e.get('type')}"
                aid = e.get("action_id", "")
                if not aid or len(aid) > 255 or aid in action_ids:
                    return "missing, long or duplicate action_id"
                action_ids.add(aid)
                if e["type"] == "feedback_buttons" and (problem := _feedback_buttons_problem(e)):
                    return problem
        elif t == "actions":
            els = b.get("elements") or []
            if not els or len(els) > 25:
                return "actions needs 1-25 elements"
            for e in els:
                if e.get("type") == "button":
                    label = (e.get("text") or {}).get("text", "")
                    if not label or len(label) > 75 or len(e.get("value", "")) > 2000:
                        return "button label or value over the limits"
                    aid = e.get("action_id", "")
                    if not aid or len(aid) > 255 or aid in action_ids:
                        return "missing, long or duplicate action_id"
                    action_ids.add(aid)
        elif t == "input":
            if surface == "message":
                return "input blocks belong in modals and the Home tab"
            label = b.get("label") or {}
            if label.get("type") != "plain_text" or not label.get("text") or len(label["text"]) > 2000:
                return "input needs a plain_text label"
            if not isinstance(b.get("element"), dict) or not b["element"].get("type"):
                return "input needs an element"
        elif t not in {"divider", "header", "image", "rich_text", "file", "video"}:
            return f"unknown block type {t}"
    return None


def _view_problem(view: Any, kind: str) -> str | None:
    """Why Slack would refuse a view (``kind``: ``modal`` or ``home``) with ``invalid_arguments``, or None."""
    if not isinstance(view, dict) or view.get("type") != kind:
        return f"view type must be {kind}"
    if kind == "modal":
        title = view.get("title") or {}
        if title.get("type") != "plain_text" or not title.get("text") or len(title["text"]) > 24:
            return "modal title must be plain_text of 1-24 characters"
        for key in ("submit", "close"):
            if key in view and (not (view[key] or {}).get("text") or len(view[key]["text"]) > 24):
                return f"modal {key} must be plain_text of 1-24 characters"
        if any(b.get("type") == "input" for b in view.get("blocks") or []) and "submit" not in view:
            return "a modal with inputs needs a submit button"
    if len(str(view.get("private_metadata", ""))) > 3000 or len(str(view.get("callback_id", ""))) > 255:
        return "private_metadata or callback_id too long"
    return _block_problem(view.get("blocks"), kind)


class SlackStandin:
    """Slack's side on 127.0.0.1 (see the module docstring).

    Args:
        bot_token: the only bot token accepted.
        app_token: the app-level token accepted for ``apps.connections.open`` (Socket Mode).
        scopes: the bot's granted scopes (None: every call allowed).
        home_tab: whether the app's Home tab is enabled (``views.publish`` answers ``not_enabled`` otherwise).
    """

    def __init__(self, bot_token: str, app_token: str = "", scopes: set[str] | None = None,
                 home_tab: bool = True) -> None:
        self.bot_token = bot_token
        self.app_token = app_token
        self.scopes = scopes
        self.calls: list[Call] = []
        self.conversations: dict[str, Conversation] = {}
        self.users: dict[str, dict[str, Any]] = {}
        self.socket_acks: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._faults: dict[str, list[tuple[str, Any]]] = {}
        self._ts = itertools.count(1)
        self._sockets: list[web.WebSocketResponse] = []
        self.response_url_status = 200
        self.triggers: set[str] = set()  # trigger_ids handed out with interactions (SlackSender.click)
        self.views: dict[str, dict[str, Any]] = {}  # opened modals by view id
        self.homes: dict[str, dict[str, Any]] = {}  # the published Home tab by user id
        self.home_tab = home_tab
        self.uploads: dict[str, dict[str, Any]] = {}  # files.getUploadURLExternal's files by id (bytes once uploaded)
        self.files: list[dict[str, Any]] = []  # files shared by files.completeUploadExternal (content included)
        self.upload_status = 200  # the HTTP status the upload URL answers (a failing upload)
        self.server = ServerThread(self._app)

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> "SlackStandin":
        """Listen on 127.0.0.1 (a free port)."""
        self.server.start()
        return self

    def stop(self) -> None:
        """Close sockets and stop the server."""
        self.server.call(self._close_sockets())
        self.server.stop()

    async def _close_sockets(self) -> None:
        for ws in list(self._sockets):
            await ws.close()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return self.server.url

    @property
    def api_url(self) -> str:
        """The Web API base URL (``SLACK_API_URL``)."""
        return f"{self.url}/api/"

    def response_url(self, key: str | None = None) -> str:
        """A fresh ``response_url`` (calls to it are recorded with ``key``)."""
        return f"{self.url}/response/{key or uuid.uuid4().hex[:12]}"

    def _app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_post("/response/{key}", self._response)
        app.router.add_post("/upload/{file_id}", self._upload)
        app.router.add_get("/link/", self._socket)
        return app

    # -- test set-up -------------------------------------------------------------------------------
    def add_conversation(self, channel: str, kind: str = "channel", member: bool = True,
                         people: list[str] | None = None) -> None:
        """Create a conversation (``kind``: channel, group, im, mpim) the bot is or is not a member of;
        ``people``: the user ids ``conversations.members`` lists (the bot's own is added when a member)."""
        with self._cond:
            self.conversations[channel] = Conversation(kind, member, people=[*(people or []),
                                                                             *([BOT_USER_ID] if member else [])])

    def add_user(self, user_id: str, tz: str = "Europe/Paris", locale: str = "en-US", is_bot: bool = False,
                 email: str | None = None, **extra: Any) -> None:
        """Create a user ``users.info`` knows (e-mail ``<id lower case>@example.com`` unless given; ``extra``:
        more fields of the user object, e.g. ``is_restricted=True`` or ``team_id="T0OTHER"``)."""
        with self._cond:
            self.users[user_id] = {"id": user_id, "name": user_id.lower(), "tz": tz, "locale": locale,
                                   "is_bot": is_bot, "real_name": f"User {user_id}", "team_id": TEAM_ID,
                                   "_email": email or f"{user_id.lower()}@example.com", **extra}

    def next_ts(self) -> str:
        """A new message timestamp, increasing, shaped like Slack's (``1700000000.000123``)."""
        return f"{int(time.time())}.{next(self._ts):06d}"

    def user_message(self, channel: str, user: str, text: str, thread_ts: str | None = None,
                     ts: str | None = None) -> dict[str, Any]:
        """Record a message a person wrote (as Slack would store it) and return it, ``ts`` included
        (``ts``: when it was written, a new one by default)."""
        msg = {"type": "message", "user": user, "text": text, "ts": ts or self.next_ts(), "team": TEAM_ID}
        if thread_ts:
            msg["thread_ts"] = thread_ts
        with self._cond:
            self.conversations[channel].messages.append(msg)
        return msg

    def fail_next(self, method: str, error: str, count: int = 1) -> None:
        """Answer the next ``count`` calls of ``method`` with ``{"ok": false, "error": error}``."""
        with self._cond:
            self._faults.setdefault(method, []).extend([("error", error)] * count)

    def rate_limit_next(self, method: str, retry_after: int = 1, count: int = 1) -> None:
        """Answer the next ``count`` calls of ``method`` with HTTP 429 and ``Retry-After``."""
        with self._cond:
            self._faults.setdefault(method, []).extend([("ratelimit", retry_after)] * count)

    # -- inspection ----------------------------------------------------------------------------------
    def calls_to(self, method: str, **match: Any) -> list[Call]:
        """Recorded calls of ``method`` whose params contain ``match``."""
        with self._cond:
            return [c for c in self.calls if c.method == method
                    and all(c.params.get(k) == v for k, v in match.items())]

    def answers(self, channel: str, thread_ts: str | None = None) -> list[Call]:
        """What the bot showed in ``channel`` (in the thread ``thread_ts`` when given), in order: successful
        ``chat.postMessage`` calls and finished streams (``chat.stream``: ``text`` and ``blocks`` as shown,
        ``pieces`` as streamed, ``result["ts"]``)."""
        with self._cond:
            return [c for c in self.calls if c.method in {"chat.postMessage", "chat.stream"} and c.ok
                    and c.params.get("channel") == channel
                    and (thread_ts is None or c.params.get("thread_ts") == thread_ts)]

    def wait_for(self, predicate: Callable[["SlackStandin"], Any], timeout: float = 15) -> Any:
        """Wait until ``predicate(self)`` is truthy and return it.

        Raises:
            AssertionError: after ``timeout`` seconds, with the methods called so far.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                value = predicate(self)
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out; calls so far: {[c.method for c in self.calls]}")
                self._cond.wait(min(left, 0.05))

    def _record(self, call: Call) -> None:
        with self._cond:
            self.calls.append(call)
            self._cond.notify_all()

    # -- Web API ---------------------------------------------------------------------------------------
    async def _params(self, request: web.Request) -> dict[str, Any]:
        params: dict[str, Any] = dict(request.query)
        raw = await request.read()
        if raw:
            if request.content_type == "application/json":
                params.update(json.loads(raw))
            else:
                params.update(dict(parse_qsl(raw.decode(), keep_blank_values=True)))
        for key in ("blocks", "prompts", "metadata", "view", "chunks"):
            if isinstance(params.get(key), str):
                try:
                    params[key] = json.loads(params[key])
                except ValueError:
                    pass
        return params

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await self._params(request)
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ").strip() if auth.startswith("Bearer ") else params.pop("token", "")
        with self._cond:
            faults = self._faults.get(method)
            fault = faults.pop(0) if faults else None
        if fault and fault[0] == "ratelimit":
            self._record(Call(method, params, 429, {"ok": False, "error": "ratelimited"}))
            return web.json_response({"ok": False, "error": "ratelimited"}, status=429,
                                     headers={"Retry-After": str(fault[1])})
        result = self._dispatch(method, params, token, fault)
        self._record(Call(method, params, 200, result))
        return web.json_response(result)

    def _dispatch(self, method: str, p: dict[str, Any], token: str, fault: tuple[str, Any] | None) -> dict[str, Any]:
        expected = self.app_token if method in APP_TOKEN_METHODS else self.bot_token
        if not token:
            return {"ok": False, "error": "not_authed"}
        if token != expected:
            return {"ok": False, "error": "invalid_auth"}
        if fault:
            return {"ok": False, "error": fault[1]}
        handler = getattr(self, "_m_" + method.replace(".", "_"), None)
        if handler is None:
            return {"ok": False, "error": "unknown_method"}
        if method not in APP_TOKEN_METHODS and self.scopes is not None:
            needed = set(METHOD_SCOPES.get(method, frozenset({"?"})))
            if method in {"conversations.replies", "conversations.history", "conversations.members"}:
                conv = self.conversations.get(str(p.get("channel", "")))
                scopes = MEMBERS_SCOPES if method == "conversations.members" else HISTORY_SCOPES
                needed = {scopes[conv.kind]} if conv else set()
            if needed and not needed & self.scopes:
                return {"ok": False, "error": "missing_scope", "needed": ",".join(sorted(needed)),
                        "provided": ",".join(sorted(self.scopes))}
        with self._cond:
            return handler(p)

    def _conv(self, p: dict[str, Any], key: str = "channel") -> tuple[str, Conversation | None, dict | None]:
        cid = str(p.get(key, ""))
        if cid[:1] in {"U", "W"} and cid in self.users:  # posting to a user id opens the app's DM
            dm = "D" + cid[1:]
            self.conversations.setdefault(dm, Conversation("im"))
            cid = dm
        conv = self.conversations.get(cid)
        if conv is None:
            return cid, None, {"ok": False, "error": "channel_not_found"}
        return cid, conv, None

    def _find(self, conv: Conversation, ts: str) -> dict[str, Any] | None:
        return next((m for m in conv.messages if m["ts"] == ts), None)

    def _m_auth_test(self, p: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "url": "https://standin.slack.com/", "team": "Stand-in", "user": "chatops",
                "team_id": TEAM_ID, "user_id": BOT_USER_ID, "bot_id": BOT_ID, "is_enterprise_install": False}

    def _m_chat_postMessage(self, p: dict[str, Any]) -> dict[str, Any]:
        cid, conv, err = self._conv(p)
        if err:
            return err
        assert conv is not None
        if not conv.member and conv.kind != "im":
            return {"ok": False, "error": "not_in_channel"}
        if not p.get("text") and not p.get("blocks"):
            return {"ok": False, "error": "no_text"}
        if "blocks" in p:
            problem = _block_problem(p["blocks"])
            if problem:
                return {"ok": False, "error": "invalid_blocks", "errors": [problem]}
        if len(str(p.get("text", ""))) > 40000:
            return {"ok": False, "error": "msg_too_long"}
        msg = {"type": "message", "user": BOT_USER_ID, "bot_id": BOT_ID, "text": p.get("text", ""),
               "ts": self.next_ts(), "team": TEAM_ID, "app_id": APP_ID}
        if p.get("blocks"):
            msg["blocks"] = p["blocks"]
        if p.get("thread_ts"):
            msg["thread_ts"] = p["thread_ts"]
        conv.messages.append(msg)
        return {"ok": True, "channel": cid, "ts": msg["ts"], "message": msg}

    def _m_chat_startStream(self, p: dict[str, Any]) -> dict[str, Any]:
        cid, conv, err = self._conv(p)
        if err:
            return err
        assert conv is not None
        if not conv.member and conv.kind != "im":
            return {"ok": False, "error": "not_in_channel"}
        if not p.get("thread_ts") or self._find(conv, str(p["thread_ts"])) is None:
            return {"ok": False, "error": "invalid_arguments", "response_metadata": {
                "messages": ["a stream is a reply: thread_ts must be a message of the conversation"]}}
        if conv.kind != "im" and not (p.get("recipient_user_id") and p.get("recipient_team_id")):
            return {"ok": False, "error": "invalid_arguments", "response_metadata": {
                "messages": ["recipient_user_id and recipient_team_id are required outside DMs"]}}
        if len(str(p.get("markdown_text", ""))) > 12000:
            return {"ok": False, "error": "msg_too_long"}
        msg = {"type": "message", "user": BOT_USER_ID, "bot_id": BOT_ID, "text": str(p.get("markdown_text", "")),
               "ts": self.next_ts(), "team": TEAM_ID, "app_id": APP_ID, "thread_ts": str(p["thread_ts"]),
               "_streaming": True, "_pieces": [str(p.get("markdown_text", ""))]}
        conv.messages.append(msg)
        return {"ok": True, "channel": cid, "ts": msg["ts"]}

    def _streaming(self, p: dict[str, Any]) -> tuple[str, dict[str, Any] | None, dict[str, Any] | None]:
        cid, conv, err = self._conv(p)
        if err:
            return cid, None, err
        assert conv is not None
        msg = self._find(conv, str(p.get("ts", "")))
        if msg is None:
            return cid, None, {"ok": False, "error": "message_not_found"}
        if not msg.get("_streaming"):
            return cid, None, {"ok": False, "error": "message_not_in_streaming_state"}
        if len(str(p.get("markdown_text", ""))) > 12000:
            return cid, None, {"ok": False, "error": "msg_too_long"}
        return cid, msg, None

    def _m_chat_appendStream(self, p: dict[str, Any]) -> dict[str, Any]:
        cid, msg, err = self._streaming(p)
        if err:
            return err
        assert msg is not None
        if not p.get("markdown_text") and not p.get("chunks"):
            return {"ok": False, "error": "no_text"}
        msg["text"] += str(p.get("markdown_text", ""))
        msg["_pieces"].append(str(p.get("markdown_text", "")))
        return {"ok": True, "channel": cid, "ts": msg["ts"]}

    def _m_chat_stopStream(self, p: dict[str, Any]) -> dict[str, Any]:
        cid, msg, err = self._streaming(p)
        if err:
            return err
        assert msg is not None
        blocks = p.get("blocks") or []
        shown = [{"type": "markdown", "text": msg["text"] + str(p.get("markdown_text", ""))}, *blocks]
        problem = _block_problem(shown)
        if problem:
            return {"ok": False, "error": "invalid_blocks", "errors": [problem]}
        msg["text"] += str(p.get("markdown_text", ""))
        msg["blocks"] = shown
        msg["_streaming"] = False
        # What the user now sees, recorded as one pseudo-call (like response_url): the whole message.
        self.calls.append(Call("chat.stream", {"channel": cid, "thread_ts": msg["thread_ts"], "ts": msg["ts"],
                                               "text": msg["text"], "blocks": shown,
                                               "pieces": list(msg["_pieces"])}, 200, {"ok": True, "ts": msg["ts"]}))
        return {"ok": True, "channel": cid, "ts": msg["ts"], "message": {k: v for k, v in msg.items()
                                                                         if not k.startswith("_")}}

    def _m_chat_postEphemeral(self, p: dict[str, Any]) -> dict[str, Any]:
        cid, conv, err = self._conv(p)
        if err:
            return err
        if not p.get("user"):
            return {"ok": False, "error": "user_not_in_channel"}
        return {"ok": True, "message_ts": self.next_ts()}

    def _m_chat_update(self, p: dict[str, Any]) -> dict[str, Any]:
        cid, conv, err = self._conv(p)
        if err:
            return err
        assert conv is not None
        msg = self._find(conv, str(p.get("ts", "")))
        if msg is None:
            return {"ok": False, "error": "message_not_found"}
        if msg.get("_streaming"):
            return {"ok": False, "error": "cant_update_message"}  # a stream is stopped before it is edited
        if "blocks" in p and (problem := _block_problem(p["blocks"])):
            return {"ok": False, "error": "invalid_blocks", "errors": [problem]}
        msg.update({k: p[k] for k in ("text", "blocks") if k in p})
        return {"ok": True, "channel": cid, "ts": msg["ts"], "text": msg.get("text", "")}

    def _m_chat_delete(self, p: dict[str, Any]) -> dict[str, Any]:
        cid, conv, err = self._conv(p)
        if err:
            return err
        assert conv is not None
        msg = self._find(conv, str(p.get("ts", "")))
        if msg is None:
            return {"ok": False, "error": "message_not_found"}
        conv.messages.remove(msg)
        return {"ok": True, "channel": cid, "ts": msg["ts"]}

    def _reaction_target(self, p: dict[str, Any]) -> tuple[Conversation | None, dict | None]:
        cid, conv, err = self._conv(p)
        if err:
            return None, err
        assert conv is not None
        if not conv.member and conv.kind != "im":
            return None, {"ok": False, "error": "not_in_channel"}
        if self._find(conv, str(p.get("timestamp", ""))) is None:
            return None, {"ok": False, "error": "message_not_found"}
        return conv, None

    def _m_reactions_add(self, p: dict[str, Any]) -> dict[str, Any]:
        conv, err = self._reaction_target(p)
        if err:
            return err
        assert conv is not None
        names = conv.reactions.setdefault((str(p["timestamp"]), BOT_USER_ID), set())
        if p.get("name") in names:
            return {"ok": False, "error": "already_reacted"}
        names.add(str(p.get("name")))
        return {"ok": True}

    def _m_reactions_remove(self, p: dict[str, Any]) -> dict[str, Any]:
        conv, err = self._reaction_target(p)
        if err:
            return err
        assert conv is not None
        names = conv.reactions.get((str(p["timestamp"]), BOT_USER_ID), set())
        if p.get("name") not in names:
            return {"ok": False, "error": "no_reaction"}
        names.discard(str(p.get("name")))
        return {"ok": True}

    def _m_conversations_replies(self, p: dict[str, Any]) -> dict[str, Any]:
        cid, conv, err = self._conv(p)
        if err:
            return err
        assert conv is not None
        if not conv.member and conv.kind in {"group", "im", "mpim"}:
            return {"ok": False, "error": "channel_not_found"}
        ts = str(p.get("ts", ""))
        if self._find(conv, ts) is None:
            return {"ok": False, "error": "thread_not_found"}
        thread = sorted((m for m in conv.messages if m["ts"] == ts or m.get("thread_ts") == ts),
                        key=lambda m: float(m["ts"]))
        limit = max(1, min(int(p.get("limit", 1000) or 1000), 1000))
        start = int(p.get("cursor") or 0)
        page = thread[start:start + limit]
        more = start + limit < len(thread)
        return {"ok": True, "messages": [{k: v for k, v in m.items() if not k.startswith("_")} for m in page],
                "has_more": more,
                "response_metadata": {"next_cursor": str(start + limit) if more else ""}}

    def _m_conversations_members(self, p: dict[str, Any]) -> dict[str, Any]:
        cid, conv, err = self._conv(p)
        if err:
            return err
        assert conv is not None
        if not conv.member and conv.kind in {"group", "im", "mpim"}:
            return {"ok": False, "error": "channel_not_found"}
        limit = max(1, min(int(p.get("limit", 100) or 100), 1000))
        start = int(p.get("cursor") or 0)
        page = conv.people[start:start + limit]
        more = start + limit < len(conv.people)
        return {"ok": True, "members": list(page), "response_metadata": {"next_cursor": str(start + limit) if more else ""}}

    def _m_users_info(self, p: dict[str, Any]) -> dict[str, Any]:
        user = self.users.get(str(p.get("user", "")))
        if user is None:
            return {"ok": False, "error": "user_not_found"}
        out = {k: v for k, v in user.items() if not k.startswith("_")}
        if str(p.get("include_locale", "")).lower() not in {"1", "true"}:
            out.pop("locale", None)
        profile = {"real_name": user["real_name"], "display_name": user["name"]}
        if self.scopes is None or "users:read.email" in self.scopes:  # Slack shows e-mails only with the scope
            profile["email"] = user["_email"]
        out["profile"] = profile
        return {"ok": True, "user": out}

    def _m_users_lookupByEmail(self, p: dict[str, Any]) -> dict[str, Any]:
        email = str(p.get("email", "")).strip().lower()
        if not email:
            return {"ok": False, "error": "invalid_arguments"}
        user = next((u for u in self.users.values() if u["_email"].lower() == email), None)
        if user is None:
            return {"ok": False, "error": "users_not_found"}
        out = {k: v for k, v in user.items() if not k.startswith("_")}
        out["profile"] = {"real_name": user["real_name"], "display_name": user["name"], "email": user["_email"]}
        return {"ok": True, "user": out}

    def _m_conversations_open(self, p: dict[str, Any]) -> dict[str, Any]:
        users = [u for u in str(p.get("users", "")).split(",") if u]
        if len(users) != 1:  # a group DM is not needed by the bot; one user opens the app's DM with them
            return {"ok": False, "error": "users_list_not_supplied" if not users else "not_supported"}
        if users[0] not in self.users:
            return {"ok": False, "error": "user_not_found"}
        dm = "D" + users[0][1:]
        self.conversations.setdefault(dm, Conversation("im", people=[users[0], BOT_USER_ID]))
        return {"ok": True, "channel": {"id": dm}}

    def _m_files_getUploadURLExternal(self, p: dict[str, Any]) -> dict[str, Any]:
        filename, length = str(p.get("filename", "")), str(p.get("length", ""))
        if not filename or not length.isdigit():
            return {"ok": False, "error": "invalid_arguments"}
        file_id = f"F{uuid.uuid4().hex[:10].upper()}"
        self.uploads[file_id] = {"id": file_id, "filename": filename, "length": int(length), "data": None}
        return {"ok": True, "upload_url": f"{self.url}/upload/{file_id}", "file_id": file_id}

    def _m_files_completeUploadExternal(self, p: dict[str, Any]) -> dict[str, Any]:
        try:
            files = json.loads(p["files"]) if isinstance(p.get("files"), str) else p.get("files")
        except (KeyError, ValueError):
            return {"ok": False, "error": "invalid_arguments"}
        if not files:
            return {"ok": False, "error": "invalid_arguments"}
        channel = str(p.get("channel_id") or p.get("channels") or "")
        conv = self.conversations.get(channel) if channel else None
        if channel and conv is None:
            return {"ok": False, "error": "channel_not_found"}
        shared = []
        for f in files:
            up = self.uploads.get(str(f.get("id", "")))
            if up is None or up["data"] is None:  # never uploaded: Slack has nothing to complete
                return {"ok": False, "error": "file_not_found"}
            shared.append({"id": up["id"], "name": up["filename"], "title": f.get("title") or up["filename"],
                           "size": len(up["data"]), "content": up["data"], "channel": channel})
        for f in shared:
            self.uploads.pop(f["id"], None)
        self.files.extend(shared)
        if conv is not None:
            conv.messages.append({"type": "message", "user": BOT_USER_ID, "ts": self.next_ts(),
                                  "text": str(p.get("initial_comment") or ""),
                                  "files": [{"id": f["id"], "name": f["name"]} for f in shared]})
        return {"ok": True, "files": [{k: v for k, v in f.items() if k != "content"} for f in shared]}

    async def _upload(self, request: web.Request) -> web.Response:
        """The upload URL ``files.getUploadURLExternal`` handed out: the file's bytes as the body (raw, or a
        multipart form's ``file`` part); the length must be the one announced."""
        file_id = request.match_info["file_id"]
        if request.content_type.startswith("multipart/"):
            form = await request.post()
            part = form.get("file") or form.get("filename")
            data = part.file.read() if hasattr(part, "file") else str(part or "").encode()
        else:
            data = await request.read()
        with self._cond:
            up = self.uploads.get(file_id)
            status = self.upload_status
            if status == 200 and (up is None or up["data"] is not None):
                status = 404
            if status == 200 and len(data) != up["length"]:
                status = 400
            if status == 200:
                up["data"] = data
        self._record(Call("upload", {"file_id": file_id, "size": len(data)}, status, None, key=file_id))
        if status != 200:
            return web.Response(status=status, text="upload refused")
        return web.Response(text=f"OK - {len(data)}")

    def _assistant(self, p: dict[str, Any]) -> dict[str, Any]:
        cid, conv, err = self._conv(p, "channel_id")
        if err:
            return err
        assert conv is not None
        if conv.kind != "im":
            return {"ok": False, "error": "invalid_channel"}  # assistant threads live in the app's DM
        if not p.get("thread_ts"):
            return {"ok": False, "error": "invalid_arguments"}
        return {"ok": True}

    _m_assistant_threads_setStatus = _assistant
    _m_assistant_threads_setSuggestedPrompts = _assistant
    _m_assistant_threads_setTitle = _assistant

    def _m_views_open(self, p: dict[str, Any]) -> dict[str, Any]:
        trigger = str(p.get("trigger_id", ""))
        if not trigger or trigger not in self.triggers:
            return {"ok": False, "error": "invalid_trigger_id"}
        self.triggers.discard(trigger)  # a trigger opens one view
        problem = _view_problem(p.get("view"), "modal")
        if problem:
            return {"ok": False, "error": "invalid_arguments", "response_metadata": {"messages": [problem]}}
        view = {**p["view"], "id": f"V{next(self._ts):08d}", "team_id": TEAM_ID, "app_id": APP_ID,
                "bot_id": BOT_ID, "state": {"values": {}}, "hash": uuid.uuid4().hex[:16]}
        self.views[view["id"]] = view
        return {"ok": True, "view": view}

    def _m_views_publish(self, p: dict[str, Any]) -> dict[str, Any]:
        user = str(p.get("user_id", ""))
        if user not in self.users:
            return {"ok": False, "error": "user_not_found"}
        if not self.home_tab:
            return {"ok": False, "error": "not_enabled"}  # home_tab_enabled is false in the app's settings
        problem = _view_problem(p.get("view"), "home")
        if problem:
            return {"ok": False, "error": "invalid_arguments", "response_metadata": {"messages": [problem]}}
        view = {**p["view"], "id": f"V{next(self._ts):08d}", "team_id": TEAM_ID, "app_id": APP_ID}
        self.homes[user] = view
        return {"ok": True, "view": view}

    def _m_apps_connections_open(self, p: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "url": f"ws://127.0.0.1:{self.server.port}/link/?ticket={uuid.uuid4().hex}"}

    # -- response_url --------------------------------------------------------------------------------
    async def _response(self, request: web.Request) -> web.Response:
        body = await request.read()
        try:
            params = json.loads(body) if body else {}
        except ValueError:
            params = {"_raw": body.decode(errors="replace")}
        status = self.response_url_status
        if status == 200 and isinstance(params.get("blocks"), list):
            problem = _block_problem(params["blocks"])
            if problem:
                status = 400
        self._record(Call("response_url", params, status, None, key=request.match_info["key"]))
        if status != 200:
            return web.Response(status=status, text="invalid_blocks" if status == 400 else "expired_url")
        return web.Response(text="ok")

    # -- Socket Mode ---------------------------------------------------------------------------------
    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self._sockets.append(ws)
        await ws.send_json({"type": "hello", "num_connections": 1, "connection_info": {"app_id": APP_ID},
                            "debug_info": {"host": "standin", "approximate_connection_time": 18060}})
        try:
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    data = json.loads(msg.data)
                    with self._cond:
                        self.socket_acks.append(data)
                        self._cond.notify_all()
                    self._record(Call("socket_ack", data))
        finally:
            self._sockets.remove(ws)
        return ws

    def socket_connected(self) -> bool:
        """True while a Socket Mode client is connected."""
        return bool(self._sockets)

    def socket_push(self, kind: str, payload: dict[str, Any], retry_attempt: int = 0) -> str:
        """Send an envelope (``kind``: events_api, slash_commands, interactive) to the connected client;
        returns its ``envelope_id``."""
        envelope_id = uuid.uuid4().hex
        envelope = {"envelope_id": envelope_id, "type": kind, "payload": payload,
                    "accepts_response_payload": kind != "events_api", "retry_attempt": retry_attempt,
                    "retry_reason": "timeout" if retry_attempt else ""}

        async def send() -> None:
            await self._sockets[-1].send_json(envelope)

        self.server.call(send())
        return envelope_id


def feedback_action(blocks: list[dict[str, Any]], positive: bool) -> dict[str, Any]:
    """The action Slack sends when the thumbs up (``positive``) or down of the message's ``feedback_buttons``
    is clicked: the element's ``action_id``, the block's ``block_id`` and the clicked button's ``value``.

    Raises:
        AssertionError: when the blocks hold no feedback buttons.
    """
    found = [(b, e) for b in blocks if b.get("type") == "context_actions" for e in b.get("elements", [])
             if e.get("type") == "feedback_buttons"]
    assert found, f"no feedback buttons in {[b.get('type') for b in blocks]}"
    block, element = found[0]
    button = element["positive_button" if positive else "negative_button"]
    return {"type": "feedback_buttons", "action_id": element["action_id"], "block_id": block.get("block_id", ""),
            "value": button["value"]}


class SlackSender:
    """Sends requests to the bot's ``/slack/events`` exactly as Slack does.

    Args:
        url: the bot's base URL (``http://127.0.0.1:PORT``).
        signing_secret: the app's signing secret.
        standin: the stand-in told about every ``trigger_id`` handed out (so ``views.open`` accepts only those).
    """

    def __init__(self, url: str, signing_secret: str, path: str = "/slack/events",
                 standin: SlackStandin | None = None) -> None:
        self.url = url.rstrip("/") + path
        self.secret = signing_secret
        self.standin = standin
        self.http = httpx.Client(timeout=30)
        self._ids = itertools.count(1)

    def close(self) -> None:
        """Close the HTTP client."""
        self.http.close()

    def post(self, body: bytes, content_type: str, headers: dict[str, str] | None = None,
             signed: bool = True, timestamp: int | None = None) -> httpx.Response:
        """POST ``body``, signed (``timestamp`` overrides now) unless ``signed`` is False."""
        h = {"Content-Type": content_type}
        if signed:
            h.update(sign(self.secret, body, timestamp))
        h.update(headers or {})
        return self.http.post(self.url, content=body, headers=h)

    def envelope(self, event: dict[str, Any], event_id: str | None = None) -> dict[str, Any]:
        """The Events API envelope Slack wraps ``event`` in."""
        return {"token": "legacy-verification-token", "team_id": TEAM_ID, "api_app_id": APP_ID, "event": event,
                "type": "event_callback", "event_id": event_id or f"Ev{uuid.uuid4().hex[:10].upper()}",
                "event_time": int(time.time()), "event_context": uuid.uuid4().hex,
                "authorizations": [{"enterprise_id": None, "team_id": TEAM_ID, "user_id": BOT_USER_ID,
                                    "is_bot": True, "is_enterprise_install": False}],
                "is_ext_shared_channel": False}

    def event(self, event: dict[str, Any], event_id: str | None = None, retry_num: int | None = None
              ) -> tuple[httpx.Response, dict[str, Any]]:
        """Deliver an Events API event (``retry_num`` adds Slack's redelivery headers); returns the
        response and the envelope sent."""
        env = self.envelope(event, event_id)
        headers = {}
        if retry_num is not None:
            headers = {"X-Slack-Retry-Num": str(retry_num), "X-Slack-Retry-Reason": "http_timeout"}
        return self.post(json.dumps(env).encode(), "application/json", headers), env

    def command(self, text: str, user_id: str, channel_id: str, response_url: str, command: str = "/kb",
                channel_name: str = "general") -> httpx.Response:
        """Invoke a slash command (form-encoded, as Slack sends it)."""
        form = {"token": "legacy-verification-token", "team_id": TEAM_ID, "team_domain": "standin",
                "channel_id": channel_id, "channel_name": channel_name, "user_id": user_id,
                "user_name": user_id.lower(), "command": command, "text": text, "api_app_id": APP_ID,
                "is_enterprise_install": "false", "response_url": response_url,
                "trigger_id": self._trigger()}
        return self.post(urlencode(form).encode(), "application/x-www-form-urlencoded")

    def _trigger(self) -> str:
        trigger = f"{next(self._ids)}.{uuid.uuid4().hex[:10]}"
        if self.standin is not None:
            with self.standin._cond:
                self.standin.triggers.add(trigger)
        return trigger

    def click(self, user_id: str, action: dict[str, Any], response_url: str, channel_id: str = "",
              message: dict[str, Any] | None = None, ephemeral: bool = False) -> httpx.Response:
        """Click a button (a ``block_actions`` interaction, ``payload=`` form-encoded)."""
        container: dict[str, Any] = {"type": "message", "is_ephemeral": ephemeral}
        if channel_id:
            container["channel_id"] = channel_id
        if message and not ephemeral:
            container["message_ts"] = message.get("ts", "")
        payload = {"type": "block_actions", "team": {"id": TEAM_ID, "domain": "standin"},
                   "user": {"id": user_id, "username": user_id.lower(), "team_id": TEAM_ID},
                   "api_app_id": APP_ID, "token": "legacy-verification-token", "container": container,
                   "trigger_id": self._trigger(),
                   "channel": {"id": channel_id, "name": "general"} if channel_id else None,
                   "message": message, "response_url": response_url,
                   "actions": [{"block_id": action.get("block_id", "b"), "action_ts": f"{time.time():.6f}",
                                **{k: v for k, v in action.items() if k != "block_id"}}]}
        return self.post(urlencode({"payload": json.dumps(payload)}).encode(), "application/x-www-form-urlencoded")

    def submit_view(self, user_id: str, view: dict[str, Any], values: dict[str, dict[str, Any]]) -> httpx.Response:
        """Submit an opened modal (a ``view_submission`` interaction); ``values``: ``{block_id: {action_id:
        value object}}`` as Slack puts them in ``view.state.values``."""
        payload = {"type": "view_submission", "team": {"id": TEAM_ID, "domain": "standin"},
                   "user": {"id": user_id, "username": user_id.lower(), "team_id": TEAM_ID},
                   "api_app_id": APP_ID, "token": "legacy-verification-token", "trigger_id": self._trigger(),
                   "view": {**view, "state": {"values": values}}, "response_urls": [],
                   "is_enterprise_install": False}
        return self.post(urlencode({"payload": json.dumps(payload)}).encode(), "application/x-www-form-urlencoded")

    def home_opened(self, user_id: str) -> tuple[httpx.Response, dict[str, Any]]:
        """The user opened the app's Home tab (``app_home_opened``, tab ``home``)."""
        return self.event({"type": "app_home_opened", "user": user_id, "channel": "D" + user_id[1:], "tab": "home",
                           "event_ts": f"{time.time():.6f}"})


def run_forever_for_debugging() -> None:  # pragma: no cover - manual use
    """Start a stand-in and print its URL (``python tests/slack_standin.py``)."""
    standin = SlackStandin("xoxb-standin").start()
    print(standin.api_url)
    try:
        asyncio.run(asyncio.sleep(3600))
    finally:
        standin.stop()


if __name__ == "__main__":  # pragma: no cover
    run_forever_for_debugging()


# -- the bot under test ----------------------------------------------------------------------------------
BOT_TOKEN = "xoxb-111-222-standinBotTokenDoNotLog"
APP_TOKEN = "xapp-1-A0STANDIN-333-standinAppTokenDoNotLog"
SIGNING_SECRET = "standin-signing-secret-do-not-log-8f3a"


def _manifest(path: str | None = None) -> dict[str, Any]:
    import yaml
    from pathlib import Path

    manifest = Path(path) if path else Path(__file__).resolve().parents[1] / "manifest.yml"
    return yaml.safe_load(manifest.read_text())


def manifest_scopes(path: str | None = None) -> set[str]:
    """The bot scopes ``manifest.yml`` grants."""
    return set(_manifest(path)["oauth_config"]["scopes"]["bot"])


def manifest_home_tab(path: str | None = None) -> bool:
    """Whether ``manifest.yml`` enables the Home tab."""
    return bool(((_manifest(path).get("features") or {}).get("app_home") or {}).get("home_tab_enabled"))


class SlackHarness:
    """The real bot (Bolt ``AsyncApp`` behind :func:`bot.server.create_app`, served by aiohttp on 127.0.0.1)
    wired to a :class:`SlackStandin`, and a :class:`SlackSender` to talk to it.

    Args:
        runtime: the index, tools and agent (``app.wiring.build_agent``).
        store: the state store.
        jobs: the index jobs (``/kb status``, ``/kb reindex``).
        admin_ids: ``ADMIN_USER_IDS``.
        socket_mode: serve over Socket Mode instead of ``POST /slack/events``.
        scopes: the stand-in's granted scopes (default: manifest.yml's).
        agent_concurrency: answers computed at once.
    """

    def __init__(self, runtime: Any, store: Any, jobs: Any, admin_ids: tuple[str, ...] = (),
                 socket_mode: bool = False, scopes: set[str] | None = None, agent_concurrency: int = 2) -> None:
        import dataclasses

        from bot.server import create_app
        from app.settings import Settings
        from bot.slack import SlackBot, SlackConfig
        from bot.slack.http import SlackHttpAdapter
        from bot.slack.socket_mode import SlackSocketModeAdapter

        self.standin = SlackStandin(BOT_TOKEN, APP_TOKEN, manifest_scopes() if scopes is None else scopes,
                                    home_tab=manifest_home_tab()).start()
        settings = Settings(slack_bot_token=BOT_TOKEN, slack_signing_secret=SIGNING_SECRET, slack_app_token=APP_TOKEN,
                            slack_api_url=self.standin.api_url, admin_user_ids=",".join(admin_ids))
        config = dataclasses.replace(SlackConfig.from_settings(settings, socket_mode=socket_mode),
                                     agent_concurrency=agent_concurrency)
        self.store = store

        def build() -> web.Application:
            self.bot = SlackBot(config, runtime, store, jobs)
            adapter = (SlackSocketModeAdapter(self.bot, ping_interval=30) if socket_mode
                       else SlackHttpAdapter(self.bot))

            async def state_ready() -> tuple[bool, str]:
                return store.ping(), "state"

            return create_app([adapter], checks={"state": state_ready})

        self.server = ServerThread(build).start()
        self.sender = SlackSender(self.server.url, SIGNING_SECRET, standin=self.standin)

    def idle(self, timeout: float = 20) -> None:
        """Wait until the bot has no background work left.

        Raises:
            AssertionError: when work is still running after ``timeout`` seconds.
        """
        assert self.server.call(self.bot.wait_idle(timeout), timeout + 5), "the bot is still busy"

    def close(self) -> None:
        """Stop the bot's server, then the stand-in."""
        self.sender.close()
        self.server.stop()
        self.standin.stop()
