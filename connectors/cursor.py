"""What an incremental source's ``sync`` hands back to the sync engine: the cursor to save, and the retry key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["RETRY_DOCS", "CursorUpdate"]

#: The cursor key the engine adds: doc ids of pages the indexer could not convert or chunk last run.
#: A connector's ``sync`` fetches these pages again (like its own ``retry`` list).
RETRY_DOCS = "retry_docs"


@dataclass(frozen=True, slots=True)
class CursorUpdate:
    """The last item a connector's ``sync`` yields: the cursor to save once the indexes committed.

    Attributes:
        cursor: JSON-ready state for the next run (watermark, de-duplication set, pages to retry).
        listed: how many live pages the completed listing held (for the summary).
    """

    cursor: dict[str, Any]
    listed: int = 0
