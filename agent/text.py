"""Text helpers for the agent: sentence spans and question keywords."""

from __future__ import annotations

import re
from dataclasses import dataclass

from connectors.text import FenceTracker

__all__ = ["Span", "sentence_spans", "QUESTION_STOPWORDS", "display_text"]

# Words that carry no topic in a question typed into chat (on top of the analyzer's stop words).
QUESTION_STOPWORDS = frozenset("""
a an the and or but if then so of to in on at by for with about from into over under as is are was were be been
being am do does did done doing have has had having i me my mine we us our you your he she it its they them their
this that these those there here what whats which who whom whose when where why how can could should would will
shall may might must need needs get got gets getting give go going want wanted like lol pls please hey hi hello
thanks thank any some much many more most also too just really quick q ok okay yes no not know tell ask asked
something anything everything someone anyone is isnt dont doesnt cant im ive id youre theres thats kinda sorta
sure u ur thru w/ etc way one ones thing things mean means s t do think might maybe wondering wonder guess actually basically
gonna wanna gotta lemme dunno idk iirc afaik imo imho tbh btw fyi asap rn pls plz thx ty tia lol lmao haha hmm hey hiya yo
ok okay kk ya yep yeah yup nope still ago land really pretty super quite very literally anyway anyways else ever even
someone somebody anybody anyone everyone nobody folks guys us myself yourself ourselves him his her hers
know knows tell told say says said let lets try trying wonder wondering curious confused sorry again now currently today
already yet soon just like stuff kind sort bit lot lots
""".split())
# Words above that can carry the topic of a workplace question ("team", "time", "day") are deliberately absent..split())

_BULLET = re.compile(r"^\s*(?:[-*+]\s+|\d{1,3}[.)]\s+|>\s*|#{1,6}\s+|\|\s*)")
# A sentence runs to a terminator followed by whitespace (so "4.12.0" and "e.g." inside a token
# do not end it) or to the end of the line.
_SENT = re.compile(r"\S.*?(?:[.!?]+[)\]\"'*_]*(?=\s)|$)")


@dataclass(frozen=True, slots=True)
class Span:
    """A sentence as a half-open character range ``[start, end)`` of its chunk's text."""

    start: int
    end: int
    text: str


def sentence_spans(text: str, min_chars: int = 25) -> list[Span]:
    """Split a chunk into sentence-like spans that are verbatim substrings of ``text``.

    Lines are split first (list items and table rows are units of their own), then prose lines at
    sentence ends. List bullets, numbering, quote markers and heading hashes are left outside the
    span. Spans shorter than ``min_chars`` and code-fence lines are dropped.
    """
    spans: list[Span] = []
    pos = 0
    fence = FenceTracker()
    for line in text.split("\n"):
        line_start = pos
        pos += len(line) + 1
        stripped = line.strip()
        if fence.feed(line) or not stripped or set(stripped) <= set("|-: "):
            continue
        m = _BULLET.match(line)
        offset = m.end() if m else 0
        body = line[offset:]
        for sm in _SENT.finditer(body):
            s, e = sm.start(), sm.end()
            raw = body[s:e]
            lead = len(raw) - len(raw.lstrip())
            trail = len(raw) - len(raw.rstrip())
            s += lead
            e -= trail
            if e - s >= min_chars:
                a = line_start + offset + s
                spans.append(Span(a, line_start + offset + e, text[a:line_start + offset + e]))
    return spans


def display_text(span_text: str) -> str:
    """A span as shown in an answer: emphasis markers removed, whitespace collapsed."""
    t = re.sub(r"\*\*|__", "", span_text)
    return re.sub(r"\s+", " ", t).strip()
