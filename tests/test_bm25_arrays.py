"""The BM25 array path (``index/stores/bm25_arrays.py``) ranks exactly as Whoosh's own matchers do.

A real Whoosh index on disk, several segments, some chunks deleted or re-written, chunks with different access
and sources; random questions (frequent and rare words, boosts) are run through :meth:`WhooshStore.search_ids`
(the array path) and through ``searcher.search`` with the same query and filter (Whoosh's own scoring, what
the store ran before), and the ranked chunk ids and scores must agree (scores within 1e-6).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest
from whoosh.query import Term

from core.access import Access, Viewer
from core.models import Chunk, content_hash
from index.stores.bm25_arrays import SnapshotScorer
from index.stores.whoosh_store import WhooshStore, _PreloadedOr

WORDS = [f"w{i}" for i in range(300)] + ["deploy", "freeze", "holiday", "budget", "laptop", "incident"]
VIEWERS = [Viewer.public(), Viewer.person(["group:wiki/eng"]), Viewer.person(["user:ann@example.com", "group:wiki/hr"]),
           Viewer.public().scoped(["eng"]), Viewer.person(["group:wiki/eng"]).scoped(["hr", "wiki"]),
           Viewer.person(["group:wiki/nobody"]).scoped(["nowhere"])]
ACCESS = [Access.everyone(), Access.only(["group:wiki/eng"]), Access.only(["group:wiki/hr"]),
          Access.only(["user:ann@example.com"])]


def make_chunks(rng: random.Random, source: str, doc: str, n: int, tag: str = "") -> list[Chunk]:
    weights = [1 / (i + 1) for i in range(len(WORDS))]
    access = rng.choice(ACCESS)
    out = []
    for i in range(n):
        text = " ".join(rng.choices(WORDS, weights=weights, k=rng.randint(5, 80)))
        out.append(Chunk(chunk_id=content_hash(source, doc, str(i), tag, text)[:32], source=source, doc_id=doc,
                         title=f"{doc} {rng.choice(WORDS)}", section_path=(rng.choice(WORDS),),
                         url=f"https://{source}.example.com/{doc}", text=text, ordinal=i,
                         updated_at=datetime(2026, 1, 5, tzinfo=timezone.utc), access=access))
    return out


@pytest.fixture
def store(tmp_path: Path) -> Iterator[WhooshStore]:
    """About 1,200 chunks over three sources in several segments (one commit per batch, never optimised),
    then a page deleted, a page re-written and single chunks deleted: the index has deletions."""
    rng = random.Random(12)
    s = WhooshStore(tmp_path / "bm25", prune_min_docs=400)  # prunes frequent terms, as at scale
    pages = []
    for batch in range(6):
        chunks = []
        for p in range(10):
            source = ("eng", "hr", "wiki")[(batch + p) % 3]
            doc = f"page{batch}-{p}.md"
            pages.append((source, doc))
            chunks += make_chunks(rng, source, doc, rng.randint(5, 35))
        s.replace(sorted({c.key for c in chunks}), chunks)
    s.delete([make_chunks(rng, *pages[3], 1)[0].key])
    rewritten = make_chunks(rng, *pages[7], 9, tag="v2")
    s.replace([rewritten[0].key], rewritten)
    s.delete_chunks(sorted(s.chunk_ids())[:25])
    yield s
    s.close()


def whoosh_ranking(store: WhooshStore, query: str, limit: int, boosts: dict[str, float] | None,
                   viewer: Viewer) -> list[tuple[str, float]]:
    """What the store returned before the array path: Whoosh's OR matcher, filter and collector."""
    searcher = store._get_searcher()
    terms = store.query_terms(query, searcher)
    if not terms:
        return []
    allowed = store._allowed_docs(searcher, viewer.tokens(), None if viewer.sources is None else sorted(viewer.sources))
    if not allowed:
        return []
    q = _PreloadedOr([Term("content", t, boost=(boosts or {}).get(t, 1.0)) for t in terms])
    col = store._id_column(searcher)
    return [(col[h.docnum], float(h.score)) for h in searcher.search(q, limit=limit, filter=allowed, optimize=False)]


def assert_same(got: list[tuple[str, float]], want: list[tuple[str, float]]) -> None:
    assert [c for c, _ in got] == [c for c, _ in want]
    assert all(abs(a - b) <= 1e-6 for (_, a), (_, b) in zip(got, want))


def test_random_queries_rank_and_score_as_whoosh_does(store: WhooshStore) -> None:
    searcher = store._get_searcher()
    assert len(searcher.reader().leaf_readers()) > 1 and searcher.reader().has_deletions()
    rng = random.Random(5)
    compared = 0
    for i in range(300):
        query = " ".join(rng.choices(WORDS, k=rng.randint(1, 7)))
        viewer = VIEWERS[i % len(VIEWERS)]
        limit = rng.choice([1, 5, 30, 50, 2000])
        boosts = {t: rng.choice([0.25, 0.5, 2.0]) for t in store.analyze(query) if rng.random() < 0.3} or None
        got = store.search_ids(query, limit=limit, boosts=boosts, viewer=viewer)
        want = whoosh_ranking(store, query, limit, boosts, viewer)
        assert_same(got, want)
        compared += bool(want)
    assert compared > 150
    assert isinstance(store._get_searcher()._chatops_bm25, SnapshotScorer)  # the array path ran, no fallback


def test_ties_are_broken_by_document_order_as_whoosh_does(tmp_path: Path) -> None:
    s = WhooshStore(tmp_path / "ties")
    rng = random.Random(1)
    chunks = [c for p in range(4) for c in make_chunks(rng, "wiki", f"same{p}.md", 3)]
    same = [Chunk(content_hash("t", str(i))[:32], "wiki", f"t{i}.md", "Same", ("Part",), "", "deploy freeze now", 0,
                  access=Access.everyone()) for i in range(12)]
    s.replace([], chunks + same)
    got = s.search_ids("deploy freeze", limit=5, viewer=Viewer.public())
    assert_same(got, whoosh_ranking(s, "deploy freeze", 5, None, Viewer.public()))
    s.close()


def test_filters_deletes_and_writes_are_honoured(store: WhooshStore) -> None:
    query = "deploy freeze w3 w17 budget"
    everyone = {c for c, _ in store.search_ids(query, limit=5000, viewer=Viewer.public())}
    found = store.chunks(everyone)
    assert everyone and all(found[c].access.public for c in everyone)
    eng = store.search_ids(query, limit=5000, viewer=Viewer.public().scoped(["eng"]))
    assert eng and all(store.chunks([c])[c].source == "eng" for c, _ in eng)
    assert not store.search_ids(query, limit=50, viewer=Viewer.person(["group:wiki/nobody"]).scoped(["nowhere"]))
    # a write makes a new snapshot: deleted chunks disappear and the scores follow the new statistics
    gone = [c for c, _ in store.search_ids(query, limit=3, viewer=Viewer.public())]
    store.delete_chunks(gone)
    after = store.search_ids(query, limit=5000, viewer=Viewer.public())
    assert not set(gone) & {c for c, _ in after}
    assert_same(after, whoosh_ranking(store, query, 5000, None, Viewer.public()))
    # deleted documents never rank, even under a filter that would let every document number through
    searcher = store._get_searcher()
    scorer = SnapshotScorer(searcher, "content")
    ranked = scorer.top(store.query_terms(query), {}, np.ones(scorer.size, dtype=bool), None)
    unfiltered = searcher.search(_PreloadedOr([Term("content", t) for t in store.query_terms(query)]), limit=None,
                                 optimize=False)
    assert ranked == [(h.docnum, h.score) for h in unfiltered]
    assert not any(searcher.reader().is_deleted(d) for d, _ in ranked)


def test_boosts_it_cannot_express_fall_back_to_whoosh(store: WhooshStore) -> None:
    query = "deploy freeze budget w2"
    boosts = {"deploy": 0.0, "budget": -1.0}
    searcher = store._get_searcher()
    scorer = SnapshotScorer(searcher, "content")
    assert scorer.top(store.query_terms(query), boosts, scorer.live, 10) is None  # declined
    assert_same(store.search_ids(query, limit=40, boosts=boosts, viewer=Viewer.public()),
                whoosh_ranking(store, query, 40, boosts, Viewer.public()))


def test_warm_reads_the_longest_posting_lists_without_changing_results(store: WhooshStore) -> None:
    query = "w0 w1 w2 deploy"
    before = store.search_ids(query, limit=30, viewer=Viewer.public())
    store.delete_chunks([before[0][0]])  # a new snapshot, nothing read yet
    store.warm()
    scorer = store._get_searcher()._chatops_bm25
    held = scorer.postings.cache_info().currsize
    assert held > 0  # read by warm(), before any search of this snapshot
    assert_same(store.search_ids(query, limit=30, viewer=Viewer.public()),
                whoosh_ranking(store, query, 30, None, Viewer.public()))
    assert scorer.postings.cache_info().hits > 0
