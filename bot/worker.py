"""``chatops worker``: the process that writes the index (issue 12, step 3).

It runs the schedules (each source's content syncs, the Confluence permission syncs), takes the state
store's sync locks, writes the index, runs the re-index jobs that web replicas (``chatops serve --role
web``) queued for its index (:func:`bot.scheduler.add_queue_job`, every 5 s) and the daily retention purge.
It serves no chat platform and opens no port. At start-up it runs an incremental sync of every source
(unless ``--no-sync``), as ``chatops serve`` does, then runs until SIGINT/SIGTERM and lets a running
sync finish. The default ``chatops serve`` keeps doing both jobs in one process; a worker and a
``serve`` on one embedded index cannot run at once (the index's local Qdrant stops the second with a
clear error), so split the roles only with ``QDRANT_URL``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from concurrent.futures import ThreadPoolExecutor

from app.settings import Settings

__all__ = ["run_worker", "WorkerError"]

log = logging.getLogger(__name__)


class WorkerError(ValueError):
    """``chatops worker`` cannot start; the message says what to fix (the CLI exits with status 2)."""


def run_worker(settings: Settings, initial_sync: bool = True) -> int:
    """Run ``chatops worker`` until SIGINT/SIGTERM (see the module docstring); returns the exit status.

    Raises:
        WorkerError: for an unreachable state store or no configured source.
        core.errors.ChatopsError: for a bad sources file or spec, or a locked or corrupt index.
    """
    from app.jobs import IndexJobs
    from app.retention import Retention
    from app.wiring import build_agent, open_index
    from state import StateStore, StateStoreError

    with contextlib.ExitStack() as held:  # closed in reverse order, on the way out or when opening fails
        try:
            store = StateStore(settings.state_url)
        except StateStoreError as exc:
            raise WorkerError(str(exc)) from exc
        held.callback(store.close)
        index = open_index(settings, repair=True)  # the writer rebuilds a damaged store, as `chatops sync` does
        with contextlib.ExitStack() as opening:
            opening.callback(index.close)
            runtime = build_agent(settings, index=index)
            opening.pop_all()  # from here the runtime closes the index
        held.callback(runtime.close)
        jobs = IndexJobs.from_settings(runtime, store, settings)
        held.callback(jobs.close)
        if not jobs.names():
            raise WorkerError("no sources configured: list them in chatops.yml (or CHATOPS_CONFIG) or CHATOPS_SOURCES")
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chatops-worker")
        held.callback(executor.shutdown, wait=True, cancel_futures=True)
        asyncio.run(_run(jobs, Retention.from_settings(store, settings), executor, initial_sync,
                         runtime.index.index_id))
    return 0


async def _run(jobs, retention, executor, initial_sync: bool, index_id: str) -> None:
    from .scheduler import add_queue_job, add_retention_job, start_scheduler
    from .lifecycle import log_startup_sync, stop_on_signals

    stop = stop_on_signals()
    loop = asyncio.get_running_loop()
    scheduler = start_scheduler(jobs)  # the content and permission syncs
    try:
        add_queue_job(scheduler, jobs)  # re-index jobs queued by web replicas
        add_retention_job(scheduler, retention)  # the retention purge, daily
        print(f"chatops: worker running for index {index_id} ({', '.join(jobs.names())}); Ctrl-C stops",
              file=sys.stderr, flush=True)
        if initial_sync:
            loop.run_in_executor(executor, jobs.run).add_done_callback(log_startup_sync)
        await stop.wait()
        print("chatops: stopping", file=sys.stderr, flush=True)
    finally:
        scheduler.shutdown(wait=False)
