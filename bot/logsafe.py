"""Keep tokens and secrets out of logs.

slack_sdk already redacts the ``Authorization`` header; this filter is the second line: it masks the
configured secrets and anything shaped like a Slack token (``xoxb-``, ``xoxp-``, ``xapp-``...) in every
record a handler emits, and the legacy ``token=`` field of slash-command bodies.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

__all__ = ["RedactingFilter", "install_redaction", "redact"]

_TOKEN = re.compile(r"\b(xox[abposr]|xapp|xoxe(?:\.xox[bp])?)-[A-Za-z0-9-]{4,}")
_FORM_TOKEN = re.compile(r"(\btoken=)[^&\s\"']+")
MASK = "[redacted]"


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with ``secrets`` and token-shaped strings replaced by ``[redacted]``."""
    for s in secrets:
        if s and len(s) >= 6:
            text = text.replace(s, MASK)
    text = _TOKEN.sub(MASK, text)
    return _FORM_TOKEN.sub(lambda m: m.group(1) + MASK, text)


class RedactingFilter(logging.Filter):
    """A handler filter that rewrites each record's message (and exception text) with :func:`redact`."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self.secrets = tuple(s for s in secrets if s)

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact in place; always keeps the record."""
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a broken format string is logging's problem, not ours
            return True
        clean = redact(message, self.secrets)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text, self.secrets)
        return True


def install_redaction(secrets: Iterable[str], logger: logging.Logger | None = None) -> RedactingFilter:
    """Add a :class:`RedactingFilter` to every handler of ``logger`` (the root logger by default)."""
    flt = RedactingFilter(secrets)
    for handler in (logger or logging.getLogger()).handlers:
        handler.addFilter(flt)
    return flt
