"""Progress bars of long CLI runs (``chatops index``: pages, ``chatops eval``: questions).

Drawn by ``tqdm`` on stderr, and only when stderr is a terminal (``tqdm``'s ``disable=None``): piped
or redirected, a run writes exactly what it wrote before, so scripts that read stdout (``--json``
included) or stderr see no bar. While a bar is drawn, log records that go to the terminal are written
above it (``tqdm.write``) through the same handler, so its format and secret masking still apply.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

__all__ = ["progress_bar"]


class _AboveBar:
    """A text stream that hands each written line to ``tqdm.write`` (printed above the bars)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._pending = ""

    def write(self, text: str) -> int:
        from tqdm import tqdm

        self._pending += text
        *lines, self._pending = self._pending.split("\n")
        for line in lines:
            tqdm.write(line, file=self._stream)
        return len(text)

    def flush(self) -> None:
        if self._pending:
            from tqdm import tqdm

            tqdm.write(self._pending, file=self._stream)
            self._pending = ""
        self._stream.flush()


@contextmanager
def progress_bar(desc: str, unit: str, total: int | None = None, stream: TextIO | None = None) -> Iterator:
    """A ``tqdm`` bar on ``stream`` (stderr), disabled when the stream is not a terminal.

    Args:
        desc: the label before the bar, e.g. ``"index handbook"``.
        unit: what is counted, e.g. ``"pages"``.
        total: how many there will be; None shows a count and a rate without a percentage.
        stream: where to draw (default ``sys.stderr``).

    Yields:
        The bar: ``bar.update(n)`` adds ``n``; ``bar.n`` is the count so far (``update`` is a no-op
        on a disabled bar).
    """
    from tqdm import tqdm

    stream = stream or sys.stderr
    # Every update is drawn (mininterval=0, miniters=1, no adaptive skipping): callers update per batch
    # of pages or per question, a few times a second at most.
    bar = tqdm(total=total, desc=desc, unit=f" {unit}", file=stream, disable=None, leave=False,
               dynamic_ncols=True, mininterval=0, miniters=1)
    moved: list[tuple[logging.StreamHandler, TextIO]] = []
    if not bar.disable:
        for handler in logging.getLogger().handlers:
            if isinstance(handler, logging.StreamHandler) and handler.stream is stream:
                handler.setStream(_AboveBar(stream))
                moved.append((handler, stream))
    try:
        yield bar
    finally:
        bar.close()
        for handler, original in moved:
            handler.stream.flush()
            handler.setStream(original)
