"""What the long-running commands (``chatops serve``, ``chatops worker``) share about their life: stopping on
SIGINT/SIGTERM, and reporting the start-up sync."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

__all__ = ["stop_on_signals", "log_startup_sync"]

log = logging.getLogger(__name__)


def stop_on_signals() -> asyncio.Event:
    """An event the running loop sets on SIGINT or SIGTERM (where the platform lets a loop handle signals).

    Must be called from a coroutine (it uses :func:`asyncio.get_running_loop`)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - non-Unix
            pass
    return stop


def log_startup_sync(fut) -> None:
    """Done-callback of the start-up sync (a future of :meth:`app.jobs.IndexJobs.run`'s results): one line on
    stderr per source that synced, an error record per source that did not."""
    try:
        for r in fut.result():
            if r.status == "ok" and r.summary is not None:
                s = r.summary
                print(f"chatops: start-up sync of {r.source}: {s.added} added, {s.updated} updated, "
                      f"{s.deleted} deleted, {s.unchanged} unchanged", file=sys.stderr, flush=True)
            else:
                log.error("start-up sync of %s: %s %s", r.source, r.status, r.error)
    except Exception:  # noqa: BLE001
        log.exception("start-up sync failed")
