"""Fenced code blocks, line by line (CommonMark): shared by the clean-up, the template stripper and the chunker."""

from __future__ import annotations

import re

__all__ = ["FenceTracker"]

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


class FenceTracker:
    """Tracks fenced code blocks line by line, as CommonMark defines them: a fence opens with three or
    more backticks or tildes and closes only with a line of the same character at least as long, so
    a ```` ``` ```` inside a ``~~~`` block is code, not a closing fence."""

    def __init__(self) -> None:
        self._open: str | None = None

    @property
    def inside(self) -> bool:
        """True while inside a fenced block (after its opening line, before its closing one)."""
        return self._open is not None

    def feed(self, line: str) -> bool:
        """Consume ``line``; returns True when it is code or a fence line (not prose)."""
        m = _FENCE.match(line)
        if self._open is None:
            if m:
                self._open = m.group(1)
                return True
            return False
        if m and m.group(1)[0] == self._open[0] and len(m.group(1)) >= len(self._open) \
                and not line.strip()[len(m.group(1)):].strip():
            self._open = None
        return True
