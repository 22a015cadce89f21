"""Rule-based routing of a turn: knowledge, follow-up, action, chit-chat (or empty).

The rules lean towards retrieval, as the design asks: only greetings, thanks and questions about
the bot itself skip the knowledge base; a request one of the registered action tools recognises
(:meth:`tools.actions.ActionTool.intent`, passed in as ``is_request``) goes to the action route (a
question about how to do it, "how do I book a meeting room on friday?", is not one: the tools say
so); a message that leans on an earlier one (pronouns, "and ...", "what about ...") in a thread
with history is a follow-up, rewritten into a standalone question before retrieval; everything
else retrieves.

:func:`split_request` separates a question from a request in one message ("when does the patch
release go out, and book a release sync with bob@example.com on Friday at 10"), so the planner
can answer the one and propose the other; :func:`is_action_answer` recognises a short reply that
completes an earlier request in the thread ("at 3pm"). The clause grammar is shared with the action
tools' intents (:mod:`tools.intent`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from tools.intent import asks_how, clauses, names_party, names_when

from .models import Route

__all__ = ["RuleRouter", "RouteDecision", "is_action_request", "split_request", "is_action_answer"]

#: ``is_request(clause) -> bool``: whether a registered action tool recognises the clause.
IsRequest = Callable[[str], bool]

_CHITCHAT = re.compile(
    r"^\s*(?:hi|hello|hey|yo|hiya|good (?:morning|afternoon|evening)|thanks?(?: you)?|thx|ty|cheers|"
    r"ok(?:ay)?|cool|great|nice|bye|goodbye|who are you|what are you|what can you do|help)\b[\s!.?,]*"
    r"(?:there|bot|again|so much|a lot)?[\s!.?]*$",
    re.I,
)
_FOLLOWUP_LEAD = re.compile(r"^\s*(?:and|also|but|so|what about|how about|same for|what if|then|or)\b", re.I)
_ANAPHORA = re.compile(r"\b(?:that|it|this|those|these|they|them|their|there|its|same|too|also|either|one)\b", re.I)
_QUESTION_LEAD = re.compile(r"^\s*(?:what|whats|what's|how|when|where|why|who|is|are|do|does|can|should|will)\b", re.I)
_DURATION_HINT = re.compile(r"\b\d+(?:[.,]\d+)?\s*(?:min(?:ute)?s?|h(?:ou)?rs?|h)\b|\ban hour\b", re.I)


def _never(text: str) -> bool:
    return False


def _request_clause(text: str, is_request: IsRequest) -> bool:
    return not asks_how(text) and is_request(text)


def is_action_request(text: str, is_request: IsRequest = _never) -> bool:
    """True when ``text`` (or one clause of it) is a request ``is_request`` recognises.

    A clause that asks how to do it ("how do I book a meeting room on friday?") is not a request.
    """
    if _request_clause(text, is_request):
        return True
    parts = clauses(text)
    return len(parts) > 1 and any(_request_clause(p, is_request) for p in parts)


def split_request(text: str, is_request: IsRequest = _never) -> tuple[str, str]:
    """``(question, request)``: the message's question clauses and its request clauses.

    ``question`` is "" when the message is only a request (or its other clauses are not questions);
    ``request`` is "" when no clause is a request. Clauses split at ``?``/``!``/``;`` and before an
    action verb or a question word after a comma or "and"; a clause is a question when it starts
    with a question word or ends with "?" and is not itself a request.
    """
    parts = clauses(text)
    if len(parts) <= 1:
        return ("", text) if is_action_request(text, is_request) else (text, "")
    questions = [p for p in parts if not _request_clause(p, is_request) and (
        _QUESTION_LEAD.match(p) or p.endswith("?") or re.match(r"(?:tell me|let me know)\b", p, re.I))]
    rest = [p for p in parts if p not in questions]
    request = " ".join(rest)
    if not any(_request_clause(p, is_request) for p in rest):
        return (text, "") if not is_action_request(text, is_request) else ("", text)
    question = " ".join(questions)
    if len(re.findall(r"[A-Za-z']+", question)) < 3:
        return "", text
    return question, request


def is_action_answer(text: str) -> bool:
    """True when ``text`` could complete an earlier request: short, and it gives a day or a time, an
    e-mail or ``@name``, or a length ("at 3pm", "bob@example.com", "make it 45 min")."""
    words = re.findall(r"[\w@.'-]+", text)
    if not words or len(words) > 14 or asks_how(text) and "?" in text:
        return False
    return names_when(text) or names_party(text) or bool(_DURATION_HINT.search(text))


@dataclass(frozen=True, slots=True)
class RouteDecision:
    """The route and why."""

    route: Route
    reason: str


class RuleRouter:
    """Routes a turn by its text and whether the thread has history.

    Args:
        is_request: whether a registered action tool recognises a clause as its request (the
            planner asks :func:`tools.actions.recognise`); none does by default.
    """

    def __init__(self, is_request: IsRequest = _never) -> None:
        self.is_request = is_request

    def route(self, text: str, history: tuple[str, ...] = ()) -> RouteDecision:
        """Decide the route for ``text``."""
        if not text.strip():
            return RouteDecision("empty", "no text")
        if _CHITCHAT.match(text):
            return RouteDecision("chitchat", "greeting, thanks or a question about the bot")
        if is_action_request(text, self.is_request):
            return RouteDecision("action", "a request an action tool recognises")
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
