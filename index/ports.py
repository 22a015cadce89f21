"""The sync engine's port to persistent state: cursors, run records and cross-process locks.

Cursors and runs are kept per index (``index_id``, :mod:`index.identity`): several indexes (replicas
with their own data dirs) may share one state store, and a cursor describes one of them.

:class:`SyncState` is a :class:`typing.Protocol`: :class:`state.StateStore` satisfies it
structurally (``state`` imports nothing of ours), and so can any other store a test or a
deployment brings. Summaries cross the port as JSON-ready dicts
(:meth:`index.summary.SyncSummary.as_dict`), so the state store knows nothing of the index.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol, runtime_checkable

__all__ = ["SyncState", "RunRecord", "GroupState"]


class RunRecord(Protocol):
    """One recorded run of a source (what :meth:`SyncState.last_runs` returns)."""

    @property
    def source(self) -> str: ...

    @property
    def started_at(self) -> datetime: ...

    @property
    def finished_at(self) -> datetime | None: ...

    @property
    def status(self) -> str:
        """``running``, ``ok`` or ``failed``."""
        ...

    @property
    def summary(self) -> Mapping[str, Any]:
        """The summary as stored (a :meth:`~index.summary.SyncSummary.as_dict`, or an older shape)."""
        ...

    @property
    def error(self) -> str: ...


@runtime_checkable
class SyncState(Protocol):
    """What :class:`index.sync.SyncEngine` and :func:`index.sync.sources_status` need of the state store.

    Every method may raise the store's own error when the database cannot be reached.
    """

    def get_cursor(self, source: str, *, index_id: str) -> dict[str, Any] | None:
        """The cursor saved for ``source`` in the index ``index_id`` by :meth:`set_cursor`, or ``None``."""
        ...

    def set_cursor(self, source: str, cursor: dict[str, Any], *, index_id: str) -> None:
        """Save ``source``'s cursor (JSON-ready) for the index ``index_id``; called only once it committed."""
        ...

    def adopt_legacy(self, index_id: str, sources: Iterable[str]) -> int:
        """Give the index ``index_id`` the cursors and runs of ``sources`` recorded before cursors were
        kept per index (called only with sources whose pages that index holds); returns the count."""
        ...

    def start_run(self, source: str, *, index_id: str) -> int:
        """Record that a run of ``source`` into the index ``index_id`` started; returns its run id."""
        ...

    def finish_run(self, run_id: int, status: str, summary: dict[str, Any], error: str = "") -> None:
        """Record the run's outcome (``ok`` or ``failed``), its summary dict and error."""
        ...

    def last_runs(self, source: str | None = None, limit: int = 10, *,
                  index_id: str | None = None) -> Sequence[RunRecord]:
        """The latest runs, newest first (of one source, or all; into the index ``index_id``, or any)."""
        ...

    def acquire_lock(self, name: str, owner: str, ttl: timedelta = ...) -> bool:
        """Take (or renew) lock ``name`` for ``owner`` unless another owner holds an unexpired one."""
        ...

    def take_over_lock(self, name: str, owner: str, is_dead: Callable[[str], bool], ttl: timedelta = ...) -> bool:
        """Take lock ``name`` from a holder that ``is_dead(holder)`` says is gone, atomically
        (of several takers one wins); an unheld lock is acquired. True when ``owner`` holds it."""
        ...

    def release_lock(self, name: str, owner: str) -> None:
        """Release ``name`` if ``owner`` holds it."""
        ...


@runtime_checkable
class GroupState(Protocol):
    """Where the sync engine keeps the members of sources' groups (:class:`state.StateStore` has it)."""

    def set_group_members(self, source: str, group: str, emails: Iterable[str]) -> None:
        """Replace the members (e-mails) of ``source``'s group ``group``."""
        ...
