"""Offline query rewriting: follow-up to standalone question, decomposition, keyword retry.

- :func:`followup_question` carries the earlier turn's specific terms into a follow-up, in place of
  its pronoun when it has one: "does that cover parking too?" after "how much is the coworking
  budget?" becomes "does coworking budget cover parking too?" (concatenating the whole earlier turn
  dilutes the dense query with its filler). :func:`standalone_question` is the old concatenation.
- :func:`decompose` splits a multi-part question into sub-questions, each searched on its own.
  (Pseudo-relevance feedback, the offline query expansion, runs inside ``knowledge.search``.)
- :func:`keyword_query` keeps only the key terms, a last, stricter retry.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .terms import KeyTerms
from .text import QUESTION_STOPWORDS

__all__ = ["standalone_question", "followup_question", "topic_terms", "decompose", "question_parts", "part_queries",
           "keyword_query", "definition_target", "defines"]

_DEFINITION_Q = re.compile(
    r"^\s*(?:what(?:'s|s| is| are)|what does|define|meaning of|wh?at r)\s+(?:an?\s+|the\s+)?"
    r"[`\"']?([A-Za-z][\w./+-]{1,40})[`\"']?\s*(?:mean|stand for|stands for|means)?\s*[?.!]*\s*$", re.I)


def standalone_question(text: str, history: tuple[str, ...], max_turns: int = 1) -> str:
    """The follow-up ``text`` preceded by up to ``max_turns`` earlier user messages."""
    earlier = [h.strip() for h in history[-max_turns:] if h.strip()]
    return " ".join([*earlier, text.strip()])


_TOPIC_WORD = re.compile(r"[A-Za-z0-9][\w$%/#@.+-]*")
_PRONOUN = re.compile(r"\b(?:it|that|this|those|these|they|them|one|ones)\b(?!\s+(?:is|are|was|were)\b(?=.*\?))", re.I)
_LEAD = re.compile(r"^\s*(?:and|also|but|so|or|then|what about|how about|same for|same with)\b[\s,]*", re.I)
_ASKS = re.compile(r"^\s*(?:what|whats|what's|which|when|where|who|whom|whose|why|how|can|could|do|does|did|is|are|"
                   r"should|will|would|may|am|have|has)\b", re.I)


# Words that name an answer type, not a topic ("how often", "how long").
_TYPE_WORDS = frozenset({"often", "long", "many", "much", "soon", "fast", "quickly", "far", "big", "large"})
_QUESTION_WORD = re.compile(r"\b(?:what|whats|which|when|where|who|why|how)\b|\b(?:do|does|can|should|is|are|will|"
                            r"would|could|may|must)\s+(?:i|we|you|it|they|my|our)\b", re.I)


def topic_terms(message: str, specific: Callable[[str], bool], max_terms: int = 4) -> list[str]:
    """The words of an earlier ``message`` that name its topic, in order.

    Chat filler goes (:data:`agent.text.QUESTION_STOPWORDS`), then words ``specific`` rejects (a
    word on most pages, such as the organisation's name, carries nothing); at most ``max_terms``.
    """
    words = [w.strip(".,;:!?()[]{}\"'`") for w in _TOPIC_WORD.findall(message)]
    words = [w for w in words if w and w.lower().replace("'", "") not in QUESTION_STOPWORDS]
    kept = [w for w in dict.fromkeys(words) if specific(w)]
    return kept[-max_terms:] if len(kept) > max_terms else kept


def followup_question(text: str, history: tuple[str, ...], specific: Callable[[str], bool]) -> str:
    """``text`` made standalone by carrying the earlier turn's specific terms into it.

    The earlier turn is the latest message of ``history`` (anyone's) with topic terms
    (:func:`topic_terms`), preferring a question. Terms ``text`` already has are not repeated. They
    replace the first pronoun of ``text`` ("can I take *it*?" becomes "can I take caregiver leave?"),
    else a leading "and" / "what about" ("and for contractors?" becomes "caregiver leave for
    contractors?"), else they are added at the end. Returns ``text`` unchanged when there is nothing
    to carry.
    """
    earlier = ""
    for msg in reversed(history):
        if msg.strip() and topic_terms(msg, specific):
            if not earlier:
                earlier = msg
            if "?" in msg or _ASKS.match(msg):
                earlier = msg
                break
    if not earlier:
        return text
    have = {w.lower().strip(".,;:!?()") for w in _TOPIC_WORD.findall(text)}
    carried = [w for w in topic_terms(earlier, specific) if w.lower() not in have]
    if not carried:
        return text
    topic = " ".join(carried)
    m = _PRONOUN.search(text)
    if m:
        return f"{text[:m.start()]}{topic}{text[m.end():]}"
    lead = _LEAD.match(text)
    if lead and lead.end() < len(text):
        return f"{topic} {text[lead.end():]}"
    body = text.rstrip()
    end = body[-1] if body and body[-1] in "?.!" else ""
    return f"{body.rstrip('?.! ')} {topic}{end}"


def question_parts(question: str) -> list[str]:
    """The parts of a multi-part question that ask something (:func:`decompose`, minus statements of
    context such as "last day is friday", and parts that ask about the topic of another: one naming
    only an answer type, "and how often", or one topic word and a pronoun, "when does that ship");
    ``[]`` when fewer than two parts ask."""
    parts = decompose(question, context=False)
    def topical(p: str) -> bool:
        words = [w for w in re.findall(r"[\w$%/@.+-]+", p.lower())
                 if w not in QUESTION_STOPWORDS and w not in _TYPE_WORDS]
        return len(words) >= 2 or (len(words) == 1 and not _PRONOUN.search(p))

    asking = [p for p in parts if (_ASKS.match(_LEAD.sub("", p)) or _QUESTION_WORD.search(p)) and topical(p)]
    return asking if len(asking) >= 2 else []


def part_queries(question: str) -> list[tuple[str, str]]:
    """Each part of a multi-part question (:func:`question_parts`) with the query that searches it on
    its own: the part, then the key words of the question's statements of context ("first on-call
    week next week. what tool pages me?": the week is the setting of every part), then, when the
    part leans on the part before it (a pronoun, a leading "and" / "what about", or fewer than two
    topic words: "and whats the max per night", "what do I install on it"), that part's key words.
    ``[]`` when fewer than two parts ask."""
    asking = question_parts(question)
    if not asking:
        return []

    def words(p: str) -> list[str]:
        return [w for w in re.findall(r"[\w$%/@.+-]+", p.lower()) if w not in QUESTION_STOPWORDS]

    setting = [w for p in decompose(question, context=False) if p not in asking for w in words(p)]
    out: list[tuple[str, str]] = []
    for i, part in enumerate(asking):
        extra = list(setting)
        topical = [w for w in words(part) if w not in _TYPE_WORDS]
        if i and (_PRONOUN.search(part) or _LEAD.match(part) or len(topical) < 2):
            extra += words(asking[i - 1])
        have = set(words(part))
        extra = [w for w in dict.fromkeys(extra) if w not in have]
        out.append((part, f"{part} {' '.join(extra)}" if extra else part))
    return out


def decompose(question: str, min_words: int = 1, context: bool = True) -> list[str]:
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
    if not context:
        return parts
    # A part that leans on the first ("who should lead it") or says almost nothing borrows the first
    # part's key words as context; one that names its own topic ("when do I submit expenses") does not.
    first = " ".join(keywords[0])
    return [p if i == 0 or (len(keywords[i]) >= 2 and not _PRONOUN.search(p)) else f"{p} {first}"
            for i, p in enumerate(parts)]


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
