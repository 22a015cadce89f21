"""Sync cursors and run summaries, per index and source (tables ``sync_cursors``, ``sync_runs``).

Cursors and runs are kept per index (``index_id``, see ``index.identity``): replicas that each keep their
own index on one database each have their own cursor; replicas sharing one index share it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from . import schema
from ._db import Concern, aware as _aware, now as _now, principal_part as _principal_part
from .schema import LEGACY_INDEX_ID, NO_INDEX

__all__ = ["SyncState", "SyncRun", "LEGACY_INDEX_ID", "NO_INDEX"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SyncRun:
    """The summary of one sync run of a source (into the index ``index_id``; :data:`NO_INDEX` for runs of
    no index, :data:`LEGACY_INDEX_ID` for runs recorded before runs were kept per index)."""

    id: int
    source: str
    started_at: datetime
    finished_at: datetime | None
    status: str
    summary: dict[str, Any]
    error: str
    index_id: str = LEGACY_INDEX_ID


class SyncState(Concern):
    """Cursors and runs of sources, per index.

    :meth:`forget_source` also drops the source's group memberships (table ``group_members``, in the same
    transaction): its pages were removed on purpose."""

    cursors = schema.sync_cursors
    runs = schema.sync_runs
    group_members = schema.group_members

    def get_cursor(self, source: str, *, index_id: str) -> dict[str, Any] | None:
        """The saved sync cursor of ``source`` in the index ``index_id``, or None."""
        t = self.cursors
        with self.engine.connect() as conn:
            v = conn.execute(sa.select(t.c.cursor).where(t.c.index_id == index_id, t.c.source == source)).scalar()
        return json.loads(v) if v else None

    def forget_source(self, source: str, *, index_id: str) -> None:
        """Drop ``source``'s cursor and run history in the index ``index_id`` (and any legacy ones), and its
        group memberships (its pages were removed from that index on purpose). Other indexes' cursors
        and runs of ``source`` stay: their pages are still there."""
        ids = [index_id, LEGACY_INDEX_ID]
        with self.engine.begin() as conn:
            conn.execute(self.cursors.delete().where(self.cursors.c.source == source, self.cursors.c.index_id.in_(ids)))
            conn.execute(self.runs.delete().where(self.runs.c.source == source, self.runs.c.index_id.in_(ids)))
            conn.execute(self.group_members.delete().where(self.group_members.c.source == _principal_part(source)))

    def set_cursor(self, source: str, cursor: dict[str, Any], *, index_id: str) -> None:
        """Save the sync cursor of ``source`` in the index ``index_id`` (call only after that index committed)."""
        t = self.cursors
        with self.engine.begin() as conn:
            conn.execute(t.delete().where(t.c.index_id == index_id, t.c.source == source))
            conn.execute(t.insert().values(index_id=index_id, source=source, cursor=json.dumps(cursor, default=str),
                                           updated_at=_now()))

    def adopt_legacy(self, index_id: str, sources: Iterable[str]) -> int:
        """Give the index ``index_id`` the cursors and runs of ``sources`` written before cursors were kept
        per index (index id :data:`LEGACY_INDEX_ID`); returns the cursors adopted.

        Call it only with sources whose pages that index holds (an index without them must list them
        from the start, not from another index's watermark). One conditional ``UPDATE`` per table, so of
        several replicas starting at once exactly one adopts each legacy row.
        """
        names = sorted(set(sources))
        if not names or index_id == LEGACY_INDEX_ID:
            return 0
        with self.engine.begin() as conn:
            n = conn.execute(self.cursors.update().where(self.cursors.c.index_id == LEGACY_INDEX_ID,
                                                         self.cursors.c.source.in_(names))
                             .values(index_id=index_id)).rowcount
            conn.execute(self.runs.update().where(self.runs.c.index_id == LEGACY_INDEX_ID, self.runs.c.source.in_(names))
                         .values(index_id=index_id))
        if n:
            log.info("index %s adopted the cursors of %d source(s) written before cursors were kept per index", index_id, n)
        return n

    def start_run(self, source: str, *, index_id: str) -> int:
        """Record that a run of ``source`` into the index ``index_id`` (:data:`NO_INDEX` for runs of no
        index) started; returns the run id."""
        with self.engine.begin() as conn:
            res = conn.execute(self.runs.insert().values(index_id=index_id, source=source, started_at=_now(),
                                                         status="running", summary="{}", error=""))
            key = res.inserted_primary_key
            assert key is not None  # an INSERT of one row always has its key
            return int(key[0])

    def finish_run(self, run_id: int, status: str, summary: dict[str, Any], error: str = "") -> None:
        """Record the outcome of a run (``ok`` or ``failed``) with its summary."""
        with self.engine.begin() as conn:
            conn.execute(self.runs.update().where(self.runs.c.id == run_id).values(
                finished_at=_now(), status=status, summary=json.dumps(summary, default=str), error=error))

    def last_runs(self, source: str | None = None, limit: int = 10, *, index_id: str | None = None) -> list[SyncRun]:
        """The latest runs, newest first (of one source, or all; of the index ``index_id``, or of every index)."""
        t = self.runs
        q = sa.select(t).order_by(t.c.id.desc()).limit(limit)
        if source:
            q = q.where(t.c.source == source)
        if index_id is not None:
            q = q.where(t.c.index_id == index_id)
        with self.engine.connect() as conn:
            return [SyncRun(r["id"], r["source"], _aware(r["started_at"]), _aware(r["finished_at"]),
                            r["status"], json.loads(r["summary"]), r["error"], r["index_id"])
                    for r in conn.execute(q).mappings()]

    def last_successful_runs(self, index_id: str | None = None) -> dict[str, datetime]:
        """When each source's latest successful (``ok``) sync run finished (UTC), from one GROUP BY query:
        runs into the index ``index_id``, or into any index when None."""
        t = self.runs
        q = sa.select(t.c.source, sa.func.max(t.c.finished_at)).where(t.c.status == "ok").group_by(t.c.source)
        if index_id is not None:
            q = q.where(t.c.index_id == index_id)
        with self.engine.connect() as conn:
            return {s: _aware(at) for s, at in conn.execute(q) if at is not None}
