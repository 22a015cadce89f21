"""The Slack stand-in's nouns: the workspace's ids and the bot's credentials, the scopes each Web API method needs,
the calls it records and its conversations."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

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

BOT_TOKEN = "xoxb-111-222-standinBotTokenDoNotLog"
APP_TOKEN = "xapp-1-A0STANDIN-333-standinAppTokenDoNotLog"
SIGNING_SECRET = "standin-signing-secret-do-not-log-8f3a"


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
