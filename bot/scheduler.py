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

Each Confluence source whose ``permissions_interval`` is not ``off`` (default ``1h``) also gets the job
``permissions:<name>`` (:func:`run_scheduled_permissions`): the permission sync of
:meth:`IndexJobs.run_permissions`, under the same per-source lock as its syncs, with the same
``max_instances``, ``coalesce`` and grace. It is scheduled whether or not the source's content syncs are.

Beside the syncs, :func:`add_outbox_job` adds the job ``outbox``: at start, then every 30 s (``max_instances=1``,
``coalesce``) it delivers the scheduled messages that are due (:meth:`app.outbox.Outbox.deliver_due`),
on the event loop, through the senders of the platforms ``chatops serve`` runs.

:func:`add_retention_job` adds the job ``retention``: at start, then daily at :data:`RETENTION_AT` (the
scheduler's time zone; a fixed time, so restarts never postpone it), the retention purge
(:meth:`app.retention.Retention.run`: rows past ``RETENTION_DAYS_*`` deleted, the counts recorded as a
run that ``chatops status`` shows), in a worker thread; a run missed by up to 12 hours still runs, and a
stop during a run lets it finish.

A process that does not write the index (``chatops serve --role web``: its jobs have ``writes=False``)
gets no sync or permission job: those are the worker's. A process that writes it (``chatops worker``, the
default ``chatops serve``) gets :func:`add_queue_job`: every :data:`QUEUE_INTERVAL_SECONDS` it runs the
re-index jobs web replicas of its index queued (:meth:`app.jobs.IndexJobs.run_queued`), in a worker thread.

Usage inside ``chatops serve`` (from a coroutine, i.e. with the event loop running)::

    jobs = IndexJobs.from_settings(runtime, store, settings)
    scheduler = start_scheduler(jobs)          # build_scheduler(jobs) + scheduler.start()
    outbox = Outbox(store, {"slack": SlackDmSender(client)})
    add_outbox_job(scheduler, outbox)
    ...
    await stop_scheduler(scheduler, outbox)    # on exit: a delivery in flight is recorded first
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from zoneinfo import ZoneInfo

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from app.config import ChatopsConfig
from app.jobs import IndexJobs
from app.outbox import DeliveryReport, Outbox
from app.retention import Retention, RetentionReport

__all__ = ["build_scheduler", "start_scheduler", "next_run_times", "run_scheduled_sync", "JOB_PREFIX",
           "PERMISSIONS_PREFIX", "run_scheduled_permissions",
           "add_outbox_job", "run_outbox", "OUTBOX_JOB_ID", "OUTBOX_INTERVAL_SECONDS",
           "add_retention_job", "run_retention", "RETENTION_JOB_ID", "RETENTION_AT",
           "add_queue_job", "run_queue", "QUEUE_JOB_ID", "QUEUE_INTERVAL_SECONDS"]

log = logging.getLogger(__name__)

JOB_PREFIX = "sync:"
PERMISSIONS_PREFIX = "permissions:"
OUTBOX_JOB_ID = "outbox"
OUTBOX_INTERVAL_SECONDS = 30.0
RETENTION_JOB_ID = "retention"
#: When the daily purge runs (hour, minute), in the scheduler's time zone: a quiet hour.
RETENTION_AT = (3, 17)
QUEUE_JOB_ID = "index-queue"
#: How often a writing process looks for re-index jobs queued by web replicas.
QUEUE_INTERVAL_SECONDS = 5.0


def run_queue(jobs: IndexJobs) -> int:
    """The queue job's body: run the re-index jobs queued for this index (:meth:`IndexJobs.run_queued`);
    returns how many ran. Never raises (a state store outage is logged; the next run tries again)."""
    try:
        done = jobs.run_queued()
    except Exception:  # noqa: BLE001 - a store outage must not kill the job
        log.exception("running the queued re-index jobs failed; retrying at the next run")
        return 0
    for job_id, results in done:
        log.info("queued re-index job %d: %s", job_id, ", ".join(f"{r.source} {r.status}" for r in results))
    return len(done)


def add_queue_job(scheduler: AsyncIOScheduler, jobs: IndexJobs, interval_seconds: float = QUEUE_INTERVAL_SECONDS) -> None:
    """Add (or replace) the job ``index-queue``: :func:`run_queue` every ``interval_seconds`` (first right
    away), one run at a time, missed runs collapsed into one."""
    scheduler.add_job(run_queue, trigger="interval", seconds=interval_seconds, args=(jobs,), id=QUEUE_JOB_ID,
                      next_run_time=datetime.now(scheduler.timezone),
                      name=f"queued re-index jobs (every {interval_seconds:g} s)", max_instances=1, coalesce=True,
                      misfire_grace_time=max(1, int(interval_seconds)), replace_existing=True)


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


def run_scheduled_permissions(jobs: IndexJobs, name: str) -> str:
    """The permission job's body: one permission sync of source ``name``; returns its status.

    Never raises for the source's failure (it is recorded in the state store and logged).
    """
    result = jobs.run_permissions(name)
    if result.status == "ok" and result.summary is not None:
        s = result.summary
        log.info("scheduled permission sync of %s: %s pages updated, %s unchanged, %s unresolved, %s calls in %.1f s",
                 name, s.updated, s.unchanged, s.skipped, s.calls, s.seconds)
    else:
        log.warning("scheduled permission sync of %s: %s %s", name, result.status, result.error)
    return result.status


async def run_outbox(outbox: Outbox) -> DeliveryReport | None:
    """The outbox job's body: one :meth:`Outbox.deliver_due` run; returns its report, or None when the
    state store failed (logged; the next run tries again). Never raises."""
    try:
        report = await outbox.deliver_due()
    except Exception:  # noqa: BLE001 - a store outage must not kill the job
        log.exception("delivering the scheduled messages failed; retrying at the next run")
        return None
    if report.delivered or report.retrying or report.failed or report.lost:
        log.info("outbox: %d delivered, %d to retry, %d failed, %d taken over", len(report.delivered),
                 len(report.retrying), len(report.failed), len(report.lost))
    return report


def add_outbox_job(scheduler: AsyncIOScheduler, outbox: Outbox,
                   interval_seconds: float = OUTBOX_INTERVAL_SECONDS) -> None:
    """Add (or replace) the job ``outbox``: :func:`run_outbox` every ``interval_seconds``, one run at a
    time (``max_instances=1``), missed runs collapsed into one (``coalesce``); works before or after
    the scheduler started. The first run is right away (messages that fell due while no process was
    delivering go out at start-up), then every interval."""
    scheduler.add_job(run_outbox, trigger="interval", seconds=interval_seconds, args=(outbox,), id=OUTBOX_JOB_ID,
                      next_run_time=datetime.now(scheduler.timezone),
                      name=f"deliver scheduled messages (every {interval_seconds:g} s)", max_instances=1,
                      coalesce=True, misfire_grace_time=max(1, int(interval_seconds)), replace_existing=True)


def _purge_once(retention: Retention) -> RetentionReport | None:
    try:
        return retention.run()
    except Exception:  # noqa: BLE001 - a store outage must not kill the job
        log.exception("the retention purge could not run; the next daily run tries again")
        return None


async def run_retention(retention: Retention) -> RetentionReport | None:
    """The retention job's body: one purge (:meth:`Retention.run`) in a worker thread; returns its report,
    or None when even recording the run failed (logged; tomorrow's run tries again). Never raises.

    A stop while it runs (the scheduler shuts down and cancels the job) does not interrupt the purge:
    the thread finishes it (one transaction) and the job ends quietly with None.
    """
    work = asyncio.get_running_loop().run_in_executor(None, _purge_once, retention)
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        log.info("stopping: the retention purge that is running finishes in its thread")
        return None


def add_retention_job(scheduler: AsyncIOScheduler, retention: Retention, at: tuple[int, int] = RETENTION_AT,
                      at_start: bool = True) -> None:
    """Add (or replace) the job ``retention``: :func:`run_retention` daily at ``at`` (hour, minute) in
    the scheduler's time zone, and right away when ``at_start`` (a process restarted more often than
    daily still purges); one run at a time, missed runs collapsed into one and run when at most 12
    hours late."""
    hour, minute = at
    first = {"next_run_time": datetime.now(scheduler.timezone)} if at_start else {}
    scheduler.add_job(run_retention, trigger="cron", hour=hour, minute=minute, args=(retention,),
                      id=RETENTION_JOB_ID, name=f"retention purge (daily at {hour:02d}:{minute:02d})",
                      max_instances=1, coalesce=True, misfire_grace_time=12 * 3600, replace_existing=True, **first)


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
    if not jobs.writes:
        log.info("this process does not write the index: the syncs are the worker's (chatops worker)")
    for name, schedule in sorted(jobs.schedules().items() if jobs.writes else []):
        if schedule is None:
            log.info("source %s has no schedule; it syncs only on demand", name)
            continue
        scheduler.add_job(run_scheduled_sync, trigger=schedule.trigger(opts.timezone), args=(jobs, name),
                          id=JOB_PREFIX + name, name=f"sync {name} ({schedule.describe()})",
                          max_instances=1, coalesce=True, misfire_grace_time=grace, replace_existing=True)
    for name, every in sorted(jobs.permission_schedules().items() if jobs.writes else []):
        scheduler.add_job(run_scheduled_permissions, trigger="interval", seconds=int(every.total_seconds()),
                          args=(jobs, name), id=PERMISSIONS_PREFIX + name,
                          name=f"permission sync {name} (every {every})", max_instances=1, coalesce=True,
                          misfire_grace_time=grace, replace_existing=True)
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


async def stop_scheduler(scheduler: AsyncIOScheduler, outbox: Outbox | None = None,
                         drain_seconds: float = 10.0) -> None:
    """Stop the scheduler without losing a delivery in flight: no new runs (``pause``), then wait up to
    ``drain_seconds`` for the outbox run that is sending (:meth:`Outbox.drain`), then shut down (which
    cancels the coroutine jobs still running). A message sent but not yet recorded would otherwise be
    sent again once its lease expires."""
    scheduler.pause()
    if outbox is not None:
        await outbox.drain(drain_seconds)
    scheduler.shutdown(wait=False)


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
