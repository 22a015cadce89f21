"""The exit screen: what looks like a credential, personal data or a planted instruction never leaves.

Every reply, from every planner, passes :func:`screen_reply` in :meth:`agent.agent.Agent.answer`
(the agent's single exit), with the scanner of :mod:`screening`:

- a citation whose quote holds a finding, or overlaps one in its chunk (an injected instruction
  runs past the sentence that announces it, so a quote is judged in its chunk's context), is dropped;
- a cited sentence (one with ``[n]`` markers) holding a finding, or showing a dropped quote, is
  dropped whole: a sentence that was only a redacted secret answers nothing, and a fragment around
  a hole is worse than nothing;
- citations no sentence refers to any more are dropped, so every source shown still backs a sentence;
- uncited text (a direct answer, a refusal echoing the question, an action preview) has findings
  replaced by ``[left out: <kind>]``, and so do the string arguments and summary of a pending action.

The agent then re-validates what is left (:func:`agent.citations.validate_citations` and the
gate's citation count) and refuses with :func:`agent.messages.withheld_refusal` when the rest no
longer answers. :func:`chunk_findings` is also how the answerers skip flagged sentences up front.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from screening import Finding, redact, scan
from tools.knowledge_search import Evidence

from .citations import MARKER
from .models import Citation, Reply
from .text import display_text

__all__ = ["ScreenResult", "screen_reply", "scrub_text", "chunk_findings", "span_flagged"]

# A reply's units: the extractive and LLM answers join "sentence [n]" pieces with a space; leads,
# previews, notes and refusals are separated by newlines.
_SEGMENTS = re.compile(r"((?<=\])[ \t]+|\n+)")


@dataclass(slots=True)
class ScreenResult:
    """What the screen left out of a reply (counts only, never the content).

    Attributes:
        categories: the categories withheld (``secret``, ``personal``, ``injection``), including
            flagged content of the cited chunks that the answer did not quote.
        kinds: the kinds found, e.g. ``"an AWS key"``, for the trace.
        dropped_sentences, dropped_citations, redacted: how many of each the screen removed.
        nothing_left: the answer was empty and the evidence holds flagged content (the answerer
            skipped every flagged sentence and found nothing else to say).
    """

    categories: set[str] = field(default_factory=set)
    kinds: set[str] = field(default_factory=set)
    dropped_sentences: int = 0
    dropped_citations: int = 0
    redacted: int = 0
    nothing_left: bool = False

    @property
    def removed(self) -> bool:
        """True when the screen removed or redacted part of the reply, or the planner's answer came back
        empty because every sentence of its evidence was flagged."""
        return bool(self.dropped_sentences or self.dropped_citations or self.redacted or self.nothing_left)

    def note(self, found: Iterable[Finding]) -> None:
        """Record findings' categories and kinds."""
        for f in found:
            self.categories.add(f.category)
            self.kinds.add(f.kind)

    def as_dict(self) -> dict[str, Any]:
        """Trace-friendly dict."""
        return {"categories": sorted(self.categories), "kinds": sorted(self.kinds),
                "dropped_sentences": self.dropped_sentences, "dropped_citations": self.dropped_citations,
                "redacted": self.redacted, "nothing_left": self.nothing_left}


@lru_cache(maxsize=4096)
def _cached_scan(text: str) -> tuple[Finding, ...]:
    return tuple(scan(text))


def chunk_findings(text: str) -> tuple[Finding, ...]:
    """Findings in a chunk's text (cached: the same chunks come back turn after turn)."""
    return _cached_scan(text)


def span_flagged(text: str, start: int, end: int) -> bool:
    """True when ``text[start:end]`` overlaps a finding of ``text`` (judged in its whole context), or
    is the rest of a sentence a flagged value cut short ("the password is hunter2-Prod! and the
    user is report_ro": a splitter ends the sentence at the "!"; its lower-case rest goes with it)."""
    found = chunk_findings(text)
    if any(f.overlaps(start, end) for f in found):
        return True
    if not text[start:start + 1].islower():
        return False
    before = text[:start].rstrip(" \t")
    prev = len(before)
    return not before.endswith("\n") and any(f.start < prev <= f.end + 2 for f in found)


def _quote_ok(c: Citation, chunks: dict[str, str], result: ScreenResult) -> bool:
    own = scan(c.quote)
    if own:
        result.note(own)
        return False
    text = chunks.get(c.chunk_id)
    if text is None:
        return True  # not among this turn's evidence: citation validation rejects it
    pos = text.find(c.quote)
    while pos >= 0:
        if span_flagged(text, pos, pos + len(c.quote)):
            result.note(chunk_findings(text))
            return False
        pos = text.find(c.quote, pos + 1)
    return True


def _plain(text: str) -> str:
    return display_text(MARKER.sub(" ", text)).rstrip(".!? ")


def scrub_text(text: str, result: ScreenResult | None = None) -> str:
    """``text`` with every finding replaced by ``[left out: <kind>]`` (for uncited text)."""
    found = scan(text)
    if not found:
        return text
    if result is not None:
        result.note(found)
        result.redacted += len(found)
    return redact(text, found)


def _scrub_value(value: Any, result: ScreenResult) -> Any:
    if isinstance(value, str):
        return scrub_text(value, result)
    if isinstance(value, list):
        return [_scrub_value(v, result) for v in value]
    if isinstance(value, dict):
        return {k: _scrub_value(v, result) for k, v in value.items()}
    return value


def screen_reply(reply: Reply, evidence: list[Evidence]) -> ScreenResult:
    """Screen ``reply`` in place (see the module docstring) and say what was left out."""
    result = ScreenResult()
    chunks = {e.chunk.chunk_id: e.chunk.text for e in evidence}
    if not reply.text.strip() and not reply.refused:
        for e in evidence[:8]:
            result.note(chunk_findings(e.chunk.text))
        result.nothing_left = bool(result.categories)
    kept = [c for c in reply.citations if _quote_ok(c, chunks, result)]
    result.dropped_citations = len(reply.citations) - len(kept)
    dropped_quotes = {_plain(c.quote) for c in reply.citations if c not in kept}
    parts = _SEGMENTS.split(reply.text)
    out: list[str] = []
    for i in range(0, len(parts), 2):
        seg, sep = parts[i], (parts[i + 1] if i + 1 < len(parts) else "")
        if MARKER.search(seg):
            found = scan(MARKER.sub(" ", seg))
            if found or _plain(seg) in dropped_quotes:  # holds a finding, or shows a quote that was dropped
                result.note(found)
                result.dropped_sentences += 1
                continue
        else:
            seg = scrub_text(seg, result)
        out.append(seg + sep)
    text = "".join(out).strip()
    before = {int(n) for n in MARKER.findall(reply.text)}
    used = {int(n) for n in MARKER.findall(text)}
    final = [c for c in kept if c.n in used or c.n not in before]
    result.dropped_citations += len(kept) - len(final)
    reply.text, reply.citations = text, final
    pending = reply.pending_action
    if pending is not None:
        args, summary = _scrub_value(pending.args, result), scrub_text(pending.summary, result)
        if args != pending.args or summary != pending.summary:
            reply.pending_action = replace(pending, args=args, summary=summary)
    for c in final:  # what the cited chunks hold that the answer did not quote
        if c.chunk_id in chunks:
            result.note(chunk_findings(chunks[c.chunk_id]))
    return result
