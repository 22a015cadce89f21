"""Confluence's REST API as pages: Cloud's v2 (spaces, a space's pages, one page) and Data Center's v1
(CQL searches, one page), each listing followed page by page, and a page's JSON turned into a
:class:`~core.models.Document` (its body converted by :mod:`connectors.storage_format`, its read access
resolved by the caller's resolver)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from core.access import Access
from core.models import Document, Tombstone

from .config import ConfluenceConfig
from .confluence_access import V1_ACCESS_EXPAND
from .confluence_times import parse_confluence_time
from .errors import SourceUnavailableError
from .folder import SkippedPage
from .http import HttpClient, HttpStatusError, SourceAuthError, decode_json
from .storage_format import storage_to_markdown

__all__ = ["ConfluencePages"]

log = logging.getLogger("connectors.confluence")


class ConfluencePages:
    """Lists and fetches the pages of one configured site.

    Args:
        cfg: the validated config entry (spaces, page size, whether restrictions are read).
        http: the site's HTTP client.
        deployment: ``"cloud"`` (REST v2) or ``"datacenter"`` (REST v1 and CQL).
        web_base: what a page's ``webui`` link is relative to.
        page_access: a page's effective read access from its JSON and its space (id or key).
    """

    def __init__(self, cfg: ConfluenceConfig, http: HttpClient, deployment: str, web_base: str,
                 page_access: Callable[[Mapping[str, Any], str], Access]) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.http = http
        self.deployment = deployment
        self.web_base = web_base
        self.page_access = page_access
        self._space_keys: dict[str, str] = {}  # v2 space id -> key

    # -- one page -------------------------------------------------------------------------
    def fetch(self, pid: str) -> Document | Tombstone | SkippedPage:
        """The page now: a Document, a Tombstone (404, not current, or outside the spaces) or a SkippedPage."""
        doc_id = f"page/{pid}"
        try:
            if self.deployment == "cloud":
                resp = self.http.get(f"/wiki/api/v2/pages/{quote(pid)}", {"body-format": "storage"}, allow_404=True)
                if resp.status_code == 404:
                    return Tombstone(self.name, doc_id)
                page = decode_json(resp, "Confluence")
                key = self.v2_space_ids().get(str(page.get("spaceId")))
                if page.get("status") != "current" or key is None:
                    return Tombstone(self.name, doc_id)
                return self.v2_document(page, key)
            expand = "body.storage,version,space" + (f",{V1_ACCESS_EXPAND}" if self.cfg.restrictions else "")
            resp = self.http.get(f"/rest/api/content/{quote(pid)}", {"expand": expand}, allow_404=True)
            if resp.status_code == 404:
                return Tombstone(self.name, doc_id)
            page = decode_json(resp, "Confluence")
            key = (page.get("space") or {}).get("key")
            if page.get("status") != "current" or key not in self.cfg.spaces:
                return Tombstone(self.name, doc_id)
            return self.v1_document(page)
        except (SourceUnavailableError, ValueError, KeyError, TypeError) as exc:
            if isinstance(exc, SourceAuthError) and exc.status == 401:
                raise  # bad credentials fail the run, they are not a page's problem
            reason = f"{type(exc).__name__}: {exc}"
            log.warning("source %s: cannot fetch page %s: %s", self.name, pid, reason)
            return SkippedPage(self.name, doc_id, reason)

    # -- v2 (Cloud) --------------------------------------------------------------------------------
    def v2_space_ids(self) -> dict[str, str]:
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

    def v2_list(self, space_id: str, sort: str, body: bool) -> Iterator[tuple[dict[str, Any], httpx.Response]]:
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

    def v2_document(self, page: Mapping[str, Any], space_key: str) -> Document | SkippedPage:
        pid = str(page.get("id"))
        try:
            storage = ((page.get("body") or {}).get("storage") or {}).get("value") or ""
            webui = (page.get("_links") or {}).get("webui") or f"/pages/viewpage.action?pageId={pid}"
            return Document(
                source=self.name, doc_id=f"page/{pid}", title=str(page.get("title") or ""),
                url=self.web_base + webui, text=storage_to_markdown(storage),
                updated_at=self.modified(page), space=space_key, access=self.page_access(page, str(page.get("spaceId"))))
        except Exception as exc:  # noqa: BLE001 - a page that cannot be converted is skipped, the run goes on
            if isinstance(exc, HttpStatusError) and exc.status == 401:
                raise
            return self._skipped(pid, exc)

    # -- v1 (Data Center) --------------------------------------------------------------------------
    def cql_spaces(self) -> str:
        return ",".join(f'"{k}"' for k in self.cfg.spaces)

    def v1_search(self, cql: str, expand: str, limit: int) -> Iterator[tuple[dict[str, Any], httpx.Response]]:
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
                url, params = self.v1_join(nxt), None
            elif "_links" not in data and results and len(results) >= int(data.get("limit") or limit):
                # A server that sends no links at all: page by offset until a short page.
                start = int(data.get("start", start)) + len(results)
                url, params = "/rest/api/content/search", {"cql": cql, "limit": limit, "start": start,
                                                          **({"expand": expand} if expand else {})}
            else:
                url = None

    def v1_join(self, nxt: str) -> str:
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

    def v1_document(self, page: Mapping[str, Any]) -> Document | SkippedPage:
        pid = str(page.get("id"))
        try:
            storage = ((page.get("body") or {}).get("storage") or {}).get("value") or ""
            webui = (page.get("_links") or {}).get("webui") or f"/pages/viewpage.action?pageId={pid}"
            key = str((page.get("space") or {}).get("key") or "")
            return Document(
                source=self.name, doc_id=f"page/{pid}", title=str(page.get("title") or ""),
                url=self.web_base + webui, text=storage_to_markdown(storage),
                updated_at=self.modified(page), space=key, access=self.page_access(page, key))
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
    def version(page: Mapping[str, Any]) -> int | None:
        v = (page.get("version") or {}).get("number")
        return int(v) if v is not None else None

    @staticmethod
    def modified(page: Mapping[str, Any]) -> datetime | None:
        ver = page.get("version") or {}
        return parse_confluence_time(ver.get("createdAt") or ver.get("when"))


def _no_loop(url: str, followed: set[str]) -> None:
    """Stop a listing whose next link comes back to a page already read (a server bug would loop forever)."""
    if url in followed:
        raise SourceUnavailableError(f"Confluence sent the same next-page link twice ({url[:200]}); the listing "
                                     "was stopped and nothing was pruned")
    followed.add(url)
