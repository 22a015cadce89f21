"""The CLI's output boundary: nothing stored by users or pages reaches a terminal as control characters.

A question asked in Slack, a page title or a source's error can hold terminal escape sequences (``ESC [``
... colour and cursor moves, ``ESC ]`` ... window titles and hyperlinks), C0/C1 control characters (a
carriage return that rewrites the line, a backspace) and bidirectional overrides that reorder what a
reader sees. ``chatops report``, ``status``, ``ask``, ``chat``, ``sources`` and the rest print such text,
so :func:`install` wraps ``sys.stdout`` and ``sys.stderr`` once, for every command:

- text output: each escape sequence is removed whole and every other control character (but newline
  and tab) is dropped (:func:`clean_text`);
- ``--json`` output: the same characters are written as JSON escapes (``\\u001b``, ``\\u009b``,
  ``\\u202e``), so the output stays valid JSON and decodes to the stored text (:func:`clean_json`).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

__all__ = ["clean_text", "clean_json", "SafeStream", "install"]

# ECMA-48: CSI (ESC [ or 0x9b) parameters, intermediates, a final byte; OSC/DCS/SOS/PM/APC strings up to
# their terminator (BEL or ST: ESC \\ or 0x9c); any other ESC and the one character after it.
_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f]).*?(?:\x07|\x1b\\|\x9c|(?=\n)|$)"
    r"|\x1b[ -/]*[0-~]?", re.S)
# C0 but tab and newline, DEL, C1, the bidirectional embeddings, overrides and isolates
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def clean_text(text: str) -> str:
    """``text`` without terminal escape sequences and control characters (newline and tab kept).

    >>> clean_text("\\x1b[31mred\\x1b[0m\\rover\\u202e")
    'redover'
    """
    return _UNSAFE.sub("", _SEQUENCE.sub("", text))


def clean_json(text: str) -> str:
    """``text`` (JSON) with every control character but newline and tab written as a ``\\uXXXX`` escape:
    inside a JSON string it decodes to the same character, and a terminal never receives it raw.

    >>> clean_json('{"q": "\\u009b31m"}')
    '{"q": "\\\\u009b31m"}'
    """
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


class SafeStream:
    """A text stream that passes every write through ``clean`` to ``stream`` (other attributes: the
    wrapped stream's, so ``isatty()``, ``fileno()`` and ``encoding`` still answer)."""

    def __init__(self, stream: TextIO, clean: Callable[[str], str] = clean_text) -> None:
        self.stream = stream
        self.clean = clean

    def write(self, text: str) -> int:
        """Write ``text`` cleaned; returns ``len(text)`` (what the caller handed over)."""
        self.stream.write(self.clean(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        """Write each of ``lines`` cleaned."""
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        """Flush the wrapped stream."""
        self.stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


@contextmanager
def install(as_json: bool = False) -> Iterator[None]:
    """Wrap ``sys.stdout`` (:func:`clean_json` when ``as_json``, else :func:`clean_text`) and ``sys.stderr``
    (:func:`clean_text`) for the duration of the block; the originals are put back after it."""
    out, err = sys.stdout, sys.stderr
    sys.stdout = SafeStream(out, clean_json if as_json else clean_text)
    sys.stderr = SafeStream(err, clean_text)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err
