"""The shared index (issue 12 step 2): ONE Qdrant collection with a named dense vector and a BM25 sparse vector
(:class:`index.stores.QdrantHybridStore`), in qdrant-client's local mode on disk (the client code a server gets).

Beyond the store contract (``tests/test_contract_stores.py``, both faces) and the access and scope suites:
one upsert writes both vectors; :meth:`~index.stores.QdrantHybridStore.search_pair` sends exactly one
``query_batch_points`` and returns what the two separate searches return (and the BM25 hits' cosines); the
keyword view scores exactly as :class:`~index.stores.QdrantSparseStore` does; document frequencies come from
one facet request per refresh; a collection of an older layout is refused to readers and rebuilt by indexing
runs. Then the knowledge index and ``knowledge.search`` in the shared mode: no local store folder, the same
evidence as separate searches, one call without pseudo-relevance feedback, and the settings.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from qdrant_client import QdrantClient, models

from app.settings import Settings
from core.access import Access, Viewer
from core.errors import IndexCorruptError, IndexOutdatedError
from connectors.folder import FolderSource
from tests.helpers import WIKI_PAGES
from index.identity import shared_index_id
from index.indexer import Indexer
from index.knowledge import KnowledgeIndex
from index.retrieval import PairedCandidates, SeparateCandidates
from index.stores import HybridKeywordView, QdrantHybridStore, QdrantSparseStore
from index.stores.qdrant_store import qdrant_location
from index.stores.sparse_bm25 import TermCounts
from tests.test_contract_stores import BIKES, DIM, PRINTER, STAFF, chunk, embed
from tools.context import ToolContext
from tools.knowledge_search import KnowledgeSearch, KnowledgeSearchArgs

EVERYONE = Viewer.public()
HR = Access.only(["group:wiki/hr"])
SECRET = [chunk("salaries", i, f"Bikes courtyard rack salary band {i} is confidential.", access=HR) for i in range(3)]
FILLER = [chunk(f"lunch{i}", 0, f"The canteen lunch menu for day {i} has soup and bread.") for i in range(6)]
ALL = BIKES + PRINTER + SECRET + FILLER


def spy(client: QdrantClient, monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Count the calls of every client method a search or a count could make."""
    calls: Counter[str] = Counter()
    for name in ("query_batch_points", "query_points", "retrieve", "scroll", "count", "facet"):
        original = getattr(client, name)

        def counted(*args, _name=name, _original=original, **kwargs):
            calls[_name] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(client, name, counted)
    return calls


def write(store: QdrantHybridStore, chunks) -> None:
    by_key: dict[str, list] = {}
    for c in chunks:
        by_key.setdefault(c.key, []).append(c)
    for key, part in by_key.items():
        store.replace([key], part, np.stack([embed(c.text) for c in part]))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[QdrantHybridStore]:
    s = QdrantHybridStore(DIM, path=tmp_path / "shared", avgdl=20.0)
    write(s, ALL)
    yield s
    s.close()


def rows(hits) -> list[tuple[str, float]]:
    """Hits as ``(chunk id, score)``, in a tie-proof order (equal scores by id)."""
    return sorted(((h.chunk.chunk_id, round(h.score, 5)) for h in hits), key=lambda r: (-r[1], r[0]))


# -- the collection --------------------------------------------------------------------------------------------
def test_one_upsert_writes_both_vectors_and_the_terms(store: QdrantHybridStore) -> None:
    info = store.client.get_collection(store.collection)
    assert info.config.params.vectors["dense"].size == DIM  # type: ignore[index]
    assert info.config.params.vectors["dense"].distance == models.Distance.COSINE  # type: ignore[index]
    assert info.config.params.sparse_vectors["bm25"].modifier == models.Modifier.IDF  # type: ignore[index]
    points, _ = store.client.scroll(store.collection, limit=100, with_payload=True, with_vectors=True)
    assert len(points) == len(ALL) == store.count == store.keyword.count
    for p in points:
        assert set(p.vector) == {"dense", "bm25"}, p.vector  # type: ignore[arg-type]
        c = next(c for c in ALL if c.chunk_id == p.payload["chunk_id"])  # type: ignore[index]
        assert p.payload["terms"] == sorted(set(store.keyword.chunk_terms(c)))  # type: ignore[index]
    assert store.chunks([BIKES[0].chunk_id]) == {BIKES[0].chunk_id: BIKES[0]}  # the record, without the terms


# -- one round trip ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("viewer", [STAFF, EVERYONE, Viewer.person(["group:wiki/hr"]).scoped(["wiki"])],
                         ids=["staff", "public", "hr-scoped"])
def test_search_pair_is_one_call_returning_what_two_searches_return(store: QdrantHybridStore, viewer: Viewer,
                                                                    monkeypatch) -> None:
    text, vec = "where are bikes parked courtyard rack salary", embed("bikes parked in the courtyard rack")
    boosts = {"salari": 0.3}
    store.keyword.warm()  # the document frequencies: read once, then remembered (see the counts test)
    calls = spy(store.client, monkeypatch)
    n = len(ALL)  # every candidate: hashed bags of words tie often, and a tie at the cut may fall either way
    both = store.search_pair(vec, text, limit=n, boosts=boosts, viewer=viewer)
    assert calls == Counter({"query_batch_points": 1}), calls
    assert rows(both.dense) == rows(store.search(vec, n, viewer=viewer))
    assert [h.chunk for h in both.dense[:1]] == [BIKES[0]] and len(both.dense) < n  # filtered, not cut
    assert rows(both.bm25) == rows(store.keyword.search(text, n, boosts, viewer=viewer))
    assert [(h.chunk.chunk_id, h.score) for h in both.bm25] == store.keyword.search_ids(text, n, boosts, viewer=viewer)
    assert both.bm25 and set(both.cosines) == {h.chunk.chunk_id for h in both.bm25}
    vectors = store.vectors(list(both.cosines))
    for cid, cos in both.cosines.items():
        assert cos == pytest.approx(float(np.dot(vectors[cid], vec)), abs=1e-5)
    readable = {c.chunk_id for c in ALL if set(c.access.tokens()) & set(viewer.tokens())}
    assert {h.chunk.chunk_id for h in both.dense + both.bm25} <= readable  # the filter is inside each request


def test_search_pair_without_the_dense_request_an_empty_scope_or_query_terms(store: QdrantHybridStore,
                                                                             monkeypatch) -> None:
    vec = embed("bikes courtyard")
    store.keyword.warm()
    calls = spy(store.client, monkeypatch)
    bm25_only = store.search_pair(vec, "bikes courtyard", limit=5, viewer=EVERYONE, dense=False)
    assert bm25_only.dense == [] and bm25_only.bm25 and set(bm25_only.cosines) == {h.chunk.chunk_id for h in bm25_only.bm25}
    assert calls == Counter({"query_batch_points": 1})
    nothing = store.search_pair(vec, "bikes courtyard", limit=5, viewer=EVERYONE.scoped([]))
    assert (nothing.dense, nothing.bm25, nothing.cosines) == ([], [], {})
    assert calls == Counter({"query_batch_points": 1})  # an empty scope asks nothing
    stop_words = store.search_pair(vec, "the of and zebra", limit=len(ALL), viewer=EVERYONE)
    assert stop_words.bm25 == [] and rows(stop_words.dense) == rows(store.search(vec, len(ALL), viewer=EVERYONE))
    with pytest.raises(ValueError, match="access context"):
        store.search_pair(vec, "bikes", limit=5, viewer=None)  # type: ignore[arg-type]


def test_the_keyword_views_bm25_scores_are_the_sparse_stores(store: QdrantHybridStore, tmp_path: Path) -> None:
    sparse = QdrantSparseStore(path=tmp_path / "sparse", avgdl=20.0)
    try:
        sparse.replace([], ALL)
        for query, boosts in [("bikes courtyard rack", None), ("third floor printer badge", None),
                              ("lunch soup salary band confidential", {"soup": 0.3}), ("canteen bread day 3", None)]:
            for viewer in (STAFF, EVERYONE, Viewer.person(["group:wiki/hr"])):
                ours = store.keyword.search_ids(query, 20, boosts, viewer=viewer)
                theirs = sparse.search_ids(query, 20, boosts, viewer=viewer)
                assert [c for c, _ in ours] == [c for c, _ in theirs], query
                assert [s for _, s in ours] == pytest.approx([s for _, s in theirs], rel=1e-6), query
            assert store.keyword.query_terms(query) == sparse.query_terms(query)
        for term in ("bike", "lunch", "salari", "printer", "zebra"):
            assert store.keyword.doc_frequency(term) == sparse.doc_frequency(term)
    finally:
        sparse.close()


# -- document frequencies -----------------------------------------------------------------------------------------
def test_document_frequencies_come_from_one_facet_per_refresh(store: QdrantHybridStore, monkeypatch) -> None:
    calls = spy(store.client, monkeypatch)
    terms = sorted({t for c in ALL for t in store.keyword.chunk_terms(c)})
    got = {t: store.keyword.doc_frequency(t) for t in terms}
    assert store.keyword.doc_count == len(ALL) and store.keyword.doc_frequency("no-such-term") == 0
    assert calls == Counter({"facet": 1, "count": 1}), calls  # every term and the total: two requests
    exact = {t: sum(1 for c in ALL if t in store.keyword.chunk_terms(c)) for t in terms}
    assert got == exact and got["lunch"] == len(FILLER)
    write(store, [chunk("lunch9", 0, "Lunch is served at noon.")])
    assert store.keyword.doc_frequency("lunch") == len(FILLER) + 1  # a write forgets
    assert calls["facet"] == 2
    store.delete(["wiki:lunch9"])
    assert store.keyword.doc_frequency("lunch") == len(FILLER) and store.keyword.count == len(ALL)


def test_a_vocabulary_larger_than_one_facet_counts_the_rest_alone(store: QdrantHybridStore, monkeypatch) -> None:
    counts = TermCounts(store.client, store.collection, server=False, guard=store._guard, lock=store._lock,
                        facet_limit=3)
    calls = spy(store.client, monkeypatch)
    assert counts.doc_frequency("polici") == len(ALL)  # every heading path says "Policies": the commonest term
    assert calls == Counter({"facet": 1, "count": 1})
    assert counts.doc_frequency("printer") == 1 and counts.doc_frequency("zebra") == 0  # counted one by one
    assert calls == Counter({"facet": 1, "count": 3})
    assert counts.doc_frequency("printer") == 1 and calls["count"] == 3  # and remembered


def test_a_read_that_a_write_overtook_is_not_remembered(store: QdrantHybridStore, monkeypatch) -> None:
    """A sync writing while a search reads the counts: the write's ``forget`` wins, the next search reads again."""
    counts = store.keyword._counts
    facet = store.client.facet

    def facet_then_a_write_ends(*args, **kwargs):
        result = facet(*args, **kwargs)
        counts.forget()  # what the writer's replace() does once its upsert is done
        return result

    monkeypatch.setattr(store.client, "facet", facet_then_a_write_ends)
    assert store.keyword.doc_frequency("lunch") == len(FILLER)  # answered from that read...
    calls = spy(store.client, monkeypatch)
    assert store.keyword.doc_frequency("lunch") == len(FILLER)
    assert calls["facet"] == 1  # ...but not kept


def test_a_servers_counts_expire_after_the_ttl(store: QdrantHybridStore, monkeypatch) -> None:
    """On a server other processes write too: the memory lasts ``ttl`` seconds (here none)."""
    counts = TermCounts(store.client, store.collection, server=True, guard=store._guard, lock=store._lock, ttl=0.0)
    calls = spy(store.client, monkeypatch)
    counts.doc_frequency("lunch")
    counts.doc_frequency("lunch")
    assert calls["facet"] == 2


# -- an older collection ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("old", ["unnamed-dense", "no-sparse"])
def test_a_collection_of_an_older_layout_is_refused_to_readers_and_rebuilt_on_repair(tmp_path: Path, old: str) -> None:
    client = QdrantClient(path=str(tmp_path / "shared"))
    params = models.VectorParams(size=DIM, distance=models.Distance.COSINE)
    client.create_collection("chunks", vectors_config=params if old == "unnamed-dense" else {"dense": params})
    client.upsert("chunks", points=[models.PointStruct(id=1, vector=[0.1] * DIM if old == "unnamed-dense"
                                                       else {"dense": [0.1] * DIM}, payload={"chunk_id": "x", "doc_key": "wiki:x"})])
    client.close()
    with pytest.raises(IndexOutdatedError, match=r"older chatops.*chatops index --full"):
        QdrantHybridStore(DIM, url=f"file:{tmp_path / 'shared'}")
    store = QdrantHybridStore(DIM, url=f"file:{tmp_path / 'shared'}", recreate=True)
    try:
        assert store.count == 0
        write(store, BIKES)
        assert store.search_pair(embed("bikes"), "bikes", limit=3, viewer=STAFF).bm25
    finally:
        store.close()
    QdrantHybridStore(DIM, url=f"file:{tmp_path / 'shared'}").close()  # rebuilt: readers open it


def test_an_indexing_run_never_drops_a_collection_that_is_not_chatops(tmp_path: Path) -> None:
    client = QdrantClient(path=str(tmp_path / "shared"))
    client.create_collection("chunks", vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE))
    client.upsert("chunks", points=[models.PointStruct(id=1, vector=[0.1] * DIM, payload={"sku": "A-1"})])
    client.close()
    with pytest.raises(IndexCorruptError, match="does not hold chatops chunks.*QDRANT_COLLECTION"):
        QdrantHybridStore(DIM, url=f"file:{tmp_path / 'shared'}", recreate=True)
    client = QdrantClient(path=str(tmp_path / "shared"))
    try:
        assert client.count("chunks").count == 1  # untouched
    finally:
        client.close()


def test_a_file_url_names_a_local_mode_folder() -> None:
    assert qdrant_location(None) == (None, None)
    assert qdrant_location("http://qdrant:6333") == ("http://qdrant:6333", None)
    assert qdrant_location("file:/srv/q") == (None, Path("/srv/q"))
    assert qdrant_location("file:///srv/q") == (None, Path("/srv/q"))
    assert qdrant_location("file:rel/q") == (None, Path("rel/q"))


# -- the knowledge index and knowledge.search in the shared mode ---------------------------------------------------
@pytest.fixture
def shared(tmp_path: Path, wiki_copy: Path, embedder) -> Iterator[KnowledgeIndex]:
    index = KnowledgeIndex(tmp_path / "index", embedder, qdrant_url=f"file:{tmp_path / 'qdrant'}", repair=True)
    rep = Indexer(index).run(FolderSource(wiki_copy))
    assert rep.added == WIKI_PAGES and not rep.errors, rep
    yield index
    index.close()


def test_the_shared_index_is_one_collection_and_no_local_store(shared: KnowledgeIndex, tmp_path: Path) -> None:
    assert isinstance(shared.dense, QdrantHybridStore) and shared.hybrid is shared.dense
    assert isinstance(shared.keyword, HybridKeywordView) and shared.keyword is shared.dense.keyword
    assert shared.dense.client.get_collections().collections[0].name == "chunks"
    assert len(shared.dense.client.get_collections().collections) == 1
    assert sorted(p.name for p in (tmp_path / "index").iterdir()) == ["manifest.sqlite"]
    assert shared.consistency().ok and shared.keyword.doc_count == shared.dense.count > 0
    assert shared.index_id == shared_index_id(f"file:{tmp_path / 'qdrant'}", "chunks")
    page = next(iter(shared.manifest.pages_of("wiki").values()))
    assert shared.set_access("wiki", page.doc_id, Access.only(["group:wiki/hr"])) == len(page.chunk_ids)
    assert shared.consistency().ok


@pytest.mark.parametrize("args", [
    {"query": "how do I file an expense report with receipts"},
    {"query": "how do I file an expense report with receipts", "prf": False},
    {"query": "vpn access from home", "prf": False, "expansion": ["remote", "tunnel"]},
    {"query": "on-call rotation handover", "retriever": "bm25"},
    {"query": "on-call rotation handover", "retriever": "dense"},
    {"query": "laptop", "dense_query": "Employees get a laptop on their first day", "cosine_to": "new laptop"},
], ids=["prf", "no-prf", "expansion", "bm25", "dense", "dense-query"])
def test_knowledge_search_gives_the_same_evidence_as_separate_searches(shared: KnowledgeIndex, args: dict,
                                                                        monkeypatch) -> None:
    viewer = Viewer.public()
    one_call = KnowledgeSearch(shared).run(KnowledgeSearchArgs(**args), ToolContext(viewer=viewer))
    monkeypatch.setattr(shared, "hybrid", None)  # the embedded steps over the same stores: one search each
    separate = KnowledgeSearch(shared).run(KnowledgeSearchArgs(**args), ToolContext(viewer=viewer))

    def summary(res):
        return [(e.chunk.chunk_id, e.ranks, round(e.score, 6), {k: round(v, 4) for k, v in e.scores.items()},
                 None if e.cosine is None else round(e.cosine, 4)) for e in res.evidence]

    assert one_call.evidence and summary(one_call) == summary(separate)
    assert one_call.feedback_terms == separate.feedback_terms


def test_knowledge_search_is_one_call_without_feedback_and_two_with_it(shared: KnowledgeIndex, monkeypatch) -> None:
    search = KnowledgeSearch(shared)
    shared.warm()  # what a sync does after writing: the dense mirror (local mode) and the document frequencies
    calls = spy(shared.dense.client, monkeypatch)
    res = search.run(KnowledgeSearchArgs(query="expense report receipts", prf=False), ToolContext(viewer=EVERYONE))
    assert res.evidence and {"dense", "bm25"} <= set(res.evidence[0].ranks) | set(res.evidence[1].ranks)
    assert calls == Counter({"query_batch_points": 1}), calls  # dense + BM25 + their cosines: one call
    calls.clear()
    res = search.run(KnowledgeSearchArgs(query="how are travel costs reimbursed"), ToolContext(viewer=EVERYONE))
    assert res.feedback_terms and calls["query_batch_points"] == 1, calls
    # the dense query went first: one query on a server; local mode ranks its mirror and reads the payloads
    assert calls["query_points"] + calls["retrieve"] == 1 and not calls["count"] and not calls["facet"], calls


def test_a_search_reads_the_index_version_once(shared: KnowledgeIndex, monkeypatch) -> None:
    """The dense-candidate cache is keyed by the index version, which a shared index keeps in the state database:
    one query per search, not one per cache look-up, and none for a search without the dense ranker."""
    reads: list[str] = []
    get = shared.manifest.get
    monkeypatch.setattr(shared.manifest, "get", lambda key, default=None: reads.append(key) or get(key, default))
    search = KnowledgeSearch(shared)
    for args, n in (({"query": "how are travel costs reimbursed"}, 1),
                    ({"query": "expense report receipts", "prf": False}, 1),
                    ({"query": "expense report receipts", "retriever": "bm25"}, 0)):
        reads.clear()
        assert search.run(KnowledgeSearchArgs(**args), ToolContext(viewer=EVERYONE)).evidence
        assert reads.count("index_version") == n, (args, reads)


def test_the_engine_runs_the_paired_stages_on_a_shared_index_and_the_separate_ones_otherwise(
        shared: KnowledgeIndex, monkeypatch) -> None:
    assert isinstance(KnowledgeSearch(shared).engine.candidates, PairedCandidates)
    monkeypatch.setattr(shared, "hybrid", None)
    assert isinstance(KnowledgeSearch(shared).engine.candidates, SeparateCandidates)


def test_keyword_index_settings_in_the_shared_mode(tmp_path: Path, embedder, monkeypatch) -> None:
    from app.wiring import open_index

    url = f"file:{tmp_path / 'qdrant'}"
    with pytest.raises(ValueError, match="cannot use local Whoosh files.*unset KEYWORD_INDEX"):
        KnowledgeIndex(tmp_path / "index", embedder, qdrant_url=url, keyword_index="whoosh")
    monkeypatch.delenv("KEYWORD_INDEX", raising=False)
    monkeypatch.setenv("QDRANT_URL", url)
    monkeypatch.setenv("QDRANT_COLLECTION", "handbook")
    settings = Settings(chatops_data_dir=tmp_path / "data")
    assert (settings.keyword_index, settings.qdrant_collection) == ("auto", "handbook")
    for keyword in ("auto", "qdrant"):
        index = open_index(settings.model_copy(update={"keyword_index": keyword}), embedder)
        try:
            assert isinstance(index.keyword, HybridKeywordView) and index.dense.collection == "handbook"
            assert index.index_id == shared_index_id(url, "handbook")
        finally:
            index.close()
    assert not (settings.index_dir / "whoosh").exists() and not (settings.index_dir / "qdrant").exists()
