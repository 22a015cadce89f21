"""Citation validation: every marker maps to evidence shown this turn, every quote is verbatim.

A reply leaves the agent only after :func:`validate_citations`: a citation whose chunk was not
among this turn's evidence, or whose quote is not an exact substring of that chunk's text, is
rejected, and so is a ``[n]`` marker in the text with no valid citation behind it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tools.knowledge_search import Evidence

from .models import Citation

__all__ = ["validate_citations", "CitationCheck", "MARKER"]

MARKER = re.compile(r"\[(\d{1,3})\]")


@dataclass(slots=True)
class CitationCheck:
    """The outcome: the valid citations, the rejected ones with reasons, and dangling markers."""

    valid: list[Citation] = field(default_factory=list)
    rejected: list[tuple[Citation, str]] = field(default_factory=list)
    dangling_markers: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing was rejected and no marker dangles."""
        return not self.rejected and not self.dangling_markers

    def as_dict(self) -> dict[str, Any]:
        """Trace-friendly dict."""
        return {"valid": len(self.valid), "rejected": [{"n": c.n, "reason": r} for c, r in self.rejected],
                "dangling_markers": self.dangling_markers}


def validate_citations(text: str, citations: list[Citation], evidence: list[Evidence]) -> CitationCheck:
    """Check ``citations`` and the markers in ``text`` against this turn's ``evidence``."""
    shown = {e.chunk.chunk_id: e.chunk for e in evidence}
    check = CitationCheck()
    for c in citations:
        chunk = shown.get(c.chunk_id)
        if chunk is None:
            check.rejected.append((c, "cites a passage that was not retrieved in this turn"))
        elif not c.quote.strip() or c.quote not in chunk.text:
            check.rejected.append((c, "quote is not a verbatim span of the cited passage"))
        elif chunk.doc_id != c.doc_id:
            check.rejected.append((c, "doc_id does not match the cited passage"))
        else:
            check.valid.append(c)
    valid_numbers = {c.n for c in check.valid}
    check.dangling_markers = sorted({int(m) for m in MARKER.findall(text)} - valid_numbers)
    return check
