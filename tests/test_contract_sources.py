"""The source contract (:mod:`connectors.base`), one suite run against every source.

Like Haystack's document-store tests: each source kind is a :class:`Site` (a fresh connector, the
pages it serves and the means to change them upstream), and every test below runs against every
site it applies to:

- ``folder``: a folder of Markdown files in ``tmp_path``;
- ``confluence-cloud`` and ``confluence-datacenter``: the stand-in Confluence (``tests.standins.confluence``);
- ``mediawiki``: a real MediaWiki (``mediawiki_server``; skipped where it cannot be installed,
  like ``test_mediawiki.py``).

Every source: conforms to :class:`~connectors.base.Source` (``isinstance``), and its scan yields
one :class:`Document` per page with the fields filled as the source fills them (doc id, title, URL,
text, modification time where the source has one, ACL) and nothing else; a page deleted upstream
is no longer listed. Incremental sources also conform to
:class:`~connectors.base.IncrementalSource`, and their ``sync``: yields the same pages on a first
run with exactly one :class:`CursorUpdate`, last; yields no change when run again with that
cursor; yields an edited page again with its new text; and a :class:`Tombstone` for a page
deleted upstream.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from core.access import Access
from connectors.base import IncrementalSource, Source
from app.config import parse_config
from connectors.factory import build_source
from connectors.cursor import CursorUpdate
from connectors.folder import FolderSource, SkippedPage
from connectors.http import RetryPolicy
from core.models import Document, Tombstone

from tests.standins.confluence import CLOUD_EMAIL, CLOUD_TOKEN, DC_TOKEN, ConfluenceStandIn

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

FAST = RetryPolicy(attempts=3, backoff_initial=0.02, backoff_max=0.1)

#: title -> a sentence of the page's text (every site serves these pages, in its own markup).
PAGES = {
    "Parking Rules": "Bikes are parked in the courtyard rack between 7:00 and 21:00.",
    "Release Train": "The release branch is cut every second Tuesday at noon.",
    "Printer Help": "The third floor printer is called Ada and needs a badge.",
}
#: The page readable only by some principals, on sources that have per-page permissions.
RESTRICTED = "Release Train"


@dataclass
class Site:
    """One source under test and the means to change its pages upstream.

    Attributes:
        kind: the parameter id.
        make: a fresh connector for the site.
        titles: the titles of the pages the test seeded (a site may serve more, e.g. a shared wiki).
        url_prefix: what every page URL starts with.
        dated: True when the source knows a page's modification time (``Document.updated_at``).
        access: the expected access of :data:`RESTRICTED` (public on sources without per-page permissions;
            every other page is public).
        delete: delete the page with this title upstream.
        edit: replace the text of the page with this title by this sentence.
    """

    kind: str
    make: Callable[[], Source]
    titles: dict[str, str]
    url_prefix: str
    dated: bool
    access: Access
    delete: Callable[[str], None]
    edit: Callable[[str, str], None]
    opened: list = field(default_factory=list)

    def source(self) -> Source:
        src = self.make()
        self.opened.append(src)
        return src


# -- the sites --------------------------------------------------------------------------------------------------

def _folder_site(root: Path) -> Site:
    root.mkdir()

    def path(title: str) -> Path:
        return root / (title.lower().replace(" ", "-") + ".md")

    def write(title: str, sentence: str) -> None:
        path(title).write_text(f"# {title}\n\n{sentence}\n", encoding="utf-8")

    for title, sentence in PAGES.items():
        write(title, sentence)
    return Site("folder", lambda: FolderSource(root, name="handbook"), dict(PAGES), root.as_uri(), True, Access.everyone(),
                lambda title: path(title).unlink(), write)


def _confluence_site(standin: ConfluenceStandIn, deployment: str) -> Site:
    standin.add_space("ENG")
    ids = {title: standin.add_page("ENG", title, f"<p>{sentence}</p>") for title, sentence in PAGES.items()}
    standin.pages[ids[RESTRICTED]].groups = ["release-managers"]
    standin.pages[ids[RESTRICTED]].users = ["557058:rita"]
    standin.add_user("557058:rita", "rita@example.com")
    standin.add_group("release-managers", ["557058:rita"])
    cloud = deployment == "cloud"
    entry = {"name": "eng", "type": "confluence", "base_url": standin.cloud_url if cloud else standin.dc_url,
             "deployment": deployment, "spaces": ["ENG"], "page_size": 2, "public_groups": ["confluence-users"]}
    env = {"CONFLUENCE_EMAIL": CLOUD_EMAIL, "CONFLUENCE_API_TOKEN": CLOUD_TOKEN} if cloud else \
        {"CONFLUENCE_TOKEN": DC_TOKEN}

    def make() -> Source:
        return build_source(parse_config({"sources": [entry]}).sources[0], environ=env, policy=FAST)

    return Site(f"confluence-{deployment}", make, dict(PAGES), standin.origin, True,
                Access.only((f"group:eng/{'id-' if cloud else ''}release-managers", "user:rita@example.com")),
                lambda title: standin.trash(ids[title]),
                lambda title, sentence: standin.edit_page(ids[title], body=f"<p>{sentence}</p>"))


_wiki_runs = itertools.count(1)


def _mediawiki_site(wiki) -> Site:
    # One wiki serves the whole module; each test seeds pages of its own (titles prefixed by a run number).
    n = next(_wiki_runs)
    titles = {f"{title} {n}": sentence for title, sentence in PAGES.items()}
    for title, sentence in titles.items():
        wiki.edit(title, f"== About ==\n{sentence}\n")
    entry = {"name": "wiki", "type": "mediawiki", "api_url": wiki.api_url,
             "auth": {"username_env": "WIKI_BOT_USER", "password_env": "WIKI_BOT_PASSWORD"}}
    env = {"WIKI_BOT_USER": wiki.bot_user, "WIKI_BOT_PASSWORD": wiki.bot_password}

    def make() -> Source:
        return build_source(parse_config({"sources": [entry]}).sources[0], environ=env, policy=FAST)

    return Site("mediawiki", make, titles, wiki.api_url.rsplit("/", 1)[0], False, Access.everyone(), wiki.delete,
                lambda title, sentence: wiki.edit(title, f"== About ==\n{sentence}\n"))


@pytest.fixture(scope="module")
def wiki_server(tmp_path_factory: pytest.TempPathFactory):
    from tests.mediawiki_server import MediaWikiServer, dump_xml, ensure_mediawiki, page_xml

    ensure_mediawiki()
    server = MediaWikiServer(tmp_path_factory.mktemp("contract-wiki"))
    server.install(dump_xml([page_xml("Main Page", "Welcome.")]))
    server.start()
    yield server
    server.stop()


MEDIAWIKI = pytest.param("mediawiki", marks=pytest.mark.server)  # a real MediaWiki: not in make test-fast
ALL = ["folder", "confluence-cloud", "confluence-datacenter", MEDIAWIKI]
INCREMENTAL = ["confluence-cloud", "confluence-datacenter", MEDIAWIKI]


def _open_site(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Site]:
    standin = None
    if kind == "folder":
        site = _folder_site(tmp_path / "pages")
    elif kind.startswith("confluence"):
        standin = ConfluenceStandIn().start()
        site = _confluence_site(standin, kind.split("-", 1)[1])
    else:
        site = _mediawiki_site(request.getfixturevalue("wiki_server"))
    try:
        yield site
    finally:
        for src in site.opened:
            if isinstance(src, IncrementalSource):
                src.close()
        if standin is not None:
            standin.stop()


@pytest.fixture(params=ALL)
def site(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Site]:
    """Every source kind."""
    yield from _open_site(request.param, request, tmp_path)


@pytest.fixture(params=INCREMENTAL)
def incremental(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Site]:
    """The source kinds with an incremental ``sync``."""
    yield from _open_site(request.param, request, tmp_path)


def _ours(site: Site, items) -> list:
    """The items about the site's seeded pages (a shared wiki serves other tests' pages too)."""
    return [i for i in items if not isinstance(i, Document) or i.title in site.titles]


def _docs(items) -> dict[str, Document]:
    return {d.title: d for d in items if isinstance(d, Document)}


# -- every source -------------------------------------------------------------------------------------------------

def test_a_source_conforms_to_the_protocol(site: Site) -> None:
    src = site.source()
    assert isinstance(src, Source) and isinstance(src.name, str) and src.name
    assert src.complete_listing is True
    assert isinstance(src, IncrementalSource) == (site.kind != "folder")


def test_a_scan_yields_one_document_per_page_with_its_fields_filled(site: Site) -> None:
    src = site.source()
    items = _ours(site, list(src.scan()))
    assert not [i for i in items if isinstance(i, (SkippedPage, Tombstone, CursorUpdate))], items
    docs = _docs(items)
    assert set(docs) == set(site.titles), sorted(docs)
    assert len({d.doc_id for d in docs.values()}) == len(docs)  # one doc id per page
    for title, doc in docs.items():
        assert doc.source == src.name and doc.doc_id and doc.title == title
        assert doc.url.startswith(site.url_prefix), doc.url
        assert site.titles[title] in doc.text, doc.text
        assert (doc.updated_at is not None and doc.updated_at.tzinfo is not None) == site.dated, doc.updated_at
        assert doc.access == (site.access if title.startswith(RESTRICTED) else Access.everyone()), (title, doc.access)


def test_a_page_deleted_upstream_is_no_longer_listed(site: Site) -> None:
    gone = next(t for t in site.titles if t.startswith("Printer Help"))
    site.delete(gone)
    docs = _docs(_ours(site, site.source().scan()))
    assert set(docs) == set(site.titles) - {gone}


# -- incremental sources --------------------------------------------------------------------------------------

def _sync(src: IncrementalSource, cursor, known) -> tuple[list, CursorUpdate]:
    items = list(src.sync(cursor, known))
    assert items and isinstance(items[-1], CursorUpdate), items[-1:]
    assert sum(isinstance(i, CursorUpdate) for i in items) == 1  # exactly one, last
    return items[:-1], items[-1]


def test_a_first_sync_yields_the_pages_of_a_scan_and_a_cursor_last(incremental: Site) -> None:
    src = incremental.source()
    assert isinstance(src, IncrementalSource)
    items, update = _sync(src, None, [])
    scanned = _docs(_ours(incremental, incremental.source().scan()))
    synced = _docs(_ours(incremental, items))
    assert synced.keys() == scanned.keys() == set(incremental.titles)
    assert {t: (d.doc_id, d.url, d.text, d.access) for t, d in synced.items()} == \
        {t: (d.doc_id, d.url, d.text, d.access) for t, d in scanned.items()}
    assert update.cursor and update.listed >= len(incremental.titles)


def test_a_second_sync_with_the_cursor_yields_no_change(incremental: Site) -> None:
    src = incremental.source()
    assert isinstance(src, IncrementalSource)
    items, update = _sync(src, None, [])
    known = [i.doc_id for i in items if isinstance(i, Document)]
    again, _ = _sync(src, update.cursor, known)
    assert [i for i in again if isinstance(i, (Document, Tombstone))] == []


def test_an_edited_page_is_synced_again_with_its_new_text(incremental: Site) -> None:
    src = incremental.source()
    assert isinstance(src, IncrementalSource)
    items, update = _sync(src, None, [])
    known = [i.doc_id for i in items if isinstance(i, Document)]
    edited = next(t for t in incremental.titles if t.startswith("Parking Rules"))
    incremental.edit(edited, "Bikes are now parked in the basement garage.")
    again, _ = _sync(src, update.cursor, known)
    docs = _docs(again)
    assert set(docs) == {edited} and "basement garage" in docs[edited].text
    assert not [i for i in again if isinstance(i, Tombstone)]


def test_a_page_deleted_upstream_yields_a_tombstone(incremental: Site) -> None:
    src = incremental.source()
    assert isinstance(src, IncrementalSource)
    items, update = _sync(src, None, [])
    docs = _docs(_ours(incremental, items))
    known = [i.doc_id for i in items if isinstance(i, Document)]
    gone = next(t for t in incremental.titles if t.startswith("Printer Help"))
    incremental.delete(gone)
    again, after = _sync(src, update.cursor, known)
    assert [(t.source, t.doc_id) for t in again if isinstance(t, Tombstone)] == [(src.name, docs[gone].doc_id)]
    assert not _docs(again)
    third, _ = _sync(src, after.cursor, [d for d in known if d != docs[gone].doc_id])
    assert [i for i in third if isinstance(i, (Document, Tombstone))] == []
