"""Jira's REST API as ``ticket.create`` needs it: Cloud (REST v3) and Data Center (REST v2).

Authentication is the Confluence connector's: Cloud takes the Atlassian account's e-mail and an API
token as HTTP basic auth; Data Center a personal access token as ``Authorization: Bearer``. Requests go
through ``httpx`` with a ``tenacity`` retry policy (:class:`connectors.http.RetryPolicy`): ``429`` and
``503`` wait the response's ``Retry-After`` (clamped), other ``5xx``, timeouts and transport errors back
off exponentially; ``401``/``403`` and other ``4xx`` are never retried.

The calls, per deployment (``v`` is ``3`` on Cloud, ``2`` on Data Center):

- the project: ``GET /rest/api/{v}/project/{key}`` (``404``: no such project, or one the account may
  not browse); its issue types: Cloud ``GET /rest/api/3/issue/createmeta/{key}/issuetypes`` (the types
  the account may *create*; paged), Data Center the project's ``issueTypes``;
- the requester: Cloud ``GET /rest/api/3/user/search?query=<e-mail>`` (``accountId``), Data Center
  ``GET /rest/api/2/user/search?username=<e-mail>`` (``name``);
- the exactly-once check: Cloud ``GET /rest/api/3/search/jql?jql=...`` (the enhanced search that
  replaced ``/rest/api/3/search``), Data Center ``GET /rest/api/2/search?jql=...``;
- the ticket: ``POST /rest/api/{v}/issue`` with ``{"fields": ...}`` (Cloud: the description in the
  Atlassian Document Format; Data Center: plain text) -> ``201 {"id", "key", "self"}``.

Creating is not idempotent in Jira, so a create is never blindly retried: :meth:`JiraClient.file_once`
looks the action's label up before every attempt (see :mod:`tools.jira.tool` for the whole decision).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from connectors.http import RetryPolicy, parse_retry_after

__all__ = ["JiraClient", "JiraError", "JiraAuthError", "JiraUnavailableError", "JiraRefusedError", "Project",
           "IssueType", "Filed", "Deployment", "deployment_for"]

log = logging.getLogger(__name__)
_T = TypeVar("_T")

Deployment = Literal["cloud", "datacenter"]
USER_AGENT = "chatops/0.1 (ticket.create)"
_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class JiraError(Exception):
    """A Jira call failed. ``retryable``: trying again later may work."""

    retryable = False


class JiraAuthError(JiraError):
    """``401``/``403``: the credentials were refused or lack a permission."""


class JiraRefusedError(JiraError):
    """Jira refused the request (``400``, ``404``...): the message says what Jira said.

    Attributes:
        status: the HTTP status.
        errors: Jira's ``errors`` object (field -> message).
    """

    def __init__(self, message: str, status: int, errors: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.errors = dict(errors or {})


class JiraUnavailableError(JiraError):
    """Jira could not be reached, timed out or kept answering ``429``/``5xx``."""

    retryable = True


class _Retry(Exception):
    """One retryable answer (inside the retry loop)."""

    def __init__(self, what: str, retry_after: float | None = None) -> None:
        super().__init__(what)
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class IssueType:
    """An issue type of a project (``subtask``: it needs a parent, so a chat request cannot make one)."""

    id: str
    name: str
    subtask: bool = False


@dataclass(frozen=True, slots=True)
class Project:
    """A Jira project and the issue types the account may create in it."""

    key: str
    name: str
    issue_types: tuple[IssueType, ...]

    def issue_type(self, name: str) -> IssueType | None:
        """The (non-subtask) type called ``name``, case-insensitively, or None."""
        want = name.strip().lower()
        return next((t for t in self.issue_types if t.name.lower() == want and not t.subtask), None)

    @property
    def type_names(self) -> list[str]:
        """The names of the types a ticket can have (no subtasks)."""
        return [t.name for t in self.issue_types if not t.subtask]


@dataclass(frozen=True, slots=True)
class Filed:
    """A ticket in Jira: its key, browse link, and whether this call created it (False: found by its label)."""

    key: str
    id: str
    link: str
    created: bool


def deployment_for(url: str, deployment: str | None) -> Deployment:
    """``cloud`` or ``datacenter``: as given, else ``cloud`` for ``*.atlassian.net`` and ``datacenter`` otherwise."""
    if deployment == "cloud":
        return "cloud"
    if deployment == "datacenter":
        return "datacenter"
    host = httpx.URL(url).host or ""
    return "cloud" if host.endswith(".atlassian.net") else "datacenter"


class JiraClient:
    """A small Jira REST client (see the module docstring).

    Args:
        base_url: the site (``https://acme.atlassian.net``, ``https://jira.acme.com`` or with a context
            path, ``https://intranet.acme.com/jira``).
        deployment: ``cloud`` or ``datacenter`` (see :func:`deployment_for`).
        email, api_token: Cloud's basic auth.
        pat: Data Center's personal access token.
        timeout: seconds per request (connect at most 10).
        policy: the retry policy (``attempts`` per call; ``sleep`` is replaceable in tests).
        client: an ``httpx.Client`` to use (the caller closes it).
        cache_seconds: how long a project's issue types are kept (the preview and the filing reuse them).
    """

    def __init__(self, base_url: str, deployment: Deployment, *, email: str = "", api_token: str = "", pat: str = "",
                 timeout: float = 20.0, policy: RetryPolicy | None = None, client: httpx.Client | None = None,
                 cache_seconds: float = 300.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.base_url = base_url.rstrip("/")
        self.deployment: Deployment = deployment
        self.version = "3" if deployment == "cloud" else "2"
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        self._auth: httpx.Auth | None = None
        if deployment == "cloud":
            if not (email and api_token):
                raise JiraAuthError("Jira Cloud needs JIRA_EMAIL (the Atlassian account's e-mail) and JIRA_API_TOKEN")
            self._auth = httpx.BasicAuth(email, api_token)
            self.auth_hint = ("check JIRA_EMAIL and JIRA_API_TOKEN (an API token of that Atlassian account, "
                              "id.atlassian.com > Security > API tokens)")
        else:
            if not pat:
                raise JiraAuthError("Jira Data Center needs JIRA_PAT (a personal access token)")
            headers["Authorization"] = f"Bearer {pat}"
            self.auth_hint = "check JIRA_PAT (a personal access token of the bot's Jira account, not expired)"
        self._headers = headers
        self.policy = policy or RetryPolicy(attempts=4, backoff_initial=1.0, backoff_max=8.0, retry_after_max=30.0)
        self._own = client is None
        self.client = client or httpx.Client(timeout=httpx.Timeout(timeout, connect=min(10.0, timeout)))
        self.cache_seconds = cache_seconds
        self._clock = clock
        self._projects: dict[str, tuple[float, Project | None]] = {}
        self._lock = threading.Lock()
        self.calls = 0

    def close(self) -> None:
        """Close the HTTP client (unless it was passed in)."""
        if self._own:
            self.client.close()

    def api(self, path: str) -> str:
        """``/rest/api/{v}/`` + ``path``."""
        return f"{self.base_url}/rest/api/{self.version}/{path.lstrip('/')}"

    def browse_link(self, key: str) -> str:
        """The ticket's page: ``{site}/browse/{key}``."""
        return f"{self.base_url}/browse/{key}"

    # -- HTTP ------------------------------------------------------------------------------------
    def _send(self, method: str, url: str, *, params: Mapping[str, Any] | None = None,
              json: Any = None) -> httpx.Response:
        """One request; raises :class:`_Retry` for a retryable answer, :class:`JiraAuthError` for 401/403."""
        self.calls += 1
        try:
            resp = self.client.request(method, url, params=params, json=json, headers=self._headers,
                                       auth=self._auth if self._auth is not None else httpx.USE_CLIENT_DEFAULT)
        except (httpx.TimeoutException, httpx.TransportError) as exc:
            raise _Retry(f"{type(exc).__name__}: {exc}") from exc
        if resp.status_code in _RETRY_STATUSES:
            raise _Retry(f"HTTP {resp.status_code}", parse_retry_after(resp.headers.get("Retry-After")))
        if resp.status_code == 401:
            raise JiraAuthError(f"Jira refused the bot's credentials (401); {self.auth_hint}")
        if resp.status_code == 403:
            raise JiraAuthError(f"Jira answered 403 Forbidden for {method} {httpx.URL(url).path}: the bot's account "
                                f"lacks a permission ({_messages(resp) or 'no detail'})")
        return resp

    def _retrying(self, what: str) -> Retrying:
        def wait(state: RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome else None
            return self.policy.wait(state.attempt_number, getattr(exc, "retry_after", None))

        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            log.warning("Jira %s: %s; retry %d/%d in %.1f s", what, exc, state.attempt_number,
                        self.policy.attempts - 1, state.next_action.sleep if state.next_action else 0.0)

        return Retrying(stop=stop_after_attempt(self.policy.attempts), wait=wait,
                        retry=retry_if_exception(lambda e: isinstance(e, _Retry)), before_sleep=before_sleep,
                        sleep=self.policy.sleep, reraise=True)

    def _call(self, what: str, fn: Callable[[], _T]) -> _T:
        try:
            for attempt in self._retrying(what):
                with attempt:
                    return fn()
        except _Retry as exc:
            raise JiraUnavailableError(f"Jira did not answer ({what}: {exc}) after {self.policy.attempts} tries; "
                                       "try again in a moment") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _get(self, path: str, params: Mapping[str, Any] | None = None, *, what: str) -> httpx.Response:
        return self._call(what, lambda: self._send("GET", self.api(path), params=params))

    # -- reads -----------------------------------------------------------------------------------
    def project(self, key: str) -> Project | None:
        """The project ``key`` with its creatable issue types, or None when Jira knows none (or the
        account may not browse it). Cached for ``cache_seconds``.

        Raises:
            JiraAuthError, JiraUnavailableError, JiraRefusedError.
        """
        key = key.upper()
        with self._lock:
            hit = self._projects.get(key)
            if hit and self._clock() - hit[0] < self.cache_seconds:
                return hit[1]
        resp = self._get(f"project/{key}", what=f"project {key}")
        if resp.status_code == 404:
            found = None
        else:
            data = _json(resp, "project")
            name = str(data.get("name") or key)
            types = (self._create_types(key) if self.deployment == "cloud"
                     else [_issue_type(t) for t in data.get("issueTypes") or []])
            found = Project(str(data.get("key") or key), name, tuple(types))
        with self._lock:
            self._projects[key] = (self._clock(), found)
        return found

    def cached_project(self, key: str) -> Project | None:
        """The project ``key`` as last read by :meth:`project` (no call; None when never read or unknown)."""
        with self._lock:
            hit = self._projects.get(key.upper())
        return hit[1] if hit else None

    def _create_types(self, key: str) -> list[IssueType]:
        """Cloud's creatable issue types of ``key`` (createmeta, every page)."""
        types: list[IssueType] = []
        start = 0
        while True:
            resp = self._get(f"issue/createmeta/{key}/issuetypes", {"startAt": start, "maxResults": 50},
                             what=f"issue types of {key}")
            if resp.status_code == 404:
                return types
            data = _json(resp, "issue types")
            page = data.get("issueTypes") or data.get("createMetaIssueType") or data.get("values") or []
            types += [_issue_type(t) for t in page]
            start += len(page)
            if not page or start >= int(data.get("total") or 0):
                return types

    def find_user(self, email: str) -> dict[str, str] | None:
        """The Jira user with the e-mail ``email`` as a ``reporter`` value (Cloud ``{"accountId"}``, Data
        Center ``{"name"}``), or None when none (or more than one without an exact e-mail match)."""
        if not email:
            return None
        cloud = self.deployment == "cloud"
        resp = self._get("user/search", {"query" if cloud else "username": email, "maxResults": 10},
                         what="user search")
        if resp.status_code >= 400:
            log.info("Jira user search for the requester answered %s", resp.status_code)
            return None
        users = [u for u in _json(resp, "user search") or [] if isinstance(u, dict) and u.get("active", True)]
        exact = [u for u in users if str(u.get("emailAddress") or "").lower() == email.lower()]
        pick = exact[0] if len(exact) == 1 else (users[0] if len(users) == 1 else None)
        if pick is None:
            return None
        if cloud:
            return {"accountId": str(pick["accountId"])} if pick.get("accountId") else None
        return {"name": str(pick["name"])} if pick.get("name") else None

    def find_labelled(self, label: str) -> dict[str, str] | None:
        """The issue carrying ``label`` (``{"id", "key"}``), or None."""
        params = {"jql": f'labels = "{label}" ORDER BY created ASC', "fields": "summary", "maxResults": 1}
        path = "search/jql" if self.deployment == "cloud" else "search"
        resp = self._send("GET", self.api(path), params=params)
        if resp.status_code >= 400:
            raise JiraRefusedError(f"Jira refused the search for an earlier attempt ({resp.status_code}: "
                                   f"{_messages(resp)})", resp.status_code)
        issues = (_json(resp, "search") or {}).get("issues") or []
        return {"id": str(issues[0].get("id")), "key": str(issues[0]["key"])} if issues else None

    # -- the one write ---------------------------------------------------------------------------
    def file_once(self, label: str, fields: dict[str, Any]) -> Filed:
        """Create the issue ``fields`` (which carry ``label`` in ``labels``) unless one with ``label``
        exists; every attempt, retries included, searches first, so an attempt whose answer was lost
        (a timeout, a 502 after Jira created it) is found instead of filed again.

        Raises:
            JiraRefusedError: Jira refused the fields (400: its ``errors`` say which).
            JiraAuthError, JiraUnavailableError.
        """
        def attempt() -> Filed:
            found = self.find_labelled(label)
            if found:
                return Filed(found["key"], found["id"], self.browse_link(found["key"]), created=False)
            resp = self._send("POST", self.api("issue"), json={"fields": fields})
            if resp.status_code >= 400:
                errors = _errors(resp)
                raise JiraRefusedError(f"Jira refused the ticket ({resp.status_code}): {_messages(resp)}",
                                       resp.status_code, errors)
            data = _json(resp, "create")
            return Filed(str(data["key"]), str(data.get("id") or ""), self.browse_link(str(data["key"])), created=True)

        return self._call("create issue", attempt)


def _issue_type(t: Mapping[str, Any]) -> IssueType:
    return IssueType(str(t.get("id") or ""), str(t.get("name") or ""), bool(t.get("subtask")))


def _json(resp: httpx.Response, what: str) -> Any:
    try:
        return resp.json()
    except ValueError as exc:
        raise JiraRefusedError(f"Jira sent {resp.headers.get('content-type', 'no content type')} instead of JSON "
                               f"for the {what} ({resp.status_code}); check JIRA_URL points at the Jira site",
                               resp.status_code) from exc


def _errors(resp: httpx.Response) -> dict[str, str]:
    try:
        data = resp.json()
    except ValueError:
        return {}
    errors = data.get("errors") if isinstance(data, dict) else None
    return {str(k): str(v) for k, v in errors.items()} if isinstance(errors, dict) else {}


def _messages(resp: httpx.Response) -> str:
    """Jira's error text: ``errorMessages`` and ``errors`` joined, else the body's start."""
    try:
        data = resp.json()
    except ValueError:
        return resp.text[:200].replace("\n", " ")
    if not isinstance(data, dict):
        return str(data)[:200]
    parts = [str(m) for m in data.get("errorMessages") or []]
    parts += [f"{k}: {v}" for k, v in (data.get("errors") or {}).items()]
    return "; ".join(parts) or str(data)[:200]
