"""The web link of a Teams conversation, for an action that records where it was asked (a Jira ticket).

A channel thread's conversation id ``19:...@thread.tacv2;messageid=<id>`` links to
``https://teams.microsoft.com/l/message/<channel id>/<id>``; a group chat (``19:...``) to
``https://teams.microsoft.com/l/chat/<id>/conversations``; a personal chat with the bot (``a:...``) has
no link others could open.
"""

from __future__ import annotations

from urllib.parse import quote

__all__ = ["conversation_link"]


def conversation_link(conversation_id: str) -> str:
    """The conversation's web link, or "" when it has none (see the module docstring)."""
    if not conversation_id.startswith("19:"):
        return ""
    base, _, message = conversation_id.partition(";messageid=")
    if message:
        return f"https://teams.microsoft.com/l/message/{quote(base, safe='')}/{quote(message, safe='')}"
    return f"https://teams.microsoft.com/l/chat/{quote(base, safe='')}/conversations"
