"""A video call (``Google Meet``, ``Zoom``, ``Teams``) and a room (``in room 4B``)."""

from __future__ import annotations

import re

__all__ = ["LOCATION", "MEET_VERB", "VIDEO", "only_meet_verb"]

VIDEO = re.compile(r"\b(?:(?:with\s+)?(?:a\s+)?(?:google\s+)?meet(?:\s+link)?|(?:a\s+)?video(?:\s+(?:link|conference))?|"
                    r"zoom(?:\s+link)?|hangouts?|(?:on|in|via|over)\s+(?:ms\s+|microsoft\s+)?teams|"
                    r"(?:ms\s+|microsoft\s+)?teams\s+(?:link|meeting|call|invite|invitation))\b",
                    re.I)


MEET_VERB = re.compile(r"\b(?:meet|meeting)\b", re.I)
LOCATION = re.compile(r"\bin\s+((?:the\s+)?[A-Z][\w-]*(?:\s+[A-Z][\w-]*)*\s+room|room\s+[\w-]+|"
                       r"(?:the\s+)?(?:office|cafeteria|kitchen|lobby))\b")


def only_meet_verb(s: str) -> bool:
    """True when every video match is just the verb "meet" ("can we meet friday")."""
    return all(MEET_VERB.fullmatch(m[0].strip()) for m in VIDEO.finditer(s))
