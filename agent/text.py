"""Text helpers for the agent: sentence spans and question keywords."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import pysbd

from connectors.fences import FenceTracker

__all__ = ["Span", "sentence_spans", "QUESTION_STOPWORDS", "display_text"]

# Words that carry no topic in a question typed into chat (on top of the analyzer's stop words).
# Decision (issue 22 asked for a library's stop list): the lists that install with their data from the
# package registry were compared with this one. `stop-words` (174 English words) has none of the chat
# register below ("lol", "pls", "gonna", "idk", "tbh", ...) and holds words that carry a workplace
# question's topic ("off" in "time off", "after"/"before" in "after 5 years"); NLTK's list needs a data
# download these machines cannot make, and spaCy's (326 words) comes with a 30 MB package for one list.
# So the function words and the chat register stay listed here, with no word taken from an eval
# question; a chat word missing here is still weighed by the corpus (an absent term is left to the
# dense similarity, a common one never counts as evidence: agent.terms).
QUESTION_STOPWORDS = frozenset("""
a an the and or but if then so of to in on at by for with about from into over under as is are was were be been
being am do does did done doing have has had having i me my mine we us our you your he she it its they them their
this that these those there here what whats which who whom whose when where why how can could should would will
shall may might must need needs get got gets getting give go going want wanted like lol pls please hey hi hello
thanks thank any some much many more most also too just really quick q ok okay yes no not know tell ask asked
something anything everything someone anyone is isnt dont doesnt cant im ive id youre theres thats kinda sorta
sure u ur thru w/ etc way one ones thing things mean means s t do think might maybe wondering wonder guess actually basically
gonna wanna gotta lemme dunno idk iirc afaik imo imho tbh btw fyi asap rn pls plz thx ty tia lol lmao haha hmm hey hiya yo
ok okay kk ya yep yeah yup nope really pretty super quite very literally anyway anyways else ever even
someone somebody anybody anyone everyone nobody folks guys us myself yourself ourselves him his her hers
know knows tell told say says said let lets try trying wonder wondering curious confused sorry again now currently today
already yet soon just like stuff kind sort bit lot lots
""".split())
# Words that can carry the topic of a workplace question ("team", "time", "day") are deliberately absent.

_BULLET = re.compile(r"^\s*(?:[-*+]\s+|\d{1,3}[.)]\s+|>\s*|#{1,6}\s+|\|\s*)")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
_TABLE_ROW = re.compile(r"^\s*\|")
# Fallback splitter (when the segmenter's pieces cannot be placed): a sentence runs to a terminator
# followed by whitespace (so "4.12.0" and "e.g." inside a token do not end it) or to the end.
_SENT = re.compile(r"\S.*?(?:[.!?]+[)\]\"'*_]*(?=\s)|$)", re.S)


@dataclass(frozen=True, slots=True)
class Span:
    """A sentence as a half-open character range ``[start, end)`` of its chunk's text."""

    start: int
    end: int
    text: str


@lru_cache(maxsize=8192)
def _segment(block: str) -> tuple[tuple[int, int], ...]:
    """Sentence ranges of one prose block (a paragraph or a list item's text, newlines as spaces).

    ``pysbd`` (Sadvilkar & Neumann 2020, "PySBD: Pragmatic Sentence Boundary Disambiguation", the
    Golden Rules set) knows abbreviations ("e.g.", "Dr."), numbers ("4.12.0", "$1.50"), URLs and
    ellipses. Its pieces are placed back in ``block`` by search; if one cannot be, the block falls
    back to splitting at a terminator followed by whitespace.
    """
    out: list[tuple[int, int]] = []
    pos = 0
    try:
        pieces = pysbd.Segmenter(language="en", clean=False).segment(block)
    except Exception:  # noqa: BLE001 - a segmenter failure falls back to the plain rule
        pieces = None
    for piece in pieces or ():
        piece = piece.strip()
        if not piece:
            continue
        at = block.find(piece, pos)
        if at < 0:
            out = []
            pieces = None
            break
        out.append((at, at + len(piece)))
        pos = at + len(piece)
    if pieces is None or not out:
        out = []
        for m in _SENT.finditer(block):
            raw = m.group(0)
            a = m.start() + len(raw) - len(raw.lstrip())
            b = m.end() - (len(raw) - len(raw.rstrip()))
            if b > a:
                out.append((a, b))
    return tuple(out)


_WORDS = re.compile(r"[^\W\d_]{2,}")


def sentence_spans(text: str, min_chars: int = 25) -> list[Span]:
    """Split a chunk into sentences that are verbatim substrings of ``text``.

    Blocks first: a paragraph (consecutive prose lines, so a sentence wrapped over two lines stays
    whole), a list item (its marker left outside), a table row and a heading line (each a unit of
    its own, never split; a row keeps its cells, without the leading ``|``). Paragraphs and list
    items are then cut into sentences by a maintained segmenter (:func:`_segment`, ``pysbd``), not
    at line breaks. Quote markers and heading hashes are left outside the span. A prose sentence
    shorter than ``min_chars`` opens the next sentence of its paragraph when it is words (a glossary's
    "“Please do investigate”." before what it explains) and is dropped otherwise (a list number, an
    abbreviation); list items, rows and headings shorter than half of it, and code (fenced blocks) are
    dropped.

    Args:
        text: a chunk's text (Markdown).
        min_chars: the shortest span kept.

    Returns:
        Spans in text order; ``span.text == text[span.start:span.end]``.
    """
    spans: list[Span] = []
    fence = FenceTracker()
    block: list[tuple[int, str]] = []  # (offset in text, line) of the open prose block
    item = [False]  # whether the open block is a list item

    def emit(a: int, b: int, floor: int = min_chars) -> None:
        if b - a >= floor:
            spans.append(Span(a, b, text[a:b]))

    def close() -> None:
        if not block:
            return
        first = block[0][0]
        last_start, last_line = block[-1]
        body = text[first:last_start + len(last_line)]
        floor = min_chars // 2 if item[0] else min_chars  # a list item ("Whale: > 2000 pipelines") is a unit
        held = None  # a sentence too short to stand alone opens the next one ("“Please do investigate”. Seen ...")
        for a, b in _segment(body.replace("\n", " ")):
            if held is not None:
                a, held = held, None
            if b - a < floor:  # kept for the next sentence when it is words, not a list number or an abbreviation
                held = a if len(_WORDS.findall(body[a:b])) >= 2 else None
                continue
            emit(first + a, first + b, floor)
        block.clear()
        item[0] = False

    pos = 0
    for line in text.split("\n"):
        line_start = pos
        pos += len(line) + 1
        stripped = line.strip()
        if fence.feed(line):
            close()
            continue
        if not stripped or set(stripped) <= set("|-: "):
            close()
            continue
        m = _BULLET.match(line)
        offset = m.end() if m else 0
        if _TABLE_ROW.match(line) or _HEADING.match(line):
            close()
            body = line[offset:].rstrip()
            emit(line_start + offset, line_start + offset + len(body), min_chars // 2)
            continue
        if _LIST_ITEM.match(line) or (m and not block):
            close()
            item[0] = bool(_LIST_ITEM.match(line))
        elif block and m:  # a quote line continuing a quoted paragraph
            pass
        block.append((line_start + offset, line[offset:]))
    close()
    return spans


def display_text(span_text: str) -> str:
    """A span as shown in an answer: emphasis markers removed, whitespace collapsed."""
    t = re.sub(r"\*\*|__", "", span_text)
    return re.sub(r"\s+", " ", t).strip()
