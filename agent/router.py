"""Rule-based routing of a turn: knowledge, follow-up, action, chit-chat (or empty).

The rules lean towards retrieval, as the design asks: only greetings, thanks and questions about
the bot itself skip the knowledge base; a meeting request goes to the action route; a message
that leans on an earlier one (pronouns, "and ...", "what about ...") in a thread with history is
a follow-up, rewritten into a standalone question before retrieval; everything else retrieves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .models import Route

__all__ = ["RuleRouter", "RouteDecision", "is_action_request"]

_CHITCHAT = re.compile(
    r"^\s*(?:hi|hello|hey|yo|hiya|good (?:morning|afternoon|evening)|thanks?(?: you)?|thx|ty|cheers|"
    r"ok(?:ay)?|cool|great|nice|bye|goodbye|who are you|what are you|what can you do|help)\b[\s!.?,]*"
    r"(?:there|bot|again|so much|a lot)?[\s!.?]*$",
    re.I,
)
_ACTION_VERB = re.compile(
    r"\b(?:book|schedule|set ?up|create|arrange|organi[sz]e|put|add|send (?:an? )?invite|invite)\b", re.I)
_ACTION_OBJECT = re.compile(
    r"\b(?:meeting|call|sync|review|retro(?:spective)?|1[:-]1|one[- ]on[- ]one|standup|stand-up|event|"
    r"invite|session|chat|catch[- ]?up|demo|interview|huddle|workshop|hour|min(?:ute)?s?|calendar)\b", re.I)
_WHEN = re.compile(
    r"\b(?:today|tomorrow|tonight|next|this|on (?:mon|tue|wed|thu|fri|sat|sun)|"
    r"(?:mon|tues?|wed(?:nes)?|thu(?:rs)?|fri|satur|sun)(?:day)?|\d{1,2}(?::\d{2})?\s*(?:am|pm)|"
    r"at \d{1,2}|noon|morning|afternoon)\b", re.I)
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+")
_MENTION = re.compile(r"<@[UW][A-Z0-9]+>")
_FOLLOWUP_LEAD = re.compile(r"^\s*(?:and|also|but|so|what about|how about|same for|what if|then|or)\b", re.I)
_ANAPHORA = re.compile(r"\b(?:that|it|this|those|these|they|them|their|there|its|same|too|also|either|one)\b", re.I)
_QUESTION_LEAD = re.compile(r"^\s*(?:what|whats|what's|how|when|where|why|who|is|are|do|does|can|should|will)\b", re.I)


def is_action_request(text: str) -> bool:
    """True when ``text`` asks the bot to put a meeting in a calendar."""
    verb = _ACTION_VERB.search(text)
    if not verb:
        return False
    has_object = bool(_ACTION_OBJECT.search(text))
    has_party = bool(_EMAIL.search(text) or _MENTION.search(text))
    has_when = bool(_WHEN.search(text))
    return has_object and (has_party or has_when)


@dataclass(frozen=True, slots=True)
class RouteDecision:
    """The route and why."""

    route: Route
    reason: str


class RuleRouter:
    """Routes a turn by its text and whether the thread has history."""

    def route(self, text: str, history: tuple[str, ...] = ()) -> RouteDecision:
        """Decide the route for ``text``."""
        if not text.strip():
            return RouteDecision("empty", "no text")
        if _CHITCHAT.match(text):
            return RouteDecision("chitchat", "greeting, thanks or a question about the bot")
        if is_action_request(text):
            return RouteDecision("action", "a request to create a calendar event")
        if history and self.is_followup(text):
            return RouteDecision("followup", "leans on an earlier message of the thread")
        return RouteDecision("knowledge", "default: search the knowledge base")

    @staticmethod
    def is_followup(text: str) -> bool:
        """True when ``text`` reads as a continuation (leading "and", pronouns, very short)."""
        words = re.findall(r"[A-Za-z']+", text)
        if _FOLLOWUP_LEAD.match(text):
            return True
        if _ANAPHORA.search(text) and len(words) <= 12:
            return True
        return len(words) <= 3 and not _QUESTION_LEAD.match(text)
