"""The knowledge-gap report (``app/report.py``, ``app/report_render.py``, ``chatops report``, ``/kb report``).

Real components throughout: a real state store (SQLite, and PostgreSQL for the content) seeded with turn
records and feedback as ``chatops serve`` writes them, a real index (Whoosh, local Qdrant, manifest) of a copy of examples/wiki
with one page last changed two years ago, the real local embedding model for the grouping, Debian's
Chromium for the HTML page, and the real Bolt app over signed HTTP (``tests/standins/slack/``) for
``/kb report``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from app.jobs import IndexJobs
from app.layout import PATH_SEPARATOR
from app.report import UNKNOWN_SOURCE, GapReport, build_report, gap_report, index_pages, parse_since
from app.report_render import render_html, render_text, summary_markdown
from app.settings import Settings
from app.wiring import build_agent
from bot.cli import build_parser, main
from connectors.folder import FolderSource
from index.indexer import Indexer
from index.knowledge import KnowledgeIndex
from state import StateStore, TurnRecord
from state.store import sqlite_url

from tests.standins.slack import SlackHarness
from tests.test_state_store import pg_url  # noqa: F401 - the PostgreSQL database fixture

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

NOW = datetime.now(timezone.utc)
WIFI = ("what is the office wifi password?", "How do I connect to the office wi-fi?",
        "What is the office WiFi password")  # two wordings of one gap; the third repeats the first
SABBATICAL = "can I take a sabbatical after five years?"
SCRIPT_Q = "<script>document.title='pwned'</script> where do I park my bike?"
STALE_PAGE = "people/time-off.md"
INCIDENT_PAGE = "engineering/incident-response.md"
ADMIN, ALICE = "UADMIN01", "UALICE01"


def citation(index: KnowledgeIndex, doc_id: str, n: int, source: str = "wiki") -> dict:
    """A citation as the turn log stores it, of the page's first chunk."""
    cid = index.manifest.pages_of(source)[doc_id].chunk_ids[0]
    chunk = index.keyword.chunks([cid])[cid]
    return {"n": n, "chunk_id": cid, "doc_id": doc_id, "title": chunk.title, "url": chunk.url,
            "section": chunk.section}


def seed(store: StateStore, index: KnowledgeIndex, source: str = "wiki") -> None:
    """Seven turns in the period (five refused: three about the wifi, one each about a sabbatical and a bike;
    two answered, one marked not helpful twice, one citing the stale page and a page no longer indexed) and
    one a month before."""
    def turn(trace: str, question: str, outcome: str, citations=(), hours: float = 1, reason: str = "") -> None:
        store.record_turn(TurnRecord(trace_id=trace, platform="slack", user_id="U1", channel_id="D1",
                                     question=question, route="knowledge", outcome=outcome, reason=reason,
                                     citations=tuple(citations), created_at=NOW - timedelta(hours=hours)))

    for i, q in enumerate(WIFI):
        turn(f"wifi{i}", q, "refused", reason="no passage was close enough to the question")
    turn("sabb", SABBATICAL, "refused", reason="no passage was close enough to the question")
    turn("script", SCRIPT_Q, "refused")
    incident = citation(index, INCIDENT_PAGE, 1, source)
    # the same source quoted twice under one number counts once; the second page is the stale one
    turn("incident", "how do I declare an incident?", "answered", [incident, dict(incident)])
    turn("timeoff", "how much PTO do I get?", "answered",
         [citation(index, STALE_PAGE, 1, source), {"n": 2, "chunk_id": "gone", "doc_id": "old/removed.md",
                                                   "title": "Removed page", "url": "https://wiki/old", "section": ""}])
    turn("old", "an old question about wifi", "refused", hours=24 * 30)  # before the period
    store.add_feedback("incident", "slack", "U2", "not_helpful", "The pager number is <b>out of date</b>")
    store.add_feedback("incident", "slack", "U3", "not_helpful")
    store.add_feedback("timeoff", "slack", "U2", "helpful")
    store.add_feedback("old", "slack", "U2", "not_helpful", "outside the period")


@pytest.fixture
def stale_wiki(wiki_copy: Path) -> Path:
    """examples/wiki with the time-off page last changed two years ago."""
    old = time.time() - 2 * 365 * 86400
    os.utime(wiki_copy / STALE_PAGE, (old, old))
    return wiki_copy


@pytest.fixture
def indexed(stale_wiki: Path, index_factory) -> KnowledgeIndex:
    index = index_factory()
    rep = Indexer(index).run(FolderSource(stale_wiki))
    assert rep.added == 13 and not rep.errors
    return index


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.server)])
def store(request: pytest.FixtureRequest, tmp_path: Path):
    """The state store on SQLite and on PostgreSQL (``pg_url``: a fresh database, as in test_state_store)."""
    s = StateStore(sqlite_url(tmp_path / "state.sqlite") if request.param == "sqlite"
                   else request.getfixturevalue("pg_url"))
    yield s
    s.drop_all()
    s.close()


@pytest.fixture
def report(indexed: KnowledgeIndex, store: StateStore) -> GapReport:
    seed(store, indexed)
    return gap_report(store, indexed.manifest, indexed.keyword, indexed.embedder.embed,
                      since=NOW - timedelta(days=7), until=NOW + timedelta(seconds=1), stale_after_days=365)


# -- content ------------------------------------------------------------------------------------------------------
def test_refused_questions_are_grouped_by_similar_wording_most_frequent_first(report: GapReport) -> None:
    assert (report.questions, report.answered, report.refused) == (7, 2, 5)  # the old turn is outside the period
    assert report.answer_rate == pytest.approx(2 / 7)
    groups = [(g.count, set(g.examples)) for g in report.refused_groups]
    assert groups[0] == (3, set(WIFI[:2]))  # two wordings of one gap; the repeated wording counted, shown once
    assert sorted(groups[1:], key=str) == sorted([(1, {SABBATICAL}), (1, {SCRIPT_Q})], key=str)
    assert report.refused_groups[0].reasons == ("no passage was close enough to the question",)


def test_unhelpful_answers_come_with_their_citations_and_comments(report: GapReport) -> None:
    [bad] = report.unhelpful  # the old turn's vote is outside the period
    assert (bad.trace_id, bad.question, bad.votes) == ("incident", "how do I declare an incident?", 2)
    assert bad.comments == ("The pager number is <b>out of date</b>",)
    [cite] = bad.citations  # one number, quoted twice: one citation
    assert (cite.n, cite.source, cite.doc_id, cite.title) == (1, "wiki", INCIDENT_PAGE, "Incident response and on-call")
    assert (report.helpful, report.not_helpful) == (1, 2)


def test_pages_cited_never_cited_and_stale_per_source(report: GapReport, indexed: KnowledgeIndex) -> None:
    wiki, gone = report.sources
    assert (wiki.source, wiki.pages, wiki.citations, wiki.answers) == ("wiki", 13, 2, 2)
    assert {u.page.doc_id for u in wiki.cited} == {INCIDENT_PAGE, STALE_PAGE}
    never = {p.doc_id for p in wiki.never_cited}
    assert len(never) == 11 and never == set(indexed.manifest.pages_of("wiki")) - {INCIDENT_PAGE, STALE_PAGE}
    [stale] = wiki.stale
    assert stale.page.doc_id == STALE_PAGE and stale.age_days >= 729 and stale.page.title == "Time off and holidays"
    assert not [u for u in wiki.cited if u.page.doc_id == INCIDENT_PAGE][0].stale
    # a cited page the index no longer holds is still counted, under its own title
    assert gone.source == UNKNOWN_SOURCE and [u.page.title for u in gone.cited] == ["Removed page"]


def test_the_stale_threshold_is_the_setting(indexed: KnowledgeIndex, store: StateStore) -> None:
    seed(store, indexed)
    report = gap_report(store, indexed.manifest, indexed.keyword, indexed.embedder.embed,
                        since=NOW - timedelta(days=7), until=NOW + timedelta(seconds=1), stale_after_days=800)
    assert report.stale_after_days == 800 and report.sources[0].stale == ()


def test_only_the_most_recent_refused_questions_are_grouped(indexed: KnowledgeIndex, store: StateStore) -> None:
    seed(store, indexed)
    turns = store.turn_records(since=NOW - timedelta(days=7))
    pages, chunk_page = index_pages(indexed.manifest, indexed.keyword)
    report = build_report(turns, [], pages, chunk_page, indexed.embedder.embed, since=NOW - timedelta(days=7),
                          until=NOW + timedelta(seconds=1), max_grouped=2)
    assert report.refused == 5 and report.ungrouped == 3
    assert sorted(g.examples for g in report.refused_groups) == sorted([(SABBATICAL,), (SCRIPT_Q,)])
    assert "3 older refused questions were not grouped" in render_text(report)


def test_the_period_accepts_spans_and_dates_and_explains_anything_else() -> None:
    now = datetime(2026, 11, 26, 8, 0, tzinfo=timezone.utc)
    assert parse_since("7d", now) == now - timedelta(days=7)
    assert parse_since("24h", now) == now - timedelta(hours=24)
    assert parse_since("2w", now) == now - timedelta(weeks=2)
    assert parse_since("2026-11-01", now) == datetime(2026, 11, 1, tzinfo=timezone.utc)
    for bad in ("soon", "7x", "2027-01-01"):
        with pytest.raises(ValueError, match="--since"):
            parse_since(bad, now)


def test_text_and_chat_summaries_show_groups_and_escape_users_words(report: GapReport) -> None:
    text = render_text(report)
    assert "  3 x " in text and "Incident response and on-call" in text and "last updated" in text
    cited = [ln for ln in text.splitlines() if re.match(r"      \[\d+\] ", ln)]
    assert cited and all(" > " not in ln for ln in cited)  # one path separator, as in chatops ask (app.layout)
    assert any(f"Incident response and on-call{PATH_SEPARATOR}" in ln for ln in cited), cited
    summary = summary_markdown(report)
    assert "3 × " in summary and "\\<script\\>" in summary and "<script>" not in summary
    data = json.loads(json.dumps(report.as_dict()))
    assert data["refused_groups"][0]["count"] == 3 and data["answer_rate"] == pytest.approx(2 / 7)


class _ClosedRuntime:
    """A runtime whose index cannot be read (closed, damaged: the report must fail plainly, not raise)."""

    class index:  # noqa: N801
        manifest = whoosh = None

        class embedder:  # noqa: N801
            @staticmethod
            def embed(texts):
                raise OSError("index unreadable")

    settings = Settings()


class _Jobs:
    runtime = _ClosedRuntime()


def test_the_report_service_is_admin_only_audited_and_fails_plainly(store: StateStore) -> None:
    import asyncio

    from app.admin import AUDIT_REPORT, AdminResult, AdminService
    from app.inbound import InboundMessage

    def msg(admin: bool) -> InboundMessage:
        return InboundMessage(platform="teams", text="report", user_id="A" if admin else "U", is_admin=admin)

    store.record_turn(TurnRecord("t1", "slack", "U1", "D1", "why?", "knowledge", "refused", created_at=NOW))
    service = AdminService(_Jobs(), store)  # type: ignore[arg-type]
    denied = asyncio.run(service.request_report(msg(False), "7d"))
    assert denied.outcome == "denied" and "for the knowledge base's admins" in denied.text
    with pytest.raises(ValueError):
        asyncio.run(service.run_report(msg(True), denied))  # never run what was not accepted
    with pytest.raises(ValueError):
        asyncio.run(service.run_report(msg(False), AdminResult("report", "started", since="7d")))
    started = asyncio.run(service.request_report(msg(True), ""))
    assert (started.outcome, started.since) == ("started", "7d")
    failed = asyncio.run(service.run_report(msg(True), started))
    assert failed.outcome == "failed" and failed.text == "Sorry, I couldn't read the report right now."
    entries = [(e.actor, e.outcome) for e in store.audit_entries(action=AUDIT_REPORT)]
    assert entries == [("A", "failed"), ("U", "denied")]


# -- the HTML page, in a real browser -------------------------------------------------------------------------------
def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("Debian's chromium is missing under CI=true; .ci/run installs it (apt-get install chromium)")
        pytest.skip("chromium is not installed (apt-get install -y chromium); the HTML report is not rendered")
    return path


def test_html_report_renders_its_tables_in_headless_chromium(report: GapReport, tmp_path: Path) -> None:
    browser = chromium()
    page = tmp_path / "report.html"
    page.write_text(render_html(report), encoding="utf-8")
    profile = tmp_path / "chromium-profile"
    out = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                          f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    dom = BeautifulSoup(out.stdout, "html.parser")

    def rows(table_id: str) -> list[list[str]]:
        table = dom.find("table", id=table_id)
        assert table is not None, f"no table {table_id} in the rendered page"
        return [[td.get_text(" ", strip=True) for td in tr.find_all("td")] for tr in table.tbody.find_all("tr")]

    assert rows("totals") == [["7", "2", "5", "29%", "1", "2"]]
    refused = rows("refused")
    assert [r[0] for r in refused] == ["3", "1", "1"]
    assert any(SCRIPT_Q in r[1] for r in refused)  # the question is shown as text...
    assert dom.find_all("script") == [] and "pwned" not in dom.title.get_text()  # ...and never ran
    [bad] = rows("unhelpful")
    assert bad[0] == "how do I declare an incident?" and "Incident response and on-call" in bad[1]
    assert "<b>out of date</b>" in bad[2]  # the comment's markup is text too
    assert len(rows("never-wiki")) == 11 and len(rows("cited-wiki")) == 2
    assert [r[0] for r in rows("stale-wiki")] == ["Time off and holidays"]


# -- chatops report ---------------------------------------------------------------------------------------------------
def test_chatops_report_prints_text_json_and_html(stale_wiki: Path, tmp_path: Path, embedder, embedding_cache_dir,
                                                 monkeypatch,
                                                 capsys) -> None:
    data = tmp_path / "data"
    monkeypatch.setenv("CHATOPS_DATA_DIR", str(data))
    monkeypatch.setenv("EMBEDDING_MODEL", "local")
    monkeypatch.setenv("CHATOPS_CACHE_DIR", str(embedding_cache_dir))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    index = KnowledgeIndex(data / "index", embedder)
    # The index stays open, as `chatops serve` holds it (local Qdrant admits one client): the report reads around it.
    try:
        Indexer(index).run(FolderSource(stale_wiki))
        store = StateStore(Settings().state_url)
        seed(store, index)
        store.close()
        assert main(["report"]) == 0
        text = capsys.readouterr().out
        assert "Knowledge-gap report" in text and "  3 x " in text and SABBATICAL in text
        assert main(["report", "--since", "30d", "--json"]) == 0
        data_json = json.loads(capsys.readouterr().out)
        assert data_json["questions"] == 7 and data_json["sources"][0]["stale"][0]["page"]["doc_id"] == STALE_PAGE
        assert main(["report", "--since", "60d", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["questions"] == 8  # the old turn is inside 60 days
        html = tmp_path / "gaps.html"
        assert main(["report", "--html", str(html)]) == 0
        assert "wrote" in capsys.readouterr().out and "&lt;script&gt;" in html.read_text()
        assert main(["report", "--since", "soon"]) == 2
        assert "not a period like 7d" in capsys.readouterr().err
    finally:
        index.close()


def test_report_help_has_a_description_and_examples() -> None:
    parser = build_parser()
    sub = next(a for a in parser._subparsers._group_actions if a.choices)  # noqa: SLF001
    help_text = sub.choices["report"].format_help()
    assert "refused questions grouped by similar wording" in help_text
    assert "chatops report --since 30d" in help_text and "--html FILE" in help_text
    with pytest.raises(SystemExit):
        parser.parse_args(["report", "--json", "--html", "x.html"])  # one output at a time


# -- /kb report through the real Bolt app -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def slack(tmp_path_factory: pytest.TempPathFactory, wiki_index: KnowledgeIndex, session_wiki: Path):
    store = StateStore(sqlite_url(tmp_path_factory.mktemp("report-state") / "state.sqlite"))
    runtime = build_agent(Settings(chatops_data_dir=tmp_path_factory.mktemp("report-data")), index=wiki_index)
    jobs = IndexJobs(runtime, store, [FolderSource(session_wiki)])
    seed(store, wiki_index, source=FolderSource(session_wiki).name)
    h = SlackHarness(runtime, store, jobs, admin_ids=(ADMIN,))
    for user in (ADMIN, ALICE):
        h.standin.add_user(user)
    h.standin.add_conversation("CREPORT01", "channel", True)
    yield h, store
    h.close()
    store.close()


def test_kb_report_posts_the_summary_to_an_admin_only(slack) -> None:
    h, store = slack
    resp = h.sender.command("report", ALICE, "CREPORT01", h.standin.response_url("alice"))
    assert resp.status_code == 200
    assert "knowledge-gap report is for the knowledge base's admins" in resp.json()["text"]
    resp = h.sender.command("report 30d", ADMIN, "CREPORT01", h.standin.response_url("admin"))
    assert resp.status_code == 200 and resp.json()["response_type"] == "ephemeral"
    assert "Preparing the knowledge-gap report (30d)" in resp.json()["text"]
    [posted] = h.standin.wait_for(lambda s: [c for c in s.calls_to("response_url") if c.key == "admin"] or None)
    h.idle()
    assert posted.params["response_type"] == "ephemeral"
    text = "\n".join(b["text"]["text"] for b in posted.params["blocks"] if b["type"] == "section")
    assert "3 × what is the office wifi password?" in text or "3 × How do I connect to the office wi-fi?" in text
    assert "&lt;script&gt;" in text and "<script>" not in text  # users' words escaped for mrkdwn
    assert "how do I declare an incident? (cited: Incident response and on-call; “The pager number is " \
           "&lt;b&gt;out of date&lt;/b&gt;”)" in text
    assert "*wiki*: 13 pages, 2 cited, 11 never cited" in text
    assert [c for c in h.standin.calls_to("response_url") if c.key == "alice"] == []  # nothing after the refusal
    entries = {(e.actor, e.outcome) for e in store.audit_entries(action="admin.report")}
    assert entries == {(ALICE, "denied"), (ADMIN, "ok")}


def test_kb_report_with_an_impossible_date_says_which_periods_work(slack) -> None:
    h, store = slack
    resp = h.sender.command("report 2026-13-45", ADMIN, "CREPORT01", h.standin.response_url("bad"))
    assert resp.status_code == 200 and "is not a period like 7d" in resp.json()["text"]
    assert store.audit_entries(action="admin.report")[0].outcome == "invalid"


# -- the index's modes -------------------------------------------------------------------------------------------
def test_chatops_report_reads_titles_and_links_from_a_shared_index_and_makes_no_local_files(
        stale_wiki: Path, tmp_path: Path, embedder, embedding_cache_dir, qdrant_server, monkeypatch, capsys) -> None:
    """``QDRANT_URL``: the pages' titles, links and dates come from the shared collection (a non-default
    ``QDRANT_COLLECTION``, whose manifest is scoped by it), and the reader's data dir gets no index folder."""
    state_url = sqlite_url(tmp_path / "state.sqlite")
    StateStore(state_url).close()  # migrated, as the worker's start does
    worker = KnowledgeIndex(tmp_path / "worker", embedder, qdrant_url=qdrant_server.url, collection="gaps",
                            database_url=state_url, repair=True)
    try:  # the worker keeps the index open while the report runs, as a deployment does
        Indexer(worker).run(FolderSource(stale_wiki))
        store = StateStore(state_url)
        seed(store, worker)
        store.close()
        data = tmp_path / "reader"
        for key, value in {"CHATOPS_DATA_DIR": str(data), "QDRANT_URL": qdrant_server.url, "QDRANT_COLLECTION": "gaps",
                           "DATABASE_URL": state_url, "EMBEDDING_MODEL": "local",
                           "CHATOPS_CACHE_DIR": str(embedding_cache_dir)}.items():
            monkeypatch.setenv(key, value)
        assert main(["report", "--json"]) == 0
        wiki = json.loads(capsys.readouterr().out)["sources"][0]
        assert wiki["source"] == "wiki" and wiki["pages"] == 13
        assert wiki["stale"][0]["page"]["title"] == "Time off and holidays"
        never = wiki["never_cited"]
        assert len(never) == 11 and all(p["title"] != p["doc_id"] and p["url"] for p in never)
        assert not (data / "index").exists()
    finally:
        worker.close()


@pytest.mark.parametrize("keyword_index", ["whoosh", "qdrant"])
def test_the_report_reads_the_embedded_keyword_store_it_is_configured_with(
        stale_wiki: Path, tmp_path: Path, embedder, keyword_index: str) -> None:
    """Embedded: titles come from the configured keyword store (Whoosh, read beside the open index; or, with
    ``KEYWORD_INDEX=qdrant``, the local sparse collection), and no other store's folder is made."""
    from app.wiring import open_index_chunks, open_index_manifest

    settings = Settings(chatops_data_dir=tmp_path / "data", keyword_index=keyword_index, embedding_model="local",
                        database_url=None, qdrant_url=None)
    assert open_index_chunks(settings, embedder.dim) is None  # nothing indexed: nothing opened, nothing made
    index = KnowledgeIndex(settings.index_dir, embedder, keyword_index=keyword_index)
    try:
        Indexer(index).run(FolderSource(stale_wiki))
    finally:
        if keyword_index == "qdrant":
            index.close()  # local mode admits one process (client) at a time; Whoosh readers need no lock
    manifest, chunks = open_index_manifest(settings, create=False), open_index_chunks(settings, embedder.dim)
    try:
        pages, _ = index_pages(manifest, chunks)
        assert len(pages) == 13 and all(p.title != p.doc_id and p.url for p in pages)
        assert {p.name for p in settings.index_dir.iterdir()} >= {"whoosh" if keyword_index == "whoosh" else "qdrant-bm25"}
        assert not (settings.index_dir / ("qdrant-bm25" if keyword_index == "whoosh" else "whoosh")).exists()
    finally:
        chunks.close()
        manifest.close()
        if keyword_index == "whoosh":
            index.close()
