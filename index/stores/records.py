"""Chunk to flat record and back, the payload both stores keep."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from connectors.access import PUBLIC_TOKEN, Access
from connectors.models import Chunk

__all__ = ["StoredChunk", "chunk_to_record", "chunk_from_record", "SECTION_SEP"]

SECTION_SEP = "\x1f"


@dataclass(frozen=True, slots=True)
class StoredChunk:
    """A search hit from one store: the chunk and that store's raw score (higher is better)."""

    chunk: Chunk
    score: float


def chunk_to_record(c: Chunk) -> dict:
    """Flatten a chunk into JSON-safe fields (section path joined with ``\\x1f``)."""
    return {
        "chunk_id": c.chunk_id, "doc_key": c.key, "source": c.source, "doc_id": c.doc_id,
        "title": c.title, "section_path": SECTION_SEP.join(c.section_path), "url": c.url,
        "text": c.text, "ordinal": c.ordinal,
        "updated_at": c.updated_at.isoformat() if c.updated_at else "",
        "acl": SECTION_SEP.join(c.access.tokens()),  # bridge until the stores index access (issue 11)
    }


def chunk_from_record(r: dict) -> Chunk:
    """Inverse of :func:`chunk_to_record`."""
    sp = r.get("section_path") or ""
    acl = r.get("acl") or ""
    ts = r.get("updated_at") or ""
    return Chunk(
        chunk_id=r["chunk_id"], source=r["source"], doc_id=r["doc_id"], title=r.get("title", ""),
        section_path=tuple(sp.split(SECTION_SEP)) if sp else (), url=r.get("url", ""),
        text=r.get("text", ""), ordinal=int(r.get("ordinal", 0)),
        updated_at=datetime.fromisoformat(ts) if ts else None,
        access=_access(tuple(acl.split(SECTION_SEP)) if acl else ()),
    )


def _access(tokens: tuple[str, ...]) -> Access:
    """The access stored as tokens (bridge: ``()`` is readable by nobody)."""
    if not tokens:
        return Access.nobody("no access stored")
    if PUBLIC_TOKEN in tokens:
        return Access.everyone()
    return Access.only(tokens)
