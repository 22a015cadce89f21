"""A stand-in Jira on 127.0.0.1 speaking the REST wire formats ``ticket.create`` uses.

No Jira can run here, so this server answers the requests the tool makes with the shapes Atlassian
documents, and checks them the way Jira does:

Cloud (``deployment="cloud"``, REST v3, basic auth ``email:api-token``):

- ``GET /rest/api/3/project/{key}`` - ``{"id", "key", "name", "self", "issueTypes": [...]}``; ``404``
  ``{"errorMessages": ["No project could be found with key 'X'."], "errors": {}}``;
- ``GET /rest/api/3/issue/createmeta/{key}/issuetypes?startAt=&maxResults=`` - ``{"issueTypes": [...],
  "maxResults", "startAt", "total"}`` (the types the account may create; paged);
- ``GET /rest/api/3/user/search?query=`` - users ``{"accountId", "accountType", "emailAddress"?,
  "displayName", "active"}`` (the e-mail left out when the user hides it);
- ``GET /rest/api/3/search/jql?jql=&fields=&maxResults=`` - ``{"issues": [{"id", "key", "self", "fields"}],
  "isLast": true}``; the removed ``/rest/api/3/search`` answers ``410`` as Atlassian's does now;
- ``POST /rest/api/3/issue`` ``{"fields": {...}}`` - ``201 {"id", "key", "self"}``; the description must
  be an Atlassian Document (``400`` otherwise, as Jira Cloud answers a string on v3).

Data Center (``deployment="datacenter"``, REST v2, ``Authorization: Bearer <PAT>``, an optional context
path such as ``/jira``): ``GET /rest/api/2/project/{key}`` (with ``issueTypes``), ``GET
/rest/api/2/user/search?username=`` (``{"name", "key", "emailAddress", "displayName", "active"}``),
``GET /rest/api/2/search?jql=`` (``{"startAt", "maxResults", "total", "issues"}``), ``POST
/rest/api/2/issue`` with a plain-text description (an object is refused).

The JQL subset is ``labels = "x"`` (optionally ``AND project = K``) with an optional ``ORDER BY``; any
other query is a ``400``. Creating checks the project, the issue type (by ``id`` or ``name``, no
subtask), the summary (one line, at most 255), the labels (no spaces) and the reporter (a known user;
``400`` on ``reporter`` when :attr:`JiraStandIn.reporter_settable` is False, as Jira answers without
the *Modify Reporter* permission).

Faults are injected with :meth:`JiraStandIn.fail` (e.g. ``429`` with ``Retry-After`` on the create), and
``lose_answer`` makes a create store the issue and then answer ``502``, as when the answer of a request
that did reach Jira is lost. Every request is logged in :attr:`JiraStandIn.requests`.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.standins.base import Handler, StandIn

CLOUD_EMAIL = "jira-bot@example.com"
CLOUD_TOKEN = "jira-cloud-api-token-123"
DC_PAT = "jira-dc-personal-access-token-456"

DEFAULT_TYPES = (("10001", "Task", False), ("10002", "Bug", False), ("10003", "Story", False),
                 ("10004", "Sub-task", True))


@dataclass
class Fault:
    """Answer ``status`` (with ``headers``) to the next ``times`` requests matching ``pattern`` (``"POST /rest/..."``)."""

    pattern: re.Pattern[str]
    status: int
    times: int
    headers: dict[str, str]
    lose_answer: bool = False  # a create: store the issue, then answer ``status``
    hits: int = 0


@dataclass
class Request:
    """One request as the stand-in saw it."""

    method: str
    path: str
    query: dict[str, list[str]]
    body: Any = None
    auth: str = ""


@dataclass
class Project:
    id: str
    key: str
    name: str
    issue_types: list[tuple[str, str, bool]] = field(default_factory=lambda: list(DEFAULT_TYPES))


class _Handler(Handler):
    standin: JiraStandIn
    protocol_version = "HTTP/1.1"

    def _reply(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self.reply_json(status, payload, headers, content_type="application/json;charset=UTF-8")

    def _auth_ok(self) -> bool:
        st = self.standin
        got = self.headers.get("Authorization", "")
        if st.deployment == "cloud":
            return got == "Basic " + base64.b64encode(f"{CLOUD_EMAIL}:{CLOUD_TOKEN}".encode()).decode()
        return got == f"Bearer {DC_PAT}"

    def _handle(self, method: str) -> None:
        st = self.standin
        parts = urlsplit(self.path)
        query = parse_qs(parts.query, keep_blank_values=True)
        raw = b""
        if method == "POST":
            raw = self.body()
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                self._reply(400, {"errorMessages": ["Unexpected character in the request body"], "errors": {}})
                return
        path = parts.path
        if st.context_path:
            if not path.startswith(st.context_path + "/"):
                self._reply(404, {"errorMessages": ["not found"], "errors": {}})
                return
            path = path[len(st.context_path):]
        lose: Fault | None = None
        with st.lock:
            st.record(st.requests, Request(method, path, query, body, self.headers.get("Authorization", "")))
            for f in st.faults:
                if f.times > 0 and f.pattern.search(f"{method} {path}"):
                    f.times -= 1
                    f.hits += 1
                    if f.lose_answer:
                        lose = f
                        break
                    self._reply(f.status, {"errorMessages": ["injected fault"], "errors": {}}, f.headers)
                    return
        if not self._auth_ok():
            self._reply(401, {"errorMessages": ["You are not authenticated. Authentication required to perform "
                                                "this operation."], "errors": {}},
                        {"WWW-Authenticate": 'Basic realm="protected-area"' if st.deployment == "cloud"
                         else 'OAuth realm="https%3A%2F%2Fjira"'})
            return
        if method == "POST" and "json" not in (self.headers.get("Content-Type") or ""):
            self._reply(415, {"errorMessages": ["Unsupported Media Type"], "errors": {}})
            return
        status, payload = st.answer(method, path, query, body)
        if lose is not None and status < 300:
            self._reply(lose.status, {"errorMessages": ["Bad gateway (the issue was created)"], "errors": {}},
                        lose.headers)
            return
        self._reply(status, payload)

    def do_GET(self) -> None:  # noqa: N802
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._handle("POST")


class JiraStandIn(StandIn):
    """The server; use as a context manager or call :meth:`start` / :meth:`stop`.

    Args:
        deployment: ``cloud`` (REST v3) or ``datacenter`` (REST v2).
        context_path: Data Center's context path (``/jira``), "" for none.
    """

    handler = _Handler

    def __init__(self, deployment: str = "cloud", context_path: str = "") -> None:
        super().__init__()
        assert deployment in ("cloud", "datacenter")
        self.deployment = deployment
        self.context_path = context_path.rstrip("/")
        self.projects: dict[str, Project] = {}
        self.users: list[dict[str, Any]] = []
        self.issues: list[dict[str, Any]] = []
        self.requests: list[Request] = []
        self.faults: list[Fault] = []
        self.reporter_settable = True

    # -- set-up --------------------------------------------------------------------------------
    def add_project(self, key: str, name: str, issue_types: list[tuple[str, str, bool]] | None = None) -> None:
        with self.lock:
            self.projects[key] = Project(str(10000 + len(self.projects)), key, name,
                                         list(issue_types) if issue_types is not None else list(DEFAULT_TYPES))

    def add_user(self, email: str, name: str = "", hide_email: bool = False) -> dict[str, Any]:
        """A Jira user: Cloud ``accountId`` ``acc-<n>``, Data Center ``name`` (the part before the @ unless given)."""
        with self.lock:
            user = {"accountId": f"5b10ac8d82e05b22cc7d{len(self.users):04d}", "name": name or email.split("@")[0],
                    "email": email, "hidden": hide_email, "displayName": (name or email.split("@")[0]).title()}
            self.users.append(user)
            return user

    def fail(self, pattern: str, status: int, times: int = 1, headers: dict[str, str] | None = None,
             lose_answer: bool = False) -> Fault:
        f = Fault(re.compile(pattern), status, times, dict(headers or {}), lose_answer)
        with self.lock:
            self.faults.append(f)
        return f

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` and the context path."""
        return f"{self.origin}{self.context_path}"

    @property
    def version(self) -> str:
        return "3" if self.deployment == "cloud" else "2"

    def calls(self, method: str, path_part: str = "") -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.method == method and path_part in r.path]

    def issues_in(self, project: str) -> list[dict[str, Any]]:
        with self.lock:
            return [i for i in self.issues if i["fields"]["project"]["key"] == project]

    # -- the API -------------------------------------------------------------------------------
    def _user_view(self, u: dict[str, Any]) -> dict[str, Any]:
        if self.deployment == "cloud":
            out = {"accountId": u["accountId"], "accountType": "atlassian", "displayName": u["displayName"],
                   "active": True, "self": f"{self.url}/rest/api/3/user?accountId={u['accountId']}"}
        else:
            out = {"name": u["name"], "key": f"JIRAUSER{10000 + self.users.index(u)}", "displayName": u["displayName"],
                   "active": True, "self": f"{self.url}/rest/api/2/user?username={u['name']}"}
        if not u["hidden"]:
            out["emailAddress"] = u["email"]
        return out

    def _type_view(self, t: tuple[str, str, bool]) -> dict[str, Any]:
        return {"id": t[0], "name": t[1], "subtask": t[2], "description": "", "iconUrl": f"{self.url}/icon/{t[0]}",
                "self": f"{self.url}/rest/api/{self.version}/issuetype/{t[0]}"}

    def answer(self, method: str, path: str, q: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        one = {k: v[-1] for k, v in q.items()}
        v = self.version
        api = f"/rest/api/{v}/"
        if not path.startswith(api):
            if self.deployment == "cloud" and path == "/rest/api/3/search":
                return 410, {"errorMessages": ["The requested API has been removed. Please migrate to the "
                                               "/rest/api/3/search/jql API."], "errors": {}}
            return 404, {"errorMessages": [f"null for uri: {path}"], "errors": {}}
        rest = path[len(api):]
        with self.lock:
            if method == "GET" and (m := re.fullmatch(r"project/([^/]+)", rest)):
                p = self.projects.get(m.group(1).upper())
                if p is None:
                    return 404, {"errorMessages": [f"No project could be found with key '{m.group(1)}'."], "errors": {}}
                return 200, {"id": p.id, "key": p.key, "name": p.name, "self": f"{self.url}{api}project/{p.id}",
                             "projectTypeKey": "software", "issueTypes": [self._type_view(t) for t in p.issue_types]}
            if method == "GET" and self.deployment == "cloud" and (
                    m := re.fullmatch(r"issue/createmeta/([^/]+)/issuetypes", rest)):
                p = self.projects.get(m.group(1).upper())
                if p is None:
                    return 404, {"errorMessages": ["Issue Does Not Exist"], "errors": {}}
                start, size = int(one.get("startAt", 0)), min(int(one.get("maxResults", 50)), 2)  # small pages
                page = p.issue_types[start:start + size]
                return 200, {"issueTypes": [self._type_view(t) for t in page], "maxResults": size, "startAt": start,
                             "total": len(p.issue_types)}
            if method == "GET" and rest == "user/search":
                needle = (one.get("query") if self.deployment == "cloud" else one.get("username")) or ""
                if not needle:
                    return 400, {"errorMessages": ["The username query parameter was not provided"], "errors": {}}
                n = needle.lower()
                hits = [u for u in self.users if n in u["email"].lower() or n in u["displayName"].lower()
                        or (self.deployment != "cloud" and n in u["name"].lower())]
                return 200, [self._user_view(u) for u in hits]
            if method == "GET" and rest == ("search/jql" if self.deployment == "cloud" else "search"):
                return self._search(one)
            if method == "POST" and rest == "issue":
                return self._create(body)
        return 404, {"errorMessages": [f"null for uri: {path}"], "errors": {}}

    def _search(self, one: dict[str, str]) -> tuple[int, Any]:
        jql = one.get("jql", "")
        m = re.fullmatch(r'\s*labels\s*=\s*"([^"]+)"(?:\s+AND\s+project\s*=\s*"?([A-Z0-9_]+)"?)?'
                         r'(?:\s+ORDER\s+BY\s+\w+(?:\s+(?:ASC|DESC))?)?\s*', jql, re.I)
        if not m:
            return 400, {"errorMessages": [f"Error in the JQL Query: the stand-in cannot read {jql!r}."], "errors": {}}
        label, project = m.group(1), m.group(2)
        hits = [i for i in self.issues if label in i["fields"].get("labels", [])
                and (project is None or i["fields"]["project"]["key"] == project)]
        size = int(one.get("maxResults", 50))
        issues = [{"id": i["id"], "key": i["key"], "self": i["self"], "fields": {"summary": i["fields"]["summary"]}}
                  for i in hits[:size]]
        if self.deployment == "cloud":
            return 200, {"issues": issues, "isLast": len(hits) <= size}
        return 200, {"startAt": 0, "maxResults": size, "total": len(hits), "issues": issues}

    def _create(self, body: Any) -> tuple[int, Any]:
        fields = body.get("fields") if isinstance(body, dict) else None
        if not isinstance(fields, dict):
            return 400, {"errorMessages": ["Can not deserialize instance of fields"], "errors": {}}
        errors: dict[str, str] = {}
        key = (fields.get("project") or {}).get("key") or ""
        p = self.projects.get(key)
        if p is None:
            errors["project"] = "valid project is required"
        itype = fields.get("issuetype") or {}
        t = None
        if p is not None:
            t = next((x for x in p.issue_types if ("id" in itype and x[0] == itype["id"])
                      or ("name" in itype and x[1] == itype["name"])), None)
            if t is None or t[2]:
                errors["issuetype"] = "Specify a valid issue type" if t is None else "Issue type is a sub-task but parent issue key or id not specified."
        summary = fields.get("summary")
        if not isinstance(summary, str) or not summary.strip():
            errors["summary"] = "You must specify a summary of the issue."
        elif len(summary) > 255 or "\n" in summary:
            errors["summary"] = "Summary must be less than 255 characters and one line."
        desc = fields.get("description")
        if self.deployment == "cloud":
            if desc is not None and not (isinstance(desc, dict) and desc.get("type") == "doc"
                                         and desc.get("version") == 1 and isinstance(desc.get("content"), list)):
                errors["description"] = "Operation value must be an Atlassian Document (see the Atlassian Document Format)"
        elif desc is not None and not isinstance(desc, str):
            errors["description"] = "Operation value must be a string"
        labels = fields.get("labels", [])
        if not isinstance(labels, list) or any(not isinstance(x, str) or " " in x or len(x) > 255 for x in labels):
            errors["labels"] = "The label must not contain spaces and must be at most 255 characters."
        reporter = fields.get("reporter")
        if reporter is not None:
            if not self.reporter_settable:
                errors["reporter"] = ("Field 'reporter' cannot be set. It is not on the appropriate screen, "
                                      "or unknown.")
            else:
                ident = reporter.get("accountId") if self.deployment == "cloud" else reporter.get("name")
                attr = "accountId" if self.deployment == "cloud" else "name"
                if not any(u[attr] == ident for u in self.users):
                    errors["reporter"] = "Specified reporter is not a user." if ident else "Reporter is required."
        if errors:
            return 400, {"errorMessages": [], "errors": errors}
        assert p is not None
        number = len(self.issues_in(p.key)) + 1
        issue_id = str(20000 + len(self.issues))
        issue = {"id": issue_id, "key": f"{p.key}-{number}", "self": f"{self.url}/rest/api/{self.version}/issue/{issue_id}",
                 "fields": {**fields, "project": {"key": p.key}, "issuetype": {"id": t[0], "name": t[1]}}}  # type: ignore[index]
        self.issues.append(issue)
        return 201, {"id": issue["id"], "key": issue["key"], "self": issue["self"]}
