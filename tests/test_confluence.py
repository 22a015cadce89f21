"""The Confluence connector and the sync engine against the stand-in Confluence (``tests.standins.confluence``).

Real indexes (Whoosh + local Qdrant), the real embedder and a real SQLite state store; the server is
the stand-in serving Cloud REST v2 and Data Center REST v1 wire formats on 127.0.0.1. Covers: a
first sync (cursor paging through ``_links.next`` and through the ``Link`` header only, page ids as
keys, read access in ``access`` (the group members stored), section anchors in URLs); incremental syncs that fetch only changed
pages and prune trashed (``status: trashed``), purged (404) and moved-away pages; a 429 with
``Retry-After`` mid-listing (honoured; an absurd value clamped); a 500 mid-sync (the run fails,
no cursor moves, no page is lost, the next run completes); a page that keeps failing (skipped, kept,
retried next run); a 401 (a message naming what to check); Data Center CQL paging under a context
path, the site time zone of CQL dates, and 404 for trashed pages; a trashed page never cited again;
and pages that break conversion or chunking: a body nested 500 ``<div>`` deep (flattened and indexed),
a converter or chunker raising on one page (that page skipped with its reason and retried next run,
the rest committed, the cursor moved).
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from agent.models import Turn
from app.settings import Settings
from app.wiring import build_agent
from core.access import Access
from connectors.confluence import ConfluenceSource
from app.config import parse_config
from connectors.factory import build_source
from connectors.http import RetryPolicy
from index.knowledge import KnowledgeIndex
from index.sync import RETRY_DOCS, SyncEngine
from tools.knowledge_search import KnowledgeSearch, KnowledgeSearchArgs
from state import StateStore
from state.store import sqlite_url

from tests.standins.confluence import CLOUD_EMAIL, CLOUD_TOKEN, DC_TOKEN, ConfluenceStandIn
from tests.helpers import public_viewer, public_ctx

FAST = RetryPolicy(attempts=4, backoff_initial=0.02, backoff_max=0.1, retry_after_max=5.0)

LAPTOP = """<p>Every employee gets a company laptop, and laptops are refreshed every three years. The refresh
is automatic: IT opens a ticket for you about six weeks before your laptop turns three years old, and you choose
the new model from the standard list. Engineers may choose a laptop with 32 GB of memory. The old laptop goes back
to IT within two weeks of receiving the new one, wiped and with its charger.</p>
<h2>Early laptop refresh</h2>
<p>A laptop that is broken or too slow for your work can be refreshed early, before the three years are over: ask
your manager to approve an early laptop refresh in the IT portal.</p>"""

VPN = """<p>The VPN connects your laptop to the internal network from home, from a hotel or from a customer site.
Every internal tool, from the wiki to the build servers, is reachable only through the VPN, so install the client on
the first day. The VPN uses your single sign-on account together with a hardware key; a session lasts twelve hours,
after which the client asks you to touch the key again. Traffic to the public internet does not go through the VPN.</p>
<ac:structured-macro ac:name="toc"/>
<h2>Installing the client</h2>
<ac:structured-macro ac:name="info"><ac:parameter ac:name="title">Before you start</ac:parameter>
<ac:rich-text-body><p>You need a hardware key registered with IT.</p></ac:rich-text-body></ac:structured-macro>
<ac:structured-macro ac:name="code"><ac:parameter ac:name="language">bash</ac:parameter>
<ac:plain-text-body><![CDATA[sudo apt install acme-vpn && acme-vpn login --key <serial>]]></ac:plain-text-body></ac:structured-macro>
<p>See <ac:link><ri:page ri:content-title="Office Wi-Fi"/><ac:plain-text-link-body><![CDATA[the Wi-Fi page]]></ac:plain-text-link-body></ac:link>
and <ac:structured-macro ac:name="jira"><ac:parameter ac:name="key">IT-42</ac:parameter></ac:structured-macro>.</p>
<ac:image ac:alt="VPN client window"><ri:attachment ri:filename="vpn.png"/></ac:image>"""

PAGES = {
    "Laptop Refresh": LAPTOP,
    "VPN Setup": VPN,
    "On-call Handbook": "<h2>Paging</h2><p>The on-call engineer answers a page within 15 minutes.</p>",
    "Deploying Services": "<h2>Deploy windows</h2><p>Deploys run Monday to Thursday between 9:00 and 16:00.</p>",
    "Office Wi-Fi": "<p>The guest network is called acme-guest and needs no password.</p>",
}


def seed(s: ConfluenceStandIn) -> dict[str, str]:
    """Spaces ENG (configured) and OPS (not), the pages of :data:`PAGES` in ENG, one page in OPS."""
    s.add_space("ENG")
    s.add_space("OPS")
    ids = {title: s.add_page("ENG", title, body) for title, body in PAGES.items()}
    s.pages[ids["VPN Setup"]].groups = ["engineering"]
    s.pages[ids["VPN Setup"]].users = ["557058:alice"]
    s.add_user("557058:alice", "Alice@Example.com")
    s.add_user("557058:bob", "bob@example.com")
    s.add_group("engineering", ["557058:alice", "557058:bob"])
    ids["ops"] = s.add_page("OPS", "Ops Runbook", "<p>Only for the ops team.</p>")
    return ids


def cloud(s: ConfluenceStandIn, policy: RetryPolicy = FAST, token: str = CLOUD_TOKEN, **overrides) -> ConfluenceSource:
    cfg = parse_config({"sources": [{"name": "eng", "type": "confluence", "base_url": s.cloud_url, "deployment": "cloud",
                                     "spaces": ["ENG"], "page_size": 2, "public_groups": ["confluence-users"],
                                     **overrides}]}).sources[0]
    return build_source(cfg, environ={"CONFLUENCE_EMAIL": CLOUD_EMAIL, "CONFLUENCE_API_TOKEN": token}, policy=policy)


def datacenter(s: ConfluenceStandIn, **overrides) -> ConfluenceSource:
    cfg = parse_config({"sources": [{"name": "eng", "type": "confluence", "base_url": s.dc_url,
                                     "deployment": "datacenter", "spaces": ["ENG"], "page_size": 2,
                                     "public_groups": ["confluence-users"], **overrides}]}).sources[0]
    return build_source(cfg, environ={"CONFLUENCE_TOKEN": DC_TOKEN}, policy=FAST)


@pytest.fixture
def standin():
    with ConfluenceStandIn() as s:
        yield s


@pytest.fixture
def store(tmp_path: Path):
    st = StateStore(sqlite_url(tmp_path / "state.sqlite"))
    yield st
    st.close()


def chunks_of(index: KnowledgeIndex, source: str = "eng") -> list:
    return [index.dense.get(cid) for p in index.manifest.pages_of(source).values() for cid in p.chunk_ids]


def consistent(index: KnowledgeIndex) -> None:
    rep = index.consistency()
    assert rep.ok, (rep.keyword ^ rep.manifest, rep.dense ^ rep.manifest)


def page_fetches(s: ConfluenceStandIn, since: int) -> list[str]:
    """Ids of single-page GETs (v2 ``/pages/{id}``, v1 ``/content/{id}``) since request number ``since``."""
    out = []
    for _, path, _ in s.requests[since:]:
        tail = path.rsplit("/", 1)[-1]
        if (path.startswith("/wiki/api/v2/pages/") or path.startswith("/confluence/rest/api/content/")) and tail.isdigit():
            out.append(tail)
    return out


# -- Cloud (REST v2) ---------------------------------------------------------------------------------

def test_cloud_first_sync_pages_by_id_with_acl_anchors_and_converted_storage(standin, index_factory, store) -> None:
    ids = seed(standin)
    index = index_factory()
    res = SyncEngine(index, store).run(cloud(standin))
    assert res.status == "ok", res.error
    s = res.summary
    assert (s.mode, s.added, s.updated, s.deleted, s.errors) == ("full", 5, 0, 0, [])
    assert set(index.manifest.pages_of("eng")) == {f"page/{ids[t]}" for t in PAGES}  # OPS not configured
    # 5 pages at page_size 2: three listing requests following _links.next cursors.
    listing = [q for _, p, q in standin.requests if p.endswith("/pages") and "/spaces/" in p]
    assert len(listing) == 3 and "cursor" not in listing[0] and all("cursor" in q for q in listing[1:])
    chunks = chunks_of(index)
    vpn = [c for c in chunks if c.doc_id == f"page/{ids['VPN Setup']}"]
    assert vpn
    docs = {d.doc_id: d for d in cloud(standin).scan()}
    assert docs[f"page/{ids['VPN Setup']}"].access == Access.only({"group:eng/id-engineering", "user:alice@example.com"})
    assert all(d.access == Access.everyone() for k, d in docs.items() if k != f"page/{ids['VPN Setup']}")
    assert store.groups_of("bob@example.com") == {"group:eng/id-engineering"}
    text = "\n".join(c.text for c in vpn)
    assert "```bash\nsudo apt install acme-vpn && acme-vpn login --key <serial>\n```" in text
    assert "> **Info: Before you start**" in text and "You need a hardware key registered with IT." in text
    assert "the Wi-Fi page" in text and "[image: VPN client window]" in text
    assert "IT-42" not in text and "ac:" not in text and "toc" not in text.lower().split()
    install = next(c for c in vpn if c.section_path == ("Installing the client",))
    assert install.url == f"{standin.cloud_url}/spaces/ENG/pages/{ids['VPN Setup']}/VPN+Setup#Installing-the-client"
    cursor = store.get_cursor("eng", index_id=index.index_id)
    assert cursor["retry"] == [] and cursor["watermark"] and set(cursor["seen"]) == {ids[t] for t in PAGES}
    consistent(index)


def test_cloud_listing_follows_the_link_header_when_links_next_is_absent(index_factory, store) -> None:
    with ConfluenceStandIn(link_header_only=True) as s:
        ids = seed(s)
        index = index_factory()
        res = SyncEngine(index, store).run(cloud(s))
        assert res.status == "ok", res.error
        assert set(index.manifest.pages_of("eng")) == {f"page/{ids[t]}" for t in PAGES}


def test_cloud_incremental_sync_fetches_changes_only_and_prunes(standin, index_factory, store) -> None:
    ids = seed(standin)
    index = index_factory()
    engine = SyncEngine(index, store)
    source = cloud(standin)
    assert engine.run(source).status == "ok"

    mark = len(standin.requests)
    quiet = engine.run(source)
    s = quiet.summary
    assert (s.mode, s.added, s.updated, s.deleted, s.unchanged, s.fetched) == \
        ("incremental", 0, 0, 0, 5, 0)
    assert page_fetches(standin, mark) == []  # listings only: spaces, changes, ids

    standin.edit_page(ids["On-call Handbook"], body="<h2>Paging</h2><p>The on-call engineer answers within 5 minutes.</p>")
    new = standin.add_page("ENG", "Expenses", "<p>Submit expenses within 30 days.</p>")
    standin.trash(ids["Deploying Services"])
    standin.purge(ids["Office Wi-Fi"])
    standin.move_page(ids["VPN Setup"], "OPS")
    mark = len(standin.requests)
    res = engine.run(source)
    assert res.status == "ok", res.error
    s = res.summary
    assert (s.added, s.updated, s.deleted, s.unchanged, s.errors) == (1, 1, 3, 1, []), s
    fetched = page_fetches(standin, mark)
    # Bodies of the two changed pages; the three pages gone from the listing are checked once each.
    assert sorted(fetched) == sorted([ids["On-call Handbook"], new, ids["Deploying Services"], ids["Office Wi-Fi"],
                                      ids["VPN Setup"]])
    assert set(index.manifest.pages_of("eng")) == {f"page/{ids['Laptop Refresh']}", f"page/{ids['On-call Handbook']}",
                                                    f"page/{new}"}
    assert any("within 5 minutes" in c.text for c in chunks_of(index))
    consistent(index)


def test_a_trashed_page_is_never_cited_again(standin, index_factory, store, tmp_path: Path) -> None:
    ids = seed(standin)
    index = index_factory()
    engine = SyncEngine(index, store)
    source = cloud(standin)
    assert engine.run(source).status == "ok"
    laptop = f"page/{ids['Laptop Refresh']}"
    agent = build_agent(Settings(chatops_data_dir=tmp_path / "agent"), index=index).agent
    question = "How often are laptops refreshed?"
    before = agent.answer(Turn(viewer=public_viewer(), text=question, platform="test"))
    assert not before.refused and laptop in {c.doc_id for c in before.citations}, before.text

    standin.trash(ids["Laptop Refresh"])
    res = engine.run(source)
    assert res.status == "ok" and res.summary.deleted == 1
    after = agent.answer(Turn(viewer=public_viewer(), text=question, platform="test"))
    assert laptop not in {c.doc_id for c in after.citations}
    assert "three years" not in after.text
    assert not any(c.doc_id == laptop for c in chunks_of(index))


def test_429_with_retry_after_mid_listing_is_honoured(standin, index_factory, store) -> None:
    ids = seed(standin)
    fault = standin.fail(r"GET /wiki/api/v2/spaces/\d+/pages\?.*cursor=", 429, times=1, headers={"Retry-After": "1"})
    t0 = time.monotonic()
    res = SyncEngine(index := index_factory(), store).run(cloud(standin))
    elapsed = time.monotonic() - t0
    assert res.status == "ok", res.error
    assert fault.hits == 1 and res.summary.retries == 1
    assert res.summary.added == len(PAGES)
    assert elapsed >= 1.0  # waited as told
    assert set(store.get_cursor("eng", index_id=index.index_id)["seen"]) == {ids[t] for t in PAGES}


def test_an_absurd_retry_after_is_clamped(standin, index_factory, store) -> None:
    seed(standin)
    standin.fail(r"GET /wiki/api/v2/spaces\?", 503, times=1, headers={"Retry-After": "9223372036854775807"})
    policy = RetryPolicy(attempts=3, backoff_initial=0.02, backoff_max=0.1, retry_after_max=0.3)
    t0 = time.monotonic()
    res = SyncEngine(index_factory(), store).run(cloud(standin, policy=policy))
    assert res.status == "ok", res.error
    assert time.monotonic() - t0 < 10
    assert res.summary.retries == 1


def test_a_500_mid_sync_fails_the_run_moves_no_cursor_and_loses_no_page(standin, index_factory, store) -> None:
    ids = seed(standin)
    index = index_factory()
    engine = SyncEngine(index, store)
    source = cloud(standin)
    assert engine.run(source).status == "ok"
    cursor = store.get_cursor("eng", index_id=index.index_id)
    before = set(index.manifest.pages_of("eng"))

    standin.edit_page(ids["On-call Handbook"], body="<h2>Paging</h2><p>Answer a page within 10 minutes.</p>")
    standin.trash(ids["Deploying Services"])
    # A transient 500 on a body fetch is retried; the id listing then keeps failing: the run fails.
    transient = standin.fail(rf"GET /wiki/api/v2/pages/{ids['On-call Handbook']}\?", 500, times=1)
    standin.fail(r"GET /wiki/api/v2/spaces/\d+/pages\?.*sort=id", 500, times=1000)
    failed = engine.run(source)
    assert failed.status == "failed" and "HTTP 500" in failed.error and "tries" in failed.error
    assert transient.hits == 1
    assert store.get_cursor("eng", index_id=index.index_id) == cursor  # not advanced
    assert store.last_runs("eng", limit=1)[0].status == "failed"
    # Nothing lost: the trashed page is still served (no pruning without a complete listing), every page is whole.
    assert set(index.manifest.pages_of("eng")) == before
    consistent(index)

    standin.clear_faults()
    ok = engine.run(source)
    assert ok.status == "ok", ok.error
    assert ok.summary.deleted == 1
    pages = index.manifest.pages_of("eng")
    assert set(pages) == before - {f"page/{ids['Deploying Services']}"}
    assert any("within 10 minutes" in c.text for c in chunks_of(index))
    assert len(pages) == len(set(pages)) == 4  # no duplicates
    consistent(index)


def test_a_page_that_keeps_failing_is_skipped_kept_and_retried_next_run(standin, index_factory, store) -> None:
    ids = seed(standin)
    index = index_factory()
    engine = SyncEngine(index, store)
    source = cloud(standin)
    assert engine.run(source).status == "ok"
    oncall = ids["On-call Handbook"]
    standin.edit_page(oncall, body="<h2>Paging</h2><p>Answer a page within 7 minutes.</p>")
    standin.fail(rf"GET /wiki/api/v2/pages/{oncall}\?", 502, times=1000)
    res = engine.run(source)
    assert res.status == "ok" and res.summary.skipped == 1, res
    assert any(oncall in e and "502" in e for e in res.summary.errors)
    assert store.get_cursor("eng", index_id=index.index_id)["retry"] == [oncall]
    assert any("within 15 minutes" in c.text for c in chunks_of(index))  # the old copy keeps serving

    standin.clear_faults()
    again = engine.run(source)
    assert again.status == "ok" and again.summary.updated == 1, again.summary
    assert store.get_cursor("eng", index_id=index.index_id)["retry"] == []
    assert any("within 7 minutes" in c.text for c in chunks_of(index))


def test_a_401_fails_with_what_to_check(standin, index_factory, store) -> None:
    seed(standin)
    res = SyncEngine(index := index_factory(), store).run(cloud(standin, token="wrong"))
    assert res.status == "failed"
    assert "401" in res.error and "auth.token_env" in res.error and "API token" in res.error
    assert store.get_cursor("eng", index_id=index.index_id) is None


# -- Data Center (REST v1 + CQL) ----------------------------------------------------------------------

def test_datacenter_sync_pages_through_cql_under_a_context_path(standin, index_factory, store) -> None:
    ids = seed(standin)
    index = index_factory()
    engine = SyncEngine(index, store)
    source = datacenter(standin)
    res = engine.run(source)
    assert res.status == "ok", res.error
    assert res.summary.added == len(PAGES)
    # _links.next is relative to _links.base, which holds the context path: never doubled.
    paths = [p for _, p, _ in standin.requests]
    assert all(p.startswith("/confluence/rest/api/") and "/confluence/confluence" not in p for p in paths)
    searches = [q for _, p, q in standin.requests if p.endswith("/content/search")]
    assert len(searches) == 3 and [q.get("start") for q in searches] == [["0"], ["2"], ["4"]]
    vpn = [c for c in chunks_of(index) if c.doc_id == f"page/{ids['VPN Setup']}"]
    docs = {d.doc_id: d for d in datacenter(standin).scan()}
    assert docs[f"page/{ids['VPN Setup']}"].access == Access.only({"group:eng/engineering", "user:alice@example.com"})
    assert store.groups_of("alice@example.com") == {"group:eng/engineering"}
    install = next(c for c in vpn if c.section_path == ("Installing the client",))
    assert install.url == f"{standin.dc_url}/display/ENG/VPN+Setup#VPNSetup-Installingtheclient"

    watermark = datetime.fromisoformat(store.get_cursor("eng", index_id=index.index_id)["watermark"])
    standin.edit_page(ids["Office Wi-Fi"], body="<p>The guest network is now acme-visitors.</p>")
    standin.trash(ids["On-call Handbook"])  # v1 answers 404 for a trashed page
    mark = len(standin.requests)
    res = engine.run(source)
    assert res.status == "ok", res.error
    s = res.summary
    assert (s.added, s.updated, s.deleted, s.unchanged) == (0, 1, 1, 3), s
    assert sorted(page_fetches(standin, mark)) == sorted([ids["Office Wi-Fi"], ids["On-call Handbook"]])
    # No site time zone configured: the CQL date is written in UTC, 12 hours (plus the overlap) early.
    expected = (watermark - timedelta(hours=12, minutes=10)).astimezone(timezone.utc).strftime("%Y/%m/%d %H:%M")
    cql = {q["cql"][0] for _, p, q in standin.requests[mark:] if p.endswith("/content/search") and "lastmodified" in q["cql"][0]}
    assert cql == {f'type=page AND space in ("ENG") AND lastmodified >= "{expected}" ORDER BY lastmodified DESC'}


def test_datacenter_cql_dates_are_written_in_the_site_time_zone(index_factory, store) -> None:
    site = timezone(timedelta(hours=-7))
    with ConfluenceStandIn(site_tz=site) as s:
        ids = seed(s)
        index = index_factory()
        engine = SyncEngine(index, store)
        source = datacenter(s, timezone="Etc/GMT+7", overlap_minutes=2)  # POSIX sign: Etc/GMT+7 is UTC-7
        assert engine.run(source).status == "ok"
        watermark = store.get_cursor("eng", index_id=index.index_id)["watermark"]
        s.edit_page(ids["Deploying Services"], body="<h2>Deploy windows</h2><p>Deploys run Monday to Wednesday.</p>")
        mark = len(s.requests)
        res = engine.run(source)
        assert res.status == "ok" and res.summary.updated == 1, res
        expected = (datetime.fromisoformat(watermark) - timedelta(minutes=2)).astimezone(site).strftime("%Y/%m/%d %H:%M")
        cql = [q["cql"][0] for _, p, q in s.requests[mark:] if p.endswith("/content/search") and "lastmodified" in q["cql"][0]]
        assert cql and f'lastmodified >= "{expected}"' in cql[0]
        assert page_fetches(s, mark) == [ids["Deploying Services"]]


def test_a_space_added_to_the_config_is_indexed_by_the_next_incremental_run(standin, index_factory, store) -> None:
    ids = seed(standin)
    old = standin.add_page("OPS", "Old Ops Page", "<p>Written long ago.</p>",
                           modified=datetime.now(timezone.utc) - timedelta(days=40))
    index = index_factory()
    engine = SyncEngine(index, store)
    assert engine.run(cloud(standin)).status == "ok"
    res = engine.run(cloud(standin, spaces=["ENG", "OPS"]))  # incremental: the cursor is kept
    assert res.status == "ok" and res.summary.mode == "incremental", res
    assert res.summary.added == 2  # both OPS pages, although older than the watermark
    assert {f"page/{ids['ops']}", f"page/{old}"} <= set(index.manifest.pages_of("eng"))
    back = engine.run(cloud(standin))  # and removed again when the space leaves the config
    assert back.summary.deleted == 2 and f"page/{old}" not in index.manifest.pages_of("eng")


# -- pages that break conversion or chunking -------------------------------------------------------------

NESTED = ("<p>Intro of the nested page.</p>" + "<div>" * 500 + "<h2>Kumquat storage</h2><p>Kumquats are stored in "
          "the cold room on shelf nine, next to the quince crates.</p>" + "</div>" * 500)


def searched(index: KnowledgeIndex, query: str) -> set[str]:
    return {e.chunk.doc_id for e in KnowledgeSearch(index).run(KnowledgeSearchArgs(query=query, k=5), public_ctx()).evidence}


def test_a_page_nested_500_divs_deep_is_flattened_and_the_run_commits(standin, index_factory, store) -> None:
    seed(standin)
    index = index_factory()
    engine = SyncEngine(index, store)
    source = cloud(standin)
    assert engine.run(source).status == "ok"
    before = store.get_cursor("eng", index_id=index.index_id)["watermark"]
    time.sleep(1.1)  # the next watermark is the server's Date header, in whole seconds
    nested = standin.add_page("ENG", "Pantry", NESTED)
    normal = standin.add_page("ENG", "Bike Storage", "<p>Bikes are parked in the basement garage, level minus two.</p>")
    res = engine.run(source)
    assert res.status == "ok", res.error
    assert (res.summary.added, res.summary.skipped, res.summary.errors) == (2, 0, []), res.summary
    assert store.get_cursor("eng", index_id=index.index_id)["watermark"] > before
    deep = [c for c in chunks_of(index) if c.doc_id == f"page/{nested}"]
    text = "\n\n".join(c.text for c in deep)
    assert "Intro of the nested page.\n\n## Kumquat storage\n\nKumquats are stored in the cold room" in text, text
    assert f"page/{normal}" in searched(index, "where are bikes parked")
    assert f"page/{nested}" in searched(index, "where are kumquats stored")
    consistent(index)


def test_a_page_whose_conversion_raises_is_skipped_with_its_reason_and_retried(standin, index_factory, store,
                                                                               monkeypatch) -> None:
    import connectors.confluence_rest as confluence  # where a page's body is converted

    seed(standin)
    index = index_factory()
    engine = SyncEngine(index, store)
    source = cloud(standin)
    assert engine.run(source).status == "ok"
    real = confluence.storage_to_markdown

    def broken(storage: str) -> str:
        if "kumquat" in storage:
            raise RuntimeError("converter bug on this page")
        return real(storage)

    monkeypatch.setattr(confluence, "storage_to_markdown", broken)
    bad = standin.add_page("ENG", "Pantry", "<p>The kumquat shelf is number nine.</p>")
    good = standin.add_page("ENG", "Bike Storage", "<p>Bikes are parked in the basement garage.</p>")
    res = engine.run(source)
    assert res.status == "ok", res.error
    assert (res.summary.added, res.summary.skipped) == (1, 1), res.summary
    assert res.summary.errors == [f"page/{bad}: RuntimeError: converter bug on this page"]
    assert f"page/{good}" in index.manifest.pages_of("eng") and f"page/{bad}" not in index.manifest.pages_of("eng")
    assert store.get_cursor("eng", index_id=index.index_id)["retry"] == [bad]

    monkeypatch.setattr(confluence, "storage_to_markdown", real)
    again = engine.run(source)
    assert again.status == "ok" and again.summary.added == 1, again.summary
    assert f"page/{bad}" in index.manifest.pages_of("eng") and store.get_cursor("eng", index_id=index.index_id)["retry"] == []
    consistent(index)


def test_a_page_whose_chunking_raises_is_skipped_kept_and_fetched_again_next_run(standin, index_factory, store,
                                                                                 monkeypatch) -> None:
    from index.chunker import Chunker

    ids = seed(standin)
    index = index_factory()
    engine = SyncEngine(index, store)
    source = cloud(standin)
    assert engine.run(source).status == "ok"
    oncall = ids["On-call Handbook"]
    real = Chunker.chunk

    def broken(self, doc):
        if "7 minutes" in doc.text:
            raise RecursionError("maximum recursion depth exceeded")
        return real(self, doc)

    monkeypatch.setattr(Chunker, "chunk", broken)
    standin.edit_page(oncall, body="<h2>Paging</h2><p>Answer a page within 7 minutes.</p>")
    new = standin.add_page("ENG", "Bike Storage", "<p>Bikes are parked in the basement garage.</p>")
    res = engine.run(source)
    assert res.status == "ok", res.error
    assert (res.summary.added, res.summary.updated, res.summary.skipped) == (1, 0, 1), res.summary
    assert res.summary.errors == [f"page/{oncall}: RecursionError: maximum recursion depth exceeded"]
    cursor = store.get_cursor("eng", index_id=index.index_id)
    assert cursor[RETRY_DOCS] == [f"page/{oncall}"] and cursor["retry"] == []
    assert any("within 15 minutes" in c.text for c in chunks_of(index))  # the old copy keeps serving
    assert f"page/{new}" in index.manifest.pages_of("eng")

    # The page's version was seen, so only the retry list brings it back: fetched again and indexed.
    monkeypatch.setattr(Chunker, "chunk", real)
    mark = len(standin.requests)
    again = engine.run(source)
    assert again.status == "ok" and again.summary.updated == 1, again.summary
    assert page_fetches(standin, mark) == [oncall]
    assert RETRY_DOCS not in store.get_cursor("eng", index_id=index.index_id)
    assert any("within 7 minutes" in c.text for c in chunks_of(index))
    consistent(index)
