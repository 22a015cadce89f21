"""The MediaWiki connector: the Action API (``api.php``) over plain ``httpx``.

Documents are keyed by page id (``doc_id = "page/<pageid>"``): a move keeps the page id (and the
redirect it leaves behind is a new page that is never indexed), so a moved page is updated in
place, never duplicated. Every request uses ``format=json&formatversion=2``.

- Listing: ``list=allpages&apnamespace=N&apfilterredir=nonredirects&aplimit=max`` (500 titles per
  request; a *generator* ``generator=allpages`` that also pulls page content must use
  ``gaplimit=50``, because ``max`` silently returned content for 50 of 201 pages: content is capped
  at 50 pages per request, so this connector never asks for content through a generator).
- Content: ``action=parse&pageid=ID&prop=text|sections|revid|displaytitle`` with
  ``disableeditsection``/``disabletoc``/``disablelimitreport``; the HTML becomes Markdown with its
  headings (code blocks keep their language), and the ``sections`` list (level, title, anchor)
  gives each chunk the wiki's own anchor, so citations link to ``index.php/Title#Anchor``.
- Incremental sync: ``list=recentchanges`` (edits, creations, log entries: moves, deletions,
  restores) and ``list=logevents&letype=delete`` from the watermark minus ``overlap_seconds``, in one
  query. The watermark is the server's ``curtimestamp`` when the listing started; timestamps are
  whole seconds, so the window overlaps the last one and entries already handled (revision ids,
  log ids) are skipped. Changed page ids are checked with ``prop=info`` (50 per request): a
  ``missing`` page, a redirect or a page moved out of the configured namespaces is a deletion.
- Pruning: the ``allpages`` listing of every namespace is the authority once it completed; an
  indexed page it lacks is checked with ``prop=info`` and removed if missing. A listed page that
  is not indexed (an import writes no recent changes) is fetched.
- Private wikis: a bot password (``Special:BotPasswords``; user name ``User@botname``) logs in
  with ``action=login`` and a login token; the session cookie stays in the client and every
  request then carries ``assert=user``, so a lost session is noticed and the login redone once.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any, TypedDict, cast
from urllib.parse import quote

import httpx
from bs4 import BeautifulSoup, NavigableString, Tag

from .config import MediaWikiConfig, audience_access
from .errors import SourceUnavailableError
from .folder import SkippedPage
from .http import HttpBackedSource, HttpClient, HttpStatusError, RetryPolicy, SourceAuthError, decode_json, parse_retry_after
from core.models import Document, Tombstone
from .storage_format import fenced_block, render_markdown
from .cursor import RETRY_DOCS, CursorUpdate
from .text import strip_inline

__all__ = ["MediaWikiSource", "MediaWikiApiError", "mediawiki_html_to_markdown", "parse_mw_time"]

log = logging.getLogger(__name__)

_AUTH_CODES = {"readapidenied", "assertuserfailed", "assertbotfailed", "notloggedin", "permissiondenied"}
_INFO_BATCH = 50


class _SiteGeneral(TypedDict, total=False):
    """The keys of ``meta=siteinfo&siprop=general`` read here (the wiki sends many more)."""

    server: str  # "https://wiki.acme.com" ($wgServer)
    articlepath: str  # "/index.php/$1" ($wgArticlePath)


class _Namespace(TypedDict, total=False):
    """One entry of ``siprop=namespaces`` (keyed by the namespace id as a string)."""

    name: str  # the local name, "" for the main namespace


class _SiteInfo(TypedDict):
    """``meta=siteinfo&siprop=general|namespaces``'s ``query`` object (formatversion 2)."""

    general: _SiteGeneral
    namespaces: dict[str, _Namespace]


class MediaWikiApiError(HttpStatusError):
    """The API answered with an ``error`` object (HTTP 200); ``code`` is MediaWiki's error code."""

    def __init__(self, message: str, code: str, url: str) -> None:
        super().__init__(message, 200, url)
        self.code = code


def parse_mw_time(value: str | None) -> datetime | None:
    """Parse a MediaWiki ISO-8601 timestamp (``2024-03-01T10:00:00Z``) to aware UTC; ``None`` if empty."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(timezone.utc)
    except ValueError:
        return None


def _mw_time(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _norm_heading(text: str) -> str:
    return re.sub(r"\s+", " ", strip_inline(text)).strip().lower()


def mediawiki_html_to_markdown(html: str) -> str:
    """Convert ``action=parse`` HTML to Markdown with ATX headings.

    Drops edit-section links, the table of contents, footnote markers (``[1]``: they would read
    like the bot's own citation markers), navigation boxes and styles; ``<div class="mw-highlight
    mw-highlight-lang-X">`` and ``<pre>`` become fenced code blocks (language kept); images become
    ``[image: alt]``; links become their text.
    """
    soup = BeautifulSoup(html or "", "html.parser")
    for sel in (".mw-editsection", "#toc", ".toc", "script", "style", "link", "meta", ".mw-empty-elt",
                "sup.reference", ".mw-cite-backlink", ".navbox", ".printfooter", ".catlinks", ".noprint"):
        for tag in soup.select(sel):
            tag.decompose()
    blocks: list[str] = []

    def placeholder(block: str) -> Tag:
        p = soup.new_tag("p")
        p.string = f"CHATOPSBLOCK{len(blocks)}X"
        blocks.append(block)
        return p

    for div in soup.select("div.mw-highlight"):
        classes = div.get("class")  # a list: class is multi-valued
        lang = next((c[len("mw-highlight-lang-"):] for c in (classes if isinstance(classes, list) else [])
                     if c.startswith("mw-highlight-lang-")), "")
        pre = div.find("pre")
        div.replace_with(placeholder(fenced_block(pre.get_text() if pre else div.get_text(), lang)))
    for pre in soup.find_all("pre"):
        pre.replace_with(placeholder(fenced_block(pre.get_text())))
    for img in soup.find_all("img"):
        alt = img.get("alt")
        alt = alt.strip() if isinstance(alt, str) else ""  # alt is single-valued: a str, never a list
        img.replace_with(NavigableString(f"[image: {alt}]" if alt else ""))
    for a in soup.find_all("a"):
        a.replace_with(NavigableString(a.get_text()))
    root = soup.select_one("div.mw-parser-output") or soup
    return render_markdown(root, blocks)


class MediaWikiSource(HttpBackedSource):
    """One wiki's configured namespaces (see the module docstring).

    Args:
        cfg: the validated config entry.
        username, password: a bot password (both or neither).
        client: an ``httpx.Client`` to use (the caller closes it); default: one of its own.
        policy: the retry policy.

    Attributes:
        name: the source name.
        access: who may read every page (the entry's ``audience``; a wiki has no per-page read control here).
        complete_listing: True: :meth:`scan` lists every page, for :class:`~index.indexer.Indexer`.
        http: the HTTP client (``http.calls`` counts requests).
        calls, retries: HTTP requests sent so far, and of which retries.

    An :class:`~connectors.base.IncrementalSource`.
    """

    complete_listing = True

    def __init__(self, cfg: MediaWikiConfig, username: str | None = None, password: str | None = None,
                 client: httpx.Client | None = None, policy: RetryPolicy | None = None) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.access = audience_access(cfg.audience)
        self.api_url = cfg.api_url
        self.username = username
        self.password = password
        hint = (f"Check the bot password in the environment variables named by auth.username_env/auth.password_env "
                f"of source {cfg.name!r}." if username else
                f"If the wiki is private, give source {cfg.name!r} a bot password (auth.username_env, auth.password_env).")
        self.http = HttpClient(cfg.api_url, "MediaWiki", timeout=cfg.timeout_seconds, policy=policy,
                               auth_hint=hint, client=client)
        self._logged_in = False
        self._site: _SiteInfo | None = None
        self._anchors: dict[str, dict[str, str]] = {}

    def __repr__(self) -> str:
        return f"MediaWikiSource({self.api_url!r}, namespaces={self.cfg.namespaces})"

    # -- API plumbing ------------------------------------------------------------------------------
    def api(self, params: Mapping[str, Any], post: bool = False) -> dict[str, Any]:
        """One Action API request (JSON, formatversion 2), logging in first when credentials are set.

        Raises:
            SourceAuthError: when the wiki refuses to read without a login (and none is configured),
                or the login fails.
            MediaWikiApiError: for any other API error (its ``code`` says which).
            SourceUnavailableError: when the server cannot be reached (after retries).
        """
        if self.username and not self._logged_in:
            self.login()
        for attempt in (1, 2):
            try:
                return self._api_once(params, post)
            except MediaWikiApiError as exc:
                if exc.code in _AUTH_CODES and self.username and attempt == 1:
                    log.info("source %s: MediaWiki session lost (%s); logging in again", self.name, exc.code)
                    self._logged_in = False
                    self.login()
                    continue
                if exc.code in _AUTH_CODES:
                    who = (f"bot password user {self.username!r} lacks the right" if self.username else
                           "the wiki requires a login to read; set auth.username_env and auth.password_env to a "
                           "bot password (Special:BotPasswords) for source " + repr(self.name))
                    raise SourceAuthError(f"MediaWiki at {self.api_url} refused: {exc.code}: {who}", 403,
                                          self.api_url) from exc
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _api_once(self, params: Mapping[str, Any], post: bool) -> dict[str, Any]:
        p = {"format": "json", "formatversion": "2", **params}
        if self._logged_in and p.get("action") != "login":
            p["assert"] = "user"
        lag_tries = 0
        while True:
            if post:
                resp = self.http.request("POST", self.api_url, data=p)
            else:
                resp = self.http.get(self.api_url, p)
            data = decode_json(resp, "MediaWiki")
            err = data.get("error") if isinstance(data, dict) else None
            if not err:
                return cast(dict[str, Any], data)  # decode_json's Any: an Action API answer is an object
            code = str(err.get("code", ""))
            if code == "maxlag" and lag_tries < self.http.policy.attempts - 1:
                lag_tries += 1
                wait = self.http.policy.wait(lag_tries, parse_retry_after(resp.headers.get("Retry-After")) or 5.0)
                log.warning("MediaWiki %s is lagged; waiting %.1f s", self.api_url, wait)
                self.http.policy.sleep(wait)
                continue
            raise MediaWikiApiError(f"MediaWiki API error {code}: {err.get('info', '')}", code, self.api_url)

    def query_all(self, params: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        """Yield every response of an ``action=query`` through its ``continue`` parameters."""
        cont: dict[str, Any] = {}
        while True:
            data = self.api({"action": "query", **params, **cont})
            yield data
            if "continue" not in data:
                return
            cont = dict(data["continue"])

    def login(self) -> None:
        """Log in with the bot password (``action=login`` with a login token).

        Raises:
            SourceAuthError: when the wiki refuses the login, with its reason and what to check.
        """
        if not (self.username and self.password):
            return
        tok = self._api_once({"action": "query", "meta": "tokens", "type": "login"}, post=False)
        token = tok["query"]["tokens"]["logintoken"]
        res = self._api_once({"action": "login", "lgname": self.username, "lgpassword": self.password,
                              "lgtoken": token}, post=True)
        result = (res.get("login") or {}).get("result")
        if result != "Success":
            reason = (res.get("login") or {}).get("reason") or result
            if isinstance(reason, dict):
                reason = reason.get("text") or reason.get("code")
            raise SourceAuthError(
                f"MediaWiki at {self.api_url} refused the login of {self.username!r}: {reason}. Use a bot password "
                f"from Special:BotPasswords (user name User@botname) in the variables named by auth.username_env/"
                f"auth.password_env of source {self.name!r}", 401, self.api_url)
        self._logged_in = True

    def site(self) -> _SiteInfo:
        """``meta=siteinfo`` (general, namespaces), fetched once per source object."""
        if self._site is None:
            data = self.api({"action": "query", "meta": "siteinfo", "siprop": "general|namespaces"})
            self._site = cast(_SiteInfo, data["query"])
        return self._site

    def page_url(self, title: str) -> str:
        """The article URL of ``title`` (``$wgServer`` + ``$wgArticlePath``)."""
        g = self.site()["general"]
        path = g.get("articlepath") or "/index.php/$1"
        return g.get("server", "") + path.replace("$1", quote(title.replace(" ", "_"), safe="/:()!*,;@'~"))

    def namespace_name(self, ns: int) -> str:
        """The namespace's local name (``""`` for the main namespace)."""
        info = self.site().get("namespaces", {}).get(str(ns)) or {}
        return info.get("name", "")

    def section_anchor(self, doc: Document, heading: str) -> str:
        """The wiki's anchor of ``heading`` on ``doc`` (from ``action=parse``'s ``sections``), URL-safe."""
        anchor = self._anchors.get(doc.doc_id, {}).get(_norm_heading(heading)) or heading.strip().replace(" ", "_")
        return quote(anchor, safe="!$&'()*+,;=:@/?-._~")

    # -- one-off full index ------------------------------------------------------------------------
    def scan(self) -> Iterator[Document | SkippedPage]:
        """Every non-redirect page of the configured namespaces (for ``chatops index``)."""
        st = _RunState()
        for item in self._full(st):
            if isinstance(item, (Document, SkippedPage)):
                yield item

    # -- incremental sync --------------------------------------------------------------------------
    def sync(self, cursor: Mapping[str, Any] | None, known: Iterable[str], full: bool = False
             ) -> Iterator[Document | Tombstone | SkippedPage | CursorUpdate]:
        """Yield changed pages, deletions, and one :class:`CursorUpdate` last (see the module docstring).

        Args:
            cursor: the cursor saved after the last successful run (``None``: first run).
            known: doc ids of this source in the index.
            full: list and fetch every page.

        Raises:
            SourceUnavailableError: (and subclasses) when a listing fails; no deletion and no
                cursor follow.
        """
        cur = dict(cursor or {})
        wm = parse_mw_time(cur.get("watermark"))
        known_set = set(known)
        st = _RunState()
        stale = wm is not None and datetime.now(timezone.utc) - wm > timedelta(days=self.cfg.full_sync_after_days)
        if full or wm is None or stale:
            yield from self._full(st)
        else:
            yield from self._incremental(wm, cur, known_set, st)
        yield from self._prune(known_set, st)
        new_wm = st.server_start or wm or datetime.now(timezone.utc)
        keep_after = new_wm - timedelta(seconds=self.cfg.overlap_seconds + 1)
        seen = sorted(k for k, ts in st.seen.items() if ts is None or ts >= keep_after)
        yield CursorUpdate({"watermark": _mw_time(new_wm), "seen": seen, "retry": sorted(st.failed)},
                           listed=len(st.live))

    def _list_namespace(self, ns: int, st: _RunState) -> Iterator[tuple[int, str]]:
        for data in self.query_all({"list": "allpages", "apnamespace": ns, "apfilterredir": "nonredirects",
                                    "aplimit": "max", "curtimestamp": 1}):
            st.mark_start(data)
            for p in data.get("query", {}).get("allpages", []):
                yield int(p["pageid"]), p["title"]

    def _full(self, st: _RunState) -> Iterator[Document | Tombstone | SkippedPage]:
        for ns in self.cfg.namespaces:
            for pageid, _title in list(self._list_namespace(ns, st)):
                st.live.add(f"page/{pageid}")
                yield self._handle(pageid, st)
        st.listing_complete = True
        if st.server_start is not None:
            # Changes from just before the listing started are in what was fetched: remember them, so the
            # next run's overlapping window does not fetch those pages again.
            for data in self.query_all(self._changes_params(st.server_start, until=st.server_start)):
                q = data.get("query", {})
                for entry in [*q.get("recentchanges", []), *q.get("logevents", [])]:
                    st.seen[_change_key(entry)] = parse_mw_time(entry.get("timestamp"))

    def _changes_params(self, wm: datetime, until: datetime | None = None) -> dict[str, Any]:
        since = _mw_time(wm - timedelta(seconds=self.cfg.overlap_seconds))
        params: dict[str, Any] = {
            "list": "recentchanges|logevents", "curtimestamp": 1,
            "rcstart": since, "rcdir": "newer", "rcnamespace": "|".join(str(n) for n in self.cfg.namespaces),
            "rctype": "edit|new|log", "rcprop": "ids|title|timestamp|loginfo", "rclimit": "max",
            "letype": "delete", "lestart": since, "ledir": "newer", "leprop": "ids|title|timestamp|type|details",
            "lelimit": "max",
        }
        if until is not None:
            params["rcend"] = params["leend"] = _mw_time(until)
        return params

    def _incremental(self, wm: datetime, cur: Mapping[str, Any], known: set[str], st: _RunState
                     ) -> Iterator[Document | Tombstone | SkippedPage]:
        seen_prev = set(cur.get("seen") or [])
        todo: dict[int, None] = {}
        for data in self.query_all(self._changes_params(wm)):
            st.mark_start(data)
            q = data.get("query", {})
            for rc in q.get("recentchanges", []):
                key = _change_key(rc)
                st.seen[key] = parse_mw_time(rc.get("timestamp"))
                if key in seen_prev:
                    continue
                if rc.get("pageid"):
                    todo.setdefault(int(rc["pageid"]), None)
            for le in q.get("logevents", []):
                key = _change_key(le)
                st.seen[key] = parse_mw_time(le.get("timestamp"))
                if key in seen_prev:
                    continue
                page = le.get("logpage") or le.get("pageid")
                if page and f"page/{page}" in known:
                    todo.setdefault(int(page), None)
        for pid in cur.get("retry") or []:
            todo.setdefault(int(pid), None)
        for doc_id in cur.get(RETRY_DOCS) or []:  # pages the indexer could not chunk last run
            if str(doc_id).startswith("page/") and doc_id.split("/", 1)[1].isdigit():
                todo.setdefault(int(doc_id.split("/", 1)[1]), None)
        yield from self._check_and_fetch(list(todo), st)
        for n in self.cfg.namespaces:
            for pageid, _title in self._list_namespace(n, st):
                st.live.add(f"page/{pageid}")
        st.listing_complete = True
        # A listed page that is not indexed (an import writes no recent changes; a page moved into a
        # configured namespace): fetch it now.
        new = sorted(int(k.split("/", 1)[1]) for k in st.live - known - st.handled)
        yield from self._check_and_fetch(new, st)

    def _prune(self, known: set[str], st: _RunState) -> Iterator[Document | Tombstone | SkippedPage]:
        if not st.listing_complete:  # pragma: no cover - listings raise instead
            return
        gone = sorted(int(k.split("/", 1)[1]) for k in known - st.live - st.handled if k.startswith("page/"))
        yield from self._check_and_fetch(gone, st)

    def _check_and_fetch(self, pageids: list[int], st: _RunState) -> Iterator[Document | Tombstone | SkippedPage]:
        """``prop=info`` for ``pageids`` (50 per request): missing, redirect or out-of-namespace pages
        become Tombstones, the others are fetched."""
        for i in range(0, len(pageids), _INFO_BATCH):
            batch = pageids[i:i + _INFO_BATCH]
            info: dict[int, dict[str, Any]] = {}
            for data in self.query_all({"prop": "info", "pageids": "|".join(map(str, batch))}):
                for p in data.get("query", {}).get("pages", []):
                    info[int(p["pageid"])] = p
            for pid in batch:
                p = info.get(pid, {"missing": True})
                doc_id = f"page/{pid}"
                if p.get("missing") or p.get("invalid") or p.get("redirect") or p.get("ns") not in self.cfg.namespaces:
                    st.handled.add(doc_id)
                    yield Tombstone(self.name, doc_id)
                else:
                    yield self._handle(pid, st)

    def _handle(self, pageid: int, st: _RunState) -> Document | Tombstone | SkippedPage:
        doc_id = f"page/{pageid}"
        st.handled.add(doc_id)
        item = self._fetch(pageid)
        if isinstance(item, SkippedPage):
            st.failed.add(pageid)
        return item

    def _fetch(self, pageid: int) -> Document | Tombstone | SkippedPage:
        doc_id = f"page/{pageid}"
        try:
            data = self.api({"action": "parse", "pageid": pageid, "prop": "text|sections|revid|displaytitle",
                             "disableeditsection": 1, "disabletoc": 1, "disablelimitreport": 1})
        except MediaWikiApiError as exc:
            if exc.code in {"nosuchpageid", "missingtitle", "nosuchrevid"}:
                return Tombstone(self.name, doc_id)
            return SkippedPage(self.name, doc_id, str(exc))
        except SourceAuthError:
            raise
        except SourceUnavailableError as exc:
            log.warning("source %s: cannot fetch page %s: %s", self.name, pageid, exc)
            return SkippedPage(self.name, doc_id, f"{type(exc).__name__}: {exc}")
        try:
            parse = data["parse"]
            title = parse["title"]
            anchors: dict[str, str] = {}
            for s in parse.get("sections", []):
                line = BeautifulSoup(s.get("line", ""), "html.parser").get_text()
                anchors.setdefault(_norm_heading(line), s.get("anchor", ""))
            self._anchors[doc_id] = anchors
            ns = int(parse.get("ns", 0)) if "ns" in parse else None
            return Document(source=self.name, doc_id=doc_id, title=title, url=self.page_url(title),
                            text=mediawiki_html_to_markdown(parse.get("text", "")),
                            updated_at=None, space=self.namespace_name(ns) if ns is not None else "",
                            access=self.access)  # no per-page read control: the source's audience
        except SourceAuthError:
            raise  # the site info behind page_url needs the login: not a page's problem
        except Exception as exc:  # noqa: BLE001 - a page that cannot be converted is skipped, the run goes on
            reason = f"cannot convert the parse response: {type(exc).__name__}: {exc}"
            log.warning("source %s: skipping page %s: %s", self.name, pageid, reason)
            return SkippedPage(self.name, doc_id, reason)


def _change_key(entry: Mapping[str, Any]) -> str:
    """De-duplication key of a recent change or log event: ``r<revid>`` for edits, ``l<logid>`` for log entries."""
    if entry.get("revid") and entry.get("type") in {"edit", "new"}:
        return f"r{entry['revid']}"
    return f"l{entry.get('logid', entry.get('rcid'))}"


class _RunState:
    def __init__(self) -> None:
        self.live: set[str] = set()
        self.handled: set[str] = set()
        self.failed: set[int] = set()
        self.seen: dict[str, datetime | None] = {}
        self.server_start: datetime | None = None
        self.listing_complete = False

    def mark_start(self, data: Mapping[str, Any]) -> None:
        if self.server_start is None and data.get("curtimestamp"):
            self.server_start = parse_mw_time(data["curtimestamp"])
