"""Slack message mark-up to the plain text the agent reads (pure functions).

Slack sends ``<@U123>`` for mentions, ``<#C123|general>`` for channels, ``<https://x|label>`` for links,
``<!here>`` for special mentions, and escapes ``&``, ``<`` and ``>``.
"""

from __future__ import annotations

import re

__all__ = ["to_plain", "mentions"]

_TOKEN = re.compile(r"<([^<>]*)>")
_SPACES = re.compile(r"[ \t]+")


def mentions(text: str, user_id: str) -> bool:
    """True when ``text`` mentions ``user_id`` (``<@U123>`` or ``<@U123|name>``)."""
    if not text or not user_id:
        return False
    return re.search(rf"<@{re.escape(user_id)}(\|[^>]*)?>", text) is not None


def to_plain(text: str, bot_user_id: str = "") -> str:
    """``text`` without Slack mark-up: the bot's own mentions removed, other mentions as ``@name``,
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
