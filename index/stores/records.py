"""Chunk to flat record and back, the payload both stores keep."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core.access import PUBLIC_TOKEN, Access, Viewer
from core.models import Chunk

__all__ = ["StoredChunk", "chunk_to_record", "chunk_from_record", "access_from_record", "viewer_tokens",
           "viewer_sources", "SECTION_SEP", "LEGACY_ACCESS"]

SECTION_SEP = "\x1f"

#: Why a chunk stored before access control existed (no ``access`` field) is readable by nobody.
LEGACY_ACCESS = "indexed before access control; run `chatops index --full`"


@dataclass(frozen=True, slots=True)
class StoredChunk:
    """A search hit from one store: the chunk and that store's raw score (higher is better)."""

    chunk: Chunk
    score: float


def point_id(chunk_id: str) -> str:
    """Qdrant point id for a chunk id: the UUID made of its first 32 hex digits."""
    return str(uuid.UUID(hex=chunk_id[:32].ljust(32, "0")))


def chunk_to_record(c: Chunk) -> dict[str, Any]:
    """Flatten a chunk into JSON-safe fields (section path joined with ``\\x1f``).

    The access is kept as ``access`` (the list of :meth:`core.access.Access.tokens`, the terms
    the stores filter on; empty when unresolved) and ``access_unresolved`` (why it could not be read).
    """
    return {
        "chunk_id": c.chunk_id, "doc_key": c.key, "source": c.source, "doc_id": c.doc_id,
        "title": c.title, "section_path": SECTION_SEP.join(c.section_path), "url": c.url,
        "text": c.text, "ordinal": c.ordinal,
        "updated_at": c.updated_at.isoformat() if c.updated_at else "",
        "access": list(c.access.tokens()), "access_unresolved": c.access.unresolved,
    }


def access_from_record(r: Mapping[str, Any]) -> Access:
    """The :class:`Access` of a record: ``access`` tokens (a list, or a ``\\x1f``-joined string) and
    ``access_unresolved``. A record without an ``access`` field (stored before access control) is
    readable by nobody."""
    if "access" not in r or r.get("access") is None:
        return Access.nobody(LEGACY_ACCESS)
    if r.get("access_unresolved"):
        return Access.nobody(str(r["access_unresolved"]))
    raw = r["access"]
    tokens = [t for t in (raw.split(SECTION_SEP) if isinstance(raw, str) else raw) if t]
    if PUBLIC_TOKEN in tokens:
        return Access.everyone()
    if not tokens:
        return Access.nobody("no reader recorded")
    return Access(principals=frozenset(tokens))


def chunk_from_record(r: Mapping[str, Any]) -> Chunk:
    """Inverse of :func:`chunk_to_record`."""
    sp = r.get("section_path") or ""
    ts = r.get("updated_at") or ""
    return Chunk(
        chunk_id=r["chunk_id"], source=r["source"], doc_id=r["doc_id"], title=r.get("title", ""),
        section_path=tuple(sp.split(SECTION_SEP)) if sp else (), url=r.get("url", ""),
        text=r.get("text", ""), ordinal=int(r.get("ordinal", 0)),
        updated_at=datetime.fromisoformat(ts) if ts else None,
        access=access_from_record(r),
    )


def viewer_tokens(viewer: Viewer, store: str) -> list[str]:
    """The terms ``viewer`` matches (:meth:`Viewer.tokens`), checked: a store search without an access
    context is a programming error, never "everyone".

    Raises:
        ValueError: when ``viewer`` is not a :class:`Viewer` (e.g. ``None``).
    """
    if not isinstance(viewer, Viewer):
        raise ValueError(f"{store} search needs the asker's access context (a core.access.Viewer), "
                         f"got {type(viewer).__name__}")
    return list(viewer.tokens())


def viewer_sources(viewer: Viewer) -> list[str] | None:
    """The sources ``viewer`` is scoped to (:attr:`Viewer.sources`), sorted; None when it searches every
    source. An empty list (a scope that names nothing) must match no chunk: the stores return nothing."""
    return None if viewer.sources is None else sorted(viewer.sources)
