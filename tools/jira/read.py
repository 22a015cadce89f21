"""Reading a ticket request into a draft: project, issue type, summary (rules, no phrase list).

- The project is a Jira key the request names after *in*, *to*, *into*, *under* or *project*
  (``in OPS``, ``to project IT``); otherwise the configured default.
- The issue type is a type word the request uses as the noun (``bug`` -> ``Bug``, ``story`` ->
  ``Story``, ``incident`` -> ``Incident``), or one named with ``type``/``issue type``; a ticket or an
  issue is the configured default type.
- The summary is what follows a colon or a dash (``create a ticket: laptop screen broken``), else
  what follows the ticket noun after *to*, *for*, *about*, *that*, *saying* (``open a ticket to
  replace the badge reader``). A request that only points at the thread ("open a ticket for this")
  takes the requester's own latest earlier message in the thread; with none, the tool asks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .args import MAX_SUMMARY
from .intent import _NOUN, _VERB

__all__ = ["TicketDraft", "read_ticket"]

_KEY = r"[A-Z][A-Z0-9_]{1,19}"
_PROJECT = re.compile(rf"\b(?:in|to|into|under|for)\s+(?:the\s+)?(?:project\s+)?({_KEY})\b(?:\s+project\b)?"
                      rf"|\bproject\s+({_KEY})\b")
_TYPE_NAMED = re.compile(r"\b(?:issue\s+)?type\s*[:=]?\s*[\"'\u201c]?([A-Za-z][\w-]*)", re.I)
_TYPE_WORDS = {"bug": "Bug", "bugs": "Bug", "story": "Story", "stories": "Story", "incident": "Incident",
               "incidents": "Incident", "task": "Task", "epic": "Epic"}
_HEAD = re.compile(rf"^.*?\b{_VERB}\b(?P<mid>(?:\s+[\w'-]+){{0,3}}?)\s+(?P<noun>{_NOUN}(?:\s+{_NOUN})*)\b", re.I | re.S)
_LEAD = re.compile(r"^\s*(?:(?:please|pls|plz|can you|could you|would you|hey|hi|ok|okay)\b[\s,]*)+", re.I)
_AFTER = re.compile(r"^\s*(?:(?:(?:in|to|into|under)\s+(?:the\s+)?(?:project\s+)?[A-Z][A-Z0-9_]+\b(?:\s+project\b)?"
                    r"|(?:with\s+)?(?:issue\s+)?type\s*[:=]?\s*[\"'\u201c]?[\w-]+[\"'\u201d]?)\s*)*"
                    r"(?:[:\u2013\u2014-]\s*|(?:to|for|about|that says|saying|that|because|re|regarding|on)\s+)"
                    r"(?P<rest>.+)$", re.I | re.S)
#: What "for this" / "about it" mean: the thread, not a summary.
_DEICTIC = re.compile(r"^(?:this|that|it|this one|this thread|this issue|this problem|the above|above|me|us)"
                      r"(?:\s+(?:please|pls|thanks|thank you))?[.!?]*$", re.I)


@dataclass(slots=True)
class TicketDraft:
    """What :func:`read_ticket` found.

    Attributes:
        project: the project key named in the request ("" when none).
        issue_type: the issue type the request asks for ("" for the default).
        summary: the ticket's title ("" when the request gives none).
        from_history: True when the summary was taken from the requester's earlier message.
        notes: what was read, for the trace.
    """

    project: str = ""
    issue_type: str = ""
    summary: str = ""
    from_history: bool = False
    notes: dict[str, str] = field(default_factory=dict)


def _clean(text: str) -> str:
    text = " ".join(text.split()).strip(" \"'\u201c\u201d`")
    text = re.sub(r"\s*(?:please|pls|plz|thanks|thank you)[.!]*$", "", text, flags=re.I).rstrip(" .!,;")
    if len(text) > MAX_SUMMARY:
        text = text[:MAX_SUMMARY - 1].rstrip() + "\u2026"
    return text[:1].upper() + text[1:] if text else ""


def read_ticket(text: str, history: tuple[str, ...] = ()) -> TicketDraft:
    """Read ``text`` (a ticket request) and, for "this", the requester's own ``history`` (oldest first)."""
    draft = TicketDraft()
    text = " ".join(text.split())
    head = _HEAD.search(text)
    before, after = (text[:head.end()], text[head.end():]) if head else (text, "")
    m = _PROJECT.search(before + re.split(r"[:\u2013\u2014]|\s-\s", after, maxsplit=1)[0])
    if m:
        draft.project = m.group(1) or m.group(2)
    named = _TYPE_NAMED.search(before + re.split(r"[:\u2013\u2014]", after, maxsplit=1)[0])
    if named and named.group(1).lower() not in {"of", "a", "an", "the"}:
        draft.issue_type = named.group(1).strip()
    elif head:
        words = (head.group("mid") + " " + head.group("noun")).lower().split()
        draft.issue_type = next((_TYPE_WORDS[w] for w in reversed(words) if w in _TYPE_WORDS), "")
    summary = ""
    if head:
        rest = _AFTER.match(after)
        if rest:
            summary = rest.group("rest")
    elif ":" in text:
        summary = text.split(":", 1)[1]
    summary = _clean(summary)
    if not summary and head:  # "the VPN is down, can you open a ticket": the words before the request
        lead = re.split(rf"[,;.]?\s*(?:and\s+)?(?:(?:please|pls|can you|could you|would you|so)\s+)*\b{_VERB}\b",
                        text, maxsplit=1, flags=re.I)[0]
        if len(lead.split()) >= 2:
            summary = _clean(_LEAD.sub("", lead))
    if not summary or _DEICTIC.match(summary):
        draft.notes["points_at"] = summary or "(nothing)"
        summary = ""
        earlier = [h for h in history if h.strip() and not _HEAD.search(h)]
        if earlier:
            summary, draft.from_history = _clean(_LEAD.sub("", earlier[-1])), True
    draft.summary = summary
    return draft
