"""The link to the chat thread a ticket was asked for in, from the platform-neutral ids the action keeps.

Tools never call a chat platform, so the link is built from the ids: ``platform``, ``channel_id`` and
the thread's id (Slack's ``thread_ts``; Teams' conversation id).

- Slack: ``{workspace}/archives/{channel}/p{ts without the dot}``, the shape ``chat.getPermalink``
  returns for a thread's first message; it needs the workspace's address (``SLACK_WORKSPACE_URL``,
  e.g. ``https://acme.slack.com``), without which there is no link.
- Teams: a channel thread's conversation id ``19:...@thread.tacv2;messageid=<id>`` links to
  ``https://teams.microsoft.com/l/message/<channel id>/<id>``; a group chat (``19:...``) to
  ``https://teams.microsoft.com/l/chat/<id>/conversations``; a personal chat with the bot has no link
  others could open.
"""

from __future__ import annotations

import re
from urllib.parse import quote

__all__ = ["thread_link"]

_SLACK_TS = re.compile(r"^\d{9,}\.\d{6}$")


def thread_link(platform: str, channel_id: str, thread_id: str, *, slack_workspace_url: str = "") -> str:
    """The thread's web link, or "" when it cannot be built (see the module docstring)."""
    if platform == "slack":
        if not (slack_workspace_url and channel_id and _SLACK_TS.match(thread_id or "")):
            return ""
        return f"{slack_workspace_url.rstrip('/')}/archives/{channel_id}/p{thread_id.replace('.', '')}"
    if platform == "teams":
        conv = thread_id or channel_id
        if not conv.startswith("19:"):
            return ""
        base, _, message = conv.partition(";messageid=")
        if message:
            return f"https://teams.microsoft.com/l/message/{quote(base, safe='')}/{quote(message, safe='')}"
        return f"https://teams.microsoft.com/l/chat/{quote(base, safe='')}/conversations"
    return ""
