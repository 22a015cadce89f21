"""Identifiers in a question: codes, commands, channels, ticket ids, versions, acronyms.

A question that names an exact term ("how do I fix error E42?", "what's ``/genie``?", "what does PTEP
mean?", "status of ABC-123") is answered by the passage that contains that term, which keyword search
finds and a small dense model does not know. :func:`identifiers` finds them; :func:`contains` tells
whether a passage holds one verbatim (case-insensitive, not inside a longer token, so ``E42`` is not
found in ``E421``).

*Code-like* identifiers (:func:`is_code`: with a digit, a ``/``, ``#``, ``@`` or ``--`` prefix, or in
backticks) are specific enough that the one page holding them answers for them; an all-capitals
acronym (``PTEP``, ``HSA``) is an exact term too, but a page that mentions it may still not answer.
"""

from __future__ import annotations

import re

__all__ = ["identifiers", "contains", "is_code"]

_BACKTICK = re.compile(r"`([^`\n]{2,60})`")
_PATTERNS = [
    re.compile(r"(?<![\w/.])/[a-z][\w-]{1,40}(?![\w/.])", re.I),                  # /genie (not a/b paths)
    re.compile(r"(?<![\w#])#[a-z][\w-]{1,60}", re.I),                              # #help
    re.compile(r"(?<![\w@])@[a-z][\w-]{1,40}", re.I),                              # @dependabot
    re.compile(r"(?<![\w-])--?[a-z][\w-]{1,40}", re.I),                            # --print-var
    re.compile(r"\b[A-Za-z]{1,10}-\d{1,8}\b"),                                     # ABC-123
    re.compile(r"\b[A-Za-z]{1,6}\d+(?:[.-]\w+)*\b"),                               # E42, v1.2.3, S3
    re.compile(r"\b\d+(?:\.\d+){2,}\b"),                                           # 4.12.0
    # line 1241: not a year, an amount or a part of a longer number ("1-844-303-6515"), as :func:`contains` reads it
    re.compile(r"(?<![\w$€£¥₹.,/@-])(?!(?:19|20)\d\d\b)\d{3,7}(?![\w%-]|[.,]\d)"),
    re.compile(r"\b[A-Z][A-Z0-9]{1,9}s?\b"),                                       # PTEP, EAP, SOC2
    re.compile(r"\b[a-z]+(?:-[a-z0-9]+){2,}\b"),                                   # confirm-no-backport
]
# All-capitals words that are chat, not terms.
_NOT_TERMS = frozenset({"I", "OK", "OKAY", "FYI", "ASAP", "LOL", "PLS", "PLZ", "TBH", "IMO", "IMHO", "BTW", "AFAIK",
                        "AM", "PM", "THE", "AND", "OR", "IS", "IT", "MY", "ME", "WE", "US", "IF", "TL", "DR", "TLDR",
                        "Q", "QQ", "HI", "HEY", "THX", "TY", "NB", "PS"})


def identifiers(question: str) -> list[str]:
    """The exact terms of ``question``, in order of appearance, without duplicates.

    Args:
        question: the user's text.

    Returns:
        Terms as written (``["E42"]``, ``["/genie whoisoncall"]``, ``["PTEP"]``); ``[]`` for none. A
        question written entirely in capitals has no acronyms.
    """
    found: list[tuple[int, str]] = []
    for m in _BACKTICK.finditer(question):
        found.append((m.start(), m.group(1).strip()))
    shouting = sum(c.isupper() for c in question) > 0.6 * max(sum(c.isalpha() for c in question), 1)
    for i, pat in enumerate(_PATTERNS):
        if shouting and i == len(_PATTERNS) - 2:
            continue
        for m in pat.finditer(question):
            term = m.group(0).strip()
            if term.upper() in _NOT_TERMS or term.rstrip("s") in _NOT_TERMS:
                continue
            if any(a <= m.start() < a + len(t) + 2 for a, t in found):
                continue  # inside a longer identifier already found
            found.append((m.start(), term))
    out: list[str] = []
    for _, term in sorted(found):
        if term.lower() not in (t.lower() for t in out):
            out.append(term)
    return out


def is_code(term: str) -> bool:
    """True for a code-like identifier: a digit, a ``/``, ``#``, ``@`` or ``-`` prefix, or several hyphens."""
    return bool(re.search(r"\d", term)) or term[:1] in "/#@-" or term.count("-") >= 2 or " " in term


def contains(text: str, term: str) -> bool:
    """True when ``text`` holds ``term`` verbatim (case-insensitive) and not inside a longer token (a number also
    after a ``#``)."""
    if not term:
        return False
    # A number is written with a "#" as often as without ("line 1241" for "#1241"); a "#" before a word is a channel.
    before = r"(?<![\w/@.,-])" if term[:1].isdigit() else r"(?<![\w/#@-])"
    pattern = before + re.escape(term) + r"(?![\w-])"
    return re.search(pattern, text, re.I) is not None
