"""The platform-neutral inbound message: what every adapter makes of a payload before the agent sees it.

Slack (events, DMs, thread replies, ``/kb``, button follow-ups), Teams, the CLI (``ask``, ``chat``) and
the eval each translate their input into one :class:`InboundMessage`; :func:`app.turns.build_turn` is the
only place that turns it into the agent's :class:`agent.models.Turn`. Adapters resolve platform mark-up
here, not later: ``text`` is plain, and a mention of a person is already that person's e-mail (when the
platform gives one) or ``@Name``; :attr:`InboundMessage.mentions` keeps who was mentioned.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Literal

from agent.models import HistoryMessage

__all__ = ["InboundMessage", "Mention", "AudienceMember", "ChannelKind", "CHANNEL_KINDS", "utc_from_epoch"]

#: Where a message was written: a one-to-one chat with the bot, a group DM / group chat, or a channel.
#: A thread is not a kind: it is :attr:`InboundMessage.thread_id` within any of them.
ChannelKind = Literal["dm", "group", "channel", ""]
CHANNEL_KINDS: frozenset[str] = frozenset({"dm", "group", "channel"})


@dataclass(frozen=True, slots=True)
class Mention:
    """A person mentioned in the message.

    Attributes:
        user_id: the platform's id (Slack ``U123``, Teams ``29:...`` or AAD object id).
        name: the display name ("" when unknown).
        email: the e-mail address ("" when the platform did not give one).
    """

    user_id: str
    name: str = ""
    email: str = ""

    @property
    def as_text(self) -> str:
        """How the mention reads in the plain text: the e-mail, else ``@Name``, else ``@<id>``."""
        return self.email or f"@{self.name or self.user_id}"


@dataclass(frozen=True, slots=True)
class AudienceMember:
    """One person who can read the conversation (for ``CHANNEL_ACCESS=members``).

    Attributes:
        email: their e-mail ("" when the platform gave none: the audience is then public only).
        is_guest: a guest or a person from another organisation (public pages only).
    """

    email: str = ""
    is_guest: bool = False


@dataclass(frozen=True, slots=True)
class InboundMessage:
    """One message as an adapter understood it (see the module docstring).

    Attributes:
        platform: ``"slack"``, ``"teams"``, ``"cli"``, ``"console"`` or ``"eval"``.
        text: the message as plain text, mentions resolved (see :class:`Mention`).
        user_id: the requester's platform id ("" when unknown).
        user_email: the requester's e-mail ("" when unknown).
        channel_id: the conversation's id ("" when none, e.g. the CLI).
        channel_kind: ``"dm"``, ``"group"``, ``"channel"``, or "" when unknown.
        thread_id: the thread or reply chain ("" when none).
        message_id: the platform's id of this very message (Slack ``ts``, Teams activity id); a
            redelivery has the same id. "" when the platform has none (a Slack slash command).
        sent_at: when it was sent, aware; None when unknown (the agent then uses its clock).
        thread_link: the web link of the thread or conversation (Slack's permalink shape, a Teams message
            link), "" when the platform has none; an action may record it (a Jira ticket links its thread).
        history: earlier messages of the thread or conversation, oldest first, with their authors.
        mentions: the people mentioned (other than the bot), in order.
        is_admin: whether the requester may run admin commands (decided by the adapter from its
            settings: ``ADMIN_USER_IDS``, ``TEAMS_ADMIN_IDS``).
        locale: the requester's locale (``en-US``).
        timezone: the requester's IANA zone ("" when unknown: ``DEFAULT_TIMEZONE`` applies).
        is_guest: the requester is a guest or from another organisation (Slack ``is_restricted``,
            ``is_ultra_restricted`` or another team; Teams ``userRole: guest`` or another tenant): public
            pages only (see :mod:`app.access`).
        private_reply: the answer is shown to the requester alone wherever they asked (an ephemeral
            ``/kb`` answer, the assistant pane): their own access applies, as in a DM.
        audience_members: the people (bots excluded) who can read the conversation, when the adapter
            listed them for ``CHANNEL_ACCESS=members``; None when not listed (or the listing failed, or
            the conversation is larger than ``CHANNEL_MEMBERS_MAX``): a channel is then public only.

    Raises:
        ValueError: for an unknown ``channel_kind`` or a naive ``sent_at``.
        TypeError: when ``history`` holds something other than :class:`HistoryMessage`.
    """

    platform: str
    text: str
    user_id: str = ""
    user_email: str = ""
    channel_id: str = ""
    channel_kind: ChannelKind = ""
    thread_id: str = ""
    message_id: str = ""
    sent_at: datetime | None = None
    thread_link: str = ""
    history: tuple[HistoryMessage, ...] = ()
    mentions: tuple[Mention, ...] = ()
    is_admin: bool = False
    locale: str = "en"
    timezone: str = ""
    is_guest: bool = False
    private_reply: bool = False
    audience_members: tuple[AudienceMember, ...] | None = None

    def __post_init__(self) -> None:
        if self.channel_kind and self.channel_kind not in CHANNEL_KINDS:
            raise ValueError(f"channel_kind must be one of {sorted(CHANNEL_KINDS)} or empty, got {self.channel_kind!r}")
        if self.sent_at is not None and self.sent_at.utcoffset() is None:
            raise ValueError("sent_at must be an aware datetime (with a time zone)")
        # a caller may pass lists for the tuple fields: tuple() makes them tuples (a tuple is kept as is)
        object.__setattr__(self, "history", tuple(self.history))
        object.__setattr__(self, "mentions", tuple(self.mentions))
        if self.audience_members is not None:
            object.__setattr__(self, "audience_members", tuple(self.audience_members))
        bad = [h for h in self.history if not isinstance(h, HistoryMessage)]
        if bad:
            raise TypeError(f"InboundMessage.history takes HistoryMessage entries, got {type(bad[0]).__name__}")

    @property
    def mention_emails(self) -> dict[str, str]:
        """User id -> e-mail of the mentioned people whose e-mail is known."""
        return {m.user_id: m.email for m in self.mentions if m.email}


def utc_from_epoch(value: object) -> datetime | None:
    """An epoch time in seconds (``"1700000000.000100"``, Slack's ``ts``) as an aware UTC datetime.

    Returns None for anything that is not a finite, positive number (never raises).
    """
    try:
        seconds = float(value)  # type: ignore[arg-type]  # any object: float()'s TypeError means "not a number"
    except (TypeError, ValueError):
        return None
    if not seconds > 0 or seconds != seconds or seconds > 1e11:
        return None
    return datetime.fromtimestamp(seconds, tz=timezone.utc)
