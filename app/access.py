"""Who is asking and who will see the answer: the :class:`core.access.Viewer` of every turn.

The rules (issue 11; fail closed throughout):

- The asker's principals are ``user:<e-mail>``, the static groups of ``chatops.yml`` they are listed in
  (``group:chatops/<name>``) and the groups the sources reported (``groups_of``, the state store's).
- An asker without an e-mail, or a guest / someone from another organisation
  (:attr:`app.inbound.InboundMessage.is_guest`), sees public pages only, wherever they ask.
- **The audience decides.** A DM, the assistant pane and an ephemeral ``/kb`` answer
  (``channel_kind == "dm"`` or :attr:`~app.inbound.InboundMessage.private_reply`) use the asker's own
  access. Anything else (a public or private channel, a group DM, a Teams channel or group chat, and a
  conversation whose kind is unknown) follows ``CHANNEL_ACCESS``: ``public`` (the default) uses public
  pages only; ``members`` uses what *every* member may read, when the adapter listed the members
  (:attr:`~app.inbound.InboundMessage.audience_members`, at most ``CHANNEL_MEMBERS_MAX``): public
  pages plus the principals every member has (the intersection of their principal sets). A member
  without an e-mail or a guest member, a listing that failed, or a larger conversation: public only.

**A channel's scope** (``channels:`` of the sources file, :class:`app.config.ChannelConfig`): a
question asked in a listed conversation searches only that channel's ``sources``; the scope rides on the
viewer (:attr:`core.access.Viewer.sources`) down to the stores, which apply it inside their
pre-filter. The same entry's ``reply_in_threads`` says whether thread replies without a mention are
answered there (:meth:`AccessPolicy.answers_thread_replies`).

:class:`AccessPolicy` holds the settings and :func:`app.turns.build_turn` asks it for the viewer;
:class:`ChannelMembersCache` is the port through which the adapters list a conversation's members
(cached with a TTL); :func:`unreadable_citations` re-checks an answer's citations against an audience
("Share in channel").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cachetools import TLRUCache

from core.access import Viewer, group, normalise, user
from connectors.config import STATIC_GROUP_SOURCE

from .config import DEFAULT_CONFIG_FILE, ChannelConfig, load_config
from .inbound import AudienceMember, InboundMessage
from .sources_file import load_sources_config

__all__ = ["viewer_for", "principals_of", "audience_of", "AccessPolicy", "ChannelMembersCache", "MembersFetch",
           "unreadable_citations", "CHANNEL_ACCESS_MODES", "GroupsOf", "access_policy", "static_groups_of"]

log = logging.getLogger(__name__)

#: The values of ``CHANNEL_ACCESS``.
CHANNEL_ACCESS_MODES = ("public", "members")

#: e-mail -> the group principals the sources say it belongs to (the state store's ``groups_of``).
GroupsOf = Callable[[str], frozenset[str]]

#: ``(conversation id, at most N members) -> the members, or None`` (failed, or more than N).
MembersFetch = Callable[[str, int], Awaitable[Sequence[AudienceMember] | None]]


def audience_of(msg: InboundMessage) -> str:
    """``"dm"`` when only the asker will see the answer (a DM, an ephemeral or assistant-pane reply),
    else ``"channel"`` (including a conversation of unknown kind: fail closed)."""
    return "dm" if msg.channel_kind == "dm" or msg.private_reply else "channel"


def principals_of(email: str, *, groups_of: GroupsOf | None, static_groups: Mapping[str, Iterable[str]]) -> frozenset[str]:
    """The principals of the person with ``email``: ``user:<email>``, ``group:chatops/<name>`` for each
    static group listing them, and ``groups_of(email)`` (normalised; a failing ``groups_of`` or a
    malformed group is logged and left out: fewer principals, never more). Empty for no e-mail."""
    e = (email or "").strip().lower()
    if not e:
        return frozenset()
    out = {user(e)}
    out.update(group(STATIC_GROUP_SOURCE, name) for name, members in static_groups.items()
               if e in {str(m).strip().lower() for m in members})
    if groups_of is not None:
        try:
            found = groups_of(e)
        except Exception as exc:  # noqa: BLE001 - the state store may be down: fewer principals, not more
            log.warning("could not read the groups of a user: %s", exc)
            found = frozenset()
        for p in found:
            try:
                out.add(normalise(p))
            except ValueError:
                log.warning("ignored a malformed group principal %r", p)
    return frozenset(out)


def viewer_for(msg: InboundMessage, *, groups_of: GroupsOf | None, static_groups: Mapping[str, Iterable[str]],
               channel_access: str, channel_members: Sequence[AudienceMember] | None = None) -> Viewer:
    """The viewer of the answer to ``msg`` (see the module docstring).

    Args:
        msg: the inbound message (its e-mail, ``is_guest``, ``channel_kind`` and ``private_reply``).
        groups_of: e-mail -> group principals from the sources (None: none known).
        static_groups: the ``groups:`` of ``chatops.yml`` (name -> e-mails).
        channel_access: ``"public"`` or ``"members"``; anything else is taken as ``"public"``.
        channel_members: the conversation's members (``CHANNEL_ACCESS=members``), None when not listed.

    Never raises.
    """
    audience = audience_of(msg)
    if msg.is_guest or not (msg.user_email or "").strip():
        return Viewer.public(audience)
    mine = principals_of(msg.user_email, groups_of=groups_of, static_groups=static_groups)
    if audience == "dm":
        return Viewer(mine, False, "dm")
    if channel_access != "members" or channel_members is None:
        return Viewer.public("channel")
    common = set(mine)
    for m in channel_members:
        if m.is_guest or not (m.email or "").strip():
            return Viewer.public("channel")
        common &= principals_of(m.email, groups_of=groups_of, static_groups=static_groups)
        if not common:
            return Viewer.public("channel")
    return Viewer(frozenset(common), False, "channel")


@dataclass(frozen=True, slots=True)
class AccessPolicy:
    """The access settings of a process: what :func:`app.turns.build_turn` needs to set ``Turn.viewer``.

    Attributes:
        groups_of: e-mail -> group principals from the sources (the state store's ``groups_of``), or None.
        static_groups: the ``groups:`` of ``chatops.yml`` (name -> e-mails, lower case).
        channel_access: ``CHANNEL_ACCESS`` (``public`` or ``members``).
        channel_members_max: ``CHANNEL_MEMBERS_MAX``: larger conversations are public only.
        channels: the ``channels:`` of the sources file (conversation id -> its scope).
    """

    groups_of: GroupsOf | None = None
    static_groups: Mapping[str, frozenset[str]] = field(default_factory=dict)
    channel_access: str = "public"
    channel_members_max: int = 50
    channels: Mapping[str, ChannelConfig] = field(default_factory=dict)

    def scope(self, conversation_id: str) -> ChannelConfig | None:
        """The scope of ``conversation_id`` (None: not listed, every source and the default thread replies).

        A Teams channel thread's conversation id carries its root post (``19:x@thread.tacv2;messageid=17...``):
        the channel's entry (``19:x@thread.tacv2``) applies to each of its threads."""
        if not conversation_id:
            return None
        found = self.channels.get(conversation_id)
        if found is None and ";" in conversation_id:
            found = self.channels.get(conversation_id.split(";", 1)[0])
        return found

    def answers_thread_replies(self, conversation_id: str) -> bool:
        """Whether a reply without a mention in a thread the bot answered in is answered in this
        conversation (``reply_in_threads: answered_threads``, the default) or not (``mention_only``)."""
        scope = self.scope(conversation_id)
        return scope is None or scope.reply_in_threads == "answered_threads"

    def wants_members(self, msg: InboundMessage) -> bool:
        """Whether the adapter should list the conversation's members for ``msg`` (``members`` mode,
        an audience other than the asker, an asker who is no guest and has an e-mail)."""
        return (self.channel_access == "members" and audience_of(msg) == "channel" and not msg.is_guest
                and bool(msg.user_email) and bool(msg.channel_id))

    def viewer(self, msg: InboundMessage) -> Viewer:
        """The viewer of the answer to ``msg`` (:func:`viewer_for` with these settings and
        ``msg.audience_members``; more than ``channel_members_max`` members: public only), scoped to the
        ``sources`` of ``msg.channel_id`` when the sources file lists that conversation. Never raises."""
        members = msg.audience_members
        if members is not None and len(members) > self.channel_members_max:
            members = None
        viewer = viewer_for(msg, groups_of=self.groups_of, static_groups=self.static_groups,
                            channel_access=self.channel_access, channel_members=members)
        scope = self.scope(msg.channel_id)
        return viewer.scoped(scope.sources) if scope is not None else viewer


def access_policy(settings: Any, groups_of: GroupsOf | None = None,
                  static_groups: Mapping[str, frozenset[str]] | None = None) -> AccessPolicy:
    """The policy from the settings (``CHANNEL_ACCESS``, ``CHANNEL_MEMBERS_MAX``), the sources file's
    static groups (unless ``static_groups`` is given) and ``channels:``, read with the ``CHATOPS_SOURCES``
    specs as the index jobs read them (:func:`app.sources_file.load_sources_config`: a channel may name a
    source given there), and ``groups_of``.

    Raises:
        connectors.config_file.ConfigFileError: for an invalid sources file.
        connectors.errors.SourceSpecError: for a malformed ``CHATOPS_SOURCES`` spec.
    """
    cfg = load_sources_config(settings)
    if static_groups is None:
        static_groups = cfg.static_groups()
    return AccessPolicy(groups_of=groups_of, static_groups=dict(static_groups),
                        channel_access=getattr(settings, "channel_access", "public"),
                        channel_members_max=int(getattr(settings, "channel_members_max", 50)),
                        channels=dict(cfg.channels))


def static_groups_of(settings: Any) -> dict[str, frozenset[str]]:
    """The ``groups:`` of the sources file (``CHATOPS_CONFIG``, else ``./chatops.yml`` when it exists).

    Raises:
        connectors.config_file.ConfigFileError: for a missing (explicitly named) or invalid file.
    """
    from pathlib import Path

    path = getattr(settings, "chatops_config", None)
    if path is None and Path(DEFAULT_CONFIG_FILE).is_file():
        path = DEFAULT_CONFIG_FILE
    return load_config(path).static_groups() if path is not None else {}


class ChannelMembersCache:
    """The port through which the adapters list a conversation's members, cached per process.

    ``fetch(conversation_id, limit)`` is the adapter's (Slack ``conversations.members`` + ``users.info``,
    the Teams roster); it returns the human members, or None when the listing failed or the
    conversation has more than ``limit`` members. Answers are kept ``ttl`` seconds (a failure
    ``failure_ttl``), at most ``size`` conversations.
    """

    def __init__(self, fetch: MembersFetch, limit: int = 50, ttl: float = 300.0, failure_ttl: float = 60.0,
                 size: int = 1000) -> None:
        self.fetch = fetch
        self.limit = limit
        self.ttl = ttl
        self.failure_ttl = failure_ttl
        self.size = size
        # A listing is kept ``ttl`` seconds, a failure (None) ``failure_ttl``; least recently used out first.
        self._cache: TLRUCache[str, tuple[AudienceMember, ...] | None] = TLRUCache(
            maxsize=size, ttu=lambda _key, found, now: now + (self.ttl if found is not None else self.failure_ttl),
            timer=time.monotonic)

    async def members(self, conversation_id: str) -> tuple[AudienceMember, ...] | None:
        """The members of ``conversation_id`` (cached), or None (failed, or too many). Never raises."""
        if not conversation_id:
            return None
        try:
            return self._cache[conversation_id]
        except KeyError:  # never listed, or expired
            pass
        try:
            found = await self.fetch(conversation_id, self.limit)
            result = tuple(found) if found is not None and len(found) <= self.limit else None
        except Exception as exc:  # noqa: BLE001 - a failed listing means "public only", never an error
            log.warning("could not list the members of %s: %s", conversation_id, exc)
            result = None
        self._cache[conversation_id] = result
        return result


def unreadable_citations(citations: Iterable[Any], viewer: Viewer, lookup: Callable[[str], Any]) -> list[Any]:
    """The citations whose chunk ``viewer`` may not read, re-checked against the stored chunks.

    Args:
        citations: the answer's citations (each with ``chunk_id``).
        viewer: the audience the answer would be shown to.
        lookup: chunk id -> the stored chunk (with ``access``), or None (e.g. ``KnowledgeIndex.dense.get``).

    A chunk that is gone or whose lookup fails counts as unreadable (fail closed). Never raises.
    """
    out = []
    for c in citations:
        try:
            chunk = lookup(c.chunk_id)
            ok = chunk is not None and chunk.access.readable_by(viewer)
        except Exception as exc:  # noqa: BLE001
            log.warning("could not re-check citation %s: %s", getattr(c, "chunk_id", "?"), exc)
            ok = False
        if not ok:
            out.append(c)
    return out
