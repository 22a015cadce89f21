"""Who may read a Confluence page: its effective read access, resolved as Atlassian defines it.

A person may view a page when they have the **space's read permission** AND satisfy the **read
restrictions of the page and of every ancestor page** (a restriction on a parent applies to all its
descendants). Each of those rules is a :class:`Gate`: everyone, or a union of users and groups. A
page's access is the intersection of its space's gate and the gates of the restricted pages on its
path (pages without read restrictions add none), turned into a :class:`core.access.Access`:

- ``public`` when the intersection is everyone: the space is readable by one of the source's
  ``public_groups`` (or anonymously) and no restriction applies, or every restriction names a public group;
- otherwise the principals that satisfy every gate, computed exactly from the group members read in
  the same run (:func:`intersect`): a group named by every gate stays a group (``group:<source>/<group>``);
  a user named by one gate is kept when the others name them or a group they belong to; the members of
  a group that only some gates name are kept, one by one, when the other gates let them in. So a
  restriction to users on a page and to a group on its parent leaves the users who are in that group;
  a group on one side and an unrelated group on the other leaves the people in both. Nothing is widened:
  a member chatops could not read is left out (stricter), a group grant through a Cloud *role* is left out
  (stricter; chatops cannot list a role's people), and when nobody is left the page is unresolved;
- :meth:`Access.nobody` (readable by nobody, counted by ``chatops status``) when any read it needs fails:
  a 403, a 5xx after the retries, a timeout, a principal of an unknown type, a restriction listing that
  does not fit one answer (fail closed).

Users are ``user:<e-mail>``; a user who hides their e-mail (Cloud privacy setting) stays
``user:<accountId>`` (Data Center: ``user:<username>``), which matches no asker directly (only through
their groups) and is counted in :attr:`ConfluenceAccess.stats` (``hidden_emails``). Groups are keyed by
their Cloud group id (what space permissions name) or, on Data Center, their name; ``public_groups``
may list Cloud groups by name (looked up once per run) or id.

Requests (one :class:`ConfluenceAccess` per source; :meth:`ConfluenceAccess.reset` at the start of
every run; everything below is cached for the run, failures included, so siblings share their parents'
reads and a failing space is asked once):

- Cloud: ``GET /wiki/api/v2/spaces/{id}/permissions`` (assignments with ``operation {key: read,
  targetType: space}``), ``GET /wiki/rest/api/content/{id}/restriction/byOperation/read`` for a page and
  each ancestor, ``GET /wiki/api/v2/pages/{id}/ancestors`` only when the parent chain is not known from
  the pages already seen (``parentId``), ``GET /wiki/rest/api/group/{groupId}/membersByGroupId`` (paged),
  ``GET /wiki/rest/api/user?accountId=`` for users listed without an e-mail, ``GET
  /wiki/rest/api/group/by-name?name=`` for public groups given by name;
- Data Center: ``GET /rest/api/space/{key}/permissions``, a page's restrictions and ancestors from its
  own ``expand=restrictions.read.restrictions.user,restrictions.read.restrictions.group,ancestors``, an
  ancestor's from ``GET /rest/api/content/{id}?expand=restrictions...`` (unless seen earlier in the run),
  ``GET /rest/api/group/{name}/member`` (paged) and ``GET /rest/api/user?username=``.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from core.access import Access, group, user
from .errors import SourceUnavailableError
from .http import HttpClient, HttpStatusError, SourceAuthError, decode_json

__all__ = ["Gate", "ConfluenceAccess", "AccessReadError", "intersect", "V1_ACCESS_EXPAND"]

log = logging.getLogger(__name__)

#: The ``expand`` that gives a Data Center page's read restrictions and ancestors.
V1_ACCESS_EXPAND = "restrictions.read.restrictions.user,restrictions.read.restrictions.group,ancestors"
_V1_RESTRICTIONS = "restrictions.read.restrictions.user,restrictions.read.restrictions.group"


class AccessReadError(Exception):
    """A read needed for a page's access failed, or answered something chatops cannot express safely."""


@dataclass(frozen=True, slots=True)
class Gate:
    """Who one rule (a space's read permission, one page's read restrictions) lets read.

    Attributes:
        everyone: every employee passes (a public group, anonymous access).
        users: user principals (``user:<e-mail>`` or ``user:<id>`` for a hidden e-mail) that pass.
        groups: group keys (Cloud group id, Data Center group name; lower case) whose members pass.
    """

    everyone: bool = False
    users: frozenset[str] = field(default_factory=frozenset)
    groups: frozenset[str] = field(default_factory=frozenset)


EVERYONE = Gate(everyone=True)


def intersect(a: Gate, b: Gate, members: Callable[[str], frozenset[str]]) -> Gate:
    """The people both ``a`` and ``b`` let read, as users and groups (see the module docstring).

    Args:
        members: a group key's members as user principals (an unreadable group: empty, which only
            narrows the result).
    """
    if a.everyone:
        return b
    if b.everyone:
        return a

    def passes(u: str, g: Gate) -> bool:
        return u in g.users or any(u in members(x) for x in g.groups)

    groups = a.groups & b.groups
    users = {u for u in a.users if passes(u, b)} | {u for u in b.users if passes(u, a)}
    for x in sorted(a.groups - b.groups):
        users |= {u for u in members(x) if passes(u, b)}
    for x in sorted(b.groups - a.groups):
        users |= {u for u in members(x) if passes(u, a)}
    return Gate(False, frozenset(users), frozenset(groups))


class ConfluenceAccess:
    """Resolves pages' effective read access for one Confluence source (see the module docstring).

    Args:
        source: the source name (the ``<source>`` of group principals).
        deployment: ``cloud`` or ``datacenter``.
        http: the source's HTTP client (its ``calls`` count every request).
        public_groups: the groups that mean every employee (names or, on Cloud, ids).
        v1_join: turns a Data Center ``_links.next`` (relative to the context path) into a URL to GET.

    Attributes:
        stats: this run's counts: requests by kind (``space_permissions``, ``restrictions``,
            ``ancestors``, ``group_members``, ``users``, ``group_names``), ``cache_hits``,
            ``hidden_emails`` (users kept as ``user:<id>``), ``unresolved`` (pages readable by nobody),
            ``roles_skipped``.
    """

    def __init__(self, source: str, deployment: str, http: HttpClient, public_groups: Iterable[str],
                 v1_join: Callable[[str], str] | None = None) -> None:
        self.source = source
        self.v1_join = v1_join or (lambda nxt: nxt)
        self.cloud = deployment == "cloud"
        self.http = http
        self.public_names = frozenset(g.strip().lower() for g in public_groups if g.strip())
        self.reset()

    def reset(self) -> None:
        """Forget every cached read (call at the start of each sync or permission sync run)."""
        self.stats: Counter[str] = Counter()
        self._public: frozenset[str] | None = None
        self._spaces: dict[str, Gate | AccessReadError] = {}
        self._restrictions: dict[str, Gate | None | AccessReadError] = {}
        self._chains: dict[str, tuple[str, ...]] = {}
        self._parents: dict[str, str | None] = {}
        self._members: dict[str, frozenset[str]] = {}
        self._member_emails: dict[str, frozenset[str]] = {}
        self._users: dict[str, str] = {}
        self._needed: set[str] = set()

    # -- the answer ------------------------------------------------------------------------------------
    def page_access(self, page: Mapping[str, Any], space: str) -> Access:
        """The effective read access of ``page`` (a v2 page or v1 content object) in ``space``.

        Args:
            page: the page as listed or fetched (v2: ``id``, ``parentId``; v1: ``id``, and when expanded
                ``restrictions`` and ``ancestors``).
            space: the space's id (Cloud) or key (Data Center).

        Returns:
            The access; :meth:`Access.nobody` with the reason when a read failed (never raises for that,
            but a 401 propagates as :class:`SourceAuthError`: bad credentials fail the run).
        """
        pid = str(page.get("id"))
        try:
            gate = self._space_gate(space)
            if not self.cloud:
                self._seed_v1(page)
            for cid in (*self._ancestors(pid, page), pid):
                g = self._restriction(cid)
                if g is not None:
                    gate = intersect(gate, g, self._group_members)
            return self._to_access(pid, gate, space)
        except AccessReadError as exc:
            self.stats["unresolved"] += 1
            log.warning("source %s: page %s is readable by nobody until its permissions can be read: %s",
                        self.source, pid, exc)
            return Access.nobody(str(exc))

    def note(self, page: Mapping[str, Any]) -> None:
        """Remember what a listed page tells about the tree without any request: its parent (Cloud
        ``parentId``) or its ancestors and restrictions (Data Center, when expanded)."""
        pid = str(page.get("id"))
        if self.cloud:
            if "parentId" in page:
                self._parents[pid] = str(page["parentId"]) if page.get("parentId") else None
        else:
            self._seed_v1(page)

    def _to_access(self, pid: str, gate: Gate, space: str) -> Access:
        if gate.everyone:
            return Access.everyone()
        principals = set(gate.users) | {group(self.source, g) for g in gate.groups}
        self._needed |= gate.groups
        space_gate = self._spaces.get(space)
        if isinstance(space_gate, Gate):
            self._needed |= space_gate.groups
        if not principals:
            raise AccessReadError(f"nobody chatops can name both has the space's read permission and passes the "
                                  f"read restrictions of page {pid} and its ancestors")
        return Access.only(principals)

    def memberships(self) -> dict[str, frozenset[str]]:
        """The members' e-mails (lower case) of every group named by a page's access or a space's read
        permission this run, by group key; a group whose members could not be read maps to no one (fail
        closed). Members who hide their e-mail are left out (they can be matched by nothing else)."""
        for g in sorted(self._needed):
            self._group_members(g)
        return {g: self._member_emails.get(g, frozenset()) for g in sorted(self._needed)}

    # -- space permissions ---------------------------------------------------------------------------
    def _space_gate(self, space: str) -> Gate:
        cached = self._spaces.get(space)
        if cached is None:
            try:
                cached = self._read_space(space)
            except AccessReadError as exc:
                cached = exc
            self._spaces[space] = cached
        else:
            self.stats["cache_hits"] += 1
        if isinstance(cached, AccessReadError):
            raise cached
        return cached

    def _read_space(self, space: str) -> Gate:
        users: set[str] = set()
        groups: set[str] = set()
        everyone = False
        for kind, ident, obj in self._space_grants(space):
            if kind == "anonymous":
                everyone = True
            elif kind == "group":
                if self._is_public(ident):
                    everyone = True
                groups.add(ident.lower())
            elif kind == "user":
                users.add(self._user_principal(ident, obj))
            elif kind == "role":
                self.stats["roles_skipped"] += 1  # a role's people cannot be listed: left out (stricter)
            else:
                raise AccessReadError(f"space {space} grants read access to a principal of unknown type {kind!r}")
        return EVERYONE if everyone else Gate(False, frozenset(users), frozenset(groups))

    def _space_grants(self, space: str) -> Iterable[tuple[str, str, Mapping[str, Any]]]:
        out: list[tuple[str, str, Mapping[str, Any]]] = []
        if self.cloud:
            url: str | None = f"/wiki/api/v2/spaces/{quote(space)}/permissions"
            params: dict[str, Any] | None = {"limit": 250}
            while url:
                data = self._get("space_permissions", url, params, f"the read permission of space {space}")
                for row in data.get("results") or []:
                    op = row.get("operation") or {}
                    if op.get("key") != "read" or op.get("targetType") != "space":
                        continue
                    principal = row.get("principal") or {}
                    kind = str(principal.get("type") or "").lower()
                    ident = str(principal.get("id") or "")
                    if kind in {"user", "group", "role"} and not ident:
                        raise AccessReadError(f"space {space} grants read access to a {kind} without an id")
                    out.append((kind, ident, {"accountId": ident} if kind == "user" else {}))
                nxt = (data.get("_links") or {}).get("next")
                url, params = (nxt if nxt and nxt.startswith("/") else None), None
            return out
        data = self._get("space_permissions", f"/rest/api/space/{quote(space)}/permissions", None,
                         f"the read permission of space {space}")
        rows = data if isinstance(data, list) else data.get("results") or []
        for row in rows:
            op = row.get("operation") or {}
            if (op.get("operationKey") or op.get("key")) != "read" or op.get("targetType") != "space":
                continue
            subject = row.get("subject") or {}
            kind = str(subject.get("type") or "").lower()
            if kind == "group":
                ident = str(subject.get("name") or "")
            elif kind in {"user", "known"}:
                kind, ident = "user", str(subject.get("username") or "")
            else:
                ident = ""
            if kind in {"user", "group"} and not ident:
                raise AccessReadError(f"space {space} grants read access to a {kind} chatops cannot name")
            out.append((kind, ident, subject))
        return out

    def _is_public(self, key: str, name: str = "") -> bool:
        return key.lower() in self._public_keys() or (bool(name) and name.lower() in self.public_names)

    def _public_keys(self) -> frozenset[str]:
        """Public group names, plus (Cloud) their ids, looked up once per run."""
        if self._public is None:
            keys = set(self.public_names)
            if self.cloud:
                for name in sorted(self.public_names):
                    try:
                        data = self._get("group_names", "/wiki/rest/api/group/by-name", {"name": name},
                                         f"the id of public group {name}", allow_404=True)
                    except AccessReadError as exc:  # a public group left out only narrows access
                        log.warning("source %s: public group %s: %s", self.source, name, exc)
                        continue
                    if data and data.get("id"):
                        keys.add(str(data["id"]).lower())
            self._public = frozenset(keys)
        return self._public

    # -- restrictions and ancestors ---------------------------------------------------------------------
    def _restriction(self, cid: str) -> Gate | None:
        if cid in self._restrictions:
            self.stats["cache_hits"] += 1
            cached = self._restrictions[cid]
        else:
            try:
                cached = self._read_restriction(cid)
            except AccessReadError as exc:
                cached = exc
            self._restrictions[cid] = cached
        if isinstance(cached, AccessReadError):
            raise cached
        return cached

    def _read_restriction(self, cid: str) -> Gate | None:
        what = f"the read restrictions of page {cid}"
        if self.cloud:
            data = self._get("restrictions", f"/wiki/rest/api/content/{quote(cid)}/restriction/byOperation/read",
                             None, what)
            return self._gate_of(cid, data.get("restrictions") or {})
        data = self._get("restrictions", f"/rest/api/content/{quote(cid)}", {"expand": _V1_RESTRICTIONS, "status": "any"},
                         what)
        return self._gate_of(cid, self._v1_read(cid, data))

    def _seed_v1(self, page: Mapping[str, Any]) -> None:
        """Cache what a Data Center page carries: its own restrictions and its ancestor chain."""
        pid = str(page.get("id"))
        if pid not in self._restrictions and isinstance(page.get("restrictions"), Mapping):
            try:
                self._restrictions[pid] = self._gate_of(pid, self._v1_read(pid, page))
            except AccessReadError as exc:
                self._restrictions[pid] = exc
        if "ancestors" in page and isinstance(page["ancestors"], list):
            chain = tuple(str(a.get("id")) for a in page["ancestors"] if a.get("id") is not None)
            self._chains[pid] = chain
            for i, a in enumerate(chain):
                self._chains.setdefault(a, chain[:i])

    @staticmethod
    def _v1_read(cid: str, content: Mapping[str, Any]) -> Mapping[str, Any]:
        restrictions = content.get("restrictions")
        if not isinstance(restrictions, Mapping) or "read" not in restrictions:
            raise AccessReadError(f"page {cid} came without its read restrictions")
        return (restrictions.get("read") or {}).get("restrictions") or {}

    def _gate_of(self, cid: str, restrictions: Mapping[str, Any]) -> Gate | None:
        """The gate of a v1 restrictions object (``{"user": {"results": [...]}, "group": {...}}``); None: unrestricted."""
        users: set[str] = set()
        groups: set[str] = set()
        everyone = False
        for kind in ("user", "group"):
            part = restrictions.get(kind) or {}
            results = part.get("results") or []
            if (part.get("_links") or {}).get("next") or int(part.get("totalSize") or 0) > len(results):
                raise AccessReadError(f"the read restrictions of page {cid} list more {kind}s than one answer holds")
            for obj in results:
                if kind == "user":
                    ident = str((obj.get("accountId") if self.cloud else obj.get("username")) or "")
                    if not ident:
                        raise AccessReadError(f"page {cid} is restricted to a user chatops cannot name")
                    users.add(self._user_principal(ident, obj))
                else:
                    name = str(obj.get("name") or "")
                    key = str((obj.get("id") if self.cloud else None) or name)
                    if not key:
                        raise AccessReadError(f"page {cid} is restricted to a group chatops cannot name")
                    if self._is_public(key, name):
                        everyone = True
                    groups.add(key.lower())
        for kind in restrictions:
            if kind not in {"user", "group"} and (restrictions.get(kind) or {}).get("results"):
                raise AccessReadError(f"page {cid} is restricted to principals of unknown type {kind!r}")
        if everyone:
            return EVERYONE
        if not users and not groups:
            return None
        return Gate(False, frozenset(users), frozenset(groups))

    def _ancestors(self, pid: str, page: Mapping[str, Any]) -> tuple[str, ...]:
        if pid in self._chains:
            self.stats["cache_hits"] += 1
            return self._chains[pid]
        if self.cloud and "parentId" in page:
            self.note(page)
            known = self._chain_from_parents(pid)
            if known is not None:
                return known
        if not self.cloud:
            raise AccessReadError(f"page {pid} came without its ancestors")
        chain: list[str] = []
        url: str | None = f"/wiki/api/v2/pages/{quote(pid)}/ancestors"
        params: dict[str, Any] | None = {"limit": 250}
        while url:
            data = self._get("ancestors", url, params, f"the ancestors of page {pid}")
            chain += [str(a.get("id")) for a in data.get("results") or [] if a.get("id") is not None]
            nxt = (data.get("_links") or {}).get("next")
            url, params = (nxt if nxt and nxt.startswith("/") else None), None
        self._chains[pid] = tuple(chain)
        for i, a in enumerate(chain):
            self._chains.setdefault(a, tuple(chain[:i]))
        return self._chains[pid]

    def _chain_from_parents(self, pid: str, depth: int = 0) -> tuple[str, ...] | None:
        """The ancestors of ``pid`` from the parents seen so far (``None``: a link is unknown)."""
        if pid in self._chains:
            return self._chains[pid]
        if pid not in self._parents or depth > 200:
            return None
        parent = self._parents[pid]
        if parent is None:
            chain: tuple[str, ...] = ()
        else:
            up = self._chain_from_parents(parent, depth + 1)
            if up is None:
                return None
            chain = (*up, parent)
        self._chains[pid] = chain
        return chain

    # -- people ------------------------------------------------------------------------------------------
    def _user_principal(self, ident: str, obj: Mapping[str, Any]) -> str:
        """``user:<e-mail>``, or ``user:<id>`` when the user hides their e-mail (counted)."""
        if ident in self._users:
            return self._users[ident]
        if "email" in obj:
            email = str(obj.get("email") or "")
        else:
            if self.cloud:
                data = self._get("users", "/wiki/rest/api/user", {"accountId": ident}, f"user {ident}")
            else:
                data = self._get("users", "/rest/api/user", {"username": ident}, f"user {ident}")
            email = str(data.get("email") or "")
        if email.strip():
            principal = user(email)
        else:
            self.stats["hidden_emails"] += 1
            principal = user(ident)
        self._users[ident] = principal
        return principal

    def _group_members(self, key: str) -> frozenset[str]:
        """A group's members as user principals (read once per run; unreadable: empty, logged)."""
        if key in self._members:
            return self._members[key]
        principals: set[str] = set()
        emails: set[str] = set()
        try:
            if self.cloud:
                base = f"/wiki/rest/api/group/{quote(key)}/membersByGroupId"
            else:
                base = f"/rest/api/group/{quote(key)}/member"
            start = 0
            url: str | None = base
            params: dict[str, Any] | None = {"start": 0, "limit": 200}
            while url:
                data = self._get("group_members", url, params, f"the members of group {key}", allow_404=True)
                if data is None:
                    break
                results = data.get("results") or []
                for obj in results:
                    ident = str((obj.get("accountId") if self.cloud else obj.get("username")) or "")
                    if not ident:
                        continue
                    p = self._user_principal(ident, obj)
                    principals.add(p)
                    if "@" in p:
                        emails.add(p.split(":", 1)[1])
                nxt = (data.get("_links") or {}).get("next")
                if nxt:
                    url, params = self._v1_next(nxt), None
                elif results and len(results) >= int(data.get("limit") or 200) and "_links" not in data:
                    start += len(results)
                    url, params = base, {"start": start, "limit": 200}
                else:
                    url = None
        except AccessReadError as exc:
            log.warning("source %s: group %s counts as having no members this run: %s", self.source, key, exc)
            principals, emails = set(), set()
        self._members[key] = frozenset(principals)
        self._member_emails[key] = frozenset(emails)
        return self._members[key]

    # -- HTTP --------------------------------------------------------------------------------------------
    def _v1_next(self, nxt: str) -> str:
        """A REST v1 ``_links.next``: relative to ``_links.base`` (Cloud: ``.../wiki``; Data Center: the
        context path), or absolute."""
        if nxt.startswith(("http://", "https://")):
            return nxt
        if self.cloud:
            nxt = nxt if nxt.startswith("/") else "/" + nxt
            return nxt if nxt.startswith("/wiki/") else "/wiki" + nxt
        return self.v1_join(nxt)

    def _get(self, kind: str, url: str, params: Mapping[str, Any] | None, what: str, allow_404: bool = False) -> Any:
        """GET and decode; any failure but a 401 becomes :class:`AccessReadError` naming ``what``."""
        self.stats[kind] += 1
        try:
            resp = self.http.get(url, dict(params) if params else None, allow_404=True)
            if resp.status_code == 404:
                if allow_404:
                    return None
                raise AccessReadError(f"cannot read {what}: 404 not found")
            return decode_json(resp, "Confluence")
        except SourceAuthError as exc:
            if exc.status == 401:
                raise  # bad credentials fail the run, they are not a page's problem
            raise AccessReadError(f"cannot read {what}: {exc}") from exc
        except (SourceUnavailableError, HttpStatusError, ValueError, KeyError, TypeError) as exc:
            raise AccessReadError(f"cannot read {what}: {type(exc).__name__}: {exc}") from exc
