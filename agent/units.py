"""Answer units: the pieces of a retrieved chunk an answer can quote, each with the context it is read in.

A unit is one sentence of a paragraph, one item of a bulleted or numbered list, or one row of a Markdown
table (:func:`agent.text.sentence_spans` cuts them, verbatim). The evidence gate judges units, not chunks,
and the composer quotes the units it chose with what makes them readable on their own: a list item comes
with its list's lead-in line and its sibling items, a table row with its table's header row, a sentence with
the sentence before it when that one names what it lacks ("It must be ..." after the sentence naming the passcode).

Each unit carries two sets of analysed terms: its own (``terms``) and those of the context every unit of its
chunk inherits (page title, section headings) plus, for a list item its lead-in line and for a table row its
header (``context``). A unit answers "how many days of parental leave?" when its own text states the figure
and its terms with its context hold what was asked about: "12 weeks" under the heading "Paid parental leave".
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from connectors.fences import FenceTracker
from tools.knowledge_search import Evidence

from .screen import span_flagged
from .text import Span, sentence_spans

__all__ = ["Unit", "units_of", "table_header", "list_block", "paragraph_of", "next_list_item", "is_list_item",
           "item_start", "quotable", "code_after", "is_code"]

UnitKind = Literal["sentence", "item", "row"]

_LIST_MARK = re.compile(r"\s*(?:[-*+]|\d{1,3}[.)])\s+")
_HEADING_LINE = re.compile(r"^\s{0,3}#{1,6}\s")


@dataclass(frozen=True, slots=True, eq=False)
class Unit:
    """One quotable unit of a retrieved chunk.

    Attributes:
        ev: the chunk's evidence.
        rank: the chunk's 0-based position in the evidence list.
        kind: ``"sentence"``, ``"item"`` (of a list) or ``"row"`` (of a table).
        span: the unit's verbatim text in ``ev.chunk.text``.
        terms: analysed terms of ``span``.
        context: analysed terms of the page title, the section headings and, for an item, its list's lead-in
            line, for a row, its table's header row.
        lead: for an item, its list's lead-in line (a prose line just above the list); for a row, the table's
            header row; else None.
        before, after: for a sentence, the sentences just before and after it in its paragraph (None at the
            paragraph's edges, for items and rows, and where that sentence may not be quoted: :func:`quotable`).
        near: analysed terms of ``before`` and ``after``.
    """

    ev: Evidence
    rank: int
    kind: UnitKind
    span: Span
    terms: frozenset[str]
    context: frozenset[str]
    lead: Span | None = None
    before: Span | None = None
    after: Span | None = None
    near: frozenset[str] = frozenset()

    @property
    def chunk_id(self) -> str:
        """The chunk's id."""
        return self.ev.chunk.chunk_id

    @property
    def key(self) -> tuple[str, int]:
        """(chunk id, start offset): the unit's identity."""
        return self.ev.chunk.chunk_id, self.span.start


@functools.lru_cache(maxsize=4096)
def _spans(text: str) -> tuple[Span, ...]:
    """:func:`agent.text.sentence_spans`, cached by chunk text (the same passages come back turn after turn)."""
    return tuple(sentence_spans(text))


def _line_of(text: str, pos: int) -> str:
    """The text of the line ``pos`` is on, up to ``pos``."""
    return text[:pos].rsplit("\n", 1)[-1]


def _kind(text: str, span: Span) -> UnitKind | Literal["heading"]:
    line = _line_of(text, span.start)
    stripped = line.lstrip()
    if stripped.startswith("|"):
        return "row"
    if stripped.startswith("#") and _HEADING_LINE.match(line):
        return "heading"
    if is_list_item(line):
        return "item"
    return "sentence"


def item_start(text: str, span: Span) -> int | None:
    """The offset of the line of the list item ``span`` belongs to: the item's marker line, for its first
    sentence or a sentence after it on the item's lines ("- **Lock the screen.** Use a code of six digits or
    more.", wrapped or not); None for prose, rows and headings.

    The item runs up from ``span``'s line to the nearest line with a list marker, over lines that are neither
    blank, a heading nor a table row (Markdown's continuation lines).
    """
    pos = text.rfind("\n", 0, span.start) + 1
    while True:
        end = text.find("\n", pos)
        line = text[pos:] if end < 0 else text[pos:end]
        if _LIST_MARK.match(line):
            return pos
        if pos == 0:
            return None
        prev = text.rfind("\n", 0, pos - 1) + 1
        above = text[prev:pos - 1]
        if not above.strip() or _HEADING_LINE.match(above) or above.lstrip().startswith("|"):
            return None
        pos = prev


def is_list_item(line: str) -> bool:
    """Whether ``line`` (the text of a line up to a span's start) is a list marker: ``- ``, ``* ``, ``1. ``..."""
    return _LIST_MARK.fullmatch(line) is not None


def next_list_item(text: str, span: Span) -> Span | None:
    """The first item of a list that starts on the lines right after ``span`` in ``text``, else None."""
    for s in _spans(text):
        if s.start > span.end:
            return s if is_list_item(_line_of(text, s.start)) and "\n\n\n" not in text[span.end:s.start] else None
    return None


def table_header(text: str, row_start: int) -> Span | None:
    """The header row of the Markdown table whose row starts at ``row_start`` in ``text``, or ``None``.

    The header is the table's first line when the line after it is a delimiter row (``|---|---|``); the span is
    the header's cells without the leading ``|`` (as :func:`agent.text.sentence_spans` gives rows). ``None``
    when the row is the header itself or the table has no header in ``text``.
    """
    line_start = text.rfind("\n", 0, row_start) + 1
    lines: list[tuple[int, str]] = []
    pos = line_start
    while pos > 0:
        prev_end = pos - 1
        prev_start = text.rfind("\n", 0, prev_end) + 1
        line = text[prev_start:prev_end]
        if not line.lstrip().startswith("|"):
            break
        lines.append((prev_start, line))
        pos = prev_start
    if len(lines) < 2:
        return None
    (h_start, header), (_, delim) = lines[-1], lines[-2]
    if not set(delim.strip()) <= set("|-: "):
        return None
    lead = len(header) - len(header.lstrip(" |"))
    body = header.rstrip()
    return Span(h_start + lead, h_start + len(body), text[h_start + lead:h_start + len(body)])


def list_block(text: str, item: Span) -> tuple[Span | None, list[Span]]:
    """The list ``item`` belongs to: its lead-in line (the prose line just above the list, when there is one and it
    is not a heading, nor a sentence continuing an item above) and every item of the list in order, each with the
    sentences that continue it on its lines (items of one list are separated by nothing but their own continuation
    lines)."""
    spans = _spans(text)
    idx = next((i for i, s in enumerate(spans) if s.start == item.start), None)
    if idx is None:
        return None, [item]

    def is_item(s: Span) -> bool:  # an item's first sentence or one continuing it
        return item_start(text, s) is not None

    first = idx
    while first > 0 and is_item(spans[first - 1]) and "\n\n" not in text[spans[first - 1].end:spans[first].start]:
        first -= 1
    last = idx
    while last + 1 < len(spans) and is_item(spans[last + 1]) and "\n\n" not in text[spans[last].end:spans[last + 1].start]:
        last += 1
    items = list(spans[first:last + 1])
    lead = None
    if first > 0:
        prev = spans[first - 1]
        between = text[prev.end:spans[first].start]
        if _kind(text, prev) == "sentence" and item_start(text, prev) is None and between.count("\n") <= 2 \
                and "\n" in between:
            lead = prev
    return lead, items


def quotable(text: str, span: Span) -> bool:
    """Whether ``span`` of ``text`` may be quoted: not a question ("Moving abroad?") and nothing
    :mod:`screening` flags (a credential, personal data, a planted instruction)."""
    return not span.text.rstrip().endswith("?") and not span_flagged(text, span.start, span.end)


def paragraph_of(text: str, span: Span) -> list[Span]:
    """The sentences of ``span``'s paragraph (prose sentences not separated by a blank line; for a sentence continuing
    a list item, the item's sentences), in order."""
    spans = _spans(text)
    idx = next((i for i, s in enumerate(spans) if s.start == span.start), None)
    if idx is None or _kind(text, span) != "sentence":
        return [span]
    own = item_start(text, span)
    if own is not None:  # a sentence continuing a list item: the item's sentences are its paragraph
        return [s for s in spans if item_start(text, s) == own]
    first = idx
    while first > 0 and _kind(text, spans[first - 1]) == "sentence" and "\n\n" not in text[spans[first - 1].end:spans[first].start]:
        first -= 1
    last = idx
    while last + 1 < len(spans) and _kind(text, spans[last + 1]) == "sentence" and \
            "\n\n" not in text[spans[last].end:spans[last + 1].start]:
        last += 1
    return list(spans[first:last + 1])


def units_of(evidence: list[Evidence], analyze: Callable[[str], list[str]], window: int) -> list[Unit]:
    """The answer units of the first ``window`` chunks of ``evidence``, in evidence and text order.

    Left out: headings (they name a topic, they answer nothing), a table's header row, sentences that are
    questions (an FAQ's "Moving abroad?"), and anything :mod:`screening` flags in its chunk (a credential,
    personal data, an instruction planted for an assistant): such text is never quoted.
    """
    out: list[Unit] = []
    for rank, ev in enumerate(evidence[:window]):
        c = ev.chunk
        text = c.text
        base = frozenset(_analysed(analyze, f"{c.title}\n{' '.join(c.section_path)}"))
        for span in _spans(text):
            kind = _kind(text, span)
            if kind == "heading" or not quotable(text, span):
                continue
            lead: Span | None = None
            if kind == "row":
                lead = table_header(text, span.start)
                if lead is None or lead.start == span.start:
                    continue  # a header row (or a table without one): it answers nothing by itself
            elif kind == "item":
                lead = list_block(text, span)[0]
            context = base | frozenset(_analysed(analyze, lead.text)) if lead is not None else base
            before = after = None
            if kind == "sentence":
                para = paragraph_of(text, span)
                i = next(i for i, s in enumerate(para) if s.start == span.start)
                before = para[i - 1] if i > 0 and quotable(text, para[i - 1]) else None
                after = para[i + 1] if i + 1 < len(para) and quotable(text, para[i + 1]) else None
            near = frozenset(t for s in (before, after) if s is not None for t in _analysed(analyze, s.text))
            out.append(Unit(ev, rank, kind, span, frozenset(_analysed(analyze, span.text)), context, lead,
                            before, after, near))
    return out


@functools.lru_cache(maxsize=32768)
def _analysed(analyze: Callable[[str], list[str]], text: str) -> tuple[str, ...]:
    """``analyze(text)``, cached (the same chunks come back turn after turn)."""
    return tuple(analyze(text))


def code_after(text: str, span: Span, max_chars: int) -> Span | None:
    """The body of the fenced code block right below ``span`` (a lead-in such as "run this command:"), without its
    fence lines: the block must start on the line after ``span``'s (a blank line between allowed), be closed, hold
    at most ``max_chars`` characters and be :func:`quotable`; else None."""
    eol = text.find("\n", span.end)
    if eol < 0 or text[span.end:eol].strip():
        return None
    pos = eol + 1
    if text.startswith("\n", pos):
        pos += 1
    fence = FenceTracker()
    line_end = text.find("\n", pos)
    if line_end < 0 or not fence.feed(text[pos:line_end]):
        return None
    start = line_end + 1
    cur = start
    while fence.inside:
        end = text.find("\n", cur)
        line = text[cur:] if end < 0 else text[cur:end]
        fence.feed(line)
        if not fence.inside:  # ``line`` closed the block
            # mypy keeps the loop condition's narrowing of fence.inside across feed(), which changed it
            body = text[start:max(start, cur - 1)]  # type: ignore[unreachable]  # see above
            sp = Span(start, start + len(body), body)
            ok = body.strip() and len(body) <= max_chars and quotable(text, sp)
            return sp if ok else None
        if end < 0:
            return None
        cur = end + 1
    return None


def is_code(text: str, span: Span) -> bool:
    """Whether ``span`` starts a fenced code block's body (the line above it is an opening fence)."""
    if span.start == 0 or text[span.start - 1] != "\n":
        return False
    prev = text.rfind("\n", 0, span.start - 1) + 1
    return FenceTracker().feed(text[prev:span.start - 1])
