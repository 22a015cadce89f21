"""The sync schedule inside ``chatops serve``: APScheduler 3.x ``AsyncIOScheduler``, one job per source.

Each source with a schedule (its own ``schedule:`` in the sources file, else
``CHATOPS_SYNC_INTERVAL``) gets the job ``sync:<name>`` that calls :meth:`IndexJobs.run` for it:

- ``max_instances=1``: a run still going when the next is due is not doubled (and the state store's
  lock keeps other processes out too);
- ``coalesce=True``: runs missed while the process was busy or asleep collapse into one;
- ``misfire_grace_time`` (``scheduler.misfire_grace_seconds`` of the sources file, default 600 s): a
  run that could not start on time still starts when at most that late, else it is skipped.

The job function is synchronous (HTTP and embedding are blocking), so APScheduler's asyncio executor
runs it in the event loop's default thread pool; the loop keeps serving chat while a sync runs.

Usage inside ``chatops serve`` (from a coroutine, i.e. with the event loop running)::

    jobs = IndexJobs.from_settings(runtime, store, settings)
    scheduler = start_scheduler(jobs)          # build_scheduler(jobs) + scheduler.start()
    ...
    scheduler.shutdown(wait=False)             # on exit
"""

from __future__ import annotations

import logging
from datetime import datetime
from zoneinfo import ZoneInfo

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from connectors.config import ChatopsConfig

from app.jobs import IndexJobs

__all__ = ["build_scheduler", "start_scheduler", "next_run_times", "run_scheduled_sync", "JOB_PREFIX"]

log = logging.getLogger(__name__)

JOB_PREFIX = "sync:"


def run_scheduled_sync(jobs: IndexJobs, name: str) -> str:
    """The job body: sync source ``name`` once; returns its status (``ok``, ``failed``, ``busy``).

    Never raises for the source's failure (it is recorded in the state store and logged).
    """
    result = jobs.run(name)[0]
    if result.status == "ok" and result.summary is not None:
        s = result.summary
        log.info("scheduled sync of %s: %s added, %s updated, %s deleted, %s unchanged in %.1f s", name,
                 s.added, s.updated, s.deleted, s.unchanged, s.seconds)
    else:
        log.warning("scheduled sync of %s: %s %s", name, result.status, result.error)
    return result.status


def build_scheduler(jobs: IndexJobs, config: ChatopsConfig | None = None, *, event_loop=None) -> AsyncIOScheduler:
    """An (unstarted) ``AsyncIOScheduler`` with one job per scheduled source.

    Args:
        jobs: the index jobs (their sources and default schedule); ``jobs.scheduler`` is set to the
            result so ``jobs.status()`` reports each source's ``next_run``.
        config: scheduler options (``misfire_grace_seconds``, ``timezone``); default ``jobs.config``.
        event_loop: the asyncio loop to run on (default: the running loop when started).

    Returns:
        The scheduler; call ``start()`` from within the running event loop.
    """
    cfg = config or jobs.config
    opts = cfg.scheduler
    grace = opts.misfire_grace_seconds
    kwargs = {"event_loop": event_loop} if event_loop is not None else {}
    scheduler = AsyncIOScheduler(timezone=ZoneInfo(opts.timezone),
                                 job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": grace},
                                 **kwargs)
    for name, schedule in sorted(jobs.schedules().items()):
        if schedule is None:
            log.info("source %s has no schedule; it syncs only on demand", name)
            continue
        scheduler.add_job(run_scheduled_sync, trigger=schedule.trigger(opts.timezone), args=(jobs, name),
                          id=JOB_PREFIX + name, name=f"sync {name} ({schedule.describe()})",
                          max_instances=1, coalesce=True, misfire_grace_time=grace, replace_existing=True)
    jobs.scheduler = scheduler
    jobs.next_run_times = lambda: next_run_times(scheduler)
    return scheduler


def start_scheduler(jobs: IndexJobs, config: ChatopsConfig | None = None) -> AsyncIOScheduler:
    """Build the scheduler (:func:`build_scheduler`) and start it on the running event loop.

    Raises:
        RuntimeError: when called without a running event loop (call it from a coroutine or an
            async start-up hook).
    """
    scheduler = build_scheduler(jobs, config)
    scheduler.start()
    return scheduler


def next_run_times(scheduler: AsyncIOScheduler) -> dict[str, datetime | None]:
    """Next fire time of each source's job (``{source: aware datetime or None}``).

    Before ``start()`` the times are computed from the triggers as if started now.
    """
    out: dict[str, datetime | None] = {}
    now = datetime.now(scheduler.timezone)
    for job in scheduler.get_jobs():
        if not job.id.startswith(JOB_PREFIX):
            continue
        nxt = getattr(job, "next_run_time", None)
        if nxt is None and not scheduler.running:
            nxt = job.trigger.get_next_fire_time(None, now)
        out[job.id[len(JOB_PREFIX):]] = nxt
    return out
