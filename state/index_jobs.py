"""Re-index requests a web replica leaves for the worker of its index (table ``index_jobs``,
revision 0005).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import sqlalchemy as sa

from . import schema
from ._db import Concern, aware as _aware, now as _now

__all__ = ["IndexJobs", "IndexJob"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class IndexJob:
    """A re-index request left for the worker that writes the index ``index_id`` (table ``index_jobs``).

    Attributes:
        id: the job's number.
        index_id: the index to write (the requester's index id: the worker of that index claims it).
        source: the source to sync, ``""`` for every configured source.
        full: a full re-index (``/kb reindex --full``).
        requested_by: who asked (``platform:user id``), for the audit trail.
        status: ``queued``, ``running`` (claimed by ``owner``), ``done`` or ``failed``.
        owner: the worker that claimed it (``host:pid:nonce``), ``""`` while queued.
        result: each source's outcome as :meth:`app.jobs.JobResult.as_dict` dicts (``[]`` until finished).
        created_at, started_at, finished_at: when (UTC; the last two ``None`` until then).
    """

    id: int
    index_id: str
    source: str
    full: bool
    requested_by: str
    status: str
    owner: str
    result: list[dict[str, Any]]
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class IndexJobs(Concern):
    """Enqueue, claim (once, by a conditional ``UPDATE``), finish and read re-index jobs."""

    index_jobs = schema.index_jobs

    def enqueue_index_job(self, index_id: str, source: str | None = None, full: bool = False,
                          requested_by: str = "") -> int:
        """Leave a re-index of ``source`` (None: every source) of the index ``index_id`` for its worker;
        returns the job's id."""
        with self.engine.begin() as conn:
            res = conn.execute(self.index_jobs.insert().values(
                index_id=index_id, source=source or "", full=bool(full), requested_by=requested_by[:200],
                status="queued", owner="", result="[]", created_at=_now()))
            key = res.inserted_primary_key
            assert key is not None  # an INSERT of one row always has its key
            return int(key[0])

    def claim_index_job(self, index_id: str, owner: str,
                        is_dead: Callable[[str], bool] | None = None) -> IndexJob | None:
        """Claim the oldest queued job of the index ``index_id`` for ``owner`` (``queued`` -> ``running``,
        one conditional ``UPDATE`` per candidate, so of two workers exactly one gets it); None when none is queued.

        With ``is_dead``, a ``running`` job whose owner ``is_dead(owner)`` says is gone (a worker killed
        mid-job) is claimed again (the swap is conditional on that owner, so one taker wins)."""
        t = self.index_jobs
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(t.c.id, t.c.status, t.c.owner).where(
                t.c.index_id == index_id, t.c.status.in_(("queued", "running"))).order_by(t.c.id).limit(20)).all()
        for job_id, status, holder in rows:
            if status == "running":
                if is_dead is None or holder == owner or not is_dead(str(holder)):
                    continue
                log.warning("index job %d was running in %s, which is gone; running it again", job_id, holder)
            with self.engine.begin() as conn:
                n = conn.execute(t.update().where(t.c.id == job_id, t.c.status == status, t.c.owner == holder).values(
                    status="running", owner=owner, started_at=_now())).rowcount
            if n == 1:
                return self.index_job(job_id)
        return None

    def finish_index_job(self, job_id: int, owner: str, status: Literal["done", "failed"],
                         result: list[dict[str, Any]]) -> bool:
        """Record the outcome of ``owner``'s run of job ``job_id``; False when ``owner`` does not hold it.

        Raises:
            ValueError: for another ``status``.
        """
        if status not in {"done", "failed"}:
            raise ValueError(f"an index job ends done or failed, got {status!r}")
        t = self.index_jobs
        with self.engine.begin() as conn:
            n = conn.execute(t.update().where(t.c.id == job_id, t.c.status == "running", t.c.owner == owner).values(
                status=status, result=json.dumps(result, default=str), finished_at=_now())).rowcount
        return n == 1

    def index_job(self, job_id: int) -> IndexJob | None:
        """The job ``job_id``, or None."""
        t = self.index_jobs
        with self.engine.connect() as conn:
            r = conn.execute(sa.select(t).where(t.c.id == job_id)).mappings().first()
        if r is None:
            return None
        return IndexJob(id=int(r["id"]), index_id=r["index_id"], source=r["source"], full=bool(r["full"]),
                        requested_by=r["requested_by"], status=r["status"], owner=r["owner"],
                        result=json.loads(r["result"] or "[]"), created_at=_aware(r["created_at"]),
                        started_at=_aware(r["started_at"]), finished_at=_aware(r["finished_at"]))
