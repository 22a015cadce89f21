"""Attendees: e-mail addresses, the ``@Name`` mentions nobody resolved, people named without an address."""

from __future__ import annotations

import re

from .title import GENERIC_NOUNS, MEETING_NOUNS

__all__ = ["AT_NAME", "EMAIL", "at_names", "named_people"]

#: A person named with ``@`` whose address the adapter could not resolve (``@Bob``, ``@bob.smith``,
#: ``@here``); never part of an e-mail address, and never ``@ 3pm``.
AT_NAME = re.compile(r"(?<![\w.+%'-])@([A-Za-z][\w'-]*(?:\.[A-Za-z][\w'-]*)*)")
EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+'-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,63}\b")


_PEOPLE_FILLER = {"me", "us", "myself", "and", "or", "also", "both", "too", "as", "well", "plus", ",", "&", "+",
                  "a", "an", "the", "for", "please", "pls", "video", "zoom", "meet", "link", "google", "call"}


def at_names(text: str) -> list[str]:
    """The ``@Name`` mentions left in ``text`` (``["@Bob", "@here"]``), in order, without repeats."""
    return list(dict.fromkeys(f"@{m}" for m in AT_NAME.findall(text)))


def named_people(s: str) -> list[str]:
    """Words after "with"/"w/" that are not addresses: people the message named without an e-mail."""
    out: list[str] = []
    for m in re.finditer(r"(?:\bwith\b|\bw/)\s*([^\u00a6.;!?]*)", s, re.I):
        chunk = re.split(r"\b(?:for|about|on|at|to|re|regarding|in|from|tomorrow|today|called|titled)\b", m[1],
                         maxsplit=1, flags=re.I)[0]
        words = [w for w in re.findall(r"[@\w][\w'.-]*", chunk) if w.lower() not in _PEOPLE_FILLER]
        if not words:
            continue
        if any(w.lower() in MEETING_NOUNS or w.lower() in GENERIC_NOUNS for w in words):
            continue  # "with a design review" is not a person
        out.append(" ".join(words))
    return out
