"""What one run of a source did: :class:`SyncSummary`, the typed form of the run summary.

The sync engine makes one per run (:class:`index.sync.SyncResult`), ``chatops index`` one per
source (mode ``index``); the state store keeps it as JSON (:meth:`SyncSummary.as_dict`) and
:func:`index.sync.sources_status` reads it back with :meth:`SyncSummary.from_dict`, which accepts
rows written before a key existed (missing keys take their defaults, unknown keys are ignored).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .indexer import IndexReport

__all__ = ["SyncSummary"]


@dataclass(slots=True)
class SyncSummary:
    """Counts and timings of one run of one source.

    Attributes:
        mode: ``full``, ``incremental`` (a connector's sync), ``listing`` (a folder's complete
            listing), ``index`` (``chatops index``), or ``""`` when unknown (an old row).
        added, updated, deleted: pages written for the first time, re-written, removed.
        unchanged: pages of the source kept as they were.
        skipped: pages that could not be read or chunked this time (kept as they were).
        errors: one message per problem (``"<doc_id>: <reason>"``; for a failed run, the failure last).
        seconds: wall time of the run.
        calls, retries: HTTP requests the source sent (retries included), and of which retries.
        fetched: pages the source handed over.
        listed: live pages a connector's completed listing held (``None``: no listing, or not a connector).
        pages: pages of the source in the index after the run.
        chunks_written, chunks_deleted: chunks written to and deleted from each store.
        embedded: chunks embedded by the model (not from the embedding cache).
        repaired: what reconciling the stores with the manifest fixed first (``""``: nothing).
    """

    mode: str = ""
    added: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: int = 0
    skipped: int = 0
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    calls: int = 0
    retries: int = 0
    fetched: int = 0
    listed: int | None = None
    pages: int = 0
    chunks_written: int = 0
    chunks_deleted: int = 0
    embedded: int = 0
    repaired: str = ""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict with every field (the keys ``chatops sync --json`` and the state store show)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["errors"] = list(self.errors)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> SyncSummary:
        """The summary of a stored dict; missing keys (older rows, a run that failed before it
        started) take the defaults, unknown keys (an old ``chatops index`` row's) are ignored."""
        data = data or {}
        out = cls()
        for f in fields(cls):
            if f.name not in data or data[f.name] is None and f.name != "listed":
                continue
            value = data[f.name]
            try:
                if f.name == "errors":
                    value = [str(e) for e in value] if isinstance(value, (list, tuple)) else []
                elif f.name in {"mode", "repaired"}:
                    value = str(value)
                elif f.name == "seconds":
                    value = float(value)
                elif f.name == "listed":
                    value = int(value) if value is not None else None
                else:
                    value = int(value)
            except (TypeError, ValueError):
                continue  # a value of another shape: the default
            setattr(out, f.name, value)
        return out

    @classmethod
    def from_report(cls, rep: IndexReport, mode: str, pages: int | None = None) -> SyncSummary:
        """The summary of an :class:`~index.indexer.IndexReport` (``chatops index``): its counts as
        they are, every error, ``fetched`` the pages the scan handed over, ``pages`` when given."""
        return cls(mode=mode, added=rep.added, updated=rep.updated, deleted=rep.deleted, unchanged=rep.unchanged,
                   skipped=rep.skipped, errors=list(rep.errors), seconds=rep.seconds,
                   fetched=rep.added + rep.updated + rep.unchanged, pages=pages or 0,
                   chunks_written=rep.chunks_written, chunks_deleted=rep.chunks_deleted, embedded=rep.embedded,
                   repaired=rep.repair.describe())
