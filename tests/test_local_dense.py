"""The NumPy mirror behind local-mode Qdrant's access-filtered search (``index/stores/local_dense.py``)."""

from __future__ import annotations

import numpy as np

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
