"""An answer's Markdown as blocks (prose, lists, tables) for the renderers, and the renderings they share.

The agent's reply text (:attr:`agent.models.Reply.text`) is Markdown with ``[n]`` citation markers. Slack
(:mod:`bot.slack.render`), Teams (:mod:`bot.teams.cards`) and the terminal (:mod:`bot.console`) each show
its lists and tables their own way from the one parse here, :func:`parse_blocks` (markdown-it-py, CommonMark
plus GFM tables). Everything else (paragraphs, headings, code, quotes) stays :class:`Prose`, as written.

Citation markers written after a table row's last pipe (``| Plan | Premium | [2]``) would make GFM read one
cell too many (a header row then makes no table at all; a body row loses the extra cell), so they are taken
off before parsing and kept as that row's :attr:`Row.note`. Markers inside a cell, at the end of a list item
or on a lead-in line are ordinary text and stay where they are.

Shared renderings: :func:`table_lines` (columns aligned for a monospace font), :func:`table_records`
("Header: value" lines), :func:`list_lines`, and :func:`chat_markdown`, the Markdown that chat surfaces
render (Slack's ``markdown`` block and streams, a Teams message's text): lists as Markdown lists, a table as
an aligned code block when it fits :data:`CODE_TABLE_WIDTH` columns, else as "Header: value" lines.
Pure functions; none raises on any input text.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token

from agent.citations import MARKER

__all__ = ["Prose", "ListBlock", "Row", "Table", "Block", "parse_blocks", "plain_inline", "has_link", "display_width",
           "table_lines", "table_records", "list_lines", "chat_markdown", "CODE_TABLE_WIDTH"]

#: The widest table (in monospace columns, notes included) :func:`chat_markdown` shows as a code block: about
#: what a Slack or Teams message column shows on a laptop before a code line wraps (a wrapped row no longer
#: lines up). A wider table, or one whose cells hold links (a code block would drop them), becomes
#: "Header: value" lines, which read on any screen.
CODE_TABLE_WIDTH = 64

_PARSER = MarkdownIt("commonmark", {"html": False}).enable("table")
_RULE = "\u2500"  # the line under a table's header: box drawing, never read as a Markdown rule


@dataclass(frozen=True)
class Prose:
    """A block shown as written: a paragraph, heading, code block, quote, rule (its Markdown source)."""

    text: str


@dataclass(frozen=True)
class ListBlock:
    """A bulleted or numbered list: ``items`` are each item's Markdown (continuation lines dedented, a nested
    list kept as Markdown), ``start`` the first number of a numbered list."""

    ordered: bool
    start: int
    items: tuple[str, ...]


@dataclass(frozen=True)
class Row:
    """A table row: each cell's inline Markdown, and ``note``: the citation markers written after the row's
    last pipe (``"[2]"``), or ``""``."""

    cells: tuple[str, ...]
    note: str = ""


@dataclass(frozen=True)
class Table:
    """A GFM table: the header row, the body rows (each as many cells as the header) and each column's
    alignment (``"left"``, ``"center"``, ``"right"``, or ``""`` when the delimiter row sets none)."""

    header: Row
    rows: tuple[Row, ...]
    align: tuple[str, ...]


Block = Prose | ListBlock | Table


def parse_blocks(markdown: str) -> tuple[Block, ...]:
    """The top-level blocks of ``markdown`` in order (blank lines between them dropped).

    Lists and tables nested in a quote stay in that quote's :class:`Prose`; a list item's own lists and
    tables are in its Markdown (:attr:`ListBlock.items`), for the renderer to parse again.
    """
    lines = (markdown or "").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    cleaned, notes = _take_row_notes(lines)
    tokens = _PARSER.parse("\n".join(cleaned))
    blocks: list[Block] = []
    cursor = 0
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        j = i
        if tok.nesting == 1:  # the block's tokens run to the first closing token at level 0
            while j < len(tokens) and not (tokens[j].level == 0 and tokens[j].nesting == -1):
                j += 1
        if tok.level == 0 and tok.map:
            start, end = tok.map
            _gap(blocks, lines, cursor, start)  # lines no token covers (link reference definitions): kept
            if tok.type == "table_open":
                blocks.append(_table(tokens[i:j + 1], notes, start, end))
            elif tok.type in ("bullet_list_open", "ordered_list_open"):
                blocks.append(_list(tok, tokens[i:j + 1], lines))
            else:
                blocks.append(Prose(_source(lines, start, end)))
            cursor = max(cursor, end)
        i = j + 1
    _gap(blocks, lines, cursor, len(lines))
    return tuple(b for b in blocks if not (isinstance(b, Prose) and not b.text.strip()))


def _take_row_notes(lines: list[str]) -> tuple[list[str], dict[int, str]]:
    """``lines`` with citation markers after a row's last pipe taken off, and those markers by line number."""
    cleaned: list[str] = []
    notes: dict[int, str] = {}
    for n, line in enumerate(lines):
        body = line.rstrip()
        first, last = body.find("|"), body.rfind("|")
        tail = body[last + 1:]
        if body.lstrip().startswith("|") and last > first and tail.strip() and not MARKER.sub("", tail).strip():
            notes[n] = tail.strip()
            line = body[:last + 1]
        cleaned.append(line)
    return cleaned, notes


def _source(lines: list[str], start: int, end: int) -> str:
    return "\n".join(lines[start:end]).strip("\n")


def _gap(blocks: list[Block], lines: list[str], start: int, end: int) -> None:
    text = _source(lines, start, end)
    if text.strip():
        blocks.append(Prose(text))


def _table(tokens: list[Token], notes: dict[int, str], start: int, end: int) -> Table:
    rows: list[Row] = []
    align: list[str] = []
    row_lines: set[int] = set()
    cells: list[str] = []
    line = start
    for tok in tokens:
        if tok.type == "tr_open":
            cells, line = [], tok.map[0] if tok.map else line
            row_lines.add(line)
        elif tok.type == "th_open":
            style = str(tok.attrGet("style") or "")
            align.append(style.partition("text-align:")[2].strip())
        elif tok.type == "inline":
            cells.append(tok.content.strip())
        elif tok.type == "tr_close":
            rows.append(Row(tuple(cells), notes.get(line, "")))
    # markers on the delimiter row belong to the header
    extra = [notes[n] for n in range(start, end) if n in notes and n not in row_lines]
    header = rows[0] if rows else Row(())
    if extra:
        header = Row(header.cells, " ".join([header.note, *extra]).strip())
    width = len(header.cells)
    body = tuple(Row((r.cells + ("",) * width)[:width], r.note) for r in rows[1:])
    return Table(header, body, tuple(align[:width]) + ("",) * (width - len(align[:width])))


def _list(open_tok: Token, tokens: list[Token], lines: list[str]) -> ListBlock:
    ordered = open_tok.type == "ordered_list_open"
    try:
        start = int(open_tok.attrGet("start") or 1)
    except (TypeError, ValueError):
        start = 1
    items: list[str] = []
    for tok in tokens:
        if tok.type != "list_item_open" or tok.level != 1 or not tok.map:
            continue
        s, e = tok.map
        first = lines[s]
        lead = len(first) - len(first.lstrip(" "))
        marker = f"{tok.info}{tok.markup}" if ordered else tok.markup
        after = lead + len(marker) if first[lead:].startswith(marker) else lead
        rest = first[after:]
        gap = len(rest) - len(rest.lstrip(" "))
        indent = after + (gap if 1 <= gap <= 4 else 1)
        body = [rest.strip()]
        for line in lines[s + 1:e]:
            spaces = len(line) - len(line.lstrip(" "))
            body.append(line[min(spaces, indent):])
        items.append("\n".join(body).strip("\n"))
    return ListBlock(ordered, start, tuple(items))


def _inline_children(markdown: str) -> list[Token]:
    return [child for tok in _PARSER.parseInline(markdown or "") for child in tok.children or []]


def plain_inline(markdown: str) -> str:
    """One line of inline Markdown as plain text: emphasis and code marks dropped, a link as its label, an
    image as its alt text, ``\\|`` and entities decoded."""
    out: list[str] = []
    for child in _inline_children(markdown):
        if child.type in ("text", "text_special", "code_inline", "html_inline", "image"):
            out.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            out.append(" ")
    return "".join(out).strip()


def has_link(markdown: str) -> bool:
    """Whether inline Markdown holds a link or an image (whose target plain text would lose)."""
    return any(child.type in ("link_open", "image") for child in _inline_children(markdown))


def display_width(text: str) -> int:
    """Columns ``text`` takes in a monospace font: East Asian wide and full-width characters take two,
    combining marks none."""
    return sum(0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in "WF" else 1
               for ch in text)


def _pad(text: str, width: int, align: str) -> str:
    room = max(0, width - display_width(text))
    if align == "right":
        return " " * room + text
    if align == "center":
        return " " * (room // 2) + text + " " * (room - room // 2)
    return text + " " * room


def table_lines(table: Table) -> list[str]:
    """The table as plain-text lines aligned for a monospace font: the header, a rule (``─``) under each
    column, the rows; cells as :func:`plain_inline`, two spaces between columns, a row's note after it.

    Example::

        Plan   Monthly premium  [2]
        ─────  ───────────────
        Basic  $12
    """
    header = [plain_inline(c) for c in table.header.cells]
    rows = [[plain_inline(c) for c in r.cells] for r in table.rows]
    widths = [max(1, *(display_width(r[i]) for r in [header, *rows])) for i in range(len(header))]

    def line(cells: list[str], note: str) -> str:
        text = "  ".join(_pad(c, w, a) for c, w, a in zip(cells, widths, table.align))
        return f"{text}  {note}" if note else text.rstrip()  # notes line up after the last column

    return [line(header, table.header.note), "  ".join(_RULE * w for w in widths),
            *(line(cells, r.note) for cells, r in zip(rows, table.rows))]


def table_records(table: Table) -> list[str]:
    """The table as one Markdown list item a row: ``- **Header:** value · **Header:** value [n]`` (empty
    cells left out; the header's note goes with the first row). A table without rows lists its headers."""
    labels = [plain_inline(c) for c in table.header.cells]

    def notes(*found: str) -> str:
        kept = " ".join(dict.fromkeys(n for n in found if n))
        return f" {kept}" if kept else ""

    if not table.rows:
        return ["- " + " · ".join(label for label in labels if label) + notes(table.header.note)]
    out = []
    for k, row in enumerate(table.rows):
        pairs = [f"**{label}:** {value}" if label else value for label, value in zip(labels, row.cells) if value]
        out.append("- " + " · ".join(pairs) + notes(table.header.note if k == 0 else "", row.note))
    return out


def list_lines(block: ListBlock, render_item: Callable[[str], str], bullet: str = "-") -> list[str]:
    """The list as Markdown-style lines: ``1.``, ``2.`` … from its start (or ``bullet``), each item rendered
    by ``render_item`` with its later lines indented under its first."""
    out: list[str] = []
    for k, item in enumerate(block.items):
        marker = f"{block.start + k}." if block.ordered else bullet
        first, *rest = render_item(item).split("\n")
        out.append(f"{marker} {first}".rstrip())
        pad = " " * (len(marker) + 1)
        out.extend(pad + line if line.strip() else "" for line in rest)
    return out


def _code_table(table: Table, width: int) -> str | None:
    """The table as a fenced code block, or None when it does not fit ``width`` or would lose a link."""
    lines = table_lines(table)
    cells = [*table.header.cells, *(c for r in table.rows for c in r.cells)]
    if max(map(display_width, lines)) > width or any("```" in ln for ln in lines) or any(map(has_link, cells)):
        return None
    return "```\n" + "\n".join(lines) + "\n```"


def chat_markdown(markdown: str, code_width: int = CODE_TABLE_WIDTH) -> str:
    """``markdown`` as chat surfaces show it: prose as written, each list as a Markdown list (``-`` or
    numbers, set off from its lead-in line by a blank line), each table as an aligned code block
    (:func:`table_lines`) when it fits ``code_width`` columns and holds no link, else as "Header: value"
    lines (:func:`table_records`; ``code_width=0`` always). Text without lists or tables, its paragraphs one
    blank line apart, comes back unchanged (bar surrounding blank lines)."""
    return _chat(markdown, code_width, "\n\n")


def _chat(markdown: str, code_width: int, sep: str) -> str:
    parts: list[str] = []
    for block in parse_blocks(markdown):
        if isinstance(block, Prose):
            parts.append(block.text)
        elif isinstance(block, ListBlock):
            # an item's own blocks one line apart, so that the list stays tight
            parts.append("\n".join(list_lines(block, lambda item: _chat(item, code_width, "\n"))))
        else:
            code = _code_table(block, code_width) if code_width > 0 else None
            parts.append(code or "\n".join(table_records(block)))
    return sep.join(parts)
