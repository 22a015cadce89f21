"""Who calls a tool and from where: the context every tool receives."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.access import Viewer

from .invites import Courier
from .outbox import Outbox

__all__ = ["ToolContext"]


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Who is calling and from where, for permissions, per-user defaults and side effects.

    Attributes:
        user_id: the platform's id of the caller (the requester of an action).
        is_admin: whether the caller may use admin tools.
        timezone: the caller's IANA zone.
        platform: ``slack``, ``teams``, ``cli``... ("" when unknown).
        channel_id: the conversation the request came from ("" when none).
        user_email: the caller's e-mail address ("" when unknown).
        viewer: who will see the result (:class:`core.access.Viewer`, from ``Turn.viewer``):
            ``knowledge.search`` reads only what it may read and raises ``ValueError`` without one. It is
            never a tool argument, so a language model cannot choose it.
        outbox: where messages for later delivery go (:class:`tools.outbox.Outbox`, the state store),
            or None when there is none (tools that need it then fail without side effects).
        courier: delivers direct messages with a file on the requester's platform
            (:class:`tools.invites.Courier`, implemented by the adapter), or None where there is none (the CLI).
        extra: anything else a tool needs.
    """

    user_id: str = ""
    is_admin: bool = False
    timezone: str = "UTC"
    platform: str = ""
    channel_id: str = ""
    user_email: str = ""
    viewer: Viewer | None = None
    outbox: Outbox | None = None
    courier: Courier | None = None
    extra: dict[str, Any] = field(default_factory=dict)
