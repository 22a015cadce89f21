"""Index jobs: the one re-index/sync routine that the scheduler, ``/kb reindex`` and the CLI share.

Sources come from ``CHATOPS_SOURCES`` (spec strings such as ``folder:./wiki?name=handbook``).
Each run of a source takes the state store's lock ``sync:<name>`` (one run per source at a time,
across processes), records a run summary (added, updated, deleted, unchanged, skipped, errors,
seconds) and, on failure, the error; the indexes keep serving what they had.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from dataclasses import dataclass
from datetime import timedelta

from connectors.errors import SourceSpecError
from connectors.indexer import Indexer
from connectors.sources import parse_source_spec
from state import StateStore

from .wiring import Runtime

__all__ = ["IndexJobs", "JobResult", "parse_sources"]

log = logging.getLogger(__name__)


def parse_sources(value: str) -> list:
    """Parse ``CHATOPS_SOURCES`` (specs separated by commas, semicolons or whitespace)."""
    specs = [s for s in value.replace(";", " ").replace(",", " ").split() if s]
    sources = [parse_source_spec(s) for s in specs]
    names = [s.name for s in sources]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise SourceSpecError(f"several sources are named {', '.join(sorted(dupes))}; give each a unique ?name=")
    return sources


@dataclass(slots=True)
class JobResult:
    """What one source's run did."""

    source: str
    status: str  # ok | failed | busy | unknown
    summary: dict
    error: str = ""


class IndexJobs:
    """Runs index jobs against the runtime's index and records them in the state store."""

    def __init__(self, runtime: Runtime, store: StateStore, sources: list) -> None:
        self.runtime = runtime
        self.store = store
        self.sources = {s.name: s for s in sources}
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"
        self._write = threading.Lock()

    def names(self) -> list[str]:
        """Configured source names."""
        return sorted(self.sources)

    def run(self, source: str | None = None, full: bool = False) -> list[JobResult]:
        """Index one source (or all); never raises for a source's failure (it is in the result)."""
        names = [source] if source else self.names()
        results = []
        for name in names:
            src = self.sources.get(name)
            if src is None:
                results.append(JobResult(name, "unknown", {}, f"no source named {name!r}; known: "
                                         f"{', '.join(self.names()) or 'none (set CHATOPS_SOURCES)'}"))
                continue
            lock = f"sync:{name}"
            if not self.store.acquire_lock(lock, self.owner, ttl=timedelta(hours=2)):
                results.append(JobResult(name, "busy", {}, "a run of this source is already in progress"))
                continue
            run_id = self.store.start_run(name)
            try:
                with self._write:
                    rep = Indexer(self.runtime.index).run(src, full=full)
                summary = rep.as_dict()
                self.store.finish_run(run_id, "ok", summary, error="; ".join(rep.errors[:5]))
                results.append(JobResult(name, "ok", summary))
            except Exception as exc:  # noqa: BLE001 - a failed run is reported, the bot goes on
                log.exception("index run of %s failed", name)
                self.store.finish_run(run_id, "failed", {}, error=f"{type(exc).__name__}: {exc}")
                results.append(JobResult(name, "failed", {}, f"{type(exc).__name__}: {exc}"))
            finally:
                self.store.release_lock(lock, self.owner)
        return results

    def status(self) -> list[dict]:
        """Per source: pages and chunks indexed, the last run and its outcome."""
        pages = self.runtime.index.manifest.all_pages()
        out = []
        for name in self.names() or sorted({p.source for p in pages}):
            mine = [p for p in pages if p.source == name]
            runs = self.store.last_runs(name, limit=1)
            last = runs[0] if runs else None
            out.append({
                "source": name, "pages": len(mine), "chunks": sum(len(p.chunk_ids) for p in mine),
                "last_run": last.finished_at.isoformat() if last and last.finished_at else None,
                "last_status": last.status if last else None,
                "last_summary": last.summary if last else {},
                "last_error": last.error if last else "",
                "next_run": None,
            })
        return out
