"""Compliance checks on a draft answer: the deterministic pass is :mod:`screening`'s scanner.

:func:`scan` finds credentials (``detect-secrets`` plugins plus prose shapes: AWS secret access
keys, "the password is ...", connection strings, JWTs), personal data (Luhn-checked card numbers,
US social security numbers, UK National Insurance numbers) and instructions
addressed to an assistant. It is the same scanner the agent's exit screen and the indexer use, so
there is one definition of what must not leave. The LLM planner adds a model check for unsafe
advice and asks for a fix with the reasons, at most twice, else a safe reply. Work e-mail
addresses, channel names and phone numbers are not flagged: handbooks are full of them and they are
how employees reach a team.
"""

from __future__ import annotations

from collections.abc import Sequence

import screening
from screening import Finding

__all__ = ["Finding", "scan", "redact", "reasons"]


def scan(text: str) -> list[Finding]:
    """Secrets, personal data and injected instructions in ``text``, sorted by position."""
    return screening.scan(text)


def reasons(findings: list[Finding]) -> list[str]:
    """One human-readable reason per kind found, e.g. ``"the draft contains a password"`` (never the value)."""
    return [f"the draft contains {kind}" for kind in dict.fromkeys(f.kind for f in findings)]


def redact(text: str, findings: Sequence[Finding]) -> str:
    """``text`` with every finding replaced by ``[left out: <kind>]``."""
    return screening.redact(text, findings)
