"""How long a step took, measured once: :func:`timed` opens the step's span (:func:`telemetry.tracing.span`) and
measures the block's wall time with ``time.perf_counter``, for the log fields and metrics that report it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from telemetry.tracing import span

__all__ = ["Timed", "timed"]


class Timed:
    """What :func:`timed` yields: the step's span and its elapsed time.

    Attributes:
        span: the span (``set_attribute(key, value)``, ``set_attributes(mapping)``; a no-op without tracing).
        started: ``time.perf_counter()`` when the block began.
        seconds: the block's wall time in seconds once it has exited (an exception included), None before.
    """

    __slots__ = ("span", "started", "seconds")

    def __init__(self, span: Any) -> None:
        self.span = span
        self.started = time.perf_counter()
        self.seconds: float | None = None

    def elapsed(self) -> float:
        """Seconds since the block began, or its total once it has exited."""
        return self.seconds if self.seconds is not None else time.perf_counter() - self.started

    @property
    def ms(self) -> float:
        """:meth:`elapsed` in milliseconds."""
        return self.elapsed() * 1000


@contextmanager
def timed(name: str, attributes: Mapping[str, Any] | None = None) -> Iterator[Timed]:
    """Time the block in a span named ``name`` (with ``attributes``; a child of the current span).

    Yields a :class:`Timed`: :meth:`Timed.elapsed` inside the block, :attr:`Timed.seconds` after it. An exception
    leaving the block is recorded on the span and propagates; the elapsed time is recorded first.
    """
    with span(name, attributes) as sp:
        clock = Timed(sp)
        try:
            yield clock
        finally:
            clock.seconds = time.perf_counter() - clock.started
