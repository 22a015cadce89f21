"""A stand-in Confluence on 127.0.0.1 serving the real REST v2 (Cloud) and v1 (Data Center) wire formats.

No Confluence can run here, so this server answers the requests the connector makes, with the
shapes Atlassian documents:

Cloud, under ``/wiki`` (basic auth ``email:token``):

- ``GET /wiki/api/v2/spaces?keys=A,B`` - ``{"results": [{"id", "key", "name", "type", "status",
  "_links": {"webui"}}], "_links": {"base", "next"?}}``;
- ``GET /wiki/api/v2/spaces/{id}/pages?status=&sort=&limit=&cursor=&body-format=`` - page bulk
  objects (``id``, ``status``, ``title``, ``spaceId``, ``createdAt``, ``version {number, createdAt,
  ...}``, ``body`` only when asked, ``_links {webui, editui, tinyui}``); paged by an opaque
  ``cursor`` in ``_links.next`` *and* the ``Link: <...>; rel="next"`` header (``link_header_only``
  drops the former, as some endpoints do); ``limit`` capped at 250;
- ``GET /wiki/api/v2/pages/{id}?body-format=storage`` - a page single; a trashed page answers
  with ``"status": "trashed"``, a purged one ``404`` with ``{"errors": [...]}``;
- ``GET /wiki/rest/api/content/{id}/restriction/byOperation/read`` - v1 restrictions (users without
  their e-mail, groups with ``name`` and ``id``);
- permissions (issue 11): ``GET /wiki/api/v2/spaces/{id}/permissions`` (assignments ``{id, principal
  {type: user|group|role, id}, operation {key, targetType}}``, cursor-paged), ``GET
  /wiki/api/v2/pages/{id}/ancestors`` (top to bottom), ``GET /wiki/rest/api/group/{groupId}/membersByGroupId``
  (``start``/``limit`` paged, at most :attr:`ConfluenceStandIn.member_page_cap` a page, members with
  their ``email``, ``""`` when hidden), ``GET /wiki/rest/api/group/by-name?name=`` and ``GET
  /wiki/rest/api/user?accountId=`` (``email`` left out when the user hides it).

Data Center, under the context path ``/confluence`` (``Authorization: Bearer <PAT>``):

- ``GET /confluence/rest/api/content/search?cql=&start=&limit=&expand=`` - content objects with
  ``_links {base, context, next?, self}``, where ``next`` is relative to ``base`` (no context
  path); ``limit`` capped at 200 (50 with bodies). The CQL subset: ``type=page``, ``space = "K"``
  / ``space in ("A","B")``, ``lastmodified >= "yyyy/MM/dd HH:mm"`` **read in the site's time
  zone** (``site_tz``), ``ORDER BY lastmodified|created|id [ASC|DESC]``; only current pages;
- ``GET /confluence/rest/api/content/{id}?expand=...`` - one page; trashed or purged: ``404``;
  ``expand=ancestors`` gives the ancestors top to bottom;
- permissions: ``GET /confluence/rest/api/space/{key}/permissions`` (a list of ``{operation
  {operationKey, targetType}, subject {type: user|group|anonymous, ...}}``), ``GET
  /confluence/rest/api/group/{name}/member`` (``start``/``limit`` paged, no e-mails) and ``GET
  /confluence/rest/api/user?username=`` (with ``email``, left out when hidden).

Permissions model: :meth:`ConfluenceStandIn.grant` gives a space's read permission (a space nobody was
granted is readable by the group ``confluence-users``), :meth:`ConfluenceStandIn.add_user` and
:meth:`ConfluenceStandIn.add_group` make people and groups (a group's Cloud id is ``id-<name>``), page
restrictions are ``Page.users``/``Page.groups`` (:meth:`ConfluenceStandIn.restrict` changes them without
a new version, as Confluence does) and ``Page.parent`` places a page under another.

Faults are injected with :meth:`ConfluenceStandIn.fail` (e.g. a ``429`` with ``Retry-After`` on the
second listing page, a ``500`` mid-sync). Every request is logged in :attr:`ConfluenceStandIn.requests`.
"""

from __future__ import annotations

import base64
import json
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone, tzinfo
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote_plus, urlencode, urlsplit

CLOUD_EMAIL = "bot@example.com"
CLOUD_TOKEN = "cloud-api-token-123"
DC_TOKEN = "dc-personal-access-token-456"


@dataclass
class Page:
    """One page of the stand-in."""

    id: str
    space: str
    title: str
    body: str
    version: int = 1
    modified: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    created: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    status: str = "current"  # current | trashed
    users: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    parent: str | None = None


@dataclass
class Fault:
    """Answer ``status`` (with ``headers``) to the next ``times`` requests matching ``pattern``, after ``skip`` matches."""

    pattern: re.Pattern[str]
    status: int
    times: int
    headers: dict[str, str]
    skip: int = 0
    hits: int = 0
    delay: float = 0.0  # with status 0: answer normally after this many seconds


def _iso_z(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class ConfluenceStandIn:
    """The server; use as a context manager or call :meth:`start` / :meth:`stop`.

    Args:
        site_tz: the site's time zone (how Data Center reads CQL dates and writes ``version.when``).
        link_header_only: v2 listings carry their next page only in the ``Link`` header.
    """

    def __init__(self, site_tz: tzinfo = timezone(timedelta(hours=-7)), link_header_only: bool = False) -> None:
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
        self.lock = threading.RLock()
        self._next_id = 65537
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> ConfluenceStandIn:
        """Listen on 127.0.0.1 (a free port) in a daemon thread."""
        standin = self

        class Handler(_Handler):
            server_state = standin

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="confluence-standin")
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening."""
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> ConfluenceStandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:PORT``."""
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

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
            "ownerId": "557058:author", "lastOwnerId": None, "createdAt": _iso_z(p.created),
            "version": {"createdAt": _iso_z(p.modified), "message": "", "number": p.version, "minorEdit": False,
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


def _encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> int:
    pad = "=" * (-len(cursor) % 4)
    return int(json.loads(base64.urlsafe_b64decode(cursor + pad))["o"])


class _Handler(BaseHTTPRequestHandler):
    server_state: ConfluenceStandIn
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet test output
        pass

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in two writes; without TCP_NODELAY, Nagle's algorithm and delayed ACKs
        # add ~40 ms to every keep-alive response.
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    # -- plumbing ------------------------------------------------------------------------------------
    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json;charset=UTF-8")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        """Log the request, apply injected faults, check auth, then answer as Cloud or Data Center."""
        st = self.server_state
        parts = urlsplit(self.path)
        query = parse_qs(parts.query, keep_blank_values=True)
        delay = 0.0
        with st.lock:
            st.requests.append(("GET", parts.path, query))
            for f in st.faults:
                if f.times > 0 and f.pattern.search(f"GET {self.path}"):
                    if f.skip > 0:
                        f.skip -= 1
                        continue
                    f.times -= 1
                    f.hits += 1
                    if f.status == 0:
                        delay = max(delay, f.delay)
                        continue
                    self._send(f.status, {"statusCode": f.status, "message": "injected fault"}, f.headers)
                    return
        if delay:
            time.sleep(delay)
        try:
            if parts.path.startswith("/wiki/"):
                if not self._cloud_auth():
                    return
                self._cloud(parts.path, query)
            elif parts.path.startswith("/confluence/"):
                if not self._dc_auth():
                    return
                self._dc(parts.path, query)
            else:
                self._send(404, {"statusCode": 404, "message": "not found"})
        except ValueError as exc:
            self._send(400, {"statusCode": 400, "message": str(exc)})

    def _cloud_auth(self) -> bool:
        want = "Basic " + base64.b64encode(f"{CLOUD_EMAIL}:{CLOUD_TOKEN}".encode()).decode()
        if self.headers.get("Authorization") != want:
            self._send(401, {"code": 401, "message": "Client must be authenticated to access this resource."},
                       {"WWW-Authenticate": 'Basic realm="Confluence"'})
            return False
        return True

    def _dc_auth(self) -> bool:
        if self.headers.get("Authorization") != f"Bearer {DC_TOKEN}":
            self._send(401, {"statusCode": 401, "message": "This request requires authentication", "reason": "Unauthorized"})
            return False
        return True

    # -- Cloud v2 ------------------------------------------------------------------------------------
    def _cloud(self, path: str, q: dict[str, list[str]]) -> None:
        st = self.server_state
        one = {k: v[-1] for k, v in q.items()}
        with st.lock:
            if path == "/wiki/api/v2/spaces":
                keys = [k for v in q.get("keys", []) for k in v.split(",") if k]
                results = [{"id": sid, "key": key, "name": f"{key} space", "type": "global", "status": "current",
                            "authorId": "557058:author", "createdAt": "2023-01-01T00:00:00.000Z",
                            "homepageId": None, "_links": {"webui": f"/spaces/{key}"}}
                           for key, sid in st.spaces.items() if not keys or key in keys]
                self._send(200, {"results": results, "_links": {"base": st.cloud_url}})
                return
            if m := re.fullmatch(r"/wiki/api/v2/spaces/(\d+)/pages", path):
                self._v2_list(m.group(1), q, one)
                return
            if m := re.fullmatch(r"/wiki/api/v2/pages/(\d+)", path):
                p = st.pages.get(m.group(1))
                if p is None:
                    self._send(404, {"errors": [{"status": 404, "code": "NOT_FOUND", "title": "Not Found", "detail": None}]})
                    return
                d = st._v2_page(p, body=one.get("body-format") == "storage")
                d["_links"]["base"] = st.cloud_url
                self._send(200, d)
                return
            if self._cloud_permissions(path, q, one):
                return
            if m := re.fullmatch(r"/wiki/rest/api/content/(\d+)/restriction/byOperation/read", path):
                p = st.pages.get(m.group(1))
                if p is None:
                    self._send(404, {"statusCode": 404, "message": "No content found"})
                    return
                self._send(200, {"operationKey": "read", "restrictions": st._restrictions(p),
                                 "_links": {"base": st.cloud_url, "context": "/wiki"}})
                return
        self._send(404, {"errors": [{"status": 404, "code": "NOT_FOUND", "title": "Not Found"}]})

    def _cloud_permissions(self, path: str, q: dict[str, list[str]], one: dict[str, str]) -> bool:
        """Answer the Cloud permission endpoints; False when ``path`` is none of them."""
        st = self.server_state
        if m := re.fullmatch(r"/wiki/api/v2/spaces/(\d+)/permissions", path):
            key = next((k for k, v in st.spaces.items() if v == m.group(1)), None)
            if key is None:
                self._send(404, {"errors": [{"status": 404, "code": "NOT_FOUND", "title": "Space not found"}]})
                return True
            rows = []
            for i, (kind, ident) in enumerate(st._grants(key)):
                pid = f"id-{ident}" if kind == "group" else ident
                rows.append({"id": str(1000 + i), "principal": {"type": kind, "id": pid or None},
                             "operation": {"key": "read", "targetType": "space"}})
                rows.append({"id": str(5000 + i), "principal": {"type": kind, "id": pid or None},
                             "operation": {"key": "create", "targetType": "page"}})
            offset = _decode_cursor(one["cursor"]) if one.get("cursor") else 0
            limit = max(1, min(250, int(one.get("limit", "25"))))
            payload: dict[str, Any] = {"results": rows[offset: offset + limit], "_links": {"base": st.cloud_url}}
            if offset + limit < len(rows):
                payload["_links"]["next"] = (f"/wiki/api/v2/spaces/{m.group(1)}/permissions?"
                                             f"{urlencode({'cursor': _encode_cursor(offset + limit), 'limit': limit})}")
            self._send(200, payload)
            return True
        if m := re.fullmatch(r"/wiki/api/v2/pages/(\d+)/ancestors", path):
            if m.group(1) not in st.pages:
                self._send(404, {"errors": [{"status": 404, "code": "NOT_FOUND", "title": "Not Found"}]})
                return True
            self._send(200, {"results": [{"id": a.id, "type": "page"} for a in st.ancestors(m.group(1))],
                             "_links": {"base": st.cloud_url}})
            return True
        if m := re.fullmatch(r"/wiki/rest/api/group/([^/]+)/membersByGroupId", path):
            name = m.group(1)[3:] if m.group(1).startswith("id-") else None
            if name is None or name not in st.groups:
                self._send(404, {"statusCode": 404, "message": "group not found"})
                return True
            # v1 links are relative to _links.base (.../wiki)
            self._members(st.groups[name], one, v1=False, base=f"/rest/api/group/{m.group(1)}/membersByGroupId")
            return True
        if path == "/wiki/rest/api/group/by-name":
            name = one.get("name", "")
            if name not in st.groups and not any(g == ("group", name) for gs in st.space_grants.values() for g in gs) \
                    and name != "confluence-users":
                self._send(404, {"statusCode": 404, "message": "group not found"})
                return True
            self._send(200, {"type": "group", "name": name, "id": f"id-{name}"})
            return True
        if path == "/wiki/rest/api/user":
            uid = one.get("accountId", "")
            if uid not in st.users:
                self._send(404, {"statusCode": 404, "message": "user not found"})
                return True
            self._send(200, st._user(uid, v1=False))
            return True
        return False

    def _members(self, members: list[str], one: dict[str, str], v1: bool, base: str) -> None:
        st = self.server_state
        start = int(one.get("start", "0"))
        limit = max(1, min(st.member_page_cap, int(one.get("limit", "200"))))
        window = members[start: start + limit]
        results = []
        for uid in window:
            u = st._user(uid, v1)
            if not v1:
                u["email"] = st.users.get(uid) or ""  # membersByGroupId: "" when the user hides it
            else:
                u.pop("email", None)  # Data Center member listings carry no e-mail
            results.append(u)
        links: dict[str, str] = {"base": st.cloud_url if not v1 else st.dc_url}
        if start + limit < len(members):
            links["next"] = f"{base}?{urlencode({'start': start + limit, 'limit': limit})}"
        self._send(200, {"results": results, "start": start, "limit": limit, "size": len(results), "_links": links})

    def _v2_list(self, space_id: str, q: dict[str, list[str]], one: dict[str, str]) -> None:
        st = self.server_state
        key = next((k for k, v in st.spaces.items() if v == space_id), None)
        if key is None:
            self._send(404, {"errors": [{"status": 404, "code": "NOT_FOUND", "title": "Space not found"}]})
            return
        statuses = {s for v in q.get("status", ["current"]) for s in v.split(",")}
        sort = one.get("sort", "id")
        limit = max(1, min(250, int(one.get("limit", "25"))))
        offset = _decode_cursor(one["cursor"]) if one.get("cursor") else 0
        pages = [p for p in st.pages.values() if p.space == key and p.status in statuses]
        keys = {"id": lambda p: int(p.id), "-id": lambda p: -int(p.id),
                "modified-date": lambda p: (p.modified, int(p.id)),
                "-modified-date": lambda p: (p.modified, int(p.id)),
                "title": lambda p: p.title, "-title": lambda p: p.title}
        if sort not in keys:
            self._send(400, {"errors": [{"status": 400, "code": "INVALID_REQUEST_PARAMETER", "title": f"bad sort {sort}"}]})
            return
        pages.sort(key=keys[sort], reverse=sort in {"-modified-date", "-title"})
        window = pages[offset: offset + limit]
        body = one.get("body-format") == "storage"
        payload: dict[str, Any] = {"results": [st._v2_page(p, body) for p in window], "_links": {"base": st.cloud_url}}
        headers = {}
        if offset + limit < len(pages):
            params = {"cursor": _encode_cursor(offset + limit), "limit": limit, "sort": sort,
                      "status": ",".join(sorted(statuses))}
            if body:
                params["body-format"] = "storage"
            nxt = f"/wiki/api/v2/spaces/{space_id}/pages?{urlencode(params)}"
            headers["Link"] = f'<{nxt}>; rel="next", <{st.cloud_url}>; rel="base"'
            if not st.link_header_only:
                payload["_links"]["next"] = nxt
        self._send(200, payload, headers)

    # -- Data Center v1 ----------------------------------------------------------------------------------
    def _dc(self, path: str, q: dict[str, list[str]]) -> None:
        st = self.server_state
        one = {k: v[-1] for k, v in q.items()}
        expand = {e for e in one.get("expand", "").split(",") if e}
        with st.lock:
            if path == "/confluence/rest/api/content/search":
                cql = one.get("cql", "")
                if not cql:
                    self._send(400, {"statusCode": 400, "message": "CQL query parameter is required"})
                    return
                results = st._cql(cql)
                cap = 50 if "body.storage" in expand else 200
                limit = max(1, min(cap, int(one.get("limit", "25"))))
                start = int(one.get("start", "0"))
                window = results[start: start + limit]
                links = {"base": st.dc_url, "context": "/confluence",
                         "self": f"{st.dc_url}/rest/api/content/search?{urlencode({'cql': cql})}"}
                if start + limit < len(results):
                    params = {"cql": cql, "limit": limit, "start": start + limit}
                    if expand:
                        params["expand"] = ",".join(sorted(expand))
                    links["next"] = f"/rest/api/content/search?{urlencode(params)}"  # relative to base
                if start > 0:
                    links["prev"] = f"/rest/api/content/search?{urlencode({'cql': cql, 'limit': limit, 'start': max(0, start - limit)})}"
                self._send(200, {"results": [st._v1_content(p, expand) for p in window], "start": start,
                                 "limit": limit, "size": len(window), "_links": links})
                return
            if m := re.fullmatch(r"/confluence/rest/api/space/([\w~]+)/permissions", path):
                if m.group(1) not in st.spaces:
                    self._send(404, {"statusCode": 404, "message": "No space with key"})
                    return
                out = []
                for kind, ident in st._grants(m.group(1)):
                    subject: dict[str, Any] = {"type": kind, "displayName": ident or "Anonymous"}
                    if kind == "group":
                        subject["name"] = ident
                    elif kind == "user":
                        subject.update({"username": ident, "userKey": f"key-{ident}"})
                    for op, target in (("read", "space"), ("create", "page")):
                        out.append({"operation": {"operationKey": op, "targetType": target}, "subject": subject,
                                    "spaceKey": m.group(1), "spaceId": int(st.spaces[m.group(1)])})
                self._send(200, out)
                return
            if m := re.fullmatch(r"/confluence/rest/api/group/([^/]+)/member", path):
                if m.group(1) not in st.groups:
                    self._send(404, {"statusCode": 404, "message": "group not found"})
                    return
                self._members(st.groups[m.group(1)], one, v1=True, base=f"/rest/api/group/{m.group(1)}/member")
                return
            if path == "/confluence/rest/api/user":
                uid = one.get("username", "")
                if uid not in st.users:
                    self._send(404, {"statusCode": 404, "message": "user not found"})
                    return
                self._send(200, st._user(uid, v1=True))
                return
            if m := re.fullmatch(r"/confluence/rest/api/content/(\d+)", path):
                p = st.pages.get(m.group(1))
                wanted = {s for v in q.get("status", ["current"]) for s in v.split(",")}
                if "any" in wanted:
                    wanted = {"current", "trashed"}
                if p is None or p.status not in wanted:
                    self._send(404, {"statusCode": 404, "data": {"authorized": False, "valid": True, "errors": [],
                                                                  "successful": False},
                                     "message": f"No content found with id: ContentId{{id={m.group(1)}}}",
                                     "reason": "Not Found"})
                    return
                self._send(200, st._v1_content(p, expand))
                return
        self._send(404, {"statusCode": 404, "message": "null for uri: " + path, "reason": "Not Found"})
