"""A stand-in Bot Connector service on 127.0.0.1 (what an activity's ``serviceUrl`` points at).

It answers the Connector REST API the way Teams' service does (v3: send to a conversation, reply
to an activity, update an activity) with ``{"id": ...}`` bodies, records every call (method, path,
decoded conversation id, JSON body), and can fail the next calls with given statuses (e.g. 429
with ``Retry-After``, 503) to exercise retries: ``failures`` is a list, one entry per coming call,
``None`` to let that call through. A message that shows nothing (neither ``text`` nor
``attachments``) gets 400 ``BadArgument``, as from the service.

Streamed messages (an activity with a ``streaminfo`` entity) are checked against the streaming
protocol as the service enforces it: personal chats only (else 403 ``ContentStreamNotAllowed``);
informative and streaming updates are ``typing`` activities with a ``streamSequence`` that grows
by one, the first without ``streamId`` (its answer's id is the stream's id), the others with it;
informative updates only before the text; each streaming text starts with the one before; the
final one is a ``message`` without a sequence, after which the stream takes nothing more (all 400
``BadArgument`` otherwise). ``streams`` keeps each stream's accepted activities in order.

It also answers roster look-ups (``GET /v3/conversations/{id}/members/{member}``, what
``TeamsInfo.get_member`` calls) from ``members`` (member id -> account: ``name``, ``email``...; an
unknown member gets 404 like Teams; a member may also be looked up by its ``userPrincipalName`` or
``email``, as Teams allows). Look-ups are recorded in ``lookups``, not ``calls``, and are never failed by
``failures`` (which count the replies and updates a test sequences).

Personal chats the bot opens (``POST /v3/conversations``, what ``CloudAdapter.create_conversation``
sends: one member, the tenant) are recorded in ``created``; a member the roster does not know gets 403
like a user who does not have the app. ``upload_url(name)`` stands for the OneDrive upload session a
file consent card's ``accept`` carries: ``PUT`` there with ``Content-Range`` stores the bytes in ``uploads``.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from tests.standins.base import Handler, StandIn

__all__ = ["ConnectorStandIn", "Call"]

_PATH = re.compile(r"^/v3/conversations/([^/]+)/activities(?:/([^/?]+))?")
_MEMBER = re.compile(r"^/v3/conversations/([^/]+)/members/([^/?]+)")
_CREATE = re.compile(r"^/v3/conversations/?$")
_UPLOAD = re.compile(r"^/upload/([^/?]+)$")


@dataclass
class Call:
    """One recorded Connector API call."""

    method: str
    path: str
    conversation_id: str
    activity_id: str | None
    body: dict[str, Any]
    #: the id the stand-in answered with (``{"id": ...}``), None when it failed the call
    response_id: str | None = None

    def card_text(self) -> str:
        """The text of every ``TextBlock`` in the message's Adaptive Cards, one per line."""
        lines: list[str] = []

        def walk(node: Any) -> None:
            if isinstance(node, dict):
                if node.get("type") == "TextBlock":
                    lines.append(str(node.get("text", "")))
                for v in node.values():
                    walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)

        for att in self.body.get("attachments") or []:
            if att.get("contentType") == "application/vnd.microsoft.card.adaptive":
                walk(att.get("content"))
        return "\n".join(lines)

    def shown(self) -> str:
        """What the user reads: the message's ``text`` and its cards' text."""
        return "\n".join(x for x in (self.body.get("text") or "", self.card_text()) if x)


class _Handler(Handler):
    standin: ConnectorStandIn

    def _handle(self) -> None:
        stand_in = self.standin
        raw = self.body()
        try:
            body = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            body = {"_raw": raw.decode(errors="replace")}
        m = _PATH.match(self.path)
        if not m:
            return self._send(404, {"error": {"code": "NotFound", "message": self.path}})
        call = Call(self.command, self.path, unquote(m.group(1)), unquote(m.group(2)) if m.group(2) else None, body)
        stand_in.record(stand_in.calls, call)
        if body.get("type") == "message" and not body.get("text") and not body.get("attachments"):
            # what the Bot Connector answers for a message that shows nothing
            return self._send(400, {"error": {"code": "BadArgument",
                                              "message": "Activity must have text or attachments"}})
        info = next((e for e in body.get("entities") or [] if isinstance(e, dict)
                     and e.get("type") == "streaminfo"), None)
        with stand_in.lock:
            refused = stand_in._check_stream(body, info) if info is not None else None
            if refused is not None:
                status, code, message = refused
                return self._send(status, {"error": {"code": code, "message": message}})
            failure = stand_in.failures.pop(0) if stand_in.failures else None
            if failure is not None:
                status, headers = failure
                return self._send(status, {"error": {"code": "ServiceError", "message": f"HTTP {status}"}},
                                  headers)
            call.response_id = call.activity_id if self.command == "PUT" else f"reply-{next(stand_in._ids)}"
            if info is not None:
                stream_id = info.get("streamId") or call.response_id
                stand_in.streams.setdefault(stream_id, []).append({**info, "text": body.get("text", "")})
                if info.get("streamType") == "final":
                    stand_in._finished.add(stream_id)
        return self._send(200, {"id": call.response_id})

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        stand_in = self.standin
        m = _MEMBER.match(self.path)
        if not m:
            return self._send(404, {"error": {"code": "NotFound", "message": self.path}})
        member_id = unquote(m.group(2))
        stand_in.record(stand_in.lookups, Call("GET", self.path, unquote(m.group(1)), member_id, {}))
        account = stand_in.members.get(member_id) or next(
            (a for a in stand_in.members.values()
             if member_id.lower() in {str(a.get("email", "")).lower(), str(a.get("userPrincipalName", "")).lower()}),
            None)
        if account is not None and member_id not in stand_in.members:
            member_id = next(k for k, v in stand_in.members.items() if v is account)
        if account is None:
            return self._send(404, {"error": {"code": "MemberNotFoundInConversation",
                                              "message": "The member could not be found"}})
        return self._send(200, {"id": member_id, **account})

    def do_POST(self) -> None:  # noqa: N802
        stand_in = self.standin
        if not _CREATE.match(self.path):
            return self._handle()
        body = json.loads(self.body() or b"{}")
        members = [m.get("id") for m in body.get("members") or []]
        if len(members) != 1 or body.get("isGroup"):
            return self._send(400, {"error": {"code": "BadArgument", "message": "one member, not a group"}})
        if members[0] not in stand_in.members or members[0] in stand_in.without_app:  # the user lacks the app
            return self._send(403, {"error": {"code": "Forbidden", "message": "The bot is not installed for "
                                                                             "the user"}})
        stand_in.record(stand_in.created, body)
        return self._send(201, {"id": f"a:personal-{members[0]}"})

    def do_PUT(self) -> None:  # noqa: N802
        stand_in = self.standin
        m = _UPLOAD.match(self.path)
        if not m:
            return self._handle()
        data = self.body()
        expected = f"bytes 0-{len(data) - 1}/{len(data)}"
        if self.headers.get("content-range") != expected:
            return self._send(400, {"error": {"code": "invalidRange", "message": "Content-Range"}})
        if stand_in.upload_status >= 400:
            return self._send(stand_in.upload_status, {"error": {"code": "generalException"}})
        stand_in.uploads[unquote(m.group(1))] = data
        return self._send(201, {"id": "file-1", "name": unquote(m.group(1)), "size": len(data)})

    def _send(self, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
        self.reply_json(status, body, headers)


class ConnectorStandIn(StandIn):
    """``with ConnectorStandIn() as c:``; ``c.url`` is the ``serviceUrl`` to put in activities."""

    handler = _Handler

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[Call] = []
        self.lookups: list[Call] = []
        self.members: dict[str, dict[str, Any]] = {}
        self.created: list[dict[str, Any]] = []  # bodies of POST /v3/conversations that opened a chat
        self.uploads: dict[str, bytes] = {}  # file name -> bytes PUT to upload_url(name)
        self.upload_status = 201
        self.without_app: set[str] = set()  # member ids whose personal chat the bot may not open (no app)
        self.failures: list[tuple[int, dict[str, str]] | None] = []
        self._ids = itertools.count(1)
        self.streams: dict[str, list[dict[str, Any]]] = {}
        self._finished: set[str] = set()
        self.bind()
        self.url = f"{self.origin}/"
    def _check_stream(self, body: dict[str, Any], info: dict[str, Any]) -> tuple[int, str, str] | None:
        """Why the service would refuse this stream activity (status, code, message), or None."""
        if (body.get("conversation") or {}).get("conversationType") != "personal":
            return 403, "ContentStreamNotAllowed", "streaming is only supported in personal chats"
        kind, stream_id, seq = info.get("streamType"), info.get("streamId"), info.get("streamSequence")
        past = self.streams.get(stream_id, []) if stream_id else []
        if stream_id and (not past or stream_id in self._finished):
            return 400, "BadArgument", f"unknown or finished stream {stream_id!r}"
        if kind == "final":
            if body.get("type") != "message" or not stream_id or seq is not None:
                return 400, "BadArgument", "a final stream message is a message with streamId and no streamSequence"
            return None
        if kind not in ("informative", "streaming") or body.get("type") != "typing":
            return 400, "BadArgument", "stream updates are typing activities, informative or streaming"
        if not isinstance(seq, int) or seq != (past[-1]["streamSequence"] + 1 if past else 1):
            return 400, "BadArgument", f"streamSequence {seq!r} out of order"
        texts = [p["text"] for p in past if p["streamType"] == "streaming"]
        if kind == "informative" and texts:
            return 400, "BadArgument", "informative updates come before the streamed text"
        if kind == "streaming" and texts and not str(body.get("text", "")).startswith(texts[-1]):
            return 400, "BadArgument", "streamed text must start with the text streamed before"
        return None

    def upload_url(self, name: str) -> str:
        """The upload URL Teams would put in a file consent card's ``accept`` (``uploadInfo.uploadUrl``)."""
        return f"{self.url}upload/{name}"

    def messages(self) -> list[Call]:
        """Recorded message activities (replies, sends and updates), typing excluded."""
        return [c for c in self.calls if c.body.get("type") == "message"]

    def typing(self) -> list[Call]:
        """Recorded typing indicators."""
        return [c for c in self.calls if c.body.get("type") == "typing"]
