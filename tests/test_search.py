"""Retrieval tools: rank fusion, ``knowledge.search`` and the tool registry.

Covers :func:`index.retrieval.fusion.reciprocal_rank_fusion` on hand-computed examples (k=60, weights,
invalid k), :class:`tools.knowledge_search.KnowledgeSearch` over the shared example-wiki index
(hybrid, BM25 and dense each return evidence with per-retriever ranks and scores and a cosine;
an exact slash command is found by BM25; no duplicate chunks), and
:class:`tools.base.ToolRegistry` validation (bad names, missing ``Args``, duplicates,
side-effect tools never called directly, admin-only tools, bad arguments). The tool gives the agent the corpus
statistics it reads (document frequencies, chunk count, IDF) without reaching into the index, and the retrieval
engine's feedback stage reads its document frequencies in one call.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import ClassVar

import pytest
from pydantic import BaseModel

from index.knowledge import KnowledgeIndex
from core.access import Viewer
from tools.base import ToolContext, ToolRegistry
from tools.errors import ToolArgumentError, ToolPermissionError
from index.retrieval import SeparateCandidates
from index.retrieval.fusion import reciprocal_rank_fusion
from tools.knowledge_search import KnowledgeSearch, KnowledgeSearchArgs, SearchResult

# -- reciprocal rank fusion -------------------------------------------------------------------------


def test_rrf_scores_on_a_hand_example() -> None:
    fused = reciprocal_rank_fusion({"bm25": ["a", "b", "c"], "dense": ["a", "c", "d"]}, k=60)
    scores = dict(fused)
    assert scores["a"] == pytest.approx(2 / 61)          # 1st in both lists
    assert scores["b"] == pytest.approx(1 / 62)          # 2nd in one list
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 62)  # 3rd and 2nd
    assert scores["d"] == pytest.approx(1 / 63)
    assert [i for i, _ in fused] == ["a", "c", "b", "d"]


def test_rrf_default_k_is_60() -> None:
    assert dict(reciprocal_rank_fusion({"x": ["a"], "y": ["a"]}))["a"] == pytest.approx(2 / 61)


def test_rrf_weights_scale_each_retriever() -> None:
    fused = reciprocal_rank_fusion({"bm25": ["a", "b"], "dense": ["b", "a"]}, k=60, weights={"dense": 3.0})
    scores = dict(fused)
    assert scores["b"] == pytest.approx(1 / 62 + 3 / 61)
    assert scores["a"] == pytest.approx(1 / 61 + 3 / 62)
    assert fused[0][0] == "b"
    # Without weights the same lists tie, and ties keep first-seen order.
    assert [i for i, _ in reciprocal_rank_fusion({"bm25": ["a", "b"], "dense": ["b", "a"]})] == ["a", "b"]


def test_rrf_zero_weight_ignores_a_retriever() -> None:
    fused = reciprocal_rank_fusion({"bm25": ["a", "b"], "dense": ["b", "a"]}, weights={"dense": 0.0})
    assert [i for i, _ in fused] == ["a", "b"]
    assert dict(fused)["a"] == pytest.approx(1 / 61)


@pytest.mark.parametrize("k", [0, -1, -60])
def test_rrf_rejects_non_positive_k(k: int) -> None:
    with pytest.raises(ValueError, match="k"):
        reciprocal_rank_fusion({"bm25": ["a"]}, k=k)


def test_rrf_of_nothing_is_empty() -> None:
    assert reciprocal_rank_fusion({}) == []
    assert reciprocal_rank_fusion({"bm25": [], "dense": []}) == []


# -- knowledge.search -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def search(wiki_index: KnowledgeIndex) -> KnowledgeSearch:
    return KnowledgeSearch(wiki_index)


def _run(search: KnowledgeSearch, query: str, **kw) -> SearchResult:
    return search.run(KnowledgeSearchArgs(query=query, **kw), ToolContext(viewer=Viewer.public()))


@pytest.mark.parametrize("retriever", ["hybrid", "bm25", "dense"])
def test_each_retriever_returns_evidence(search: KnowledgeSearch, retriever: str) -> None:
    res = _run(search, "how long do I have to submit an expense report?", retriever=retriever, k=8)
    assert res.retriever == retriever
    assert 1 <= len(res.evidence) <= 8
    docs = [e.chunk.doc_id for e in res.evidence]
    assert "finance/travel-and-expenses.md" in docs[:5]
    expected = {"hybrid": {"bm25", "dense"}, "bm25": {"bm25"}, "dense": {"dense"}}[retriever]
    for e in res.evidence:
        assert e.ranks and set(e.ranks) <= expected and set(e.scores) == set(e.ranks)
        assert all(r >= 1 for r in e.ranks.values())
        assert e.chunk.text and e.chunk.chunk_id
    scores = [e.score for e in res.evidence]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize("retriever", ["hybrid", "dense"])
def test_evidence_carries_a_cosine(search: KnowledgeSearch, retriever: str) -> None:
    res = _run(search, "what is the monthly uptime promise to customers?", retriever=retriever, k=10)
    assert res.evidence
    for e in res.evidence:
        assert isinstance(e.cosine, float) and -1.0 <= e.cosine <= 1.0
        if "dense" in e.scores:  # the dense score is that same cosine
            assert e.cosine == pytest.approx(e.scores["dense"], abs=1e-3)


def test_hybrid_fuses_both_retrievers(search: KnowledgeSearch) -> None:
    res = _run(search, "who is the incident commander during an incident?", retriever="hybrid", k=10)
    both = [e for e in res.evidence if {"bm25", "dense"} <= set(e.ranks)]
    assert both, "some chunk should be found by both BM25 and the dense retriever"
    assert res.timings_ms and all(ms >= 0 for ms in res.timings_ms.values())
    d = res.evidence[0].as_dict()
    assert {"chunk_id", "doc_id", "title", "section", "score", "ranks", "scores", "cosine"} <= set(d)


def test_exact_slash_command_is_found_by_bm25(search: KnowledgeSearch) -> None:
    res = _run(search, "/declare-incident", retriever="bm25", k=5)
    top = res.evidence[:3]
    assert any("/declare-incident" in e.chunk.text for e in top), [e.chunk.section for e in top]
    assert top[0].chunk.doc_id == "engineering/incident-response.md"
    assert all(set(e.ranks) == {"bm25"} for e in res.evidence)


@pytest.mark.parametrize("query", [
    "incident", "how do I book travel and what are the hotel limits?", "laptop refresh", "PTO days per year",
])
@pytest.mark.parametrize("retriever", ["hybrid", "bm25", "dense"])
def test_results_have_no_duplicate_chunks(search: KnowledgeSearch, query: str, retriever: str) -> None:
    res = _run(search, query, retriever=retriever, k=25)
    ids = [e.chunk.chunk_id for e in res.evidence]
    assert ids, query
    assert len(ids) == len(set(ids))
    texts = [(e.chunk.doc_id, e.chunk.text) for e in res.evidence]
    assert len(texts) == len(set(texts))


def test_evidence_chunks_exist_in_both_stores(search: KnowledgeSearch, wiki_index: KnowledgeIndex) -> None:
    res = _run(search, "what do I return when I leave the company?", k=10)
    whoosh_ids = wiki_index.keyword.chunk_ids()
    for e in res.evidence:
        stored = wiki_index.dense.get(e.chunk.chunk_id)
        assert stored is not None and stored.text == e.chunk.text
        assert e.chunk.chunk_id in whoosh_ids


def test_search_args_are_validated() -> None:
    with pytest.raises(ValueError):
        KnowledgeSearchArgs(query="")
    with pytest.raises(ValueError):
        KnowledgeSearchArgs(query="x", k=0)
    with pytest.raises(ValueError):
        KnowledgeSearchArgs(query="x", retriever="tfidf")


# -- tool registry ----------------------------------------------------------------------------------


class _Args(BaseModel):
    title: str


def _tool(name: str = "calendar.create", side_effect: bool = False, permission: str = "everyone",
          args: object = _Args):
    """A minimal tool class (the registry's plug-in contract), counting its runs."""

    class _T:
        description: ClassVar[str] = "test tool"
        runs: ClassVar[list] = []

        def run(self, a, ctx):
            self.runs.append(a)
            return f"ran {a.title}"

    _T.name = name
    _T.side_effect = side_effect
    _T.permission = permission
    if args is not None:
        _T.Args = args
    return _T()


def test_registry_accepts_knowledge_search_and_calls_it(search: KnowledgeSearch) -> None:
    reg = ToolRegistry()
    reg.register(search)
    assert reg.names() == ["knowledge.search"] and "knowledge.search" in reg
    res = reg.call("knowledge.search", {"query": "parental leave", "k": 3}, ToolContext(viewer=Viewer.public()))
    assert isinstance(res, SearchResult) and 1 <= len(res.evidence) <= 3
    schema = reg.schemas()[0]
    assert schema["name"] == "knowledge.search" and schema["side_effect"] is False
    assert "query" in schema["parameters"]["properties"]


@pytest.mark.parametrize("name", ["search", "Knowledge.search", "knowledge search", "knowledge.", ".search", ""])
def test_registry_rejects_bad_names(name: str) -> None:
    with pytest.raises(ValueError, match="name"):
        ToolRegistry().register(_tool(name=name))


@pytest.mark.parametrize("args", [None, dict, "title: str"])
def test_registry_rejects_tools_without_an_args_model(args) -> None:
    with pytest.raises(ValueError, match="Args"):
        ToolRegistry().register(_tool(args=args))


def test_registry_rejects_unknown_permission_and_duplicates() -> None:
    reg = ToolRegistry()
    with pytest.raises(ValueError, match="permission"):
        reg.register(_tool(permission="root"))
    reg.register(_tool())
    with pytest.raises(ValueError, match="twice"):
        reg.register(_tool())
    with pytest.raises(KeyError, match="calendar.create"):
        reg.get("calendar.delete")


def test_registry_refuses_to_call_a_side_effect_tool() -> None:
    """A side-effect tool must follow the action-tool contract to be registered, and even then is never
    called straight from a plan (only through a pending action and its confirmation)."""
    from tools.actions import ActionWords

    reg = ToolRegistry()
    with pytest.raises(ValueError, match="must follow tools.actions.ActionTool"):
        reg.register(_tool(side_effect=True))
    tool = _tool(side_effect=True)
    executed: list = []
    for method in ("intent", "propose", "preview", "close"):
        setattr(type(tool), method, lambda self, *a, **k: None)
    type(tool).execute = lambda self, args, key, ctx: executed.append(key)
    type(tool).words = ActionWords()
    reg.register(tool)
    with pytest.raises(ValueError, match="side effects"):
        reg.call("calendar.create", {"title": "Design review"}, ToolContext(is_admin=True))
    assert tool.runs == [] and executed == []
    # Its arguments can still be validated (for a pending action).
    assert reg.validate("calendar.create", {"title": "Design review"}).title == "Design review"


def test_registry_enforces_admin_permission_and_validates_arguments() -> None:
    reg = ToolRegistry()
    tool = reg.register(_tool(name="admin.reindex", permission="admin"))
    with pytest.raises(ToolPermissionError):
        reg.call("admin.reindex", {"title": "x"}, ToolContext(is_admin=False))
    with pytest.raises(ToolArgumentError, match="admin.reindex"):
        reg.call("admin.reindex", {"wrong": 1}, ToolContext(is_admin=True))
    assert tool.runs == []
    assert reg.call("admin.reindex", {"title": "now"}, ToolContext(is_admin=True)) == "ran now"
    assert len(tool.runs) == 1


@pytest.mark.parametrize("text, tokens", [
    ("the passcode.** is", ["passcod"]),
    ("on duty** now", ["duti", "now"]),
    ("_foo_ and __init__", ["foo", "init"]),
    ("E42 /genie v1.2.3 PTEP #help foo-bar user_id", ["e42", "geni", "v1.2.3", "ptep", "help", "foo", "bar", "user_id"]),
])
def test_the_analyzer_keeps_identifiers_and_drops_markdown_punctuation(wiki_index: KnowledgeIndex, text: str,
                                                                      tokens: list[str]) -> None:
    assert wiki_index.keyword.analyze(text) == tokens


def test_each_hit_lists_the_querys_identifiers_its_text_holds(search: KnowledgeSearch) -> None:
    res = _run(search, "how do I use /declare-incident for a SEV1?")
    holding = [e for e in res.evidence if "/declare-incident" in e.chunk.text]
    assert holding and all("/declare-incident" in e.exact for e in holding)
    assert all(set(e.exact) <= {"/declare-incident", "SEV1"} for e in res.evidence)
    assert all(not e.exact for e in res.evidence if "/declare-incident" not in e.chunk.text
               and "SEV1" not in e.chunk.text)
    assert not any(e.exact for e in _run(search, "how do I declare an incident?").evidence)


def test_a_code_number_is_an_identifier_and_an_amount_or_a_year_is_not() -> None:
    from index.retrieval.identifiers import contains, identifiers, is_code

    assert identifiers("what is tock line 1241 for") == ["1241"] and is_code("1241")
    assert identifiers("i need form 630 signed") == ["630"] and identifiers("i need form 630.") == ["630"]
    assert identifiers("what is line #1241 for?") == ["1241"]
    for chat in ("is the budget $500 or 1,000 dollars?", "since 2024?", "a 12.5% raise", "a 90 day probation"):
        assert identifiers(chat) == [], chat
    assert contains("- **Hiring / Onboarding - #1241:** time spent hiring", "1241")  # "#1241" is 1241
    assert not contains("ticket SF-1241 and 12410", "1241")
    assert not contains("see #help", "help")  # a "#" before a word is a channel
    # a part of a longer number is none: a phone number quoted verbatim names no code of its own
    assert identifiers("call the desk at 1-844-303-6515 or 800-367-5690") == []
    assert not contains("call 1-844-303-6515", "844")


def test_the_tool_reads_the_corpus_statistics_the_agent_needs(search: KnowledgeSearch, wiki_index: KnowledgeIndex) -> None:
    terms = search.analyze("expense report incident laptop quokkafrost")
    store = wiki_index.keyword
    assert search.doc_count == store.doc_count > 0
    assert [search.doc_frequency(t) for t in terms] == [store.doc_frequency(t) for t in terms]
    assert search.doc_frequency(terms[-1]) == 0 < search.doc_frequency(terms[0])
    n, df = search.doc_count, search.doc_frequency(terms[0])
    assert search.idf(terms[0]) == pytest.approx(math.log1p(n / (df + 0.5)))


def test_feedback_reads_its_document_frequencies_in_one_call(wiki_index: KnowledgeIndex, monkeypatch) -> None:
    """Pseudo-relevance feedback weighs about a hundred terms per search: one read of the store, not one per term."""
    calls: Counter[str] = Counter()
    store = wiki_index.keyword
    for name, real in (("doc_frequency", store.doc_frequency), ("doc_frequencies", store.doc_frequencies)):
        monkeypatch.setattr(store, name, lambda *a, _n=name, _real=real, **kw: calls.update([_n]) or _real(*a, **kw))
    res = _run(KnowledgeSearch(wiki_index), "how are travel costs reimbursed", k=8)
    assert res.feedback_terms and calls == Counter({"doc_frequencies": 1}), calls


def test_the_embedded_index_runs_the_separate_stages(search: KnowledgeSearch) -> None:
    assert isinstance(search.engine.candidates, SeparateCandidates)
    assert {"embed", "dense", "feedback", "bm25", "fuse", "hydrate", "dedupe"} == set(
        _run(search, "how are travel costs reimbursed").timings_ms)
