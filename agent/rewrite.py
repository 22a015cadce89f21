"""Offline query rewriting: follow-up to standalone question, decomposition, keyword retry.

- :func:`standalone_question` joins a follow-up with the thread's previous question, so "does that
  cover parking too?" after "how much is the coworking budget?" searches for both.
- :func:`decompose` splits a multi-part question into sub-questions, each searched on its own.
  (Pseudo-relevance feedback, the offline query expansion, runs inside ``knowledge.search``.)
- :func:`keyword_query` keeps only the key terms, a last, stricter retry.
"""

from __future__ import annotations

import re
from .terms import KeyTerms
from .text import QUESTION_STOPWORDS

__all__ = ["standalone_question", "decompose", "keyword_query", "definition_target", "defines"]

_DEFINITION_Q = re.compile(
    r"^\s*(?:what(?:'s|s| is| are)|what does|define|meaning of|wh?at r)\s+(?:an?\s+|the\s+)?"
    r"[`\"']?([A-Za-z][\w./+-]{1,40})[`\"']?\s*(?:mean|stand for|stands for|means)?\s*[?.!]*\s*$", re.I)


def standalone_question(text: str, history: tuple[str, ...], max_turns: int = 1) -> str:
    """The follow-up ``text`` preceded by up to ``max_turns`` earlier user messages."""
    earlier = [h.strip() for h in history[-max_turns:] if h.strip()]
    return " ".join([*earlier, text.strip()])


def decompose(question: str, min_words: int = 1) -> list[str]:
    """Split a multi-part question into its parts ("... and can I keep my laptop?").

    Splits at sentence ends, semicolons, " - " and at " and " / " also " before a new clause
    (a question word or a pronoun subject follows). Parts with fewer than ``min_words`` key
    words are merged into their neighbour; a part with fewer than three key words gets the first
    part's key words appended as context. Returns ``[]`` for a single-part question.
    """
    pieces = re.split(r"[?.!]\s+|;\s+|\s+-\s+|\s+(?:and|also|plus)\s+(?=(?:what|whats|what's|when|where|how|who|why|"
                      r"which|can|could|do|does|is|are|should|will|i|we|my)\b)", question.strip(), flags=re.I)
    parts: list[str] = []
    keywords: list[list[str]] = []
    for p in (x.strip(" ?.!,") for x in pieces):
        if not p:
            continue
        words = [w for w in re.findall(r"[\w$%/@.+-]+", p.lower()) if w not in QUESTION_STOPWORDS]
        if parts and len(words) < min_words:
            parts[-1] = f"{parts[-1]} {p}"
            keywords[-1] += words
        else:
            parts.append(p)
            keywords.append(words)
    if len(parts) < 2:
        return []
    # A short part ("who should lead it") borrows the first part's key words as context.
    context = " ".join(keywords[0])
    return [p if i == 0 or len(keywords[i]) >= 3 else f"{p} {context}" for i, p in enumerate(parts)]


def keyword_query(terms: KeyTerms, original: str) -> str:
    """The question's words that survived filler removal, in order (the original when none did)."""
    words = [w for w in re.findall(r"[\w$%/@.+-]+", original.lower())
             if w.strip(".") and w.strip(".") not in QUESTION_STOPWORDS]
    return " ".join(words) if words and terms.weights else original


def definition_target(question: str) -> str | None:
    """The term a "what's X?" / "what does X mean?" question asks to define, or ``None``."""
    m = _DEFINITION_Q.match(question)
    if not m:
        return None
    term = m.group(1)
    return None if term.lower() in QUESTION_STOPWORDS else term


def defines(text: str, term: str) -> bool:
    """True when ``text`` reads as a definition of ``term``: "Long Name (TERM)", "TERM (long name)",
    "TERM stands for / means / is short for / refers to", "**TERM**:" or "TERM:" at a line start,
    or a table row starting with the term."""
    t = re.escape(term)
    pattern = (rf"\(\s*{t}s?\s*\)|\b{t}\s*\((?!\))|\b{t}\b\s+(?:stands for|means|is short for|refers to|is an? )|"
               rf"(?m:^\s*(?:[-*]\s*)?(?:\*\*)?{t}(?:\*\*)?\s*[:\u2014-])|(?m:^\|\s*{t}\s*\|)")
    return re.search(pattern, text, re.I) is not None
