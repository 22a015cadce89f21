"""Who a Teams user is: name and e-mail from the conversation's roster, cached per process.

:class:`MemberDirectory` asks the Bot Connector for one member (``TeamsInfo.get_member``:
``GET /v3/conversations/{id}/members/{member}``, or the team's roster in a channel) and keeps the
answer ``ttl`` seconds. A failure (the member left, the connector is down) is logged, cached like an
answer for ``failure_ttl`` seconds, and gives a :class:`Member` without an e-mail: a lookup never
stops an answer.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from dataclasses import dataclass

from botbuilder.core import TurnContext
from botbuilder.core.teams import TeamsInfo

__all__ = ["MemberDirectory", "Member"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Member:
    """A member's display name and e-mail ("" when the roster gave none)."""

    name: str = ""
    email: str = ""


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
        self._cache: OrderedDict[str, tuple[float, Member]] = OrderedDict()

    async def get(self, turn_context: TurnContext, member_id: str, name: str = "") -> Member:
        """The member ``member_id`` (a ``29:`` id or an AAD object id) of the activity's conversation.

        ``name`` is the name the activity already gave (kept when the roster has none). Never raises.
        """
        if not member_id:
            return Member(name)
        hit = self._cache.get(member_id)
        now = time.monotonic()
        if hit and hit[0] > now:
            return hit[1] if hit[1].name or not name else Member(name, hit[1].email)
        try:
            account = await TeamsInfo.get_member(turn_context, member_id)
            # only ``email``: a userPrincipalName looks like an address but need not receive mail
            email = str(getattr(account, "email", "") or "").strip()
            member = Member(str(getattr(account, "name", "") or name), email)
            until = now + self.ttl
        except Exception as exc:  # noqa: BLE001 - a roster look-up is a nicety; the SDK raises assorted errors
            log.info("Teams: could not look up member %s: %s", member_id, type(exc).__name__)
            member = Member(name)
            until = now + self.failure_ttl
        self._cache[member_id] = (until, member)
        self._cache.move_to_end(member_id)
        while len(self._cache) > self.size:
            self._cache.popitem(last=False)
        return member
