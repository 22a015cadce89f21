"""The knowledge-gap report's grouping (app/report.py): average-linkage clustering in numpy, checked against
SciPy's ``fcluster(linkage(x, "average", "cosine"), t, "distance")`` (SciPy is a test dependency only: the
runtime leaves its 143 MB out)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.cluster.hierarchy import fcluster, linkage

from app.report import average_linkage_clusters, group_questions


def _partition(labels) -> list[tuple[int, ...]]:
    groups: dict[int, list[int]] = {}
    for i, label in enumerate(labels):
        groups.setdefault(int(label), []).append(i)
    return sorted(tuple(g) for g in groups.values())


@pytest.mark.parametrize("seed", range(40))
def test_the_clusters_are_scipys_average_linkage_cut_at_the_distance(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, dim = int(rng.integers(2, 80)), int(rng.integers(2, 24))
    centres = rng.normal(size=(max(1, n // 4), dim))
    vectors = centres[rng.integers(0, len(centres), size=n)] + rng.normal(scale=rng.uniform(0.05, 1), size=(n, dim))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    for t in (0.1, 0.3, 0.5, 0.8, 1.2):
        expected = _partition(fcluster(linkage(vectors, method="average", metric="cosine"), t=t, criterion="distance"))
        assert _partition(average_linkage_clusters(1.0 - vectors @ vectors.T, t)) == expected, (seed, t)


def test_edge_cases() -> None:
    assert average_linkage_clusters(np.zeros((1, 1)), 0.5) == [0]
    assert _partition(average_linkage_clusters(np.array([[0, 0.5], [0.5, 0]]), 0.5)) == [(0, 1)]  # at t: joined
    assert _partition(average_linkage_clusters(np.array([[0, 0.51], [0.51, 0]]), 0.5)) == [(0,), (1,)]
    with pytest.raises(ValueError, match="square"):
        average_linkage_clusters(np.zeros((2, 3)), 0.5)


def test_group_questions_groups_identical_and_similar_wordings() -> None:
    axes = {"wifi": [1.0, 0.0, 0.0], "wi-fi": [0.95, 0.3, 0.0], "holiday": [0.0, 0.0, 1.0]}

    def embed(texts):
        return np.array([axes[t.lower().rstrip("?")] for t in texts])

    groups = group_questions(["wifi?", "holiday", "Wifi", "wi-fi"], embed)
    assert groups == [[0, 2, 3], [1]]
