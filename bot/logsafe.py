"""Keep tokens, secrets and users' words out of logs.

slack_sdk already redacts the ``Authorization`` header; this filter is the second line: it masks the
configured secrets and anything shaped like a Slack token (``xoxb-``, ``xoxp-``, ``xapp-``...) in every
record a handler emits (its message, its exception text and every string ``extra`` field), the legacy
``token=`` field of slash-command bodies, and the ``input_value=...`` that pydantic's validation errors
quote (the value that failed, e.g. a user's question or a payload field).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

__all__ = ["RedactingFilter", "install_redaction", "redact"]

_TOKEN = re.compile(r"\b(xox[abposr]|xapp|xoxe(?:\.xox[bp])?)-[A-Za-z0-9-]{4,}")
_FORM_TOKEN = re.compile(r"(\btoken=)[^&\s\"']+")
# pydantic: "[type=string_type, input_value=..., input_type=str]"; the value may hold commas and brackets.
_INPUT_VALUE = re.compile(r"(\binput_value=).*?(?=, input_type=|\]\s*$|\]\n|$)", re.S | re.M)
# the attributes every LogRecord has; the rest are a call's ``extra`` fields (the JSON formatter writes them)
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}
MASK = "[redacted]"


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with ``secrets`` and token-shaped strings replaced by ``[redacted]``."""
    for s in secrets:
        if s and len(s) >= 6:
            text = text.replace(s, MASK)
    text = _TOKEN.sub(MASK, text)
    text = _INPUT_VALUE.sub(lambda m: m.group(1) + MASK, text)
    return _FORM_TOKEN.sub(lambda m: m.group(1) + MASK, text)


class RedactingFilter(logging.Filter):
    """A handler filter that rewrites each record's message, exception text and string ``extra`` fields
    with :func:`redact`."""

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
        for name, value in list(vars(record).items()):
            if name not in _STANDARD and isinstance(value, str):
                setattr(record, name, redact(value, self.secrets))
        return True


def install_redaction(secrets: Iterable[str], logger: logging.Logger | None = None) -> RedactingFilter:
    """Add a :class:`RedactingFilter` to every handler of ``logger`` (the root logger by default)."""
    flt = RedactingFilter(secrets)
    for handler in (logger or logging.getLogger()).handlers:
        handler.addFilter(flt)
    return flt
