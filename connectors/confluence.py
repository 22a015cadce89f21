"""The Confluence connector: Cloud (REST v2) and Data Center (REST v1 + CQL), over plain ``httpx``.

Documents are keyed by page id (``doc_id = "page/<id>"``), so a renamed or moved page keeps its
place in the index. Bodies are read in storage format and converted by
:mod:`connectors.storage_format`; ``Document.access`` holds the page's effective read access (the
space's read permission AND the read restrictions of the page and of every ancestor), resolved by
:mod:`connectors.confluence_access`, which also reads the members of the groups it names
(:meth:`ConfluenceSource.memberships`, stored by the sync engine). :meth:`ConfluenceSource.permissions`
re-reads the access of every indexed page for the permission sync (a restriction or group change
does not bump a page's version, so the incremental sync cannot see it).

Cloud (``deployment: cloud``), REST v2, basic auth with e-mail + API token:

- spaces: ``GET /wiki/api/v2/spaces?keys=ENG,OPS``;
- pages of a space: ``GET /wiki/api/v2/spaces/{id}/pages?status=current&sort=...&limit=...``,
  followed through ``_links.next`` or, when absent, the ``Link: <...>; rel="next"`` header;
- one page: ``GET /wiki/api/v2/pages/{id}?body-format=storage`` (``status`` other than
  ``current``, e.g. ``trashed``, or a 404 means the page is gone);
- read access: see :mod:`connectors.confluence_access` (space permissions, ancestors, restrictions,
  group members, users' e-mails).

Data Center (``deployment: datacenter``), REST v1, ``Authorization: Bearer <personal access token>``:

- listings: ``GET /rest/api/content/search?cql=...&start=&limit=&expand=...`` following
  ``_links.next`` (relative to ``_links.base``, which already holds the context path: joining it
  to a base URL that also has one must not double ``/confluence``), else ``start += size``;
- one page: ``GET /rest/api/content/{id}?expand=body.storage,version,space,restrictions...,ancestors``
  (a trashed page answers 404 unless ``status`` is asked for).

Incremental sync (:meth:`ConfluenceSource.sync`):

1. The change listing goes back to the watermark minus ``overlap_minutes``: v2 lists a space's
   pages sorted by ``-modified-date`` and stops at the first older page; v1 asks CQL
   ``lastmodified >= "yyyy/MM/dd HH:mm"``. CQL reads that time in the *site's* time zone, to the
   minute, so the time is written in ``timezone`` when configured, else in UTC with the window
   widened by 12 hours. Pages seen last time at the same version (the cursor's ``seen`` map of id
   to version number over the overlap window) are skipped; the others are fetched with their bodies.
2. The id listing (no bodies) of every space is the authority for pruning, and only once it
   completed: an indexed page it lacks is fetched again, and becomes a :class:`Tombstone` when that
   answers 404, a status other than ``current``, or a space that is not configured. A listed page that
   is not indexed (a space added to the config, a page moved in) is fetched.
3. The new watermark is the server's time when the listing started (its ``Date`` header).

A first run or ``full`` lists every page with its body instead of step 1. A page whose fetch
failed after the retries, or whose body raised anything while converted (markup the converter
cannot read), is reported as a :class:`SkippedPage` (its indexed copy is kept) and carried in the
cursor's ``retry`` list for the next run, as is a page the indexer could not chunk (the engine's
``retry_docs``, see :mod:`index.sync`).
"""

from __future__ import annotations

import email.utils
import logging
import re
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import quote, urlsplit
from zoneinfo import ZoneInfo

import httpx

from core.access import Access
from .config import ConfluenceConfig
from .confluence_access import V1_ACCESS_EXPAND, ConfluenceAccess
from .errors import SourceUnavailableError
from .folder import SkippedPage
from .http import HttpClient, HttpStatusError, RetryPolicy, SourceAuthError, decode_json
from core.models import Document, Tombstone
from .storage_format import storage_to_markdown
from .cursor import RETRY_DOCS, CursorUpdate

__all__ = ["ConfluenceSource", "cql_time", "parse_confluence_time", "confluence_anchor", "NO_ACCESS_RESOLUTION"]

log = logging.getLogger(__name__)

#: Extra width of the CQL window when the site's time zone is unknown (the largest offset west of UTC).
UNKNOWN_TZ_WIDENING = timedelta(hours=12)
#: Why every page is readable by nobody when ``restrictions: false``.
NO_ACCESS_RESOLUTION = "restrictions: false in chatops.yml: read access is not resolved, so nobody may read the page"


def parse_confluence_time(value: str | None) -> datetime | None:
    """Parse Confluence's ISO-8601 times (``2024-03-01T10:00:00.000Z``, ``...+01:00``) to aware UTC.

    Returns ``None`` for an empty or unparseable value.
    """
    if not value:
        return None
    v = value.strip().replace("Z", "+00:00")
    v = re.sub(r"([+-]\d{2})(\d{2})$", r"\1:\2", v)  # +0100 -> +01:00
    try:
        dt = datetime.fromisoformat(v)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc)


def cql_time(moment: datetime, tz: str | None) -> str:
    """A CQL date literal (``"yyyy/MM/dd HH:mm"``, floored to the minute) at or before ``moment``.

    Args:
        moment: an aware time.
        tz: the site's IANA time zone; ``None`` writes UTC after going back :data:`UNKNOWN_TZ_WIDENING`,
            which is early enough whatever the site's zone.
    """
    if tz:
        local = moment.astimezone(ZoneInfo(tz))
    else:
        local = (moment - UNKNOWN_TZ_WIDENING).astimezone(timezone.utc)
    return local.strftime("%Y/%m/%d %H:%M")


def confluence_anchor(deployment: str, title: str, heading: str) -> str:
    """The URL fragment Confluence gives a heading.

    Cloud's editor: the heading with spaces turned into ``-`` (``Booking-flights``). Data Center:
    the page title and the heading without spaces, joined by ``-`` (``TravelPolicy-Bookingflights``).
    Other characters are percent-encoded.
    """
    safe = "-_.~()!*'"
    if deployment == "cloud":
        return quote(re.sub(r"\s+", "-", heading.strip()), safe=safe)
    return quote(re.sub(r"\s+", "", title) + "-" + re.sub(r"\s+", "", heading), safe=safe)


def _server_time(resp: httpx.Response) -> datetime:
    date = resp.headers.get("Date")
    if date:
        try:
            dt = email.utils.parsedate_to_datetime(date)
            return (dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)
        except (TypeError, ValueError, IndexError):
            pass
    return datetime.now(timezone.utc)


class ConfluenceSource:
    """One configured Confluence site and its spaces (see the module docstring).

    Args:
        cfg: the validated config entry.
        token: the API token (cloud) or personal access token (datacenter).
        email: the account e-mail (cloud only).
        client: an ``httpx.Client`` to use (the caller closes it); default: one of its own.
        policy: the retry policy.

    Attributes:
        name: the source name.
        complete_listing: True: :meth:`scan` lists every page, for :class:`~index.indexer.Indexer`.
        http: the HTTP client (``http.calls`` counts requests).
        calls, retries: HTTP requests sent so far, and of which retries.

    An :class:`~connectors.base.IncrementalSource` and a :class:`~connectors.base.PermissionSource`.
    """

    complete_listing = True

    def __init__(self, cfg: ConfluenceConfig, token: str, email: str | None = None,
                 client: httpx.Client | None = None, policy: RetryPolicy | None = None) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.deployment = cfg.resolved_deployment
        base = cfg.base_url.rstrip("/")
        if self.deployment == "cloud":
            site = base[: -len("/wiki")] if base.endswith("/wiki") else base
            self.web_base = site + "/wiki"
            if not email:
                raise SourceUnavailableError(f"source {cfg.name!r}: Confluence Cloud needs an account e-mail "
                                             "(auth.email_env) besides the API token")
            auth: httpx.Auth | None = httpx.BasicAuth(email, token)
            headers: dict[str, str] = {}
            hint = (f"Check the account e-mail and API token in the environment variables named by "
                    f"auth.email_env/auth.token_env of source {cfg.name!r} (tokens: id.atlassian.com > "
                    "Security > API tokens).")
            root = site
        else:
            self.web_base = base
            auth = None
            headers = {"Authorization": f"Bearer {token}"}
            hint = (f"Check the personal access token in the environment variable named by auth.token_env of "
                    f"source {cfg.name!r} (Confluence: Profile > Personal Access Tokens).")
            root = base
        self.http = HttpClient(root, "Confluence", auth=auth, headers=headers, timeout=cfg.timeout_seconds,
                               policy=policy, auth_hint=hint, client=client)
        self._space_keys: dict[str, str] = {}  # v2 space id -> key
        #: resolves pages' read access; its caches last one run (see :mod:`connectors.confluence_access`).
        self.access = ConfluenceAccess(cfg.name, self.deployment, self.http, cfg.public_groups, v1_join=self._v1_join)

    def __repr__(self) -> str:
        return f"ConfluenceSource({self.cfg.base_url!r}, {self.deployment}, spaces={self.cfg.spaces})"

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

    # -- the Source protocol (one-off full index) -------------------------------------------------
    def scan(self) -> Iterator[Document | SkippedPage]:
        """Every current page of the configured spaces, with its body (for ``chatops index``).

        Raises:
            SourceUnavailableError: (and subclasses) when a listing fails.
        """
        self.access.reset()
        for item in self._full_listing({}):
            if isinstance(item, (Document, SkippedPage)):
                yield item

    def section_anchor(self, doc: Document, heading: str) -> str:
        """The URL fragment of ``heading`` on ``doc``'s page (see :func:`confluence_anchor`)."""
        return confluence_anchor(self.deployment, doc.title, heading)

    # -- read access (issue 11) --------------------------------------------------------------------
    def _page_access(self, page: Mapping[str, Any], space: str) -> Access:
        """The page's effective read access (fail closed; see :mod:`connectors.confluence_access`)."""
        if not self.cfg.restrictions:
            return Access.nobody(NO_ACCESS_RESOLUTION)
        return self.access.page_access(page, space)

    def memberships(self) -> dict[str, frozenset[str]]:
        """The e-mails of the members of every group the last run's pages or spaces named, by group key
        (Cloud group id, Data Center group name); a group whose members could not be read maps to no one.

        The sync engine stores them (``set_group_members``) after a successful run, so askers are
        matched to ``group:<source>/<group>`` principals.
        """
        return self.access.memberships()

    def permissions(self, known: Iterable[str]) -> Iterator[tuple[str, Access]]:
        """The permission sync: ``(doc_id, access)`` for every indexed page, read again now.

        Lists every page of the configured spaces without bodies (Cloud: v2 with ``parentId``; Data
        Center: CQL with the restrictions and ancestors expanded), then resolves each indexed page's
        access with fresh space permissions, restrictions and group members (caches start empty). An
        indexed page the completed listing lacks (deleted, moved out) is readable by nobody until the
        next sync removes or re-indexes it.

        Args:
            known: doc ids of this source in the index.

        Raises:
            SourceUnavailableError: (and subclasses) when a listing fails; pages yielded before stay valid.
        """
        self.access.reset()
        wanted = {k for k in known if k.startswith("page/")}
        listed: list[tuple[dict, str]] = []
        if self.deployment == "cloud":
            for space_id in self._v2_space_ids():
                for page, _resp in self._v2_list(space_id, sort="id", body=False):
                    listed.append((page, space_id))
                    self.access.note(page)
        else:
            cql = f"type=page AND space in ({self._cql_spaces()}) ORDER BY created"
            for page, _resp in self._v1_search(cql, V1_ACCESS_EXPAND + ",space", limit=min(self.cfg.page_size, 200)):
                listed.append((page, str((page.get("space") or {}).get("key") or "")))
                self.access.note(page)
        seen: set[str] = set()
        for page, space in listed:
            doc_id = f"page/{page.get('id')}"
            if doc_id in wanted and doc_id not in seen:
                seen.add(doc_id)
                yield doc_id, self._page_access(page, space)
        for doc_id in sorted(wanted - seen):
            yield doc_id, Access.nobody("the page is no longer listed in the configured spaces; the next sync "
                                        "removes or re-indexes it")

    # -- incremental sync --------------------------------------------------------------------------
    def sync(self, cursor: Mapping[str, Any] | None, known: Iterable[str], full: bool = False
             ) -> Iterator[Document | Tombstone | SkippedPage | CursorUpdate]:
        """Yield what changed since ``cursor``, the deletions, then one :class:`CursorUpdate` last.

        Args:
            cursor: the cursor saved after the last successful run (``None``: first run).
            known: doc ids of this source in the index (for pruning).
            full: list and fetch every page, ignoring the watermark.

        Raises:
            SourceUnavailableError: (and subclasses such as ``SourceAuthError``) when a listing
                fails; nothing after the failure is yielded, so no deletion happens and no cursor is saved.
        """
        self.access.reset()
        cur = dict(cursor or {})
        watermark = parse_confluence_time(cur.get("watermark"))
        seen_prev: dict[str, int] = {str(k): int(v) for k, v in (cur.get("seen") or {}).items()}
        retry = [str(x) for x in cur.get("retry") or []]
        retry += [d.split("/", 1)[1] for d in cur.get(RETRY_DOCS) or [] if str(d).startswith("page/")]
        state = _RunState(seen_prev)
        if full or watermark is None:
            yield from self._full_listing(state)
        else:
            yield from self._incremental(watermark, seen_prev, retry, state)
        yield from self._prune(set(known), state)
        window = timedelta(minutes=self.cfg.overlap_minutes) + (
            UNKNOWN_TZ_WIDENING if self.deployment == "datacenter" and not self.cfg.timezone else timedelta(0))
        new_wm = state.server_start or watermark or datetime.now(timezone.utc)
        keep_after = new_wm - window - timedelta(minutes=1)
        seen = {pid: v for pid, (v, mod) in state.seen.items() if mod is None or mod >= keep_after}
        yield CursorUpdate({
            "watermark": new_wm.isoformat(),
            "seen": seen,
            "retry": sorted(state.failed),
            "deployment": self.deployment,
            "spaces": list(self.cfg.spaces),
        }, listed=len(state.live))

    def _full_listing(self, state: _RunState | dict) -> Iterator[Document | SkippedPage]:
        st = state if isinstance(state, _RunState) else _RunState({})
        if self.deployment == "cloud":
            for space_id, key in self._v2_space_ids().items():
                for page, resp in self._v2_list(space_id, sort="id", body=True):
                    st.mark_start(resp)
                    if f"page/{page.get('id')}" in st.yielded:
                        continue  # listed twice (pages moving while the listing runs)
                    item = self._v2_document(page, key)
                    st.record(page, item, self._version(page), self._modified(page))
                    yield item
        else:
            cql = f"type=page AND space in ({self._cql_spaces()}) ORDER BY created"
            expand = "body.storage,version,space" + (f",{V1_ACCESS_EXPAND}" if self.cfg.restrictions else "")
            for page, resp in self._v1_search(cql, expand, limit=min(self.cfg.page_size, 50)):
                st.mark_start(resp)
                if f"page/{page.get('id')}" in st.yielded:
                    continue  # listed twice (offset paging while pages are added)
                item = self._v1_document(page)
                st.record(page, item, self._version(page), self._modified(page))
                yield item
        st.listing_complete = True

    def _incremental(self, watermark: datetime, seen_prev: dict[str, int], retry: list[str], st: _RunState
                     ) -> Iterator[Document | Tombstone | SkippedPage]:
        since = watermark - timedelta(minutes=self.cfg.overlap_minutes)
        todo: dict[str, None] = {}
        if self.deployment == "cloud":
            spaces = self._v2_space_ids()
            for space_id in spaces:
                for page, resp in self._v2_list(space_id, sort="-modified-date", body=False):
                    st.mark_start(resp)
                    mod = self._modified(page)
                    if mod is not None and mod < since:
                        break
                    self._consider(page, mod, seen_prev, todo, st)
            live_lists: Iterator[Iterator[tuple[dict, httpx.Response]]] = (
                self._v2_list(sid, sort="id", body=False) for sid in spaces)
        else:
            cql = (f'type=page AND space in ({self._cql_spaces()}) AND lastmodified >= '
                   f'"{cql_time(since, self.cfg.timezone)}" ORDER BY lastmodified DESC')
            for page, resp in self._v1_search(cql, "version", limit=self.cfg.page_size):
                st.mark_start(resp)
                self._consider(page, self._modified(page), seen_prev, todo, st)
            live_lists = iter([self._v1_search(f"type=page AND space in ({self._cql_spaces()}) ORDER BY created",
                                               "", limit=min(self.cfg.page_size, 200))])
        for pid in retry:
            todo.setdefault(pid, None)
        for pid in todo:
            item = self._fetch(pid)
            st.yielded.add(f"page/{pid}")
            if isinstance(item, SkippedPage):
                st.failed.add(pid)
                st.seen.pop(pid, None)
            yield item
        for listing in live_lists:
            for page, _resp in listing:
                st.live.add(f"page/{page['id']}")
        st.listing_complete = True

    def _consider(self, page: Mapping[str, Any], mod: datetime | None, seen_prev: dict[str, int],
                  todo: dict[str, None], st: _RunState) -> None:
        pid = str(page["id"])
        version = self._version(page)
        st.seen[pid] = (version, mod)
        if version is not None and seen_prev.get(pid) == version:
            return  # already indexed at this version (the overlap of the window)
        todo.setdefault(pid, None)

    def _prune(self, known: set[str], st: _RunState) -> Iterator[Document | Tombstone | SkippedPage]:
        if not st.listing_complete:  # pragma: no cover - listings raise instead of returning early
            return
        gone = sorted(k for k in known if k not in st.live and k not in st.yielded and k.startswith("page/"))
        # Listed but never indexed (a space added to the config, a page moved in without a new version,
        # a change the window missed): fetch it now.
        new = sorted(k for k in st.live if k not in known and k not in st.yielded)
        for doc_id in [*new, *gone]:
            pid = doc_id.split("/", 1)[1]
            item = self._fetch(pid)
            if isinstance(item, SkippedPage):
                st.failed.add(pid)
            yield item

    # -- fetching one page -------------------------------------------------------------------------
    def _fetch(self, pid: str) -> Document | Tombstone | SkippedPage:
        """The page now: a Document, a Tombstone (404, not current, or outside the spaces) or a SkippedPage."""
        doc_id = f"page/{pid}"
        try:
            if self.deployment == "cloud":
                resp = self.http.get(f"/wiki/api/v2/pages/{quote(pid)}", {"body-format": "storage"}, allow_404=True)
                if resp.status_code == 404:
                    return Tombstone(self.name, doc_id)
                page = decode_json(resp, "Confluence")
                key = self._v2_space_ids().get(str(page.get("spaceId")))
                if page.get("status") != "current" or key is None:
                    return Tombstone(self.name, doc_id)
                return self._v2_document(page, key)
            expand = "body.storage,version,space" + (f",{V1_ACCESS_EXPAND}" if self.cfg.restrictions else "")
            resp = self.http.get(f"/rest/api/content/{quote(pid)}", {"expand": expand}, allow_404=True)
            if resp.status_code == 404:
                return Tombstone(self.name, doc_id)
            page = decode_json(resp, "Confluence")
            key = (page.get("space") or {}).get("key")
            if page.get("status") != "current" or key not in self.cfg.spaces:
                return Tombstone(self.name, doc_id)
            return self._v1_document(page)
        except (SourceUnavailableError, ValueError, KeyError, TypeError) as exc:
            if isinstance(exc, SourceAuthError) and exc.status == 401:
                raise  # bad credentials fail the run, they are not a page's problem
            reason = f"{type(exc).__name__}: {exc}"
            log.warning("source %s: cannot fetch page %s: %s", self.name, pid, reason)
            return SkippedPage(self.name, doc_id, reason)

    # -- v2 (Cloud) --------------------------------------------------------------------------------
    def _v2_space_ids(self) -> dict[str, str]:
        """Configured spaces as ``{space id: key}`` (one request per run, cached)."""
        if self._space_keys:
            return self._space_keys
        found: dict[str, str] = {}
        url: str | None = "/wiki/api/v2/spaces"
        params: dict[str, Any] | None = {"keys": ",".join(self.cfg.spaces), "limit": 250}
        while url:
            resp = self.http.get(url, params)
            data = decode_json(resp, "Confluence")
            for s in data.get("results", []):
                found[str(s["id"])] = s["key"]
            url, params = self._v2_next(resp, data), None
        missing = sorted(set(self.cfg.spaces) - set(found.values()))
        if missing:
            raise SourceUnavailableError(
                f"source {self.name!r}: Confluence space(s) {', '.join(missing)} not found or not visible to the "
                "account; check spaces: in the sources file and the account's space permissions")
        self._space_keys = found
        return found

    def _v2_list(self, space_id: str, sort: str, body: bool) -> Iterator[tuple[dict, httpx.Response]]:
        first: dict[str, Any] = {"status": "current", "sort": sort, "limit": self.cfg.page_size}
        if body:
            first["body-format"] = "storage"
        params: dict[str, Any] | None = first
        url: str | None = f"/wiki/api/v2/spaces/{quote(space_id)}/pages"
        followed: set[str] = set()
        while url:
            _no_loop(url, followed)
            resp = self.http.get(url, params)
            data = decode_json(resp, "Confluence")
            for page in data.get("results", []):
                yield page, resp
            url, params = self._v2_next(resp, data), None

    def _v2_next(self, resp: httpx.Response, data: Mapping[str, Any]) -> str | None:
        nxt = (data.get("_links") or {}).get("next")
        if not nxt:
            link = resp.links.get("next") if resp.headers.get("Link") else None
            nxt = link.get("url") if link else None
        if not nxt:
            return None
        if nxt.startswith(("http://", "https://")):
            parts = urlsplit(nxt)
            return parts.path + (f"?{parts.query}" if parts.query else "")
        return nxt if nxt.startswith("/") else "/" + nxt

    def _v2_document(self, page: Mapping[str, Any], space_key: str) -> Document | SkippedPage:
        pid = str(page.get("id"))
        try:
            storage = ((page.get("body") or {}).get("storage") or {}).get("value") or ""
            webui = (page.get("_links") or {}).get("webui") or f"/pages/viewpage.action?pageId={pid}"
            return Document(
                source=self.name, doc_id=f"page/{pid}", title=str(page.get("title") or ""),
                url=self.web_base + webui, text=storage_to_markdown(storage),
                updated_at=self._modified(page), space=space_key, access=self._page_access(page, str(page.get("spaceId"))))
        except Exception as exc:  # noqa: BLE001 - a page that cannot be converted is skipped, the run goes on
            if isinstance(exc, HttpStatusError) and exc.status == 401:
                raise
            return self._skipped(pid, exc)

    # -- v1 (Data Center) --------------------------------------------------------------------------
    def _cql_spaces(self) -> str:
        return ",".join(f'"{k}"' for k in self.cfg.spaces)

    def _v1_search(self, cql: str, expand: str, limit: int) -> Iterator[tuple[dict, httpx.Response]]:
        first: dict[str, Any] = {"cql": cql, "limit": limit, "start": 0}
        if expand:
            first["expand"] = expand
        params: dict[str, Any] | None = first
        url: str | None = "/rest/api/content/search"
        start = 0
        followed: set[str] = set()
        while url:
            _no_loop(url + repr(sorted((params or {}).items())), followed)
            resp = self.http.get(url, params)
            data = decode_json(resp, "Confluence")
            results = data.get("results", [])
            for page in results:
                yield page, resp
            nxt = (data.get("_links") or {}).get("next")
            if nxt:
                url, params = self._v1_join(nxt), None
            elif "_links" not in data and results and len(results) >= int(data.get("limit") or limit):
                # A server that sends no links at all: page by offset until a short page.
                start = int(data.get("start", start)) + len(results)
                url, params = "/rest/api/content/search", {"cql": cql, "limit": limit, "start": start,
                                                          **({"expand": expand} if expand else {})}
            else:
                url = None

    def _v1_join(self, nxt: str) -> str:
        """An absolute URL for a v1 ``_links.next``, which is relative to the context path."""
        if nxt.startswith(("http://", "https://")):
            return nxt
        base = urlsplit(self.http.base_url)
        context = base.path.rstrip("/")
        origin = f"{base.scheme}://{base.netloc}"
        if not nxt.startswith("/"):
            nxt = "/" + nxt
        if context and (nxt == context or nxt.startswith(context + "/")):
            return origin + nxt  # already carries the context path: do not double it
        return origin + context + nxt

    def _v1_document(self, page: Mapping[str, Any]) -> Document | SkippedPage:
        pid = str(page.get("id"))
        try:
            storage = ((page.get("body") or {}).get("storage") or {}).get("value") or ""
            webui = (page.get("_links") or {}).get("webui") or f"/pages/viewpage.action?pageId={pid}"
            key = str((page.get("space") or {}).get("key") or "")
            return Document(
                source=self.name, doc_id=f"page/{pid}", title=str(page.get("title") or ""),
                url=self.web_base + webui, text=storage_to_markdown(storage),
                updated_at=self._modified(page), space=key, access=self._page_access(page, key))
        except Exception as exc:  # noqa: BLE001 - a page that cannot be converted is skipped, the run goes on
            if isinstance(exc, HttpStatusError) and exc.status == 401:
                raise
            return self._skipped(pid, exc)

    # -- shared ------------------------------------------------------------------------------------
    def _skipped(self, pid: str, exc: Exception) -> SkippedPage:
        """The :class:`SkippedPage` for a page whose body could not be converted (logged)."""
        reason = f"{type(exc).__name__}: {exc}"
        log.warning("source %s: skipping page %s: %s", self.name, pid, reason)
        return SkippedPage(self.name, f"page/{pid}", reason)

    @staticmethod
    def _version(page: Mapping[str, Any]) -> int | None:
        v = (page.get("version") or {}).get("number")
        return int(v) if v is not None else None

    @staticmethod
    def _modified(page: Mapping[str, Any]) -> datetime | None:
        ver = page.get("version") or {}
        return parse_confluence_time(ver.get("createdAt") or ver.get("when"))


class _RunState:
    """What one sync run has seen (internal)."""

    def __init__(self, seen_prev: Mapping[str, int]) -> None:
        self.seen: dict[str, tuple[int | None, datetime | None]] = {}
        self.live: set[str] = set()
        self.yielded: set[str] = set()
        self.failed: set[str] = set()
        self.server_start: datetime | None = None
        self.listing_complete = False

    def mark_start(self, resp: httpx.Response) -> None:
        if self.server_start is None:
            self.server_start = _server_time(resp)

    def record(self, page: Mapping[str, Any], item: Document | SkippedPage, version: int | None,
               mod: datetime | None) -> None:
        pid = str(page.get("id"))
        self.live.add(f"page/{pid}")
        self.yielded.add(f"page/{pid}")
        if isinstance(item, Document):
            self.seen[pid] = (version, mod)
        else:
            self.failed.add(pid)


def _no_loop(url: str, followed: set[str]) -> None:
    """Stop a listing whose next link comes back to a page already read (a server bug would loop forever)."""
    if url in followed:
        raise SourceUnavailableError(f"Confluence sent the same next-page link twice ({url[:200]}); the listing "
                                     "was stopped and nothing was pruned")
    followed.add(url)
