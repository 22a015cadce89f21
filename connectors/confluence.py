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

This module holds the source and its sync; the REST listings and one page's fetch are
:mod:`connectors.confluence_rest`, Confluence's times :mod:`connectors.confluence_times`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import quote

import httpx

from core.access import Access
from .config import ConfluenceConfig
from .confluence_access import V1_ACCESS_EXPAND, ConfluenceAccess
from .confluence_rest import ConfluencePages
from .confluence_times import UNKNOWN_TZ_WIDENING, cql_time, parse_confluence_time, server_time
from .errors import SourceUnavailableError
from .folder import SkippedPage
from .http import HttpBackedSource, HttpClient, RetryPolicy
from core.models import Document, Tombstone
from .cursor import RETRY_DOCS, CursorUpdate

__all__ = ["ConfluenceSource", "cql_time", "parse_confluence_time", "confluence_anchor", "NO_ACCESS_RESOLUTION"]

log = logging.getLogger(__name__)

#: Why every page is readable by nobody when ``restrictions: false``.
NO_ACCESS_RESOLUTION = "restrictions: false in chatops.yml: read access is not resolved, so nobody may read the page"

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

class ConfluenceSource(HttpBackedSource):
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
        #: lists and fetches the pages (REST v2 or v1, see :mod:`connectors.confluence_rest`).
        self.pages = ConfluencePages(cfg, self.http, self.deployment, self.web_base, self._page_access)
        #: resolves pages' read access; its caches last one run (see :mod:`connectors.confluence_access`).
        self.access = ConfluenceAccess(cfg.name, self.deployment, self.http, cfg.public_groups, v1_join=self.pages.v1_join)

    def __repr__(self) -> str:
        return f"ConfluenceSource({self.cfg.base_url!r}, {self.deployment}, spaces={self.cfg.spaces})"

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
        listed: list[tuple[dict[str, Any], str]] = []
        if self.deployment == "cloud":
            for space_id in self.pages.v2_space_ids():
                for page, _resp in self.pages.v2_list(space_id, sort="id", body=False):
                    listed.append((page, space_id))
                    self.access.note(page)
        else:
            cql = f"type=page AND space in ({self.pages.cql_spaces()}) ORDER BY created"
            for page, _resp in self.pages.v1_search(cql, V1_ACCESS_EXPAND + ",space", limit=min(self.cfg.page_size, 200)):
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

    def _full_listing(self, state: _RunState | dict[str, Any]) -> Iterator[Document | SkippedPage]:
        st = state if isinstance(state, _RunState) else _RunState({})
        if self.deployment == "cloud":
            for space_id, key in self.pages.v2_space_ids().items():
                for page, resp in self.pages.v2_list(space_id, sort="id", body=True):
                    st.mark_start(resp)
                    if f"page/{page.get('id')}" in st.yielded:
                        continue  # listed twice (pages moving while the listing runs)
                    item = self.pages.v2_document(page, key)
                    st.record(page, item, self.pages.version(page), self.pages.modified(page))
                    yield item
        else:
            cql = f"type=page AND space in ({self.pages.cql_spaces()}) ORDER BY created"
            expand = "body.storage,version,space" + (f",{V1_ACCESS_EXPAND}" if self.cfg.restrictions else "")
            for page, resp in self.pages.v1_search(cql, expand, limit=min(self.cfg.page_size, 50)):
                st.mark_start(resp)
                if f"page/{page.get('id')}" in st.yielded:
                    continue  # listed twice (offset paging while pages are added)
                item = self.pages.v1_document(page)
                st.record(page, item, self.pages.version(page), self.pages.modified(page))
                yield item
        st.listing_complete = True

    def _incremental(self, watermark: datetime, seen_prev: dict[str, int], retry: list[str], st: _RunState
                     ) -> Iterator[Document | Tombstone | SkippedPage]:
        since = watermark - timedelta(minutes=self.cfg.overlap_minutes)
        todo: dict[str, None] = {}
        if self.deployment == "cloud":
            spaces = self.pages.v2_space_ids()
            for space_id in spaces:
                for page, resp in self.pages.v2_list(space_id, sort="-modified-date", body=False):
                    st.mark_start(resp)
                    mod = self.pages.modified(page)
                    if mod is not None and mod < since:
                        break
                    self._consider(page, mod, seen_prev, todo, st)
            live_lists: Iterator[Iterator[tuple[dict[str, Any], httpx.Response]]] = (
                self.pages.v2_list(sid, sort="id", body=False) for sid in spaces)
        else:
            cql = (f'type=page AND space in ({self.pages.cql_spaces()}) AND lastmodified >= '
                   f'"{cql_time(since, self.cfg.timezone)}" ORDER BY lastmodified DESC')
            for page, resp in self.pages.v1_search(cql, "version", limit=self.cfg.page_size):
                st.mark_start(resp)
                self._consider(page, self.pages.modified(page), seen_prev, todo, st)
            live_lists = iter([self.pages.v1_search(f"type=page AND space in ({self.pages.cql_spaces()}) ORDER BY created",
                                               "", limit=min(self.cfg.page_size, 200))])
        for pid in retry:
            todo.setdefault(pid, None)
        for pid in todo:
            item = self.pages.fetch(pid)
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
        version = self.pages.version(page)
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
            item = self.pages.fetch(pid)
            if isinstance(item, SkippedPage):
                st.failed.add(pid)
            yield item


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
            self.server_start = server_time(resp)

    def record(self, page: Mapping[str, Any], item: Document | SkippedPage, version: int | None,
               mod: datetime | None) -> None:
        pid = str(page.get("id"))
        self.live.add(f"page/{pid}")
        self.yielded.add(f"page/{pid}")
        if isinstance(item, Document):
            self.seen[pid] = (version, mod)
        else:
            self.failed.add(pid)
