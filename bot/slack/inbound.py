"""Slack payloads to the parts of an :class:`app.inbound.InboundMessage` (pure functions): the plain text
the agent reads, who is mentioned, and the kind of conversation.

Slack sends ``<@U123>`` for mentions, ``<#C123|general>`` for channels, ``<https://x|label>`` for links,
``<!here>`` for special mentions, and escapes ``&``, ``<`` and ``>``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from app.inbound import ChannelKind

__all__ = ["to_plain", "mentions", "mentioned_users", "event_channel_kind", "command_channel_kind"]

_TOKEN = re.compile(r"<([^<>]*)>")
_USER = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>")
_SPACES = re.compile(r"[ \t]+")
#: The kind of conversation a channel id's first letter tells (``G`` may be a private channel or a group DM).
_KIND_OF_ID: dict[str, ChannelKind] = {"D": "dm", "C": "channel"}


def mentions(text: str, user_id: str) -> bool:
    """True when ``text`` mentions ``user_id`` (``<@U123>`` or ``<@U123|name>``)."""
    if not text or not user_id:
        return False
    return re.search(rf"<@{re.escape(user_id)}(\|[^>]*)?>", text) is not None


def mentioned_users(texts: Iterable[str], bot_user_id: str = "") -> list[str]:
    """The Slack user ids mentioned (``<@U123>``, ``<@U123|name>``) in ``texts``, in order, without
    repeats and without ``bot_user_id``. Never raises; non-strings are skipped."""
    found: dict[str, None] = {}
    for text in texts:
        if isinstance(text, str):
            for uid in _USER.findall(text):
                if uid != bot_user_id:
                    found.setdefault(uid)
    return list(found)


def to_plain(text: str, bot_user_id: str = "", resolved: Mapping[str, str] | None = None) -> str:
    """``text`` without Slack mark-up: the bot's own mentions removed, other mentions as ``resolved[id]``
    (what the adapter looked up: the person's e-mail or ``@Display Name``) or else ``@name``,
    channels as ``#name``, links as ``label (url)`` or the bare URL, entities unescaped, spaces collapsed.

    Never raises; ``None`` or non-strings give ``""``.
    """
    if not isinstance(text, str) or not text:
        return ""

    def repl(m: re.Match[str]) -> str:
        inner = m.group(1)
        target, _, label = inner.partition("|")
        if target.startswith("@"):
            uid = target[1:]
            if bot_user_id and uid == bot_user_id:
                return ""
            if resolved and resolved.get(uid):
                return resolved[uid]
            return f"@{label or uid}"
        if target.startswith("#"):
            return f"#{label or target[1:]}"
        if target.startswith("!"):
            name = target[1:].split("^", 1)[0]
            if name.startswith("subteam"):
                return f"@{label.lstrip('@') or 'group'}"
            if name.startswith("date"):
                return label or ""
            return f"@{label or name}"
        if label and label != target and not target.startswith("mailto:"):
            return f"{label} ({target})"
        return label or target.removeprefix("mailto:")

    out = _TOKEN.sub(repl, text)
    out = out.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    lines = [_SPACES.sub(" ", line).strip() for line in out.splitlines()]
    return "\n".join(line for line in lines if line).strip()


def event_channel_kind(event: Mapping[str, object]) -> ChannelKind:
    """``"dm"``, ``"group"`` or ``"channel"`` for a message event, "" when it cannot be told.

    Slack's ``channel_type``: ``im`` is a DM, ``mpim`` a group DM, ``channel`` and ``group`` (a private
    channel, in Slack's old naming) are channels. ``app_mention`` has no ``channel_type``: the channel id
    says it for ``D`` (DM) and ``C`` (channel); a ``G`` id may be a private channel or a group DM (unknown).
    """
    kind = event.get("channel_type")
    if kind == "im":
        return "dm"
    if kind == "mpim":
        return "group"
    if kind in {"channel", "group"}:
        return "channel"
    channel = str(event.get("channel") or "")
    return _KIND_OF_ID.get(channel[:1], "")


def command_channel_kind(command: Mapping[str, object]) -> ChannelKind:
    """``"dm"``, ``"group"`` or ``"channel"`` for a slash command payload (its ``channel_name``:
    ``directmessage``, ``mpdm-...``, ``privategroup`` or the channel's name); "" without one."""
    name = str(command.get("channel_name") or "")
    channel = str(command.get("channel_id") or "")
    if name == "directmessage" or channel.startswith("D"):
        return "dm"
    if name.startswith("mpdm-"):
        return "group"
    return "channel" if name or channel else ""
