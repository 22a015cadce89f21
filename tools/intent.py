"""The grammar of a request clause that the router and the action tools' intents share.

A message may hold several clauses ("when does the release go out, and book a sync with bob@example.com
on Friday at 10"): :func:`clauses` splits it at ``?``/``!``/``;`` and before a request verb or a question
word after a comma or "and". A clause that asks how to do something ("how do I book a meeting room on
friday?") is a knowledge question, never a request (:func:`asks_how`). :func:`names_party` and
:func:`names_when` tell whether a clause names someone (an e-mail address, an ``@name``) or a time.
Each tool decides what its own request is from these (``calendar.create``: a meeting verb and object with
a party or a when); the router asks the tools (:func:`tools.actions.recognise`), clause by clause.
"""

from __future__ import annotations

import re

__all__ = ["MAKE_VERB", "REQUEST_VERB", "WHEN", "asks_how", "names_party", "names_when", "clauses"]

_MAKE_VERBS = r"book|schedule|set ?up|create|arrange|organi[sz]e|put|add|send (?:an? )?invite|invite"
#: Verbs that ask for something to be made ("book a call", "set up a sync"): what a meeting request does.
MAKE_VERB = re.compile(rf"\b(?:{_MAKE_VERBS})\b", re.I)
#: Imperative verbs that start a request clause (the verbs above and "remind"); where a clause may begin, never
#: what a request is.
REQUEST_VERB = re.compile(rf"\b(?:{_MAKE_VERBS}|remind)\b", re.I)
#: A day, a time of day or a delay ("tomorrow", "on fri", "3pm", "at 10", "in 20 minutes").
WHEN = re.compile(
    r"\b(?:today|tomorrow|tonight|next|this|on (?:mon|tue|wed|thu|fri|sat|sun)|"
    r"(?:mon|tues?|wed(?:nes)?|thu(?:rs)?|fri|satur|sun)(?:day)?|\d{1,2}(?::\d{2})?\s*(?:am|pm)|"
    r"at \d{1,2}|noon|morning|afternoon|in \d+\s*(?:min(?:ute)?s?|h(?:ou)?rs?|days?))\b", re.I)
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+")
_AT_NAME = re.compile(r"(?<![\w.+-])@[A-Za-z][\w.'-]*")
_HOWTO = re.compile(r"^\s*(?:how|where|who|what|whats|what's|which|why|when|whom|do i|do we|does|am i|is it|is there|"
                    r"are we|are there|should i|should we|may i|can i|could i|is|are)\b", re.I)
_POLITE = r"(?:(?:then|also|please|pls|plz|can you|could you|would you|can u|could u)\s+)*"
_CLAUSE_SPLIT = re.compile(
    r"(?<=[?!;])\s+"
    r"|\s*,\s*(?:and\s+)?(?=" + _POLITE + REQUEST_VERB.pattern + r")"
    r"|\s+and\s+(?=" + _POLITE + REQUEST_VERB.pattern + r")"
    r"|\s*,\s*(?:and\s+)?(?=(?:what|when|where|why|how|who|which)\b)"
    r"|\s+(?:and\s+)?(?:also\s+)?(?=(?:tell me|let me know)\b)", re.I)


def asks_how(clause: str) -> bool:
    """True when ``clause`` opens as a question (how, where, do I, can I, is there, ...): it asks about
    doing something rather than asking the bot to do it."""
    return bool(_HOWTO.match(clause))


def names_party(text: str) -> bool:
    """True when ``text`` names someone: an e-mail address or an ``@name``."""
    return bool(_EMAIL.search(text) or _AT_NAME.search(text))


def names_when(text: str) -> bool:
    """True when ``text`` names a day, a time or a delay (:data:`WHEN`)."""
    return bool(WHEN.search(text))


def clauses(text: str) -> list[str]:
    """``text``'s clauses, stripped of spaces and commas, empty ones dropped (one clause when it has no
    boundary)."""
    return [c.strip(" ,") for c in _CLAUSE_SPLIT.split(text) if c and c.strip(" ,")]
