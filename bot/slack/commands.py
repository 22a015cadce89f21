"""The ``/kb`` grammar (pure).

``/kb`` or ``/kb help``; ``/kb status``; ``/kb sources``; ``/kb reindex [SOURCE] [--full]`` (admins);
``/kb report [PERIOD]`` (admins; PERIOD like ``7d``, ``24h``, ``2w`` or a date ``2026-11-01``); anything else is
a question. ``help``, ``status``, ``sources`` and ``report`` are commands only when alone (``report`` with a
period), so ``/kb status of the release process`` and ``/kb report phishing`` are questions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from app.report import looks_like_period

__all__ = ["KbCommand", "parse_kb", "HELP_LINES"]

Kind = Literal["question", "help", "status", "sources", "reindex", "report", "invalid"]

HELP_LINES = (
    "*Ask the knowledge base*",
    "• `/kb QUESTION`: a cited answer only you see, with a button to share it in the channel",
    "• Mention me in a channel, or message me directly: I answer in the thread, and follow-ups in that "
    "thread need no mention",
    "*Look after it*",
    "• `/kb status`: pages, chunks, last and next sync, and the last error, per source",
    "• `/kb sources`: the configured sources",
    "• `/kb reindex [SOURCE] [--full]`: re-index now, one source or all (admins only; `--full` rebuilds)",
    "• `/kb report [PERIOD]`: the knowledge-gap report: refused questions, answers marked unhelpful, pages "
    "never cited or stale (admins only; PERIOD like `7d` or `30d`, default 7 days)",
    "• `/kb help`: this help",
)

_REINDEX_USAGE = "usage: `/kb reindex [SOURCE] [--full]`"


@dataclass(frozen=True, slots=True)
class KbCommand:
    """A parsed ``/kb`` invocation.

    Attributes:
        kind: ``question``, ``help``, ``status``, ``sources``, ``reindex`` or ``invalid``.
        question: the question (``kind == "question"``).
        source: the source to re-index, or None for all (``kind == "reindex"``).
        full: ``--full`` was given (``kind == "reindex"``).
        error: what is wrong and the usage (``kind == "invalid"``).
        since: the report's period as typed, ``""`` for the default (``kind == "report"``).
    """

    kind: Kind
    question: str = ""
    source: str | None = None
    full: bool = False
    error: str = ""
    since: str = ""


#: The commands of one word, and the kind each is.
_ONE_WORD: dict[str, Kind] = {"help": "help", "-h": "help", "--help": "help", "status": "status", "sources": "sources"}


def parse_kb(text: str | None) -> KbCommand:
    """Parse the text after ``/kb`` (see the module docstring). Never raises."""
    text = (text or "").strip()
    words = text.split()
    if not words:
        return KbCommand("help")
    head = words[0].lower()
    if len(words) == 1 and head in _ONE_WORD:
        return KbCommand(_ONE_WORD[head])
    if head == "report" and (len(words) == 1 or (len(words) == 2 and looks_like_period(words[1]))):
        return KbCommand("report", since=words[1] if len(words) == 2 else "")
    if head in {"reindex", "re-index"}:
        full = False
        source = None
        for w in words[1:]:
            if w in {"--full", "—full", "-full"}:
                full = True
            elif w.startswith("-"):
                return KbCommand("invalid", error=f"unknown option `{w}`; {_REINDEX_USAGE}")
            elif source is None:
                source = w
            else:
                return KbCommand("invalid", error=f"name one source at most; {_REINDEX_USAGE}")
        return KbCommand("reindex", source=source, full=full)
    return KbCommand("question", question=text)
