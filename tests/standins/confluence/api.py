"""The Confluence stand-in's HTTP side: faults, authentication and the Cloud v2 and Data Center v1 routes."""

from __future__ import annotations

import base64
import re
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlencode, urlsplit

from tests.standins.base import Handler
from tests.standins.confluence.model import CLOUD_EMAIL, CLOUD_TOKEN, DC_TOKEN, decode_cursor, encode_cursor

if TYPE_CHECKING:
    from tests.standins.confluence.site import ConfluenceStandIn


class ConfluenceHandler(Handler):
    """Answers one request from the site's state (:class:`ConfluenceStandIn`), as Cloud or Data Center."""

    standin: ConfluenceStandIn
    protocol_version = "HTTP/1.1"

    # -- plumbing ------------------------------------------------------------------------------------
    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self.reply_json(status, payload, headers, content_type="application/json;charset=UTF-8")

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        """Log the request, apply injected faults, check auth, then answer as Cloud or Data Center."""
        st = self.standin
        parts = urlsplit(self.path)
        query = parse_qs(parts.query, keep_blank_values=True)
        delay = 0.0
        with st.lock:
            st.record(st.requests, ("GET", parts.path, query))
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
        st = self.standin
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
        st = self.standin
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
            offset = decode_cursor(one["cursor"]) if one.get("cursor") else 0
            limit = max(1, min(250, int(one.get("limit", "25"))))
            payload: dict[str, Any] = {"results": rows[offset: offset + limit], "_links": {"base": st.cloud_url}}
            if offset + limit < len(rows):
                payload["_links"]["next"] = (f"/wiki/api/v2/spaces/{m.group(1)}/permissions?"
                                             f"{urlencode({'cursor': encode_cursor(offset + limit), 'limit': limit})}")
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
        st = self.standin
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
        st = self.standin
        key = next((k for k, v in st.spaces.items() if v == space_id), None)
        if key is None:
            self._send(404, {"errors": [{"status": 404, "code": "NOT_FOUND", "title": "Space not found"}]})
            return
        statuses = {s for v in q.get("status", ["current"]) for s in v.split(",")}
        sort = one.get("sort", "id")
        limit = max(1, min(250, int(one.get("limit", "25"))))
        offset = decode_cursor(one["cursor"]) if one.get("cursor") else 0
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
            params = {"cursor": encode_cursor(offset + limit), "limit": limit, "sort": sort,
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
        st = self.standin
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
