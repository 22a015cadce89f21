"""One flagged range of text."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Finding", "Category"]

#: ``secret``: a credential; ``personal``: personal data; ``injection``: text addressed to an assistant.
Category = Literal["secret", "personal", "injection"]


@dataclass(frozen=True, slots=True)
class Finding:
    """A flagged half-open character range ``[start, end)`` of the scanned text.

    Attributes:
        kind: what it is, for people and traces, e.g. ``"an AWS access key"`` (never the value itself).
        category: ``secret``, ``personal`` or ``injection``.
        start, end: the range in the scanned text.
    """

    kind: str
    category: Category
    start: int
    end: int

    def overlaps(self, start: int, end: int) -> bool:
        """True when this finding shares at least one character with ``[start, end)``."""
        return self.start < end and start < self.end
