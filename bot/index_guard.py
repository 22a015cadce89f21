"""The servers' agent wrapper: a damaged or full index gives users a short reply, not an error trace.

``chatops ask`` lets :class:`~core.errors.IndexError_` reach the CLI (exit 2 with what to
do); a server must keep answering instead. :class:`IndexGuardedAgent` answers such a turn with
:data:`INDEX_UNAVAILABLE` and logs the reason once per distinct failure (the operator's signal,
with ``/readyz`` reporting the index not ready, see :func:`index_readiness`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from agent.models import Reply, Turn
from core.errors import IndexError_
from index.knowledge import KnowledgeIndex
from telemetry.metrics import count_turn_error

__all__ = ["IndexGuardedAgent", "INDEX_UNAVAILABLE", "index_readiness", "FirstSync"]

log = logging.getLogger(__name__)

INDEX_UNAVAILABLE = ("The knowledge index is unavailable right now, so I can't answer from the knowledge base. "
                     "The problem has been logged for the admins; please try again later.")


class IndexGuardedAgent:
    """Same ``answer(turn, progress=None) -> Reply`` as :class:`agent.agent.Agent`, never raising for the index.

    Args:
        agent: the agent to wrap (anything with ``answer``).
    """

    def __init__(self, agent) -> None:
        self.agent = agent
        self._logged: set[str] = set()
        self._lock = threading.Lock()

    def answer(self, turn: Turn, progress: Callable[[str, dict[str, Any]], None] | None = None) -> Reply:
        """The agent's reply (``progress`` as :meth:`agent.agent.Agent.answer` takes it), or
        :data:`INDEX_UNAVAILABLE` (refused) when the index failed; either failure counts as a turn with
        outcome ``error`` in ``chatops_turns_total``."""
        try:
            return self.agent.answer(turn, progress)
        except IndexError_ as exc:
            count_turn_error(turn.platform, "knowledge")
            with self._lock:
                first = str(exc) not in self._logged
                self._logged.add(str(exc))
            if first:
                log.error("the knowledge index is unavailable: %s", exc)
            return Reply(INDEX_UNAVAILABLE, refused=True, route="knowledge")
        except Exception:
            count_turn_error(turn.platform)
            raise


def index_readiness(index: KnowledgeIndex, first_sync: "FirstSync | None" = None) -> tuple[bool, str]:
    """``(ok, detail)`` for ``/readyz``: pages and chunks, or why the index cannot answer yet.

    Not ready while a store is damaged (the BM25 searcher is opened or refreshed, so a damaged segment
    shows here before a user asks), or, with ``first_sync``, while the index started empty and a
    configured source has not committed its first sync. Counts come from aggregate queries.
    """
    damage: IndexError_ | None = index.damage()
    if damage is None:
        try:
            index.keyword.doc_count  # noqa: B018 - the read is the check
        except IndexError_ as exc:
            damage = exc
    if damage is not None:
        return False, str(damage)
    stats = index.stats()
    counts = f"{stats['pages']} pages, {stats['chunks']} chunks"
    waiting = first_sync.waiting() if first_sync is not None else None
    if waiting:
        return False, f"{counts}; {waiting}"
    return True, counts


class FirstSync:
    """Whether a server that started on an empty index has synced every configured source once.

    Ready at once when the index held pages at start (an earlier run's); otherwise not ready until
    each configured source has a successful run into *this* index recorded in the state store (another
    replica's runs into its own index do not fill this one), and never ready with no
    source configured and nothing indexed (there would be nothing to answer from).

    Args:
        index: the served index (its page count at construction is the "earlier run" test).
        store: the state store (``last_runs``).
        names: a callable giving the configured source names.
    """

    def __init__(self, index: KnowledgeIndex, store, names) -> None:
        self.had_pages = index.stats()["pages"] > 0
        self.index_id = index.index_id
        self.store = store
        self.names = names
        self._done: set[str] = set()

    def waiting(self) -> str | None:
        """``None`` when ready, else what readiness waits for (a sentence for ``/readyz``)."""
        if self.had_pages:
            return None
        names = list(self.names())
        if not names:
            return "nothing is indexed and no source is configured: set CHATOPS_SOURCES or list sources in chatops.yml"
        for name in names:
            if name not in self._done and any(r.status == "ok" for r in self.store.last_runs(name, limit=5,
                                                                                         index_id=self.index_id)):
                self._done.add(name)
        pending = [n for n in names if n not in self._done]
        return f"waiting for the first sync of {', '.join(pending)}" if pending else None
