"""The Slack stand-in's server (the package docstring says what it checks): lifecycle, test set-up, inspection,
the Web API's dispatch (tokens, faults, rate limits, scopes), ``response_url``\\ s and Socket Mode."""

from __future__ import annotations

import itertools
import json
import time
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import WSMsgType, web

from tests.standins.base import StandIn
from tests.standins.slack.blocks import block_problem
from tests.standins.slack.methods import WebApiMethods
from tests.standins.slack.model import (APP_ID, APP_TOKEN_METHODS, BOT_USER_ID, HISTORY_SCOPES, MEMBERS_SCOPES,
                                        METHOD_SCOPES, TEAM_ID, Call, Conversation)


class SlackStandin(WebApiMethods, StandIn):
    """Slack's side on 127.0.0.1 (see the module docstring).

    Args:
        bot_token: the only bot token accepted.
        app_token: the app-level token accepted for ``apps.connections.open`` (Socket Mode).
        scopes: the bot's granted scopes (None: every call allowed).
        home_tab: whether the app's Home tab is enabled (``views.publish`` answers ``not_enabled`` otherwise).
    """

    def __init__(self, bot_token: str, app_token: str = "", scopes: set[str] | None = None,
                 home_tab: bool = True) -> None:
        super().__init__()
        self.bot_token = bot_token
        self.app_token = app_token
        self.scopes = scopes
        self.calls: list[Call] = []
        self.conversations: dict[str, Conversation] = {}
        self.users: dict[str, dict[str, Any]] = {}
        self.socket_acks: list[dict[str, Any]] = []
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

    # -- lifecycle -------------------------------------------------------------------------------
    def stop(self) -> None:
        """Close sockets and stop the server."""
        if self.server is not None:
            self.server.call(self._close_sockets())
        super().stop()

    async def _close_sockets(self) -> None:
        for ws in list(self._sockets):
            await ws.close()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return self.origin

    @property
    def api_url(self) -> str:
        """The Web API base URL (``SLACK_API_URL``)."""
        return f"{self.url}/api/"

    def response_url(self, key: str | None = None) -> str:
        """A fresh ``response_url`` (calls to it are recorded with ``key``)."""
        return f"{self.url}/response/{key or uuid.uuid4().hex[:12]}"

    def web_app(self) -> web.Application:
        """The Web API, ``response_url``\\ s, file uploads and the Socket Mode link."""
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
        with self.lock:
            self.conversations[channel] = Conversation(kind, member, people=[*(people or []),
                                                                             *([BOT_USER_ID] if member else [])])

    def add_user(self, user_id: str, tz: str = "Europe/Paris", locale: str = "en-US", is_bot: bool = False,
                 email: str | None = None, **extra: Any) -> None:
        """Create a user ``users.info`` knows (e-mail ``<id lower case>@example.com`` unless given; ``extra``:
        more fields of the user object, e.g. ``is_restricted=True`` or ``team_id="T0OTHER"``)."""
        with self.lock:
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
        with self.lock:
            self.conversations[channel].messages.append(msg)
        return msg

    def fail_next(self, method: str, error: str, count: int = 1) -> None:
        """Answer the next ``count`` calls of ``method`` with ``{"ok": false, "error": error}``."""
        with self.lock:
            self._faults.setdefault(method, []).extend([("error", error)] * count)

    def rate_limit_next(self, method: str, retry_after: int = 1, count: int = 1) -> None:
        """Answer the next ``count`` calls of ``method`` with HTTP 429 and ``Retry-After``."""
        with self.lock:
            self._faults.setdefault(method, []).extend([("ratelimit", retry_after)] * count)

    # -- inspection ----------------------------------------------------------------------------------
    def calls_to(self, method: str, **match: Any) -> list[Call]:
        """Recorded calls of ``method`` whose params contain ``match``."""
        with self.lock:
            return [c for c in self.calls if c.method == method
                    and all(c.params.get(k) == v for k, v in match.items())]

    def answers(self, channel: str, thread_ts: str | None = None) -> list[Call]:
        """What the bot showed in ``channel`` (in the thread ``thread_ts`` when given), in order: successful
        ``chat.postMessage`` calls and finished streams (``chat.stream``: ``text`` and ``blocks`` as shown,
        ``pieces`` as streamed, ``result["ts"]``)."""
        with self.lock:
            return [c for c in self.calls if c.method in {"chat.postMessage", "chat.stream"} and c.ok
                    and c.params.get("channel") == channel
                    and (thread_ts is None or c.params.get("thread_ts") == thread_ts)]

    def wait_for(self, predicate: Callable[["SlackStandin"], Any], timeout: float = 15) -> Any:
        """Wait until ``predicate(self)`` is truthy and return it.

        Raises:
            AssertionError: after ``timeout`` seconds, with the methods called so far.
        """
        return self.wait_until(lambda: predicate(self), timeout,
                               lambda: f"calls so far: {[c.method for c in self.calls]}", poll=0.05)

    def _record(self, call: Call) -> None:
        self.record(self.calls, call)

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
        with self.lock:
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
        with self.lock:
            return handler(p)

    # -- response_url --------------------------------------------------------------------------------
    async def _response(self, request: web.Request) -> web.Response:
        body = await request.read()
        try:
            params = json.loads(body) if body else {}
        except ValueError:
            params = {"_raw": body.decode(errors="replace")}
        status = self.response_url_status
        if status == 200 and isinstance(params.get("blocks"), list):
            problem = block_problem(params["blocks"])
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
                    with self.lock:
                        self.socket_acks.append(data)
                        self.lock.notify_all()
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
