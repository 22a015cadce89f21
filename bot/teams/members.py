"""Who a Teams user is: name and e-mail from the conversation's roster, cached per process.

:class:`MemberDirectory` asks the Bot Connector for one member (``TeamsInfo.get_member``:
``GET /v3/conversations/{id}/members/{member}``, or the team's roster in a channel) and keeps the
answer ``ttl`` seconds. A failure (the member left, the connector is down) is logged, cached like an
answer for ``failure_ttl`` seconds, and gives a :class:`Member` without an e-mail: a lookup never
stops an answer (and such a member sees public pages only).

A member is a guest (public pages only, issue 11) when the roster says ``userRole: guest`` or their
``tenantId`` is not the conversation's tenant (another organisation). :meth:`MemberDirectory.conversation_members`
lists a conversation's people (``TeamsInfo.get_paged_members``: the team's roster in a channel) for
``CHANNEL_ACCESS=members``.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass

from botbuilder.core import TurnContext
from botbuilder.core.teams import TeamsInfo
from cachetools import TLRUCache

from app.inbound import AudienceMember

__all__ = ["MemberDirectory", "Member", "home_tenant"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Member:
    """A member's display name, e-mail ("" when the roster gave none), roster role (``userRole``:
    ``user``, ``guest``...) and tenant id ("" when unknown)."""

    name: str = ""
    email: str = ""
    role: str = ""
    tenant: str = ""

    def is_guest(self, home_tenant: str) -> bool:
        """A guest or someone from another tenant than ``home_tenant`` (the conversation's)."""
        if self.role.lower() in {"guest", "anonymous"}:
            return True
        return bool(self.tenant and home_tenant and self.tenant.lower() != home_tenant.lower())


def home_tenant(turn_context: TurnContext) -> str:
    """The tenant the conversation belongs to ("" when the activity does not say)."""
    activity = turn_context.activity
    tenant = getattr(activity.conversation, "tenant_id", None) if activity.conversation else None
    if not tenant and isinstance(activity.channel_data, dict):
        tenant = (activity.channel_data.get("tenant") or {}).get("id")
    return str(tenant or "")


def _member(account, name: str = "") -> Member:
    # only ``email``: a userPrincipalName looks like an address but need not receive mail
    return Member(str(getattr(account, "name", "") or name), str(getattr(account, "email", "") or "").strip(),
                  str(getattr(account, "user_role", "") or ""), str(getattr(account, "tenant_id", "") or ""))


class MemberDirectory:
    """Roster look-ups with an in-memory cache (see the module docstring).

    Args:
        ttl: seconds an answer is kept.
        failure_ttl: seconds a failed look-up is not retried.
        size: at most this many members are kept.
    """

    def __init__(self, ttl: float = 3600.0, failure_ttl: float = 300.0, size: int = 5000) -> None:
        self.ttl = ttl
        self.failure_ttl = failure_ttl
        self.size = size
        # (found, member): a roster answer is kept ``ttl`` seconds, a failed look-up ``failure_ttl``.
        self._cache: TLRUCache[str, tuple[bool, Member]] = TLRUCache(
            maxsize=size, ttu=lambda _key, hit, now: now + (self.ttl if hit[0] else self.failure_ttl),
            timer=time.monotonic)

    async def get(self, turn_context: TurnContext, member_id: str, name: str = "") -> Member:
        """The member ``member_id`` (a ``29:`` id or an AAD object id) of the activity's conversation.

        ``name`` is the name the activity already gave (kept when the roster has none). Never raises.
        """
        if not member_id:
            return Member(name)
        try:
            _found, known = self._cache[member_id]
            return known if known.name or not name else dataclasses.replace(known, name=name)
        except KeyError:  # never looked up, or expired
            pass
        try:
            account = await TeamsInfo.get_member(turn_context, member_id)
            member, found = _member(account, name), True
        except Exception as exc:  # noqa: BLE001 - a roster look-up is a nicety; the SDK raises assorted errors
            log.info("Teams: could not look up member %s: %s", member_id, type(exc).__name__)
            member, found = Member(name), False
        self._cache[member_id] = (found, member)
        return member

    async def conversation_members(self, turn_context: TurnContext, limit: int) -> tuple[AudienceMember, ...] | None:
        """The people of the activity's conversation (the team's roster in a channel), bots left out, or
        None when there are more than ``limit`` or the roster could not be read. Never raises."""
        home = home_tenant(turn_context)
        bot_id = turn_context.activity.recipient.id if turn_context.activity.recipient else ""
        people: list[AudienceMember] = []
        token = None
        try:
            while True:
                page = await TeamsInfo.get_paged_members(turn_context, token, 100)
                for account in page.members or []:
                    if getattr(account, "id", "") == bot_id or str(getattr(account, "id", "")).startswith("28:"):
                        continue
                    m = _member(account)
                    people.append(AudienceMember(m.email, m.is_guest(home)))
                if len(people) > limit:
                    return None
                token = page.continuation_token
                if not token:
                    break
        except Exception as exc:  # noqa: BLE001 - the roster failed: public pages only
            log.info("Teams: could not list the members of the conversation: %s", type(exc).__name__)
            return None
        return tuple(people)
