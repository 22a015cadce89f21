"""The event title: quoted, ``called ...``, the meeting noun phrase, the topic, else ``Meeting``."""

from __future__ import annotations

import re

__all__ = ["GENERIC_NOUNS", "MEETING_NOUNS", "QUOTED", "TOPIC_LEAD", "read_title"]

QUOTED = re.compile(r"[\"\u201c\u201d]([^\"\u201c\u201d]{2,120})[\"\u201c\u201d]|(?<!\w)'([^']{2,120})'(?!\w)")
_CALLED = re.compile(r"\b(?:called|titled|named|subject(?:\s+line)?:?)\s+(.+?)"
                     r"(?=\s+(?:with|w/|on|at|for|from|in|tomorrow|today|and)\b|\s*(?:\u00a6|$|[,.;!?]))", re.I)

MEETING_NOUNS = {
    "review", "retro", "retrospective", "sync", "standup", "stand-up", "1:1", "1-1", "1on1", "one-on-one",
    "demo", "interview", "workshop", "planning", "kickoff", "kick-off", "offsite", "huddle", "catch-up", "catchup",
    "brainstorm", "walkthrough", "walk-through", "debrief", "postmortem", "post-mortem", "presentation", "check-in",
    "checkin", "onboarding", "training", "lunch", "coffee", "pairing", "grooming", "refinement", "triage", "all-hands",
    "townhall", "town-hall", "readout", "meetup", "design", "session", "discussion", "briefing", "handover",
}
GENERIC_NOUNS = {"meeting", "call", "event", "invite", "invitation", "chat", "appointment", "slot", "time", "meet",
                  "hangout", "block", "calendar"}
_STOP = {
    "a", "an", "the", "our", "my", "your", "their", "his", "her", "its", "this", "that", "these", "those", "some",
    "can", "could", "would", "will", "you", "pls", "please", "plz", "kindly", "i", "we", "me", "us", "let's", "lets",
    "let", "need", "needs", "want", "wanna", "like", "to", "d", "book", "schedule", "set", "setup", "up", "create",
    "arrange", "organise", "organize", "put", "add", "send", "make", "hold", "get", "hey", "hi", "hello", "bot",
    "quick", "short", "brief", "little", "new", "another", "with", "w/", "for", "on", "at", "about", "and", "in",
    "from", "by", "of", "re", "regarding", "invite", "inviting", "also", "just", "then", "next", "a.m.", "p.m.",
    "is", "be", "it", "there", "here", "all", "everyone", "everybody", "team", "folks", "people", "guys", "start",
    "starting", "ok", "okay", "thanks", "thx", "please.", "calendar", "cal", "gcal", "outlook",
}


_TITLE_WORD = re.compile(r"[\w][\w:/&'.+-]*", re.UNICODE)
#: Where a meeting's topic starts ("about the launch", "to go over the weekly report"): its words name
#: the title, and a frequency word describing one of its nouns is no series (see ``take_series``).
TOPIC_LEAD = re.compile(r"\b(?:about|regarding|re:?|to (?:discuss|go over|go through|talk about|talk through|"
                         r"walk through|review|plan)|on the topic of)(?=\s)", re.I)


def read_title(quoted: str | None, s: str) -> str:
    """The event title from what is left of the message (see the module docstring)."""
    if quoted:
        return _tidy(quoted)
    m = _CALLED.search(s)
    if m and m[1].strip(" \u00a6"):
        return _tidy(m[1])
    words = [(w, w.lower().strip(".,!?;:")) for w in re.findall(r"\u00a6|[^\s\u00a6]+", s)]
    best: list[str] | None = None
    best_generic: list[str] | None = None
    for i, (w, low) in enumerate(words):
        low_clean = low.strip("'\"()")
        if low_clean not in MEETING_NOUNS and low_clean not in GENERIC_NOUNS:
            continue
        j = i
        while j + 1 < len(words) and (words[j + 1][1] in MEETING_NOUNS or words[j + 1][1] in GENERIC_NOUNS):
            j += 1
        k = i
        while k - 1 >= 0 and k - i > -4 and _content(words[k - 1][1]):
            k -= 1
        phrase = [x for x, _ in words[k:j + 1]]
        nouns = {words[x][1] for x in range(k, j + 1)}
        specific = any(n in MEETING_NOUNS for n in nouns) or k < i
        if specific and best is None:
            best = phrase
        elif best_generic is None:
            best_generic = phrase
    if best:
        return _tidy(" ".join(best))
    m = re.search(TOPIC_LEAD.pattern + r"\s+(?:the\s+|our\s+)?([^\u00a6,.;!?]+)", s, re.I)
    if m and _words(m[1]):
        return _tidy(" ".join(_words(m[1])[:8]))
    m = re.search(r"\bfor\s+(?:the\s+|our\s+|a\s+|an\s+)?([^\u00a6,.;!?]+)", s, re.I)
    if m and _words(m[1]) and best_generic is None:
        return _tidy(" ".join(_words(m[1])[:8]))
    if best_generic:
        return _tidy(" ".join(best_generic))
    return "Meeting"


def _content(low: str) -> bool:
    low = low.strip(".,!?;:'\"()")
    return bool(low) and low != "\u00a6" and low not in _STOP and not re.fullmatch(r"\d+([.,]\d+)?", low)


def _words(s: str) -> list[str]:
    return [w for w in _TITLE_WORD.findall(s) if w.lower() not in {"the", "a", "an", "our", "my", "with", "and"}]


def _tidy(title: str) -> str:
    title = " ".join(re.sub(r"[\[\]<>*_`~\u00a6]", " ", title).split()).strip(" .,;:!?-")
    if not title:
        return "Meeting"
    return title[0].upper() + title[1:]
