"""Rank fusion.

Reciprocal rank fusion (Cormack, Clarke & Buettcher 2009, "Reciprocal Rank Fusion outperforms
Condorcet and individual Rank Learning Methods", SIGIR): ``score(d) = sum_r w_r / (k + rank_r(d))``
with ranks from 1 and ``k = 60`` by default. Weights ``w_r`` default to 1 (the paper's form).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["reciprocal_rank_fusion"]


def reciprocal_rank_fusion(rankings: Mapping[str, Sequence[str]], k: int = 60,
                           weights: Mapping[str, float] | None = None) -> list[tuple[str, float]]:
    """Fuse ranked id lists.

    Args:
        rankings: retriever name to ids, best first (an id appears at most once per list).
        k: the RRF constant; must be positive.
        weights: retriever name to weight (missing names weigh 1.0).

    Returns:
        ``(id, fused score)`` pairs, best first; ties keep first-seen order.

    Raises:
        ValueError: when ``k`` is not positive.
    """
    if k <= 0:
        raise ValueError(f"RRF k must be positive, got {k}")
    weights = weights or {}
    scores: dict[str, float] = {}
    for name, ids in rankings.items():
        w = float(weights.get(name, 1.0))
        for rank, item in enumerate(ids, start=1):
            scores[item] = scores.get(item, 0.0) + w / (k + rank)
    return sorted(scores.items(), key=lambda kv: -kv[1])
