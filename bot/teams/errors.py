"""The HTTP status of a failed Bot Connector call, for the Teams bot's replies and the outbox's sender alike."""

from __future__ import annotations

__all__ = ["status_of"]


def status_of(exc: BaseException) -> int | None:
    """The HTTP status a Bot Framework client error carries (``exc.response.status_code`` or ``.status``, or the
    exception's own), or ``None`` when the call never got an answer (no connection, a time-out)."""
    for obj in (getattr(exc, "response", None), exc):
        for attr in ("status_code", "status"):
            v = getattr(obj, attr, None)
            if isinstance(v, int):
                return v
    return None
