"""Access control inside retrieval (issue 11): the whole path from the index to the planner's evidence.

A copy of examples/wiki gets one extra page, restricted to ``group:handbook/hr`` (the "Zanzibar" salary
band, with words no other page holds). Real Whoosh and Qdrant on disk, the real ONNX embedder (cached). The
tests on the ``restricted`` index run with each keyword index (``KEYWORD_INDEX``: Whoosh, and BM25 as a Qdrant
sparse vector in local mode, issue 12), on the shared index (one collection with both vectors, searched
through the Query API) in local mode, and on the shared index on a Qdrant server (the stand-in,
``tests/standins/qdrant/``: the ``QDRANT_URL`` code path, filters inside the queries): the permission filter
must hold in each. The ``restricted`` index is built once per keyword index for the module and only read by the
tests that get it (a test that changes access builds its own).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from agent.models import Turn
from app.inbound import InboundMessage
from app.jobs import flag_lines
from app.settings import Settings
from app.turns import build_turn
from app.wiring import build_agent
from core.access import Access, Viewer, group, user
from core.errors import IndexOutdatedError
from connectors.folder import FolderSource
from index.indexer import Indexer
from index.knowledge import KnowledgeIndex
from index.manifest import Manifest
from index.sync import sources_status
from state import StateStore
from state.store import sqlite_url
from tools.context import ToolContext
from tools.knowledge_search import KnowledgeSearch, KnowledgeSearchArgs

from tests.helpers import WIKI
from tests.standins.qdrant import QdrantStandIn

PAGE = "people/compensation-bands.md"
BODY = """# Compensation bands

## The Zanzibar band

The Zanzibar salary band for staff engineers pays between 91,000 and 118,000 euros a year.
Quokkafrost bonuses are paid each March to everyone in the Zanzibar band, after the calibration round.
"""
HR = Access.only([group("handbook", "hr")])
READER = Viewer.person([user("hana@example.com"), group("handbook", "hr")])
OUTSIDERS = {"public": Viewer.public(), "colleague": Viewer.person([user("olga@example.com"), group("handbook", "it")]),
             "hr-in-a-channel": Viewer(READER.principals, public_only=True, audience="channel")}
QUESTION = "what does the Zanzibar salary band pay staff engineers?"


class RestrictingFolder(FolderSource):
    """A folder source whose pages get the access given per doc id (public otherwise)."""

    def __init__(self, root: Path, access: dict[str, Access]) -> None:
        super().__init__(root, name="handbook")
        self.per_page = access

    def _read(self, path, doc_id):
        doc = super()._read(path, doc_id)
        return dataclasses.replace(doc, access=self.per_page.get(doc_id, doc.access))


def _index(path: Path, wiki: Path, embedder, access: dict[str, Access], keyword: str = "whoosh",
           qdrant_url: str | None = None) -> KnowledgeIndex:
    """An index of ``wiki``; ``keyword`` "shared": the shared index (one collection, in local mode under ``path``),
    or, with ``qdrant_url``, on that server in a collection named after ``path``."""
    if qdrant_url:
        index = KnowledgeIndex(path, embedder, qdrant_url=qdrant_url, collection=path.name)
    elif keyword == "shared":
        index = KnowledgeIndex(path, embedder, qdrant_url=f"file:{path / 'shared'}")
    else:
        index = KnowledgeIndex(path, embedder, keyword_index=keyword)
    rep = Indexer(index).run(RestrictingFolder(wiki, access))
    assert not rep.errors, rep
    return index


@pytest.fixture(scope="module")
def wiki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/wiki plus the restricted page, for the module (the tests only read it)."""
    dest = tmp_path_factory.mktemp("access") / "wiki"
    shutil.copytree(WIKI, dest)
    (dest / PAGE).write_text(BODY, encoding="utf-8")
    return dest


@pytest.fixture(scope="module", params=["whoosh", "qdrant", "shared", "shared-server"])
def keyword(request: pytest.FixtureRequest) -> str:
    """The keyword index (``KEYWORD_INDEX``) of the ``restricted`` index, or "shared": the shared index
    (``QDRANT_URL``), one collection holding both retrievers, searched in one call ("shared-server": on the
    Qdrant stand-in)."""
    return request.param


@pytest.fixture(scope="module")
def module_qdrant() -> Iterator[QdrantStandIn]:
    """One strict Qdrant stand-in for the module; each index on it has a collection of its own."""
    with QdrantStandIn(strict=True) as server:
        yield server


@pytest.fixture(scope="module")
def qdrant_url(keyword: str, request: pytest.FixtureRequest) -> str | None:
    """The Qdrant stand-in's URL when ``keyword`` is ``shared-server``, else ``None`` (local mode)."""
    return request.getfixturevalue("module_qdrant").url if keyword == "shared-server" else None


@pytest.fixture(scope="module")
def restricted(tmp_path_factory: pytest.TempPathFactory, wiki: Path, embedder, keyword: str,
               qdrant_url: str | None) -> Iterator[KnowledgeIndex]:
    """The wiki indexed with PAGE readable by HR only, built once per ``keyword`` and only read by the tests
    (each test makes its own :class:`KnowledgeSearch` or agent, so no search cache is shared)."""
    index = _index(tmp_path_factory.mktemp(f"restricted-{keyword}") / "restricted", wiki, embedder, {PAGE: HR},
                   keyword, qdrant_url)
    yield index
    index.close()


def _ids(index: KnowledgeIndex) -> set[str]:
    return set(index.manifest.pages_of("handbook")[PAGE].chunk_ids)


def _search(index: KnowledgeIndex, viewer: Viewer, query: str = QUESTION, **kw):
    return KnowledgeSearch(index).run(KnowledgeSearchArgs(query=query, k=10, **kw), ToolContext(viewer=viewer))


@pytest.mark.parametrize("retriever", ["hybrid", "bm25", "dense"])
def test_a_restricted_page_reaches_its_readers_only(restricted: KnowledgeIndex, retriever: str) -> None:
    secret = _ids(restricted)
    for name, viewer in OUTSIDERS.items():
        res = _search(restricted, viewer, retriever=retriever)
        got = {e.chunk.chunk_id for e in res.evidence}
        assert not got & secret, name
        assert not any("zanzibar" in e.chunk.text.lower() for e in res.evidence), name
    mine = _search(restricted, READER, retriever=retriever)
    assert mine.evidence[0].chunk.doc_id == PAGE, [e.chunk.doc_id for e in mine.evidence]


def test_a_reader_ranks_the_restricted_page_where_it_would_be_without_the_filter(tmp_path, wiki, embedder,
                                                                                 restricted, keyword, qdrant_url) -> None:
    public = _index(tmp_path / "public", wiki, embedder, {PAGE: Access.everyone()}, keyword, qdrant_url)
    try:
        for query in (QUESTION, "quokkafrost bonus in March", "how much are staff engineers paid"):
            reader = [(e.chunk.chunk_id, round(e.score, 6), e.ranks) for e in _search(restricted, READER, query).evidence]
            unfiltered = [(e.chunk.chunk_id, round(e.score, 6), e.ranks)
                          for e in _search(public, Viewer.public(), query).evidence]
            assert reader == unfiltered, query
    finally:
        public.close()


def test_feedback_terms_come_only_from_pages_the_viewer_may_read(restricted: KnowledgeIndex) -> None:
    ks = KnowledgeSearch(restricted)
    secret_chunks = restricted.keyword.chunks(_ids(restricted))
    others = restricted.keyword.chunks(restricted.keyword.chunk_ids() - _ids(restricted))
    def terms(chunks) -> set[str]:
        return {t for c in chunks for t in ks.analyze(f"{c.title} {' '.join(c.section_path)} {c.text}")}
    only_restricted = terms(secret_chunks.values()) - terms(others.values())
    assert {"zanzibar", "quokkafrost"} <= only_restricted
    query = "how much are staff engineers paid a year"
    mine = _search(restricted, READER, query).feedback_terms
    assert set(mine) & only_restricted, mine  # the check below can fail: a reader's feedback uses the page
    for name, viewer in OUTSIDERS.items():
        theirs = _search(restricted, viewer, query).feedback_terms
        assert theirs and not set(theirs) & only_restricted, (name, theirs)


def test_the_dense_cache_never_hands_one_viewers_hits_to_another(restricted: KnowledgeIndex) -> None:
    ks = KnowledgeSearch(restricted)
    args = KnowledgeSearchArgs(query=QUESTION, k=10, retriever="dense")
    first = ks.run(args, ToolContext(viewer=READER))
    assert first.evidence[0].chunk.doc_id == PAGE
    again = ks.run(args, ToolContext(viewer=Viewer.public()))  # same text, same index version
    assert not {e.chunk.chunk_id for e in again.evidence} & _ids(restricted)


def test_a_search_without_an_access_context_raises(restricted: KnowledgeIndex) -> None:
    ks = KnowledgeSearch(restricted)
    for ctx in (None, ToolContext(user_id="U1")):
        with pytest.raises(ValueError, match="knowledge.search needs the asker's access context"):
            ks.run(KnowledgeSearchArgs(query=QUESTION), ctx)
    with pytest.raises(ValueError, match="access context"):
        restricted.keyword.search_ids(QUESTION, viewer=None)  # type: ignore[arg-type]


def test_set_access_changes_visibility_without_re_embedding(tmp_path, wiki, embedder, keyword, qdrant_url) -> None:
    own = _index(tmp_path / "changed", wiki, embedder, {PAGE: HR}, keyword, qdrant_url)  # changed: not the shared one
    try:
        _check_set_access(own, embedder)
    finally:
        own.close()


def _check_set_access(restricted: KnowledgeIndex, embedder) -> None:
    ids = sorted(_ids(restricted))
    vectors = restricted.dense.vectors(ids)
    counts = (embedder.computed, embedder.cached)
    version = restricted.version
    assert restricted.set_access("handbook", PAGE, Access.everyone()) == len(ids)
    assert (embedder.computed, embedder.cached) == counts  # nothing embedded, not even from the cache
    assert restricted.version > version and restricted.consistency().ok
    after = restricted.dense.vectors(ids)
    assert all(np.array_equal(vectors[i], after[i]) for i in ids)
    assert restricted.manifest.pages_of("handbook")[PAGE].access == Access.everyone()
    assert _search(restricted, Viewer.public()).evidence[0].chunk.doc_id == PAGE
    restricted.set_access("handbook", PAGE, HR)
    assert not {e.chunk.chunk_id for e in _search(restricted, Viewer.public()).evidence} & set(ids)
    assert restricted.set_access("handbook", "no/such-page.md", Access.everyone()) == 0
    assert restricted.manifest.pending() == []


def test_an_unresolved_page_is_readable_by_nobody_and_counted_in_status(tmp_path, wiki, embedder) -> None:
    index = _index(tmp_path / "index", wiki, embedder, {PAGE: Access.nobody("HTTP 403 on the restrictions")})
    store = StateStore(sqlite_url(tmp_path / "state.sqlite"))
    try:
        everyone = Viewer.person([user("hana@example.com"), group("handbook", "hr"), group("handbook", "it")])
        for viewer in (everyone, Viewer.public()):
            assert not {e.chunk.chunk_id for e in _search(index, viewer).evidence} & _ids(index)
        assert index.manifest.unresolved_access() == 1 and index.manifest.unresolved_access("handbook") == 1
        assert index.manifest.unresolved_access("other") == 0
        [row] = sources_status(index.manifest, store, ["handbook"], index_id=index.index_id)
        assert row["pages_unresolved_access"] == 1
        assert any("unresolved access: 1" in line for line in flag_lines(row))
        index.set_access("handbook", PAGE, HR)
        assert index.manifest.unresolved_access() == 0
        assert not flag_lines(sources_status(index.manifest, store, ["handbook"], index_id=index.index_id)[0])
    finally:
        store.close()
        index.close()


def test_chatops_status_json_reports_unresolved_pages(tmp_path, wiki, embedder, monkeypatch, capsys) -> None:
    from app.jobs import cli_status

    data = tmp_path / "data"
    settings = Settings(chatops_data_dir=data)
    _index(settings.index_dir, wiki, embedder, {PAGE: Access.nobody("timeout")}).close()
    assert cli_status(settings, as_json=True) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["pages_unresolved_access"] for r in rows if r["source"] == "handbook"] == [1]
    assert cli_status(settings) == 0
    assert "pages with unresolved access: 1" in capsys.readouterr().out


# -- the agent: what the planner receives -----------------------------------------------------------------------
def _recording(rt):
    """Wrap the runtime's knowledge.search so every result handed to the planner is kept."""
    seen = []
    original = rt.search.run

    def run(args, ctx=None):
        res = original(args, ctx)
        seen.append((ctx.viewer if ctx else None, res))
        return res

    rt.search.run = run
    return seen


def test_the_planner_never_receives_a_passage_the_viewer_may_not_read(restricted, tmp_path) -> None:
    rt = build_agent(Settings(chatops_data_dir=tmp_path / "agent"), index=restricted)
    seen = _recording(rt)
    secret = _ids(restricted)
    for name, viewer in OUTSIDERS.items():
        seen.clear()
        reply = rt.agent.answer(Turn(text=QUESTION, platform="test", viewer=viewer))
        assert seen and all(v == viewer for v, _ in seen), name
        assert not {e.chunk.chunk_id for _, r in seen for e in r.evidence} & secret, name
        assert "quokkafrost" not in json.dumps(reply.trace.queries).lower() and "91,000" not in reply.text, name
        assert PAGE not in {c.doc_id for c in reply.citations}
    seen.clear()
    reply = rt.agent.answer(Turn(text=QUESTION, platform="test", viewer=READER))
    assert {e.chunk.chunk_id for _, r in seen for e in r.evidence} & secret
    assert not reply.refused and PAGE in {c.doc_id for c in reply.citations}, reply.text


def test_a_turn_without_a_viewer_is_a_programming_error(restricted, tmp_path) -> None:
    rt = build_agent(Settings(chatops_data_dir=tmp_path / "agent"), index=restricted)
    with pytest.raises(ValueError, match="access context"):
        rt.agent.answer(Turn(text=QUESTION, platform="test"))


def test_the_turn_log_and_trace_record_the_access_context_never_the_principals(restricted, tmp_path, caplog) -> None:
    rt = build_agent(Settings(chatops_data_dir=tmp_path / "agent"), index=restricted)
    with caplog.at_level(logging.INFO, logger="agent.agent"):
        reply = rt.agent.answer(Turn(text=QUESTION, platform="test", viewer=READER))
    [rec] = [r for r in caplog.records if r.getMessage().startswith("turn ")]
    assert (rec.access_principals, rec.access_audience, rec.access_public_only) == (2, "dm", False)
    assert "hana@example.com" not in rec.getMessage() and "hana" not in json.dumps(rec.__dict__, default=str)
    step = next(s for s in reply.trace.steps if s["step"] == "access")
    assert {k: v for k, v in step.items() if k != "at_ms"} == \
        {"step": "access", "principals": 2, "audience": "dm", "public_only": False}


def test_the_llm_never_receives_a_passage_the_viewer_may_not_read_and_answers_are_cached_per_access(
        restricted, tmp_path) -> None:
    from tests.standins.openai import OpenAIStandIn
    from tests.llm_script import Brain, kind, make_agent

    with OpenAIStandIn(Brain()) as llm:
        agent = make_agent(restricted, llm.base_url, tmp_path)
        agent.answer(Turn(text=QUESTION, platform="test", viewer=READER))
        to_reader = json.dumps(llm.chat_requests()).lower()
        n = len(llm.chat_requests())
        outsider = agent.answer(Turn(text=QUESTION, platform="test", viewer=Viewer.public()))
        to_outsider = llm.chat_requests()[n:]
    assert "quokkafrost" in to_reader  # the reader's answer was written from the page: the check below can fail
    assert "quokkafrost" not in json.dumps(to_outsider).lower()
    assert not any(s["step"] == "answer_cache" for s in outsider.trace.steps)
    assert "answer" not in [kind(r) for r in to_outsider] or PAGE not in {c.doc_id for c in outsider.citations}
    assert "91,000" not in outsider.text


# -- the turn builder's viewer without configured groups or channel access (app.access.AccessPolicy()) --------
@pytest.mark.parametrize("kind_, email, expected", [
    ("dm", "Hana@Example.com", Viewer.person(["user:hana@example.com"], audience="dm")),
    ("dm", "", Viewer.public("dm")),
    ("channel", "hana@example.com", Viewer.public()),
    ("group", "hana@example.com", Viewer.public()),
    ("", "hana@example.com", Viewer.public()),
])
def test_build_turn_sets_the_viewer_from_who_asks_and_where(kind_: str, email: str, expected: Viewer) -> None:
    turn = build_turn(InboundMessage(platform="slack", text="hi", user_id="U1", user_email=email, channel_kind=kind_))
    assert turn.viewer == expected


# -- an index built before access control ---------------------------------------------------------------------
def test_an_index_from_before_access_control_is_refused_to_readers_and_rebuilt_by_indexing_runs(
        tmp_path, wiki, embedder) -> None:
    path = tmp_path / "index"
    _index(path, wiki, embedder, {}).close()
    m = Manifest(path / "manifest.sqlite")
    m.set("schema_version", "6")
    m.close()
    with pytest.raises(IndexOutdatedError, match=r"chatops index --full"):
        KnowledgeIndex(path, embedder)
    index = KnowledgeIndex(path, embedder, repair=True)  # an indexing run: cleared, then refilled
    try:
        assert index.stats()["pages"] == 0
        assert Indexer(index).run(RestrictingFolder(wiki, {PAGE: HR})).added > 0
    finally:
        index.close()
    KnowledgeIndex(path, embedder).close()  # rebuilt: readers open it again


def test_a_bm25_store_without_the_access_field_is_detected(tmp_path, embedder) -> None:
    from whoosh import fields, index as wix

    path = tmp_path / "index"
    (path / "whoosh").mkdir(parents=True)
    old = fields.Schema(chunk_id=fields.ID(stored=True, unique=True), doc_key=fields.ID(stored=True),
                        acl=fields.STORED(), content=fields.TEXT())
    w = wix.create_in(str(path / "whoosh"), old).writer()
    w.add_document(chunk_id="c1", doc_key="handbook:a.md", acl="", content="bikes in the courtyard")
    w.commit()
    with pytest.raises(IndexOutdatedError, match="before per-page read access"):
        KnowledgeIndex(path, embedder)
    index = KnowledgeIndex(path, embedder, repair=True)
    try:
        assert not index.keyword.outdated and index.keyword.count == 0
    finally:
        index.close()
