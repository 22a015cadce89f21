"""The HTTP client the Confluence and MediaWiki connectors share: ``httpx`` plus a ``tenacity`` retry policy.

What is retried, and how long it waits (all waits in seconds):

- ``429 Too Many Requests`` and ``503 Service Unavailable``: after the response's ``Retry-After``
  (delta-seconds or an HTTP-date, RFC 9110 section 10.2.3), clamped to
  ``[retry_after_min, retry_after_max]`` because servers send absurd values (Atlassian has been seen
  sending ``Retry-After: 9223372036854775807``); without the header, the backoff below.
- ``500``, ``502``, ``504``, timeouts and transport errors (connection refused or reset): exponential
  backoff with jitter, ``uniform(0.5, 1) * min(backoff_max, backoff_initial * 2 ** (attempt - 1))``
  ("equal jitter", so concurrent clients spread out), honouring a ``Retry-After`` when one is sent.
- Nothing else. ``401`` raises :class:`SourceAuthError` (bad or missing credentials), ``403`` raises
  :class:`SourceAuthError` too: Confluence Data Center's rate limiter answers ``429`` (Atlassian's
  "Improving instance stability with rate limiting"), so a ``403`` there is a permission problem and
  retrying it would only hide it. ``404`` is returned to the caller when it asked for it (a page
  purged upstream is a deletion, not an error); other ``4xx`` raise :class:`HttpStatusError`.

After ``attempts`` tries the last error is raised (a :class:`SourceUnavailableError` subclass, so
callers that catch connector errors see it); nothing is retried forever.

Every client has finite timeouts (default 10 s to connect, 30 s to read) and counts the requests it
sent (``calls``, retries included), which the sync summary and the benchmark report.
"""

from __future__ import annotations

import email.utils
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from .errors import SourceUnavailableError

__all__ = [
    "RetryPolicy", "HttpClient", "HttpBackedSource", "HttpStatusError", "SourceAuthError", "RetryableHTTPError",
    "parse_retry_after", "DEFAULT_TIMEOUT", "USER_AGENT",
]

log = logging.getLogger(__name__)

#: 10 s to connect, 30 s for each read/write/pool wait: a hung server fails a try, it cannot hang a sync.
DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=10.0)
USER_AGENT = "chatops-sync/0.1 (knowledge-base connector)"


class HttpStatusError(SourceUnavailableError):
    """The server answered with an HTTP status the connector cannot use.

    Attributes:
        status: the HTTP status code.
        url: the request URL (without credentials).
    """

    def __init__(self, message: str, status: int, url: str) -> None:
        super().__init__(message)
        self.status = status
        self.url = url


class SourceAuthError(HttpStatusError):
    """401/403, or a wiki that refused the login: the credentials are missing, wrong or lack rights."""


class RetryableHTTPError(SourceUnavailableError):
    """A response worth retrying (429, 5xx); raised only after the retry budget is spent.

    Attributes:
        status: the HTTP status code.
        retry_after: the server's ``Retry-After`` in seconds (unclamped), or ``None``.
    """

    def __init__(self, message: str, status: int, retry_after: float | None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (RFC 9110 section 10.2.3).

    Args:
        value: the header value: delta-seconds (``"120"``) or an HTTP-date
            (``"Wed, 21 Oct 2015 07:28:00 GMT"``).
        now: the current time for HTTP-dates (default: now, UTC).

    Returns:
        Seconds (never negative), or ``None`` when the header is absent or unparseable.
    """
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - (now or datetime.now(timezone.utc))).total_seconds())


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how long to retry (see the module docstring). Times in seconds.

    Attributes:
        attempts: total tries per request (first try included), at least 1.
        backoff_initial: the first backoff wait before jitter.
        backoff_max: the cap of one backoff wait.
        retry_after_min: a ``Retry-After`` shorter than this waits this long.
        retry_after_max: a ``Retry-After`` longer than this waits this long (then tries again).
        retry_statuses: statuses retried.
        sleep: the sleep function (``time.sleep``).
    """

    attempts: int = 6
    backoff_initial: float = 1.0
    backoff_max: float = 30.0
    retry_after_min: float = 0.0
    retry_after_max: float = 120.0
    retry_statuses: frozenset[int] = field(default_factory=lambda: frozenset({429, 500, 502, 503, 504}))
    sleep: Callable[[float], None] = time.sleep

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("RetryPolicy.attempts must be at least 1")
        if not (0 <= self.retry_after_min <= self.retry_after_max):
            raise ValueError("RetryPolicy needs 0 <= retry_after_min <= retry_after_max")

    def wait(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before try ``attempt + 1`` after try ``attempt`` (from 1) failed.

        ``retry_after`` is the server's ``Retry-After`` in seconds, or ``None``.
        """
        if retry_after is not None:
            return min(self.retry_after_max, max(self.retry_after_min, retry_after))
        cap = min(self.backoff_max, self.backoff_initial * (2.0 ** (attempt - 1)))
        return cap * random.uniform(0.5, 1.0)


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, (RetryableHTTPError, httpx.TimeoutException, httpx.TransportError))


class HttpClient:
    """An ``httpx.Client`` with the retry policy, clear errors and a request counter.

    Args:
        base_url: prefix of relative request paths (``http://127.0.0.1:8090/confluence``).
        service: what the server is, for messages (``"Confluence"``, ``"MediaWiki"``).
        auth: an ``httpx`` auth object (basic auth), or ``None``.
        headers: extra headers (``Authorization: Bearer ...``); ``Accept: application/json`` is added.
        timeout: per-request timeouts (default :data:`DEFAULT_TIMEOUT`); must be finite.
        policy: the retry policy.
        auth_hint: appended to 401/403 errors: which settings or env vars to check.
        client: an existing ``httpx.Client`` to use instead (tests, proxies); the caller closes it.

    Attributes:
        calls: HTTP requests sent, retries included.
        retries: of which retries.
    """

    def __init__(self, base_url: str, service: str, *, auth: httpx.Auth | tuple[str, str] | None = None,
                 headers: Mapping[str, str] | None = None, timeout: httpx.Timeout | float | None = None,
                 policy: RetryPolicy | None = None, auth_hint: str = "", client: httpx.Client | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.service = service
        self.policy = policy or RetryPolicy()
        self.auth_hint = auth_hint
        self.calls = 0
        self.retries = 0
        hdrs = {"Accept": "application/json", "User-Agent": USER_AGENT, **(headers or {})}
        t = timeout if timeout is not None else DEFAULT_TIMEOUT
        if isinstance(t, (int, float)):
            t = httpx.Timeout(float(t), connect=min(10.0, float(t)))
        self._own = client is None
        self.client = client or httpx.Client(timeout=t, follow_redirects=True)
        self._auth = auth
        self._headers = hdrs

    def close(self) -> None:
        """Close the underlying client (unless it was passed in)."""
        if self._own:
            self.client.close()

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def url(self, path_or_url: str) -> str:
        """An absolute URL: ``path_or_url`` itself when absolute, else ``base_url + path``."""
        if path_or_url.startswith(("http://", "https://")):
            return path_or_url
        return self.base_url + ("" if path_or_url.startswith("/") else "/") + path_or_url

    def request(self, method: str, path_or_url: str, *, params: Mapping[str, Any] | None = None,
                data: Mapping[str, Any] | None = None, allow_404: bool = False) -> httpx.Response:
        """Send a request with retries; returns a 2xx response (or a 404 when ``allow_404``).

        Raises:
            SourceAuthError: on 401 or 403 (message says which credentials to check).
            HttpStatusError: on any other status that is not retried (the body's start is quoted).
            RetryableHTTPError: when 429/5xx persisted for every try.
            SourceUnavailableError: when the server could not be reached or timed out on every try.
        """
        url = self.url(path_or_url)
        attempt = 0

        def wait(state: RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome else None
            return self.policy.wait(state.attempt_number, getattr(exc, "retry_after", None))

        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            self.retries += 1
            log.warning("%s %s: %s; retry %d/%d in %.1f s", method, _redact(url), _describe(exc),
                        state.attempt_number, self.policy.attempts - 1,
                        state.next_action.sleep if state.next_action else 0.0)

        retrying = Retrying(stop=stop_after_attempt(self.policy.attempts), wait=wait,
                            retry=retry_if_exception(_retryable), before_sleep=before_sleep,
                            sleep=self.policy.sleep, reraise=True)
        try:
            for att in retrying:
                with att:
                    attempt += 1
                    resp = self._send(method, url, params, data)
        except RetryableHTTPError as exc:
            raise RetryableHTTPError(
                f"{self.service} at {_redact(url)} kept answering HTTP {exc.status} after {attempt} tries; "
                "the server is overloaded or failing: try again later", exc.status, exc.retry_after) from exc
        except httpx.TimeoutException as exc:
            raise SourceUnavailableError(
                f"{self.service} at {_redact(url)} timed out on {attempt} tries ({type(exc).__name__}); "
                "check that the server is up, or raise timeout_seconds for this source") from exc
        except httpx.TransportError as exc:
            raise SourceUnavailableError(
                f"cannot reach {self.service} at {_redact(url)} ({type(exc).__name__}: {exc}) after {attempt} "
                "tries; check the source's URL and the network") from exc
        status = resp.status_code
        if 200 <= status < 300 or (status == 404 and allow_404):
            return resp
        body = resp.text[:300].replace("\n", " ")
        if status == 401:
            raise SourceAuthError(f"{self.service} at {_redact(url)} answered 401 Unauthorized: the credentials "
                                  f"were refused. {self.auth_hint}".strip(), status, url)
        if status == 403:
            raise SourceAuthError(f"{self.service} at {_redact(url)} answered 403 Forbidden: the account lacks "
                                  f"permission for this request. {self.auth_hint} Server said: {body}".strip(),
                                  status, url)
        raise HttpStatusError(f"{self.service} at {_redact(url)} answered HTTP {status}: {body}", status, url)

    def get(self, path_or_url: str, params: Mapping[str, Any] | None = None, *, allow_404: bool = False
            ) -> httpx.Response:
        """``GET`` with retries (see :meth:`request`)."""
        return self.request("GET", path_or_url, params=params, allow_404=allow_404)

    def get_json(self, path_or_url: str, params: Mapping[str, Any] | None = None) -> Any:
        """``GET`` and decode JSON.

        Raises:
            HttpStatusError: when the body is not JSON (e.g. a login page from a proxy), besides
                everything :meth:`request` raises.
        """
        resp = self.get(path_or_url, params)
        return decode_json(resp, self.service)

    def _send(self, method: str, url: str, params: Mapping[str, Any] | None,
              data: Mapping[str, Any] | None) -> httpx.Response:
        self.calls += 1
        resp = self.client.request(method, url, params=params, data=data, headers=self._headers,
                                   auth=self._auth if self._auth is not None else httpx.USE_CLIENT_DEFAULT)
        if resp.status_code in self.policy.retry_statuses:
            retry_after = parse_retry_after(resp.headers.get("Retry-After"))
            raise RetryableHTTPError(f"HTTP {resp.status_code}", resp.status_code, retry_after)
        return resp


class HttpBackedSource:
    """What every source that talks HTTP through one :class:`HttpClient` (``self.http``) reports and releases:
    the request counters the sync engine reads (:class:`connectors.base.IncrementalSource`) and ``close``."""

    http: HttpClient

    @property
    def calls(self) -> int:
        """HTTP requests sent so far (retries included)."""
        return self.http.calls

    @property
    def retries(self) -> int:
        """HTTP requests sent again after a failure, so far (of :attr:`calls`)."""
        return self.http.retries

    def close(self) -> None:
        """Close the HTTP client."""
        self.http.close()


def decode_json(resp: httpx.Response, service: str) -> Any:
    """The JSON body of ``resp``.

    Raises:
        HttpStatusError: when the body is not JSON, quoting its start and content type.
    """
    try:
        return resp.json()
    except ValueError as exc:
        raise HttpStatusError(
            f"{service} at {_redact(str(resp.request.url))} sent {resp.headers.get('content-type', 'no content type')} "
            f"instead of JSON ({resp.text[:120]!r}); check that the URL points at the API", resp.status_code,
            str(resp.request.url)) from exc


def _describe(exc: BaseException | None) -> str:
    if isinstance(exc, RetryableHTTPError):
        ra = f", Retry-After {exc.retry_after:g} s" if exc.retry_after is not None else ""
        return f"HTTP {exc.status}{ra}"
    return type(exc).__name__ if exc else "error"


def _redact(url: str) -> str:
    """``url`` without user info (never log credentials)."""
    try:
        u = httpx.URL(url)
    except Exception:  # noqa: BLE001 - only for messages
        return url
    return str(u.copy_with(username=None, password=None)) if u.userinfo else str(u)
