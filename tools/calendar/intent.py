"""Whether a message asks to put a meeting in a calendar (``calendar.create``'s ``intent``).

A clause is a meeting request when it has an action verb (book, schedule, set up, ...), a meeting
object (meeting, call, sync, review, 1:1, ...) and either a party (an e-mail address, an ``@name``)
or a when (tomorrow, friday, 3pm, ...). A clause that asks how to do it ("how do I book a meeting
room on friday?") is not a request. A message whose clauses mix a question and a request ("when
does the release go out, and book a sync with bob@example.com on Friday at 10") is a request too:
the planner splits it and answers the question part. The clause grammar is shared with the router
(:mod:`tools.intent`).
"""

from __future__ import annotations

import re

from ..intent import MAKE_VERB, asks_how, clauses, names_party, names_when

__all__ = ["meeting_intent", "is_meeting_request", "is_find_time"]

_ACTION_OBJECT = re.compile(
    r"\b(?:meeting|call|sync|review|retro(?:spective)?|1[:-]1|one[- ]on[- ]one|standup|stand-up|event|"
    r"invite|session|chat|catch[- ]?up|demo|interview|huddle|workshop|hour|min(?:ute)?s?|calendar|"
    r"planning|all[- ]hands|offsite|kick[- ]?off|town[- ]?hall|check[- ]?in|1on1)\b", re.I)
def _request_clause(text: str) -> bool:
    if not MAKE_VERB.search(text) or asks_how(text):
        return False
    return bool(_ACTION_OBJECT.search(text)) and (names_party(text) or names_when(text))


#: "find 30 minutes with ...", "find a time with ...", "find us an hour with ...": a slot to pick, not a time given.
_FIND_TIME = re.compile(
    r"\b(?:find|look\s+for|get)\s+(?:me\s+|us\s+)?(?:a\s+|an\s+|some\s+)?(?:free\s+)?"
    r"(?:\d+\s*-?\s*(?:min(?:ute)?s?|h(?:ours?)?)|half\s+an\s+hour|hour|time|slot)\b", re.I)


def is_find_time(text: str) -> bool:
    """True when ``text`` asks the bot to find a free time with someone ("find 30 minutes with @alice this week")."""
    return bool(_FIND_TIME.search(text)) and names_party(text) and not asks_how(text)


def is_meeting_request(text: str) -> bool:
    """True when ``text`` (or one clause of it) asks to put a meeting in a calendar."""
    if _request_clause(text) or is_find_time(text):
        return True
    parts = clauses(text)
    return len(parts) > 1 and any(_request_clause(p) for p in parts)


def meeting_intent(text: str) -> float:
    """``calendar.create``'s intent score: 0.7 for a meeting request, else 0.0 (a reminder's "remind me
    to book ..." scores higher with its own tool)."""
    return 0.7 if is_meeting_request(text) else 0.0
