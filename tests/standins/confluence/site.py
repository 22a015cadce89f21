"""The Confluence stand-in's site: spaces, pages, people, groups, permissions and faults, and how pages render."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Any
from urllib.parse import quote_plus

from tests.standins.base import StandIn
from tests.standins.confluence.api import ConfluenceHandler
from tests.standins.confluence.model import Fault, Page, iso_z


class ConfluenceStandIn(StandIn):
    """The server; use as a context manager or call :meth:`start` / :meth:`stop`.

    Args:
        site_tz: the site's time zone (how Data Center reads CQL dates and writes ``version.when``).
        link_header_only: v2 listings carry their next page only in the ``Link`` header.
    """

    handler = ConfluenceHandler

    def __init__(self, site_tz: tzinfo = timezone(timedelta(hours=-7)), link_header_only: bool = False) -> None:
        super().__init__()
        self.site_tz = site_tz
        self.link_header_only = link_header_only
        self.spaces: dict[str, str] = {}  # key -> id
        self.pages: dict[str, Page] = {}
        self.requests: list[tuple[str, str, dict[str, list[str]]]] = []
        self.faults: list[Fault] = []
        #: space key -> read grants ``(type, id)``: ``("group", name)``, ``("user", id)``, ``("role", id)``,
        #: ``("anonymous", "")``; a space without an entry is readable by ``confluence-users``.
        self.space_grants: dict[str, list[tuple[str, str]]] = {}
        #: user id (Cloud accountId, Data Center username) -> e-mail, ``None`` when the user hides it.
        self.users: dict[str, str | None] = {}
        #: group name -> member user ids.
        self.groups: dict[str, list[str]] = {}
        #: the most members a group's member listing answers at once.
        self.member_page_cap = 2
        self._next_id = 65537

    @property
    def cloud_url(self) -> str:
        """The Cloud site's base URL (``.../wiki``)."""
        return self.origin + "/wiki"

    @property
    def dc_url(self) -> str:
        """The Data Center base URL with its context path."""
        return self.origin + "/confluence"

    # -- content -----------------------------------------------------------------------------------
    def add_space(self, key: str) -> str:
        """Create a space; returns its id."""
        with self.lock:
            sid = str(98300 + len(self.spaces))
            self.spaces[key] = sid
            return sid

    def add_page(self, space: str, title: str, body: str, *, modified: datetime | None = None,
                 users: list[str] | None = None, groups: list[str] | None = None, parent: str | None = None) -> str:
        """Create a page (version 1), under ``parent`` when given; returns its id."""
        with self.lock:
            pid = str(self._next_id)
            self._next_id += 1
            now = modified or datetime.now(timezone.utc)
            self.pages[pid] = Page(pid, space, title, body, 1, now, now, users=list(users or []),
                                   groups=list(groups or []), parent=parent)
            return pid

    # -- permissions -------------------------------------------------------------------------------
    def grant(self, space: str, *grants: tuple[str, str]) -> None:
        """Set ``space``'s read permission to ``grants`` (``("group", "eng")``, ``("user", id)``,
        ``("role", id)``, ``("anonymous", "")``)."""
        with self.lock:
            self.space_grants[space] = list(grants)

    def add_user(self, uid: str, email: str | None) -> str:
        """A user (``email=None``: the e-mail is hidden by the user's privacy setting); returns ``uid``."""
        with self.lock:
            self.users[uid] = email
            return uid

    def add_group(self, name: str, members: list[str]) -> str:
        """A group with ``members`` (user ids; replaces an existing one); returns its Cloud id."""
        with self.lock:
            self.groups[name] = list(members)
            return f"id-{name}"

    def restrict(self, pid: str, users: list[str] | None = None, groups: list[str] | None = None) -> None:
        """Set a page's read restrictions; the version does not change (as in Confluence)."""
        with self.lock:
            p = self.pages[pid]
            p.users, p.groups = list(users or []), list(groups or [])

    def ancestors(self, pid: str) -> list[Page]:
        """The ancestors of a page, top to bottom."""
        out: list[Page] = []
        p = self.pages.get(pid)
        while p is not None and p.parent and p.parent in self.pages:
            p = self.pages[p.parent]
            out.append(p)
        return out[::-1]

    def _grants(self, space: str) -> list[tuple[str, str]]:
        return self.space_grants.get(space, [("group", "confluence-users")])

    def _user(self, uid: str, v1: bool) -> dict[str, Any]:
        if v1:
            d: dict[str, Any] = {"type": "known", "username": uid, "userKey": f"key-{uid}", "displayName": uid}
        else:
            d = {"type": "known", "accountId": uid, "accountType": "atlassian", "displayName": uid, "publicName": uid}
        email = self.users.get(uid)
        if email:
            d["email"] = email
        return d

    def edit_page(self, pid: str, body: str | None = None, title: str | None = None,
                  modified: datetime | None = None) -> None:
        """A new version of a page (``modified`` defaults to now)."""
        with self.lock:
            p = self.pages[pid]
            if body is not None:
                p.body = body
            if title is not None:
                p.title = title
            p.version += 1
            p.modified = modified or datetime.now(timezone.utc)

    def move_page(self, pid: str, space: str) -> None:
        """Move a page to another space (a new version, as Confluence records it)."""
        with self.lock:
            self.pages[pid].space = space
            self.edit_page(pid)

    def trash(self, pid: str) -> None:
        """Move a page to the trash (listings stop showing it; v2 GET answers ``status: trashed``)."""
        with self.lock:
            self.pages[pid].status = "trashed"

    def purge(self, pid: str) -> None:
        """Delete a page for good (every GET answers 404)."""
        with self.lock:
            del self.pages[pid]

    def fail(self, pattern: str, status: int, times: int = 1, headers: dict[str, str] | None = None,
             skip: int = 0) -> Fault:
        """Inject a fault: requests whose ``METHOD path?query`` matches the regex ``pattern`` get ``status``."""
        f = Fault(re.compile(pattern), status, times, dict(headers or {}), skip)
        with self.lock:
            self.faults.append(f)
        return f

    def slow(self, pattern: str, seconds: float, times: int = 1_000_000) -> Fault:
        """Delay matching requests by ``seconds``, then answer them normally."""
        f = Fault(re.compile(pattern), 0, times, {}, 0, 0, seconds)
        with self.lock:
            self.faults.append(f)
        return f

    def clear_faults(self) -> None:
        """Remove every injected fault."""
        with self.lock:
            self.faults.clear()

    def count(self, pattern: str) -> int:
        """Requests so far whose path matches the regex ``pattern``."""
        rx = re.compile(pattern)
        with self.lock:
            return sum(1 for _, path, _ in self.requests if rx.search(path))

    # -- rendering ---------------------------------------------------------------------------------
    def _v2_page(self, p: Page, body: bool) -> dict[str, Any]:
        d: dict[str, Any] = {
            "id": p.id, "status": p.status, "title": p.title, "spaceId": self.spaces[p.space],
            "parentId": p.parent, "parentType": "page" if p.parent else None, "position": int(p.id) % 1000, "authorId": "557058:author",
            "ownerId": "557058:author", "lastOwnerId": None, "createdAt": iso_z(p.created),
            "version": {"createdAt": iso_z(p.modified), "message": "", "number": p.version, "minorEdit": False,
                        "authorId": "557058:author"},
            "body": {},
            "_links": {"webui": f"/spaces/{p.space}/pages/{p.id}/{quote_plus(p.title)}",
                       "editui": f"/pages/resumedraft.action?draftId={p.id}", "tinyui": f"/x/{p.id}"},
        }
        if body:
            d["body"] = {"storage": {"representation": "storage", "value": p.body}}
        return d

    def _v1_content(self, p: Page, expand: set[str]) -> dict[str, Any]:
        d: dict[str, Any] = {
            "id": p.id, "type": "page", "status": p.status, "title": p.title,
            "_links": {"webui": f"/display/{p.space}/{quote_plus(p.title)}", "tinyui": f"/x/{p.id}",
                       "self": f"{self.dc_url}/rest/api/content/{p.id}"},
            "_expandable": {"container": f"/rest/api/space/{p.space}", "metadata": "", "operations": "",
                            "children": f"/rest/api/content/{p.id}/child", "restrictions": f"/rest/api/content/{p.id}/restriction/byOperation",
                            "history": f"/rest/api/content/{p.id}/history", "ancestors": "", "body": "",
                            "version": "", "descendants": f"/rest/api/content/{p.id}/descendant",
                            "space": f"/rest/api/space/{p.space}"},
        }
        if "space" in expand:
            d["space"] = {"id": int(self.spaces[p.space]), "key": p.space, "name": f"{p.space} space", "type": "global",
                          "status": "current", "_links": {"webui": f"/display/{p.space}"}}
        if "version" in expand:
            d["version"] = {"by": {"type": "known", "username": "admin", "userKey": "8a7f8081", "displayName": "Admin"},
                            "when": p.modified.astimezone(self.site_tz).isoformat(timespec="milliseconds"),
                            "message": "", "number": p.version, "minorEdit": False, "hidden": False}
        if "body.storage" in expand:
            d["body"] = {"storage": {"value": p.body, "representation": "storage"}}
        if any(e.startswith("restrictions") for e in expand):
            d["restrictions"] = {"read": {"operation": "read", "restrictions": self._restrictions(p, v1=True)}}
        if "ancestors" in expand:
            d["ancestors"] = [{"id": a.id, "type": "page", "status": a.status, "title": a.title}
                              for a in self.ancestors(p.id)]
        return d

    def _restrictions(self, p: Page, v1: bool = False) -> dict[str, Any]:
        users = [{"type": "known", "username": u, "userKey": f"key-{u}", "displayName": u} if v1 else
                 {"type": "known", "accountId": u, "accountType": "atlassian", "displayName": u} for u in p.users]
        groups = [{"type": "group", "name": g, "id": f"id-{g}"} for g in p.groups]
        return {"user": {"results": users, "start": 0, "limit": 200, "size": len(users)},
                "group": {"results": groups, "start": 0, "limit": 200, "size": len(groups)}}

    def _cql(self, cql: str) -> list[Page]:
        """Evaluate the supported CQL subset (see the module docstring)."""
        text = cql.strip()
        order = "created"
        desc = False
        m = re.search(r"\s+ORDER\s+BY\s+(\w+)(?:\s+(ASC|DESC))?\s*$", text, re.I)
        if m:
            order, desc = m.group(1).lower(), (m.group(2) or "").upper() == "DESC"
            text = text[: m.start()]
        pages = [p for p in self.pages.values() if p.status == "current"]
        for clause in re.split(r"\s+AND\s+", text, flags=re.I):
            clause = clause.strip()
            if not clause:
                continue
            if m := re.fullmatch(r"type\s*=\s*\"?page\"?", clause, re.I):
                continue
            if m := re.fullmatch(r"space\s*=\s*\"?([\w~]+)\"?", clause, re.I):
                pages = [p for p in pages if p.space == m.group(1)]
                continue
            if m := re.fullmatch(r"space\s+in\s*\(([^)]*)\)", clause, re.I):
                keys = {k.strip().strip('"') for k in m.group(1).split(",")}
                pages = [p for p in pages if p.space in keys]
                continue
            if m := re.fullmatch(r"lastmodified\s*(>=|>|<=|<)\s*\"(\d{4})[/-](\d{2})[/-](\d{2})(?:\s+(\d{2}):(\d{2}))?\"",
                                 clause, re.I):
                y, mo, d, h, mi = (int(x) if x else 0 for x in m.group(2, 3, 4, 5, 6))
                local = datetime(y, mo, d, h, mi, tzinfo=self.site_tz)  # CQL reads the site's zone
                op = m.group(1)

                def keep(p: Page, local=local, op=op) -> bool:
                    t = p.modified.replace(second=0, microsecond=0)
                    return {">=": t >= local, ">": t > local, "<=": t <= local, "<": t < local}[op]

                pages = [p for p in pages if keep(p)]
                continue
            raise ValueError(f"unsupported CQL clause {clause!r}")
        key = {"lastmodified": lambda p: (p.modified, int(p.id)), "created": lambda p: (p.created, int(p.id)),
               "id": lambda p: int(p.id), "title": lambda p: p.title}.get(order)
        if key is None:
            raise ValueError(f"cannot order by {order!r}")
        return sorted(pages, key=key, reverse=desc)
