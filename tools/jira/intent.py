"""Whether a message asks to file a ticket (``ticket.create``'s ``intent``).

General rules, no phrase list: a clause is a ticket request when an imperative filing verb (open,
file, create, raise, log, submit, report, put in) is followed within a few words by a ticket noun
(ticket, issue, bug, Jira, story). A clause that asks how to do it ("how do I open a ticket?",
"where can I report a bug?", "can I file an issue for VPN?") is a knowledge question, not a request.
"""

from __future__ import annotations

import re

__all__ = ["is_ticket_request", "ticket_intent", "INTENT"]

#: The score of a ticket request: above a meeting's 0.7 ("create a ticket for tomorrow's meeting" is a
#: ticket), below a reminder's 0.9 ("remind me to file a bug" is a reminder).
INTENT = 0.8

_VERB = r"(?:open|file|create|raise|log|submit|report|put\s+in|make)"
_NOUN = r"(?:tickets?|issues?|bugs?|jira|stor(?:y|ies)|incidents?)"
_REQUEST = re.compile(rf"\b{_VERB}\b(?:\s+[\w'-]+){{0,3}}?\s+{_NOUN}\b", re.I)
_HOWTO = re.compile(r"^\s*(?:how|where|who|what|whats|what's|which|why|when|whom|do i|do we|does|am i|is it|is there|"
                    r"are we|are there|should i|should we|may i|can i|could i|can we|could we|is|are|did|was)\b", re.I)
_POLITE = re.compile(r"^\s*(?:(?:hey|hi|ok|okay|please|pls|plz|then|also|and)\b[\s,]*)+", re.I)
_CLAUSES = re.compile(r"(?<=[?!;.])\s+|\s*,\s*(?:and\s+)?|\s+and\s+(?=(?:please\s+)?" + _VERB + r"\b)", re.I)
_MAKE_SURE = re.compile(r"\bmake\s+(?:sure|certain)\b", re.I)


def _request_clause(clause: str) -> bool:
    clause = _POLITE.sub("", clause)
    if _HOWTO.match(clause) or _MAKE_SURE.search(clause):
        return False
    return bool(_REQUEST.search(clause))


def is_ticket_request(text: str) -> bool:
    """True when ``text`` (or one clause of it) asks to file a ticket."""
    head = text.split(":", 1)[0]  # "create a ticket: how do I reset the VPN?" - the ticket's text is no question
    if _request_clause(head):
        return True
    return any(_request_clause(c) for c in _CLAUSES.split(head) if c and c.strip())


def ticket_intent(text: str) -> float:
    """``ticket.create``'s intent score: :data:`INTENT` for a ticket request, else 0.0."""
    return INTENT if is_ticket_request(text) else 0.0
