"""What the adapter reads from Slack about a conversation: thread history and user profiles.

- :class:`ThreadHistory` reads a thread with ``conversations.replies`` (at most ``pages`` pages of
  ``limit`` messages), returns the earlier human messages as the agent's history (each with its
  author's ``user`` id and whether that is the requester, :class:`agent.models.HistoryMessage`),
  and tells whether
  the bot already answered in that thread (remembered locally for threads it answered itself; a thread
  found without the bot is remembered for ``absent_ttl`` seconds, so a busy thread the bot is not part
  of costs one Web API call per ``absent_ttl``, not one per message).
- :class:`UserDirectory` reads ``users.info`` (locale, time zone, display name, whether the user is
  a guest or a bot and, with the scope ``users:read.email``, e-mail) and caches it per process for an
  hour; it resolves the people mentioned in a message (``<@U123>``) to :class:`app.inbound.Mention`
  values. A guest is a user Slack marks ``is_restricted`` / ``is_ultra_restricted`` (or
  ``is_stranger``), or one whose ``team_id`` is not this workspace's (Slack Connect) unless both
  belong to the same Enterprise Grid organisation; guests see public pages only (issue 11).

A Web API failure here never stops an answer: it is logged and the caller gets less context.
"""

from __future__ import annotations

import asyncio
import contextlib

import logging
import time
from dataclasses import dataclass
from typing import Any

from cachetools import FIFOCache, TTLCache
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from agent.models import HistoryMessage
from app.inbound import AudienceMember, Mention

from .client import api_error_code
from .inbound import mentioned_users, to_plain

__all__ = ["ThreadHistory", "ThreadInfo", "UserDirectory", "UserProfile", "HUMAN_SUBTYPES"]

log = logging.getLogger(__name__)

#: Message subtypes written by people (others are joins, edits, bot posts...).
HUMAN_SUBTYPES = frozenset({None, "thread_broadcast", "file_share", "me_message"})

MAX_HISTORY = 10


@dataclass(frozen=True, slots=True)
class ThreadInfo:
    """A thread as the agent needs it.

    Attributes:
        history: earlier messages by people, oldest first, as plain text with their author (at most 10);
            ``from_requester`` is True only for messages whose ``user`` is the requester.
        bot_participated: whether this bot posted in the thread.
        ok: False when Slack could not be read (``history`` is then empty).
    """

    history: tuple[HistoryMessage, ...] = ()
    bot_participated: bool = False
    ok: bool = True


class ThreadHistory:
    """Thread history and participation (see the module docstring).

    Args:
        client: the Web API client.
        limit: messages a ``conversations.replies`` page (Slack allows up to 1,000; 100 is typical).
        pages: at most this many pages are read for one thread.
        remember: how many answered threads are remembered locally.
        absent_ttl: seconds a thread read without the bot in it is taken as still without it.
        users: resolves the mentions in earlier messages (``<@U123>`` -> e-mail or ``@Name``, as in the
            message being answered); None leaves them as ``@name``.
    """

    def __init__(self, client: AsyncWebClient, limit: int = 100, pages: int = 3, remember: int = 10_000,
                 absent_ttl: float = 120.0, users: "UserDirectory | None" = None) -> None:
        self.client = client
        self.users = users
        self.limit = limit
        self.pages = pages
        self.remember = remember
        self.absent_ttl = absent_ttl
        self._answered: FIFOCache[tuple[str, str], float] = FIFOCache(maxsize=remember)  # key -> when (time.time())
        self._absent: TTLCache[tuple[str, str], bool] = TTLCache(maxsize=remember, ttl=absent_ttl, timer=time.monotonic)
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    @contextlib.asynccontextmanager
    async def lock(self, channel: str, thread_ts: str):
        """Serialise work on one thread (e.g. deciding whether the bot belongs in it) within this process."""
        key = (channel, thread_ts)
        lock = self._locks.setdefault(key, asyncio.Lock())
        try:
            async with lock:
                yield
        finally:
            if not lock.locked() and not getattr(lock, "_waiters", None):
                self._locks.pop(key, None)

    def mark_answered(self, channel: str, thread_ts: str) -> None:
        """Remember that the bot posted in this thread."""
        key = (channel, thread_ts)
        self._absent.pop(key, None)
        self._answered[key] = time.time()

    def _mark_absent(self, channel: str, thread_ts: str) -> None:
        key = (channel, thread_ts)
        self._absent[key] = True

    def known_absent(self, channel: str, thread_ts: str) -> bool:
        """True when the thread was read lately and the bot was not in it (see ``absent_ttl``)."""
        return (channel, thread_ts) in self._absent

    def known_answered(self, channel: str, thread_ts: str) -> bool:
        """True when this process posted in the thread (False means "unknown", not "no")."""
        return (channel, thread_ts) in self._answered

    async def read(self, channel: str, thread_ts: str, before_ts: str, bot_user_id: str = "",
                   bot_id: str = "", requester: str = "") -> ThreadInfo:
        """Read the thread ``thread_ts`` of ``channel`` up to (not including) the message ``before_ts``.

        ``requester`` is the Slack user id of the person being answered: a message counts as theirs
        only when its ``user`` is exactly that id (an empty ``requester`` owns nothing).
        Never raises: a Web API error gives ``ThreadInfo(ok=False)`` with what is known locally.
        """
        messages: list[dict] = []
        cursor = None
        try:
            for _ in range(self.pages):
                # (slack_sdk leaves out the arguments that are None: the first page is asked without a cursor)
                resp = await self.client.conversations_replies(channel=channel, ts=thread_ts, limit=self.limit,
                                                               cursor=cursor or None)
                page: list[Any] = resp.get("messages") or []
                messages.extend(m for m in page if isinstance(m, dict))
                cursor = (resp.get("response_metadata") or {}).get("next_cursor")
                if not cursor or not resp.get("has_more", bool(cursor)):
                    break
        except SlackApiError as exc:
            log.warning("conversations.replies failed for thread %s in %s: %s", thread_ts, channel, api_error_code(exc))
            return ThreadInfo((), self.known_answered(channel, thread_ts), ok=False)
        except Exception as exc:  # noqa: BLE001 - a network failure must not stop the answer
            log.warning("conversations.replies failed for thread %s in %s: %s", thread_ts, channel, exc)
            return ThreadInfo((), self.known_answered(channel, thread_ts), ok=False)
        participated = self.known_answered(channel, thread_ts)
        history: list[HistoryMessage] = []
        resolved: dict[str, str] = {}
        if self.users is not None:
            earlier = [m.get("text", "") for m in messages if not m.get("bot_id") and _ts(m.get("ts")) < _ts(before_ts)]
            resolved = {m.user_id: m.as_text
                        for m in await self.users.mentions(mentioned_users(earlier[-MAX_HISTORY:], bot_user_id))}
        for m in messages:
            if (bot_user_id and m.get("user") == bot_user_id) or (bot_id and m.get("bot_id") == bot_id):
                participated = True
                continue
            if m.get("bot_id") or m.get("subtype") not in HUMAN_SUBTYPES:
                continue
            if _ts(m.get("ts")) >= _ts(before_ts):
                continue
            text = to_plain(m.get("text", ""), bot_user_id, resolved)
            if text:
                author = str(m.get("user") or "")
                history.append(HistoryMessage(text, author, bool(requester) and author == requester))
        if participated:
            self.mark_answered(channel, thread_ts)
        else:
            self._mark_absent(channel, thread_ts)
        return ThreadInfo(tuple(history[-MAX_HISTORY:]), participated)


def _ts(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


@dataclass(frozen=True, slots=True)
class UserProfile:
    """A user's locale (``en-US``), IANA time zone (``Europe/Paris``), display name, e-mail ("" when
    Slack did not give one: the scope ``users:read.email`` is needed), whether they are a guest or
    from another organisation (``is_guest``, see the module docstring) and whether they are a bot."""

    locale: str = "en"
    timezone: str = "UTC"
    name: str = ""
    email: str = ""
    is_guest: bool = False
    is_bot: bool = False


class UserDirectory:
    """``users.info`` with an in-memory cache per process (``ttl`` seconds, at most ``size`` users).

    Attributes:
        home_team, home_enterprise: this workspace's team id and Enterprise Grid id (``auth.test``, set
            by :meth:`bot.slack.bot.SlackBot.check_auth` or read on first need); a user of another
            team is a guest. While they are unknown (``auth.test`` failed) every user counts as a guest.
    """

    def __init__(self, client: AsyncWebClient, ttl: float = 3600.0, size: int = 5000) -> None:
        self.client = client
        self.ttl = ttl
        self.size = size
        self.home_team = ""
        self.home_enterprise = ""
        self.workspace_url = ""
        self._cache: TTLCache[str, UserProfile] = TTLCache(maxsize=size, ttl=ttl, timer=time.monotonic)

    async def _home(self) -> str:
        if not self.home_team:
            try:
                resp = await self.client.auth_test()
                self.home_team = str(resp.get("team_id") or "")
                self.home_enterprise = str(resp.get("enterprise_id") or "")
                self.workspace_url = self.workspace_url or str(resp.get("url") or "")
            except Exception as exc:  # noqa: BLE001 - unknown home: everyone is a guest (fail closed)
                log.warning("auth.test failed, so every user counts as a guest for now: %s", api_error_code(exc))
        return self.home_team

    async def workspace(self) -> str:
        """The workspace's web address (``SLACK_WORKSPACE_URL``, else ``auth.test``'s ``url``); "" while
        unknown. Never raises."""
        if not self.workspace_url:
            await self._home()
        return self.workspace_url

    async def team_id(self) -> str:
        """This workspace's team id (``auth.test``, asked once); "" while Slack cannot say. Never raises."""
        return await self._home()

    async def _guest(self, user: dict) -> bool:
        if user.get("is_restricted") or user.get("is_ultra_restricted") or user.get("is_stranger"):
            return True
        home = await self._home()
        if not home:
            return True
        team = str(user.get("team_id") or user.get("team") or "")
        if not team or team == home:
            return False
        enterprise = str((user.get("enterprise_user") or {}).get("enterprise_id") or "")
        return not (enterprise and enterprise == self.home_enterprise)

    async def profile(self, user_id: str) -> UserProfile:
        """The user's profile; defaults (``en``, ``UTC``, no name or e-mail) when Slack cannot say. Never raises."""
        if not user_id:
            return UserProfile()
        try:
            return self._cache[user_id]
        except KeyError:  # never asked, or expired
            pass
        try:
            resp = await self.client.users_info(user=user_id, include_locale=True)
            user = resp.get("user") or {}
            about = user.get("profile") or {}
            name = about.get("display_name") or about.get("real_name") or user.get("real_name") or user.get("name")
            bot = bool(user.get("is_bot")) or user.get("id") == "USLACKBOT"
            guest = False if bot else await self._guest(user)
            prof = UserProfile(locale=str(user.get("locale") or "en"), timezone=str(user.get("tz") or "UTC"),
                               name=str(name or ""), email=str(about.get("email") or "").strip(),
                               is_guest=guest, is_bot=bot)
            if not bot and not self.home_team:
                return prof  # not cached: the guest check is tried again once auth.test answers
        except SlackApiError as exc:
            log.warning("users.info failed for %s: %s", user_id, api_error_code(exc))
            prof = UserProfile()
        except Exception as exc:  # noqa: BLE001 - a profile is a nicety
            log.warning("users.info failed for %s: %s", user_id, exc)
            prof = UserProfile()
        self._cache[user_id] = prof
        return prof

    async def channel_members(self, channel: str, limit: int) -> tuple[AudienceMember, ...] | None:
        """The people of ``channel`` (``conversations.members``, then ``users.info`` for each, cached),
        bots left out: for ``CHANNEL_ACCESS=members``. None when the channel has more than ``limit``
        people or the listing failed (the caller then uses public pages only). Never raises."""
        ids: list[str] = []
        cursor = None
        try:
            while True:
                kwargs: dict = {"channel": channel, "limit": 200}
                if cursor:
                    kwargs["cursor"] = cursor
                resp = await self.client.conversations_members(**kwargs)
                ids.extend(str(m) for m in resp.get("members") or [])
                if len(ids) > limit + 20:  # bots are a few of them; a crowd is public anyway
                    return None
                cursor = (resp.get("response_metadata") or {}).get("next_cursor")
                if not cursor:
                    break
        except Exception as exc:  # noqa: BLE001 - a failed listing means public pages only
            log.warning("conversations.members failed for %s: %s", channel, api_error_code(exc))
            return None
        people = []
        for uid in dict.fromkeys(ids):
            prof = await self.profile(uid)
            if not prof.is_bot:
                people.append(AudienceMember(prof.email, prof.is_guest))
        return tuple(people) if len(people) <= limit else None

    async def mentions(self, user_ids: list[str]) -> tuple[Mention, ...]:
        """The people behind ``user_ids`` (``users.info``, cached), in order: each with the e-mail when
        Slack gives it, else the display name. Never raises; an unknown user keeps only the id."""
        out = []
        for uid in user_ids:
            prof = await self.profile(uid)
            out.append(Mention(uid, prof.name, prof.email))
        return tuple(out)
