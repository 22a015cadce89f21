"""Identifiers in a question: moved to :mod:`index.retrieval.identifiers` (the retrieval engine marks the ones each
passage holds); re-exported here for the agent's imports."""

from index.retrieval.identifiers import contains, identifiers, is_code

__all__ = ["identifiers", "contains", "is_code"]
