"""Background work after the ack: tasks are tracked, their failures logged, and they can be drained."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

__all__ = ["BackgroundTasks"]

log = logging.getLogger(__name__)


class BackgroundTasks:
    """A set of running asyncio tasks (kept referenced so none is garbage-collected mid-flight).

    Tasks are created on the running loop; an exception escaping a task is logged, never raised.
    """

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str = "") -> asyncio.Task[Any]:
        """Start ``coro`` now, in the background of the running loop.

        Raises:
            RuntimeError: when no event loop is running.
        """
        task = asyncio.get_running_loop().create_task(coro, name=name or None)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background task %s failed", task.get_name(), exc_info=task.exception())

    @property
    def running(self) -> int:
        """How many tasks are still running."""
        return len(self._tasks)

    async def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no task is running (tasks started meanwhile are waited for too).

        Returns:
            True when idle, False when ``timeout`` seconds passed first.
        """
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while self._tasks:
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return False
            await asyncio.wait(set(self._tasks), timeout=remaining)
        return True

    async def close(self, timeout: float = 10.0) -> None:
        """Let running tasks finish for up to ``timeout`` seconds, then cancel the rest."""
        if not await self.wait_idle(timeout):
            for t in list(self._tasks):
                t.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
