"""The one place where the agent's :class:`agent.models.Turn` is built (from an :class:`InboundMessage`).

Every producer (Slack events, DMs, thread replies, ``/kb`` and button follow-ups; Teams; ``chatops
ask``/``chat``; the eval) calls :func:`build_turn`, so a field added to the turn is filled for every
platform or for none; ``tests/test_turns.py`` fails when another module outside the tests constructs
a ``Turn``.
"""

from __future__ import annotations

from agent.models import Turn
from connectors.access import Viewer, user

from .inbound import InboundMessage

__all__ = ["build_turn", "default_viewer"]


def default_viewer(msg: InboundMessage) -> Viewer:
    """A conservative viewer until the real one is built (issue 11): public pages only, except in a DM
    with a known e-mail, where the asker's own ``user:<email>`` is added (no groups yet).

    Channels, group chats and an unknown kind (the CLI, the eval) see public pages only.

    TODO(issue 11, helper C): replace with ``app.access.viewer_for`` (groups, guests, CHANNEL_ACCESS).
    """
    if msg.channel_kind == "dm" and (msg.user_email or "").strip():
        return Viewer.person([user(msg.user_email)], audience="dm")
    return Viewer.public()


def build_turn(msg: InboundMessage) -> Turn:
    """The agent's turn for ``msg``: every field copied, the mentions' e-mails as ``Turn.mention_emails``,
    and ``Turn.viewer`` (who will see the answer; :func:`default_viewer`).

    Never raises for a valid :class:`InboundMessage`.
    """
    return Turn(
        text=msg.text, history=msg.history, platform=msg.platform, user_id=msg.user_id,
        channel_id=msg.channel_id, thread_id=msg.thread_id, is_admin=msg.is_admin, locale=msg.locale,
        timezone=msg.timezone, message_id=msg.message_id, sent_at=msg.sent_at,
        mention_emails=msg.mention_emails, user_email=msg.user_email, channel_kind=msg.channel_kind,
        viewer=default_viewer(msg),
    )
