"""Rank fusion: moved to :mod:`index.retrieval.fusion` (the retrieval engine's fusion stage); re-exported here for
the agent's imports."""

from index.retrieval.fusion import reciprocal_rank_fusion

__all__ = ["reciprocal_rank_fusion"]
