"""The servers' agent wrapper: a damaged or full index gives users a short reply, not an error trace.

``chatops ask`` lets :class:`~connectors.errors.IndexError_` reach the CLI (exit 2 with what to
do); a server must keep answering instead. :class:`IndexGuardedAgent` answers such a turn with
:data:`INDEX_UNAVAILABLE` and logs the reason once per distinct failure (the operator's signal,
with ``/readyz`` reporting the index not ready, see :func:`index_readiness`).
"""

from __future__ import annotations

import logging
import threading

from agent.models import Reply, Turn
from connectors.errors import IndexError_
from connectors.index import KnowledgeIndex

__all__ = ["IndexGuardedAgent", "INDEX_UNAVAILABLE", "index_readiness"]

log = logging.getLogger(__name__)

INDEX_UNAVAILABLE = ("The knowledge index is unavailable right now, so I can't answer from the knowledge base. "
                     "The problem has been logged for the admins; please try again later.")


class IndexGuardedAgent:
    """Same ``answer(turn) -> Reply`` as :class:`agent.agent.Agent`, never raising for the index.

    Args:
        agent: the agent to wrap (anything with ``answer``).
    """

    def __init__(self, agent) -> None:
        self.agent = agent
        self._logged: set[str] = set()
        self._lock = threading.Lock()

    def answer(self, turn: Turn) -> Reply:
        """The agent's reply, or :data:`INDEX_UNAVAILABLE` (refused) when the index failed."""
        try:
            return self.agent.answer(turn)
        except IndexError_ as exc:
            with self._lock:
                first = str(exc) not in self._logged
                self._logged.add(str(exc))
            if first:
                log.error("the knowledge index is unavailable: %s", exc)
            return Reply(INDEX_UNAVAILABLE, refused=True, route="knowledge")


def index_readiness(index: KnowledgeIndex) -> tuple[bool, str]:
    """``(ok, detail)`` for ``/readyz``: pages and chunks, or the damage a store ran into.

    Opens (or refreshes) the BM25 searcher, so a damaged segment shows here before a user asks.
    """
    damage = index.damage()
    if damage is None:
        try:
            index.whoosh.doc_count  # noqa: B018 - the read is the check
        except IndexError_ as exc:
            damage = exc
    if damage is not None:
        return False, str(damage)
    stats = index.stats()
    return True, f"{stats['pages']} pages, {stats['chunks']} chunks"
