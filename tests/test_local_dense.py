"""The NumPy mirror behind local-mode Qdrant's access-filtered search (``index/stores/local_dense.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from index.stores.local_dense import DenseMirror, MirrorPoint


def _mirror() -> DenseMirror:
    return DenseMirror([
        MirrorPoint("a", np.array([1.0, 0.0, 0.0]), ("public",)),
        MirrorPoint("b", np.array([0.9, 0.1, 0.0]), ("group:hr/people",)),
        MirrorPoint("c", np.array([0.0, 2.0, 0.0]), ("public", "user:ann@x.com")),
        MirrorPoint("d", np.array([0.95, 0.0, 0.05]), ()),  # unresolved access: no token, nobody
    ], dim=3)


def test_the_mask_is_decided_before_ranking_and_unreadable_points_never_appear() -> None:
    m = _mirror()
    q = np.array([1.0, 0.0, 0.0])
    assert [pid for pid, _ in m.search(q, ["public"], 10)] == ["a", "c"]
    assert [pid for pid, _ in m.search(q, ["public", "group:hr/people"], 10)] == ["a", "b", "c"]
    assert [pid for pid, _ in m.search(q, ["public"], 1)] == ["a"]  # top-k among the readable, not filtered after
    assert [pid for pid, _ in m.search(q, ["group:hr/people"], 1)] == ["b"]
    assert m.search(q, [], 5) == [] and m.search(q, ["user:bob@x.com"], 5) == []
    assert "d" not in {pid for pid, _ in m.search(q, ["public", "group:hr/people", "user:ann@x.com"], 10)}


def test_scores_are_cosines_of_unit_vectors() -> None:
    m = _mirror()
    hits = dict(m.search(np.array([0.0, 3.0, 0.0]), ["public", "group:hr/people"], 10))
    assert abs(hits["c"] - 1.0) < 1e-6 and abs(hits["a"]) < 1e-6
    assert abs(hits["b"] - 0.1 / np.hypot(0.9, 0.1)) < 1e-6
    assert len(DenseMirror([], dim=3)) == 0 and DenseMirror([], dim=3).search(np.ones(3), ["public"], 3) == []


def _brute(points: dict[str, MirrorPoint], q: np.ndarray, tokens: set[str], k: int) -> list[str]:
    """Reference ranking: every readable point scored, best first (ties broken by id)."""
    scored = [(-float(np.dot(p.vector / np.linalg.norm(p.vector), q / np.linalg.norm(q))), pid)
              for pid, p in points.items() if tokens.intersection(p.tokens)]
    return [pid for _, pid in sorted(scored)[:k]]


def _points(rng: np.random.Generator, start: int, n: int, doc_of: int = 5) -> list[MirrorPoint]:
    toks = [("public",), ("group:a",), ("group:b", "user:c@x.com"), ()]
    return [MirrorPoint(f"p{i}", rng.standard_normal(8).astype(np.float32), toks[(i // doc_of) % len(toks)]
                        if (i // doc_of) % 7 else ("group:rare",), f"doc{i // doc_of}")
            for i in range(start, start + n)]


VIEWS = [{"public"}, {"public", "group:a"}, {"group:rare"}, {"user:c@x.com"}, {"group:a", "group:b", "group:rare"}]


def test_both_plans_rank_every_readable_point_like_a_full_scan() -> None:
    """Broad access (most rows readable: one product over all rows, the rest masked) and narrow access
    (a few rows: only those scored) give the brute-force answer."""
    rng = np.random.default_rng(3)
    pts = {p.id: p for p in _points(rng, 0, 400)}
    m = DenseMirror(pts.values(), dim=8)
    for q in rng.standard_normal((10, 8)):
        for view in VIEWS:
            got = [pid for pid, _ in m.search(q, view, 15)]
            assert got == _brute(pts, q, view, 15), view


def test_a_mirror_kept_in_step_with_writes_answers_like_one_built_afresh() -> None:
    """Adds, document replacements, deleted ids and access changes applied in place (through
    compactions) leave the mirror answering exactly as a mirror built from the resulting points."""
    rng = np.random.default_rng(5)
    pts = {p.id: p for p in _points(rng, 0, 300)}
    m = DenseMirror(pts.values(), dim=8)
    nxt = 300
    for step in range(40):
        doc = f"doc{rng.integers(0, nxt // 5)}"
        if step % 4 == 0:  # replace a document with new chunks
            m.remove_docs([doc])
            pts = {k: p for k, p in pts.items() if p.doc_key != doc}
            new = [MirrorPoint(f"n{nxt + i}", rng.standard_normal(8).astype(np.float32), ("public",), doc)
                   for i in range(3)]
            nxt += 3
            m.add(new)
            pts.update({p.id: p for p in new})
        elif step % 4 == 1:  # delete single chunks
            victims = list(pts)[:: 17][:4]
            m.remove_ids(victims + ["unknown"])
            for v in victims:
                pts.pop(v)
        elif step % 4 == 2:  # change a document's access
            toks = ("group:b",) if step % 8 == 2 else ()
            m.set_tokens({doc: toks, "no-such-doc": ("public",)})
            pts.update({k: MirrorPoint(k, p.vector, toks, doc) for k, p in pts.items() if p.doc_key == doc})
        else:  # re-add an existing id: it replaces the old point
            pid = next(iter(pts))
            p = MirrorPoint(pid, rng.standard_normal(8).astype(np.float32), ("group:a",), pts[pid].doc_key)
            m.add([p])
            pts[pid] = p
        fresh = DenseMirror(pts.values(), dim=8)
        assert len(m) == len(fresh) == len(pts) and sorted(m.ids) == sorted(pts)
        for q in rng.standard_normal((3, 8)):
            for view in VIEWS:
                assert [pid for pid, _ in m.search(q, view, 10)] == _brute(pts, q, view, 10) == \
                    [pid for pid, _ in fresh.search(q, view, 10)]
    m.remove_docs({p.doc_key for p in pts.values()})
    assert len(m) == 0 and m.search(np.ones(8), ["public"], 5) == []


def _store_answers(store, queries, viewers) -> tuple[list[list[str]], np.ndarray]:
    """Chunk ids per (query, viewer), and all scores (the collection keeps vectors normalised by Qdrant,
    the mirror normalises what it is given: scores agree to float32 rounding)."""
    hits = [store.search(q, limit=20, viewer=v) for q in queries for v in viewers]
    return [[h.chunk.chunk_id for h in hs] for hs in hits], np.array([h.score for hs in hits for h in hs])


def test_local_qdrant_keeps_its_mirror_in_step_with_writes_and_answers_like_a_reopened_store(tmp_path) -> None:
    """After a search has built the mirror, replace / delete_chunks / set_access update it in place (no
    rebuild from the collection), and the answers equal those of the same folder reopened, whose
    mirror is built afresh from what the collection holds."""
    from core.access import Access, Viewer
    from core.models import Chunk, content_hash
    from index.stores import QdrantStore

    rng = np.random.default_rng(11)

    def page(doc: str, n: int, access: Access) -> tuple[list[Chunk], np.ndarray]:
        chunks = [Chunk(content_hash(doc, str(i), str(rng.random())), "wiki", doc, doc.title(), ("S",), "",
                        f"{doc} part {i}", i, access=access) for i in range(n)]
        return chunks, rng.standard_normal((n, 16)).astype(np.float32)

    staff = Viewer.person(["group:wiki/staff"])
    viewers = [Viewer.public(), staff]
    queries = list(rng.standard_normal((4, 16)).astype(np.float32))
    store = QdrantStore(16, path=tmp_path / "q")
    for i in range(6):
        store.replace([f"wiki:d{i}"], *page(f"d{i}", 5, Access.everyone() if i % 2 else Access.only(["group:wiki/staff"])))
    _store_answers(store, queries, viewers)
    mirror = store._mirror  # noqa: SLF001 - the point of the test: the same mirror, updated
    assert mirror is not None and len(mirror) == 30
    store.replace(["wiki:d1"], *page("d1", 3, Access.only(["group:wiki/staff"])))
    store.replace([], *page("d9", 4, Access.everyone()))
    store.delete(["wiki:d2"])
    store.delete_chunks(list(store.chunks(sorted(store.chunk_ids())[:3])))
    store.set_access({"wiki:d0": Access.everyone(), "wiki:d3": Access.nobody("403")})
    assert store._mirror is mirror and len(mirror) == store.count  # noqa: SLF001
    answers = _store_answers(store, queries, viewers)
    store.close()
    reopened = QdrantStore(16, path=tmp_path / "q")
    try:
        ids, scores = _store_answers(reopened, queries, viewers)
        assert ids == answers[0] and np.allclose(scores, answers[1], atol=1e-5)
        assert any(ids) and not any(h.chunk.doc_id == "d3" for h in reopened.search(queries[0], 50, viewer=staff))
    finally:
        reopened.close()


def test_a_failed_write_drops_the_mirror_so_the_next_search_reads_the_collection(tmp_path) -> None:
    """A write that fails half-way (here: vectors of the wrong size, after the old chunks were deleted)
    leaves the mirror dropped, and the next search answers from what the collection really holds."""
    from core.access import Access, Viewer
    from core.models import Chunk, content_hash
    from index.stores import QdrantStore

    store = QdrantStore(4, path=tmp_path / "q")
    try:
        old = [Chunk(content_hash("a", str(i)), "wiki", "a", "A", ("S",), "", f"a {i}", i, access=Access.everyone())
               for i in range(3)]
        store.replace(["wiki:a"], old, np.eye(4, dtype=np.float32)[:3])
        assert len(store.search(np.ones(4), 10, viewer=Viewer.public())) == 3
        with pytest.raises(Exception):  # noqa: B017 - whatever local Qdrant raises for a wrong-size vector
            store.replace(["wiki:a"], old[:1], np.ones((1, 7), dtype=np.float32))
        assert store._mirror is None  # noqa: SLF001
        assert store.search(np.ones(4), 10, viewer=Viewer.public()) == [] and store.count == 0
    finally:
        store.close()
