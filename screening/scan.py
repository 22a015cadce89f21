"""One scan for secrets, personal data and injected instructions, and what to do with findings."""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from .findings import Category, Finding
from .injection import find_injections
from .personal import find_personal
from .secrets import find_secrets
from .unexplained import find_unexplained

__all__ = ["scan", "redact", "mask", "ChunkFlags", "flag_chunks", "unexplained_on", "set_unexplained_default"]

_ALL: tuple[Category, ...] = ("secret", "personal", "injection")
_DETECTORS: dict[Category, Callable[[str], list[Finding]]] = {
    "secret": find_secrets, "personal": find_personal, "injection": find_injections}


#: the fail-closed tier's setting when ``CHATOPS_SCREEN_UNEXPLAINED`` is not in the environment: the app sets it from
#: its settings (so a ``.env`` file counts, :func:`bot.cli.settings.load_settings`), else on
_UNEXPLAINED_DEFAULT = True
_OFF = frozenset({"0", "false", "no", "off"})


def set_unexplained_default(on: bool) -> None:
    """The fail-closed tier's setting when the environment does not name one (``CHATOPS_SCREEN_UNEXPLAINED`` from
    ``.env``, read by the app's settings)."""
    global _UNEXPLAINED_DEFAULT
    _UNEXPLAINED_DEFAULT = on


def unexplained_on() -> bool:
    """Whether :func:`scan` runs the fail-closed tier by default: ``CHATOPS_SCREEN_UNEXPLAINED`` in the environment
    ("0", "false", "no" or "off" turn it off, anything else on), else :func:`set_unexplained_default`'s (on)."""
    value = os.environ.get("CHATOPS_SCREEN_UNEXPLAINED", "").strip()
    return value.lower() not in _OFF if value else _UNEXPLAINED_DEFAULT


def scan(text: str, categories: Collection[Category] = _ALL, *, unexplained: bool | None = None,
         known: Collection[str] = ()) -> list[Finding]:
    """Every finding of ``categories`` in ``text``, sorted by start (longest first on ties).

    Findings may overlap (the same token can match two detectors); :func:`redact` merges them.

    Args:
        unexplained: also report, as secrets, the tokens of a sentence naming a credential that nothing explains as
            language or an innocent shape (:mod:`screening.unexplained`, fail-closed); None (the default):
            :func:`unexplained_on`, on unless ``CHATOPS_SCREEN_UNEXPLAINED=0`` (the setting
            ``chatops_screen_unexplained``; figures in docs/explanation/evaluation.md, round 8).
        known: lower-case tokens the wiki itself uses on several pages, explained as its own vocabulary by that tier.
    """
    if not text:
        return []
    found: set[Finding] = set()
    for cat in categories:
        found.update(_DETECTORS[cat](text))
    if unexplained is None:
        unexplained = unexplained_on()
    if unexplained and "secret" in categories:
        found.update(find_unexplained(text, known))
    return sorted(found, key=lambda f: (f.start, -f.end, f.kind == "a password", f.kind))


def redact(text: str, findings: Iterable[Finding], placeholder: Callable[[Finding], str] | None = None) -> str:
    """``text`` with every finding's range replaced (overlapping ranges merged into one).

    Args:
        placeholder: the replacement for a finding (the first of a merged group); by default
            ``[left out: <kind>]``, never the value.
    """
    label = placeholder or (lambda f: f"[left out: {f.kind}]")
    out: list[str] = []
    pos = 0
    group: Finding | None = None
    end = 0
    for f in sorted(findings, key=lambda f: (f.start, -f.end)):
        if group is not None and f.start < end:
            end = max(end, f.end)
            continue
        if group is not None:
            out.append(label(group))
            pos = end
        out.append(text[pos:f.start])
        group, end = f, f.end
    if group is not None:
        out.append(label(group))
        pos = end
    out.append(text[pos:])
    return "".join(out)


def mask(text: str) -> str:
    """``text`` with every finding of every category replaced by ``[left out: <kind>]``."""
    return redact(text, scan(text))


@dataclass(frozen=True, slots=True)
class ChunkFlags:
    """Counts over one page's chunks.

    Attributes:
        sensitive: chunks holding a secret or personal data.
        injection: chunks holding an instruction addressed to an assistant.
    """

    sensitive: int = 0
    injection: int = 0


def flag_chunks(texts: Iterable[str]) -> ChunkFlags:
    """Count the chunks (``texts``) with secrets or personal data, and those with injected instructions."""
    sensitive = injection = 0
    for text in texts:
        cats = {f.category for f in scan(text)}
        sensitive += bool(cats & {"secret", "personal"})
        injection += "injection" in cats
    return ChunkFlags(sensitive, injection)
