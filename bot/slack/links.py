"""The web link of a Slack thread, for an action that records where it was asked (a Jira ticket).

``{workspace}/archives/{channel}/p{thread ts without the dot}`` is the shape ``chat.getPermalink``
returns for a thread's first message; the workspace's address is ``SLACK_WORKSPACE_URL`` when set, else
the ``url`` ``auth.test`` answers (asked once, :class:`bot.slack.threads.UserDirectory`), so no call is
made per message.
"""

from __future__ import annotations

import re

__all__ = ["thread_link"]

_TS = re.compile(r"^\d{9,}\.\d{6}$")


def thread_link(workspace_url: str, channel_id: str, thread_ts: str) -> str:
    """The thread's web link, or "" without a workspace address, a channel or a message timestamp."""
    if not (workspace_url.startswith(("https://", "http://")) and channel_id and _TS.match(thread_ts or "")):
        return ""
    return f"{workspace_url.rstrip('/')}/archives/{channel_id}/p{thread_ts.replace('.', '')}"
