"""How the CLI lays out its text output: one section separator, one page-path separator.

- Sections of one command's output (``chatops status``: the data dir, the sources, the gate's
  calibration; ``chatops eval``: the index runs, the scores; ``chatops ask``: the answer, its sources,
  a pending action) are separated by one blank line, :data:`SECTION_BREAK`, through :func:`sections`
  or a :class:`SectionPrinter`; a section never starts with a rule (``---``, ``==``) or a second blank line.
- Where a passage is (``chatops ask``, ``chatops chat``) reads ``title › heading › subheading``:
  :func:`section_path`, with :data:`PATH_SEPARATOR`. The index stores a chunk's heading path joined by
  ``" > "`` (:attr:`core.models.Chunk.section`); it is shown through this function only.

``--json`` output is data, not layout: it keeps the stored values as they are.
"""

from __future__ import annotations

import sys
from typing import TextIO

__all__ = ["SECTION_BREAK", "PATH_SEPARATOR", "sections", "section_path", "SectionPrinter"]

#: Between two sections of a command's output: one blank line.
SECTION_BREAK = "\n\n"
#: Between a page's title and its headings.
PATH_SEPARATOR = " \u203a "
_STORED_PATH_SEPARATOR = " > "


def sections(*blocks: str) -> str:
    """The non-empty ``blocks`` (surrounding blank lines dropped) joined by :data:`SECTION_BREAK`."""
    return SECTION_BREAK.join(b.strip("\n") for b in blocks if b and b.strip())


def section_path(title: str, section: str = "") -> str:
    """``title › heading › subheading`` from a page title and a stored heading path (``"A > B"``);
    empty parts are dropped, so a page without headings reads as its title alone."""
    parts = [title, *section.split(_STORED_PATH_SEPARATOR)] if section else [title]
    return PATH_SEPARATOR.join(p.strip() for p in parts if p and p.strip())


class SectionPrinter:
    """Prints the sections of one command's output as they come, a :data:`SECTION_BREAK` between two.

    Calling it with lines adds them to the current section; :meth:`section` starts a new one (the
    blank line is written only when the new section has text, so empty sections leave no trace).

    Args:
        out: where to print (default ``sys.stdout``, looked up when printing).
    """

    def __init__(self, out: TextIO | None = None) -> None:
        self._out = out
        self._printed = False  # anything printed so far
        self._fresh = True  # the current section has no text yet

    def section(self, text: str = "") -> None:
        """Start a new section, with ``text`` as its first lines when given."""
        self._fresh = True
        if text:
            self(text)

    def __call__(self, text: str) -> None:
        """Print ``text`` (one or more lines) in the current section."""
        text = text.strip("\n")
        if not text.strip():
            return
        out = self._out or sys.stdout
        if self._fresh and self._printed:
            out.write("\n")
        print(text, file=out)
        self._printed = True
        self._fresh = False
