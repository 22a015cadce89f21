"""The MediaWiki connector against a real MediaWiki (Debian's package, SQLite, PHP's built-in server).

The wiki is private (anonymous reads are refused) and read with a bot password; it starts with
five articles, a redirect and a page in the Project namespace (neither indexed). Covers: refused
anonymous reads and a wrong bot password (clear errors, no cursor); a first sync keyed by page id
with the wiki's own section anchors in chunk URLs and code blocks that keep their language; an
unchanged re-sync that costs only listing requests; then an edit, a deletion, a move, a new page
and an import (which writes no recent changes) followed by one incremental sync: the index
follows, the moved page keeps its id, and the deleted page is never cited again by the agent.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent.models import Turn
from app.settings import Settings
from app.wiring import build_agent
from app.config import parse_config
from connectors.factory import build_source
from connectors.http import RetryPolicy
from index.knowledge import KnowledgeIndex
from connectors.mediawiki import MediaWikiSource, mediawiki_html_to_markdown
from index.sync import SyncEngine
from state import StateStore
from state.store import sqlite_url

from tests.mediawiki_server import MediaWikiServer, dump_xml, ensure_mediawiki, page_xml
from tests.helpers import public_viewer

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

PARENTAL = """Employees get '''16 weeks''' of fully paid parental leave after the birth or adoption of a child.
Parental leave is available to every parent, birth parents and adoptive parents alike, and it can be taken in one
block or split into two blocks within the first year. The company tops up statutory parental pay to the full salary
for the whole 16 weeks, and benefits such as health insurance and pension contributions continue during the leave.

== Eligibility ==
Every employee with at least three months of service is eligible for parental leave, whatever their gender or the size of their team.

== How to request parental leave ==
Tell your manager at least eight weeks before the parental leave starts and file the parental leave form in the HR portal.

== Returning to work ==
After parental leave you may work part-time for up to six months before returning to full time.
"""

EXPENSES = """The expense policy explains what the company pays back when you spend your own money on company
business: travel, meals on business trips, equipment for your home office and training. Costs that are not listed
here need the approval of your manager before you spend the money. Finance reviews every claim within ten working
days and pays approved claims with the next monthly salary, in the currency of your payroll country.

== Meal allowance ==
The daily meal allowance on business trips is 45 EUR per day, paid with the monthly salary.<ref>Finance decision of 2025.</ref>

== Submitting receipts ==
Submit receipts within 30 days of the expense with the expense tool. Every claim needs a photo or a PDF of the
itemised receipt, the business reason and the project code; claims without a project code are sent back. For trips,
add the trip code so that flights, hotels and meals of the same trip are reviewed together. The tool runs on every
laptop and takes the receipt file and the trip code:
<syntaxhighlight lang="bash">
expense-cli submit --receipt receipt.pdf --trip BER-2026
</syntaxhighlight>

=== Lost receipts & exceptions ===
A lost receipt needs a signed statement from your manager.
"""

TRAVEL_DESK = """The travel desk books flights, trains and hotels for business trips.

== Contact ==
Write to travel@example.com or call extension 4455 between 9:00 and 17:00.
"""

ONBOARDING = """New hires follow the onboarding checklist in their first week.

== Day one ==
Collect your laptop from IT and set up two-factor authentication.
"""

INCIDENTS = """== Declaring an incident ==
Anyone can declare an incident in the #incidents channel with the /incident command.

== Severity levels ==
SEV1 means customers cannot use the product; SEV2 means a major feature is degraded.
"""

ARTICLES = {"Parental Leave": PARENTAL, "Expense Policy": EXPENSES, "Travel Desk": TRAVEL_DESK,
            "Onboarding Checklist": ONBOARDING, "Incident Response": INCIDENTS}


@pytest.fixture(scope="module")
def wiki(tmp_path_factory: pytest.TempPathFactory):
    """A private MediaWiki with :data:`ARTICLES`, a redirect and a Project-namespace page."""
    ensure_mediawiki()
    server = MediaWikiServer(tmp_path_factory.mktemp("mediawiki"))
    pages = [page_xml(t, body) for t, body in ARTICLES.items()]
    pages.append(page_xml("Leave", "#REDIRECT [[Parental Leave]]"))
    pages.append(page_xml("Chatops Test Wiki:About", "The project page is not in namespace 0.", ns=4))
    server.install(dump_xml(pages))
    server.start()
    yield server
    server.stop()


def _source(wiki: MediaWikiServer, **overrides) -> MediaWikiSource:
    entry = {"name": "wiki", "type": "mediawiki", "api_url": wiki.api_url,
             "auth": {"username_env": "WIKI_BOT_USER", "password_env": "WIKI_BOT_PASSWORD"}, **overrides}
    if entry.get("auth") is None:
        entry.pop("auth")
    cfg = parse_config({"sources": [entry]}).sources[0]
    env = {"WIKI_BOT_USER": wiki.bot_user, "WIKI_BOT_PASSWORD": wiki.bot_password}
    return build_source(cfg, environ=env, policy=RetryPolicy(attempts=3, backoff_initial=0.05, backoff_max=0.2))


def _page_ids(wiki: MediaWikiServer, source: MediaWikiSource) -> dict[str, int]:
    data = source.api({"action": "query", "list": "allpages", "aplimit": "max"})
    return {p["title"]: p["pageid"] for p in data["query"]["allpages"]}


@pytest.fixture
def store(tmp_path: Path):
    s = StateStore(sqlite_url(tmp_path / "state.sqlite"))
    yield s
    s.close()


def _chunks(index: KnowledgeIndex, source: str = "wiki") -> list:
    return [index.dense.get(cid) for p in index.manifest.pages_of(source).values() for cid in p.chunk_ids]


def _assert_consistent(index: KnowledgeIndex) -> None:
    report = index.consistency()
    assert report.ok, (report.keyword ^ report.manifest, report.dense ^ report.manifest)


# -- access -----------------------------------------------------------------------------------------

def test_anonymous_read_of_a_private_wiki_fails_with_what_to_do(wiki, index_factory, store) -> None:
    source = _source(wiki, auth=None)
    result = SyncEngine(index := index_factory(), store).run(source)
    assert result.status == "failed"
    assert "readapidenied" in result.error and "auth.username_env" in result.error and "bot password" in result.error
    assert store.get_cursor("wiki", index_id=index.index_id) is None
    assert store.last_runs("wiki")[0].status == "failed"


def test_a_wrong_bot_password_is_refused_clearly(wiki, index_factory, store) -> None:
    cfg = parse_config({"sources": [{"name": "wiki", "type": "mediawiki", "api_url": wiki.api_url,
                                     "auth": {"username_env": "U", "password_env": "P"}}]}).sources[0]
    source = build_source(cfg, environ={"U": wiki.bot_user, "P": "w" * 32})
    result = SyncEngine(index := index_factory(), store).run(source)
    assert result.status == "failed"
    assert "refused the login" in result.error and "Special:BotPasswords" in result.error
    assert store.get_cursor("wiki", index_id=index.index_id) is None


# -- the first sync ---------------------------------------------------------------------------------

def test_first_sync_keys_pages_by_id_with_wiki_anchors(wiki, index_factory, store) -> None:
    source = _source(wiki)
    index = index_factory()
    result = SyncEngine(index, store).run(source)
    assert result.status == "ok", result.error
    s = result.summary
    assert (s.mode, s.added, s.updated, s.deleted, s.errors) == ("full", 5, 0, 0, [])
    ids = _page_ids(wiki, source)
    # Articles only: no redirect ("Leave"), no Project-namespace page.
    assert set(index.manifest.pages_of("wiki")) == {f"page/{ids[t]}" for t in ARTICLES}
    chunks = _chunks(index)
    urls = {c.url for c in chunks}
    base = f"{wiki.server_url}/index.php/"
    assert f"{base}Expense_Policy#Meal_allowance" in urls
    assert f"{base}Parental_Leave#How_to_request_parental_leave" in urls
    # The wiki's own anchor for a heading with '&' (MediaWiki keeps it; a GitHub slug would drop it).
    assert any(u.startswith(f"{base}Expense_Policy#Lost_receipts_") and "exceptions" in u for u in urls), urls
    receipts = next(c for c in chunks if c.section_path and c.section_path[-1] == "Submitting receipts")
    assert "```bash\nexpense-cli submit --receipt receipt.pdf --trip BER-2026\n```" in receipts.text
    meal = next(c for c in chunks if c.section_path == ("Meal allowance",))
    assert "45 EUR per day" in meal.text and "[1]" not in meal.text  # footnote markers dropped
    assert all(c.title in ARTICLES for c in chunks)
    cursor = store.get_cursor("wiki", index_id=index.index_id)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", cursor["watermark"]) and cursor["retry"] == []
    _assert_consistent(index)


def test_html_conversion_keeps_headings_code_and_drops_chrome() -> None:
    html = ('<div class="mw-parser-output"><div id="toc" class="toc">Contents 1 Intro</div>'
            '<h2><span class="mw-headline" id="Setup">Setup</span><span class="mw-editsection">[edit]</span></h2>'
            '<p>Run <a href="/index.php/Tool">the tool</a>.<sup class="reference"><a href="#c">[1]</a></sup></p>'
            '<div class="mw-highlight mw-highlight-lang-python"><pre><span>print</span>(1)\n</pre></div>'
            '<p><img alt="Network diagram" src="x.png"></p></div>')
    md = mediawiki_html_to_markdown(html)
    assert md == "## Setup\n\nRun the tool.\n\n```python\nprint(1)\n```\n\n[image: Network diagram]"


def test_html_nested_thousands_deep_is_flattened_not_a_recursion_error() -> None:
    html = ('<div class="mw-parser-output"><p>Intro.</p>' + "<div>" * 3000 +
            '<h2><span class="mw-headline" id="Setup">Setup</span></h2><p>Run the tool.<sup class="reference">[1]'
            '</sup></p><div class="mw-highlight mw-highlight-lang-bash"><pre>ls -l\n</pre></div>' + "</div>" * 3000 +
            "</div>")
    assert mediawiki_html_to_markdown(html) == "Intro.\n\n## Setup\n\nRun the tool.\n\n```bash\nls -l\n```"


# -- incremental sync: edit, delete, move, create, import -----------------------------------------------

def _ask(index: KnowledgeIndex, tmp_path: Path, question: str):
    rt = build_agent(Settings(chatops_data_dir=tmp_path / "agent"), index=index)
    return rt.agent.answer(Turn(viewer=public_viewer(), text=question, platform="test"))


QUESTION = "How many weeks of parental leave do employees get?"


def test_incremental_sync_follows_edits_deletes_moves_and_never_cites_a_deleted_page(
        wiki, index_factory, store, tmp_path: Path) -> None:
    source = _source(wiki)
    index = index_factory()
    engine = SyncEngine(index, store)
    first = engine.run(source)
    assert first.status == "ok" and first.summary.added == 5, first
    ids = _page_ids(wiki, source)
    parental = f"page/{ids['Parental Leave']}"
    before = _ask(index, tmp_path, QUESTION)
    assert not before.refused and parental in {c.doc_id for c in before.citations}, before.text

    # Nothing changed: only listing requests (siteinfo, recent changes + log, allpages), nothing fetched.
    again = engine.run(source)
    assert again.status == "ok"
    s = again.summary
    assert (s.mode, s.added, s.updated, s.deleted, s.unchanged) == ("incremental", 0, 0, 0, 5)
    assert s.fetched == 0 and s.calls <= 4, s

    wiki.edit("Expense Policy", EXPENSES.replace("45 EUR", "52 EUR"))
    wiki.delete("Parental Leave")
    wiki.move("Travel Desk", "Travel Office")
    wiki.edit("Security Basics", "== Passwords ==\nUse the company password manager for every account.\n")
    wiki.import_pages(dump_xml([page_xml("Imported Runbook", "== Restarting ==\nRestart the queue worker first.\n")]),
                      rebuild_rc=False)

    third = engine.run(source)
    assert third.status == "ok", third.error
    s = third.summary
    assert (s.added, s.updated, s.deleted, s.errors) == (2, 2, 1, []), s
    ids_now = _page_ids(wiki, source)
    pages = index.manifest.pages_of("wiki")
    expected = {f"page/{ids_now[t]}" for t in
                ("Expense Policy", "Travel Office", "Onboarding Checklist", "Incident Response", "Security Basics",
                 "Imported Runbook")}
    assert set(pages) == expected
    # The move kept the page id; the redirect left at the old title is not indexed.
    assert ids_now["Travel Office"] == ids["Travel Desk"]
    chunks = _chunks(index)
    moved = [c for c in chunks if c.doc_id == f"page/{ids['Travel Desk']}"]
    assert moved and all(c.title == "Travel Office" and "/index.php/Travel_Office" in c.url for c in moved)
    assert not any(c.title in {"Travel Desk", "Parental Leave"} for c in chunks)
    assert any("52 EUR per day" in c.text for c in chunks) and not any("45 EUR" in c.text for c in chunks)
    assert parental not in pages and not any(c.doc_id == parental for c in chunks)
    _assert_consistent(index)

    after = _ask(index, tmp_path, QUESTION)
    assert parental not in {c.doc_id for c in after.citations}
    assert "16 weeks" not in after.text

    # The same window again: entries already handled are de-duplicated (revision and log ids).
    fourth = engine.run(source)
    s = fourth.summary
    assert (s.added, s.updated, s.deleted, s.fetched) == (0, 0, 0, 0), s
    assert store.last_runs("wiki", limit=1)[0].summary["unchanged"] == 6
