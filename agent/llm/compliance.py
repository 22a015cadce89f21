"""Compliance checks on a draft answer: secrets and credentials, personal data, unsafe advice.

:func:`scan` is a deterministic first pass run on every draft (LLM or extractive): it finds
credential-shaped strings (cloud keys, tokens, private keys, "password: ..." assignments) and
personal data (phone numbers, card and social-security-number shapes). The LLM planner adds a
model check for unsafe advice and asks for a fix with the reasons, at most twice, else a safe
reply. Work e-mail addresses and channel names are not personal data here: handbooks are full
of them and they are how employees reach a team.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Finding", "scan", "redact"]

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("an AWS access key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a private key", re.compile(r"-----BEGIN (?:RSA |EC |OPENSSH |DSA )?PRIVATE KEY-----")),
    ("a Slack token", re.compile(r"\bxox[abprs]-[0-9A-Za-z-]{10,}\b")),
    ("a GitHub token", re.compile(r"\bgh[pousr]_[0-9A-Za-z]{30,}\b")),
    ("an API key", re.compile(r"\b(?:sk|pk|rk)-[0-9A-Za-z_-]{20,}\b")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b")),
    ("a password", re.compile(r"(?i)\b(?:password|passwd|pwd|passcode|secret|api[_ -]?key|token)\s*(?:is|:|=)\s*[`'\"]?"
                              r"(?=[^\s`'\"]*[0-9!@#$%^&*])[^\s`'\"]{6,}")),
    ("a payment card number", re.compile(r"\b(?:\d[ -]?){13,16}\b")),
    ("a US social security number", re.compile(r"\b\d{3}-\d{2}-\d{4}\b")),
    ("a phone number", re.compile(r"(?<![\w$])\+?\d{1,3}[ .-]?\(?\d{3}\)?[ .-]\d{3}[ .-]\d{4}\b")),
]


@dataclass(frozen=True, slots=True)
class Finding:
    """One compliance problem: what it is and where (character range in the text)."""

    kind: str
    start: int
    end: int

    def reason(self) -> str:
        """Human-readable reason, e.g. for a fix prompt."""
        return f"the draft contains {self.kind}"


def scan(text: str) -> list[Finding]:
    """Find secrets and personal data in ``text``."""
    found: list[Finding] = []
    for kind, pat in _PATTERNS:
        for m in pat.finditer(text):
            found.append(Finding(kind, m.start(), m.end()))
    return sorted(found, key=lambda f: f.start)


def redact(text: str, findings: list[Finding]) -> str:
    """``text`` with every finding replaced by ``[redacted: kind]``."""
    out, pos = [], 0
    for f in sorted(findings, key=lambda f: f.start):
        if f.start < pos:
            continue
        out.append(text[pos:f.start])
        out.append(f"[redacted: {f.kind}]")
        pos = f.end
    out.append(text[pos:])
    return "".join(out)
