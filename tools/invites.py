"""The invitation port: direct messages with a file to people of the chat workspace.

The local calendar has no mail server, so it invites attendees where they already are: in a direct
message from the bot with the event's ``.ics`` attached. A tool never talks to a chat platform; it is
given a :class:`Courier` (in :attr:`tools.base.ToolContext.courier`) that the platform adapter
implements (Slack: ``users.lookupByEmail``, ``conversations.open`` and ``files.uploadV2``; Teams:
the roster and a personal chat), and asks it who of the attendees is in the workspace and to deliver.

A tool that invites this way also implements :class:`InvitingTool`, so the preview can say who will
get the invitation before anyone confirms.

The platform's refusals are :class:`tools.errors.DeliveryError` (re-exported here), with a one-line ``reason``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .errors import DeliveryError

__all__ = ["Invitee", "Courier", "InvitingTool", "DeliveryError", "names"]


@dataclass(frozen=True, slots=True)
class Invitee:
    """A person of the workspace an invitation can be delivered to.

    Attributes:
        email: their e-mail address, lower case (the attendee it matched).
        user_id: the platform's id (Slack ``U123``, a Teams user's ``29:...`` id).
        name: their display name ("" when unknown; the e-mail is shown instead).
    """

    email: str
    user_id: str
    name: str = ""

    @property
    def label(self) -> str:
        """How the person is named to the requester: the display name, else the e-mail."""
        return self.name or self.email


@runtime_checkable
class Courier(Protocol):
    """Direct messages with a file, on one platform (the adapter implements it; calls block).

    Attributes:
        platform: ``slack`` or ``teams``: the platform whose actions it serves.
    """

    platform: str

    def find(self, emails: Sequence[str], *, conversation_id: str = "") -> dict[str, Invitee]:
        """The people of the workspace among ``emails``, by lower-case e-mail (absent: not a member);
        ``conversation_id`` is where the request was made (Teams looks people up in its roster).

        Raises:
            DeliveryError: when the platform cannot answer (nobody can be said to be in or out).
        """
        ...

    def send_file(self, invitee: Invitee, *, text: str, filename: str, data: bytes, conversation_id: str = "") -> None:
        """Send ``text`` with the file ``filename`` (``data``) to ``invitee`` in a direct message (Teams: a file
        card the invitee accepts, which puts the file in their OneDrive); ``conversation_id`` as for :meth:`find`.

        Raises:
            DeliveryError: when it was not delivered.
        """
        ...


@runtime_checkable
class InvitingTool(Protocol):
    """An action tool that invites people through a :class:`Courier` when it executes."""

    def invitations(self, args: Any, courier: Courier | None, conversation_id: str = "") -> tuple[str, str] | None:
        """The preview field saying who will get the invitation (``("Invitations", "...")``), or None
        when the action invites nobody this way (``conversation_id``: where it was asked)."""
        ...


def names(items: Sequence[str]) -> str:
    """``Alice``, ``Alice and Bob``, ``Alice, Bob and Carol``."""
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + f" and {items[-1]}"
