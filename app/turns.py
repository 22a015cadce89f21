"""The one place where the agent's :class:`agent.models.Turn` is built (from an :class:`InboundMessage`).

Every producer (Slack events, DMs, thread replies, ``/kb`` and button follow-ups; Teams; ``chatops
ask``/``chat``; the eval) calls :func:`build_turn`, so a field added to the turn is filled for every
platform or for none; ``tests/test_turns.py`` fails when another module outside the tests constructs
a ``Turn``.
"""

from __future__ import annotations

from agent.models import Turn

from .access import AccessPolicy
from .inbound import InboundMessage

__all__ = ["build_turn"]


_DEFAULT_POLICY = AccessPolicy()


def build_turn(msg: InboundMessage, access: AccessPolicy | None = None) -> Turn:
    """The agent's turn for ``msg``: every field copied, the mentions' e-mails as ``Turn.mention_emails``,
    and ``Turn.viewer`` (who will see the answer) from ``access`` (:meth:`AccessPolicy.viewer`; None:
    the defaults, no groups and ``CHANNEL_ACCESS=public``, which can only narrow what is shown).

    Never raises for a valid :class:`InboundMessage`.
    """
    return Turn(
        text=msg.text, history=msg.history, platform=msg.platform, user_id=msg.user_id,
        channel_id=msg.channel_id, thread_id=msg.thread_id, is_admin=msg.is_admin, locale=msg.locale,
        timezone=msg.timezone, message_id=msg.message_id, sent_at=msg.sent_at,
        mention_emails=msg.mention_emails, user_email=msg.user_email, channel_kind=msg.channel_kind,
        viewer=(access or _DEFAULT_POLICY).viewer(msg), thread_link=msg.thread_link,
    )
