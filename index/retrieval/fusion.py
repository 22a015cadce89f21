"""Rank fusion.

Reciprocal rank fusion (Cormack, Clarke & Buettcher 2009, "Reciprocal Rank Fusion outperforms
Condorcet and individual Rank Learning Methods", SIGIR): ``score(d) = sum_r w_r / (k + rank_r(d))``
with ranks from 1 and ``k = 60`` by default. Weights ``w_r`` default to 1 (the paper's form).
:class:`WeightedRRF` is the engine's fusion stage: named ``k`` and per-ranker weights, and BM25 weighted up
for a query naming a code-like identifier.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .identifiers import is_code

__all__ = ["reciprocal_rank_fusion", "WeightedRRF"]


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


class WeightedRRF:
    """The fusion stage: the dense and BM25 lists fused by weighted :func:`reciprocal_rank_fusion`.

    A query naming a code-like identifier (:func:`~index.retrieval.identifiers.is_code`: a code, command, ticket
    id or version) is fused with BM25 weighted ``max(bm25_weight, identifier_bm25_weight)``: a small dense model
    does not know "E42", so a dense-weighted fusion would push the one passage that holds it down.

    Args:
        k: the RRF constant (positive).
        dense_weight, bm25_weight: the rankers' weights.
        identifier_bm25_weight: BM25's weight for a query naming a code-like identifier.

    Raises:
        ValueError: when ``k`` is not positive.
    """

    def __init__(self, k: int = 60, dense_weight: float = 1.0, bm25_weight: float = 0.6,
                 identifier_bm25_weight: float = 1.5) -> None:
        if k <= 0:
            raise ValueError(f"RRF k must be positive, got {k}")
        self.k = k
        self.dense_weight = dense_weight
        self.bm25_weight = bm25_weight
        self.identifier_bm25_weight = identifier_bm25_weight

    def run(self, lists: Mapping[str, Sequence[tuple[str, float]]], identifiers: Sequence[str] = ()) -> list[tuple[str, float]]:
        """Fuse ``lists`` (ranker name to ``(chunk id, raw score)`` pairs, best first).

        Args:
            lists: one list (a single ranker: returned as it is, raw scores kept) or ``"dense"`` and ``"bm25"``.
            identifiers: the query's identifiers (:func:`~index.retrieval.identifiers.identifiers`).

        Returns:
            ``(chunk id, score)`` pairs, best first: fused RRF scores, or the single ranker's raw scores.
        """
        if len(lists) == 1:
            return list(next(iter(lists.values())))
        code_like = any(is_code(x) for x in identifiers)
        bm25 = max(self.bm25_weight, self.identifier_bm25_weight) if code_like else self.bm25_weight
        return reciprocal_rank_fusion({name: [cid for cid, _ in hits] for name, hits in lists.items()}, k=self.k,
                                      weights={"dense": self.dense_weight, "bm25": bm25})
