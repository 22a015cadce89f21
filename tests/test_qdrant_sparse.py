"""The keyword store on Qdrant (:class:`index.stores.QdrantSparseStore`, issue 12 step 2) in local mode on disk.

Beyond the store contract (``tests/test_contract_stores.py``): the score is BM25, computed by hand here
from the analysed text (IDF kept by Qdrant's ``Modifier.IDF`` from the live points, BM25's term weight
stored per chunk); it saturates repeated terms and normalises by length where raw term frequencies
would not; the title and heading path count twice, as in the Whoosh store; query boosts are the
sparse query weights; document frequencies follow writes; a collection without the sparse vector is
refused with what to do. Then ``KEYWORD_INDEX=qdrant``: the knowledge index keeps BM25 in Qdrant and no
Whoosh files, and an index switched to it gets its keyword store filled by the next run's reconciliation.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from qdrant_client import QdrantClient, models

from app.settings import Settings
from core.access import Viewer
from core.errors import IndexCorruptError
from connectors.folder import FolderSource
from tests.helpers import WIKI_PAGES
from index.indexer import Indexer
from index.knowledge import KnowledgeIndex
from index.stores import QdrantSparseStore
from index.stores.qdrant_sparse import B, K1
from index.stores.whoosh_store import analyzer
from tests.test_contract_stores import BIKES, PRINTER, chunk
from tools.context import ToolContext
from tools.knowledge_search import KnowledgeSearch, KnowledgeSearchArgs

EVERYONE = Viewer.public()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[QdrantSparseStore]:
    s = QdrantSparseStore(path=tmp_path / "kw", avgdl=20.0)
    yield s
    s.close()


def bm25(store: QdrantSparseStore, query: str, doc, corpus) -> float:
    """BM25 of ``doc`` for ``query`` over ``corpus``, by hand (IDF as Qdrant's, ``ln((N-df+.5)/(df+.5)+1)``)."""
    terms_of = {c.chunk_id: store.chunk_terms(c) for c in corpus}
    n = len(corpus)
    tf = Counter(terms_of[doc.chunk_id])
    dl = len(terms_of[doc.chunk_id])
    score = 0.0
    for t in dict.fromkeys(store.analyze(query)):
        if not tf[t]:
            continue
        df = sum(1 for ts in terms_of.values() if t in ts)
        idf = math.log((n - df + 0.5) / (df + 0.5) + 1)
        score += idf * tf[t] * (K1 + 1) / (tf[t] + K1 * (1 - B + B * dl / store.avgdl))
    return score


def test_the_score_is_bm25_of_the_whoosh_stores_analysed_text(store: QdrantSparseStore) -> None:
    corpus = BIKES + PRINTER
    store.replace(["wiki:parking", "wiki:printer"], corpus)
    q = "Where are the bikes parked? courtyard rack, printer"
    hits = store.search(q, limit=5, viewer=Viewer.person(["group:wiki/staff"]))
    assert hits
    for h in hits:
        assert h.score == pytest.approx(bm25(store, q, h.chunk, corpus), rel=1e-5)
    assert store.analyze(q) == [t.text for t in analyzer()(q)]  # the Whoosh store's analyzer
    assert store.analyze("Bikes PARKED, courtyards!") == ["bike", "park", "courtyard"]


def test_bm25_saturates_repeats_and_normalises_length_where_raw_tf_does_not(tmp_path: Path) -> None:
    spam = chunk("spam", 0, "rack " * 30)
    short = chunk("short", 0, "Bike rack by the door.")
    long_ = chunk("long", 0, "Bike rack " + " ".join(f"filler{i}" for i in range(60)))
    filler = [chunk(f"other{i}", 0, f"unrelated page number {i} about lunch") for i in range(6)]
    scores = {}
    for tf in ("bm25", "raw"):
        s = QdrantSparseStore(path=tmp_path / tf, tf=tf, avgdl=20.0)
        try:
            s.replace([], [spam, short, long_, *filler])
            scores[tf] = {h.chunk.doc_id: h.score for h in s.search("bike rack", limit=10, viewer=EVERYONE)}
        finally:
            s.close()
    bm, raw = scores["bm25"], scores["raw"]
    assert raw["spam"] > raw["short"] == raw["long"]  # 30 repeats of one term win; length is ignored
    assert bm["short"] > bm["long"] and bm["short"] > bm["spam"]  # both terms, short: first
    assert bm["spam"] < (K1 + 1) * 2  # one term's weight is bounded by (k1 + 1) * idf


def test_title_and_headings_count_twice(store: QdrantSparseStore) -> None:
    titled = chunk("badge", 0, "Ask the front desk.")  # title "Badge", headings "Policies", "Part 0"
    in_body = chunk("visitors", 0, "Visitors get a badge at the front desk.")
    store.replace([], [titled, in_body, *[chunk(f"x{i}", 0, f"lunch menu {i}") for i in range(4)]])
    hits = store.search("badge", limit=2, viewer=EVERYONE)
    assert [h.chunk.doc_id for h in hits] == ["badge", "visitors"]


def test_boosts_are_the_query_weights(store: QdrantSparseStore) -> None:
    store.replace([], [chunk("a", 0, "printer toner"), chunk("b", 0, "printer paper"),
                       *[chunk(f"x{i}", 0, f"lunch menu {i}") for i in range(4)]])
    plain = dict(store.search_ids("toner paper", limit=2, viewer=EVERYONE))
    boosted = store.search_ids("toner paper", limit=2, boosts={"paper": 3.0}, viewer=EVERYONE)
    ids = {c: cid for cid, c in [(ch.chunk_id, ch.doc_id) for ch in store.chunks(plain).values()]}
    assert boosted[0][0] == ids["b"]
    assert boosted[0][1] == pytest.approx(3.0 * plain[ids["b"]], rel=1e-5)
    assert store.search_ids("the of and", limit=5, viewer=EVERYONE) == []  # only stop words: no query


def test_document_frequencies_follow_writes(store: QdrantSparseStore) -> None:
    store.replace(["wiki:parking", "wiki:printer"], BIKES + PRINTER)
    assert store.doc_frequency("bike") == 1 and store.doc_count == 3
    before = dict(store.search_ids("printer", limit=1, viewer=EVERYONE))
    store.replace([], [chunk(f"p{i}", 0, f"printer number {i}") for i in range(5)])
    assert store.doc_frequency("printer") == 6
    after = dict(store.search_ids("printer", limit=10, viewer=EVERYONE))
    assert after[PRINTER[0].chunk_id] < before[PRINTER[0].chunk_id]  # IDF fell: the server counted the new points
    store.delete(["wiki:printer"])
    assert store.doc_frequency("printer") == 5 and store.doc_frequency("no-such-term") == 0


def test_a_collection_without_the_sparse_vector_is_refused(tmp_path: Path) -> None:
    client = QdrantClient(path=str(tmp_path / "kw"))
    client.create_collection("chunks-bm25", vectors_config=models.VectorParams(size=4, distance=models.Distance.COSINE))
    client.close()
    with pytest.raises(IndexCorruptError, match="no 'bm25' sparse vector"):
        QdrantSparseStore(path=tmp_path / "kw")


def test_bad_settings_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="tf must be"):
        QdrantSparseStore(path=tmp_path / "a", tf="bm15")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="avgdl"):
        QdrantSparseStore(path=tmp_path / "b", avgdl=0)


# -- KEYWORD_INDEX=qdrant: the knowledge index's keyword store ----------------------------------------------
def test_keyword_index_qdrant_keeps_bm25_in_qdrant_and_no_whoosh_files(tmp_path: Path, wiki_copy: Path,
                                                                         embedder) -> None:
    index = KnowledgeIndex(tmp_path / "index", embedder, keyword_index="qdrant")
    try:
        rep = Indexer(index).run(FolderSource(wiki_copy))
        assert rep.added == WIKI_PAGES and not rep.errors, rep
        assert isinstance(index.keyword, QdrantSparseStore) and index.consistency().ok
        assert (tmp_path / "index" / "qdrant-bm25").is_dir() and not (tmp_path / "index" / "whoosh").exists()
        index.warm()  # what a sync run does after writing, in this mode too
        res = KnowledgeSearch(index).run(KnowledgeSearchArgs(query="expense report receipts", retriever="bm25"),
                                         ToolContext(viewer=EVERYONE))
        assert res.evidence and res.evidence[0].ranks.get("bm25") == 1
    finally:
        index.close()


def test_switching_an_index_to_qdrant_fills_the_new_keyword_store_on_the_next_run(tmp_path: Path, wiki_copy: Path,
                                                                                   embedder) -> None:
    index = KnowledgeIndex(tmp_path / "index", embedder)  # Whoosh
    Indexer(index).run(FolderSource(wiki_copy))
    index.close()
    index = KnowledgeIndex(tmp_path / "index", embedder, keyword_index="qdrant")
    try:
        assert index.keyword.count == 0 and not index.consistency().ok
        rep = Indexer(index).run(FolderSource(wiki_copy))
        assert rep.repair.bm25_added == index.dense.count > 0 and index.consistency().ok
    finally:
        index.close()


def test_the_keyword_index_setting(tmp_path: Path, embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import ValidationError

    from app.wiring import open_index

    monkeypatch.delenv("KEYWORD_INDEX", raising=False)
    assert Settings().keyword_index == "auto"
    monkeypatch.setenv("KEYWORD_INDEX", "qdrant")
    assert Settings().keyword_index == "qdrant"
    index = open_index(Settings(chatops_data_dir=tmp_path / "data"), embedder)
    try:
        assert isinstance(index.keyword, QdrantSparseStore)
    finally:
        index.close()
    monkeypatch.setenv("KEYWORD_INDEX", "elastic")
    with pytest.raises(ValidationError, match="whoosh"):
        Settings()
    with pytest.raises(ValueError, match="KEYWORD_INDEX must be"):
        KnowledgeIndex(tmp_path / "index", embedder, keyword_index="elastic")  # type: ignore[arg-type]


def test_the_query_terms_are_the_whoosh_stores(tmp_path: Path) -> None:
    """Unknown terms dropped, very common ones pruned in a large enough collection, at most ``max_terms``."""
    from index.stores import WhooshStore

    docs = [chunk(f"p{i}", 0, f"printer floor {i} needs toner" + (" badge" if i < 2 else "")) for i in range(10)]
    settings = {"max_terms": 3, "max_df_ratio": 0.5, "prune_min_docs": 5}
    sparse = QdrantSparseStore(path=tmp_path / "kw", **settings)
    whoosh = WhooshStore(tmp_path / "wh", **settings)
    try:
        for s in (sparse, whoosh):
            s.replace([], docs)
        for q in ("printer toner badge zebra", "zebra badge", "printer toner floor", "badge floor unicorn p1 toner"):
            assert sparse.query_terms(q) == whoosh.query_terms(q), q
        assert sparse.query_terms("badge floor unicorn p1 toner") == ["badg", "p1"]  # common and unknown out (stems)
        assert sparse.query_terms("printer toner floor") == ["printer", "toner", "floor"]  # no two rare: all kept
    finally:
        sparse.close()
        whoosh.close()
