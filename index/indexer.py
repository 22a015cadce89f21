"""Incremental indexing of one source into a :class:`~index.knowledge.KnowledgeIndex`.

Per run: reconcile both stores with the manifest (:mod:`index.reconcile`); scan the source; a page whose content hash matches the manifest is *unchanged* (neither
re-chunked nor re-embedded); new and changed pages are chunked, embedded (through the embedding
cache) and written to both stores in batches under the manifest's journal; a page the source no
longer lists is deleted from both (only when the source listed itself completely and the scan
finished); a page the source could not read this time is left as it was and reported, and so is
a page whose chunking raised anything (more chunks than the per-page cap, a bug): it is skipped
with its reason, listed in :attr:`IndexReport.failed_pages` (the sync engine fetches it again on
the next run) and the rest of the run is written.

Every written page's chunks are scanned (:func:`screening.flag_chunks`) and the manifest keeps, per
page, how many hold a credential or personal data and how many an instruction addressed to an
assistant (``chatops status`` shows the totals). An unchanged page indexed before the scan existed
is chunked again (no embedding, no store write) just to count them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from screening import flag_chunks

from connectors.base import Source
from connectors.folder import SkippedPage
from core.models import Chunk, Document, Tombstone
from telemetry.timing import timed

from .chunker import Chunker
from .knowledge import KnowledgeIndex
from .manifest import PageEntry
from .reconcile import RepairReport, reconcile

__all__ = ["Indexer", "IndexReport", "Source"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class IndexReport:
    """Counts of one run. ``seconds`` is wall time; ``repair`` what reconciliation fixed first.

    ``errors`` holds ``"<doc_id>: <reason>"`` per skipped page; ``failed_pages`` the doc ids of the
    pages the indexer itself could not chunk (not those the source could not read).
    """

    source: str
    added: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: int = 0
    skipped: int = 0
    chunks_written: int = 0
    chunks_deleted: int = 0
    embedded: int = 0
    embeddings_cached: int = 0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)
    failed_pages: list[str] = field(default_factory=list)
    repair: RepairReport = field(default_factory=RepairReport)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        out = {k: getattr(self, k) for k in self.__slots__}
        out["repair"] = self.repair.as_dict()
        return out


class Indexer:
    """Writes sources into an index.

    Args:
        index: the target index.
        chunker: the chunker (default sizes 400-800 characters).
        batch_pages: pages written per store transaction.
    """

    def __init__(self, index: KnowledgeIndex, chunker: Chunker | None = None, batch_pages: int = 48) -> None:
        self.index = index
        self.chunker = chunker or Chunker()
        self.batch_pages = batch_pages

    def run(self, source: Source, full: bool = False,
            progress: Callable[[IndexReport], None] | None = None,
            repair: RepairReport | None = None) -> IndexReport:
        """Index ``source`` incrementally (or from scratch for its pages when ``full``).

        Reconciles the stores with the manifest first, unless the caller already did and passes
        its ``repair`` report. ``progress`` gets the running report after every written batch, every
        ``batch_pages`` unchanged pages and at the end (a progress bar, a sync's lock renewal).

        Returns:
            The run's counts.

        Raises:
            SourceUnavailableError: when the source cannot be listed at all (nothing is deleted).
        """
        with timed("chatops.index", {"chatops.source": source.name}) as clock:
            rep = IndexReport(source=source.name,
                              repair=repair if repair is not None else reconcile(self.index, source.name))
            known = self.index.manifest.pages_of(source.name)
            if full and known:
                keys = [p.doc_key for p in known.values()]
                self.index.manifest.begin(keys)
                self.index.keyword.delete(keys)
                self.index.dense.delete(keys)
                self.index.manifest.forget(keys)
                known = {}
            seen: set[str] = set()
            batch: list[tuple[Document, PageEntry | None, list[Chunk]]] = []
            for item in source.scan():
                if isinstance(item, SkippedPage):
                    seen.add(item.doc_id)
                    rep.skipped += 1
                    rep.errors.append(f"{item.doc_id}: {item.reason}")
                    continue
                if isinstance(item, Tombstone):
                    seen.discard(item.doc_id)
                    if item.doc_id in known:
                        self._delete(source.name, [known.pop(item.doc_id)], rep)
                    continue
                seen.add(item.doc_id)
                prev = known.get(item.doc_id)
                if prev is not None and prev.hash == item.hash:
                    rep.unchanged += 1
                    if prev.sensitive_chunks is None or prev.injection_chunks is None:
                        try:
                            flags = flag_chunks(c.text for c in self.chunker.chunk(item))
                        except Exception as exc:  # noqa: BLE001 - counting only; the page stays "unscanned"
                            log.warning("could not scan unchanged %s of %s: %s", item.doc_id, source.name, exc)
                        else:
                            self.index.manifest.set_flags(prev.doc_key, flags.sensitive, flags.injection)
                    if progress and rep.unchanged % self.batch_pages == 0:  # a run of unchanged pages moves too
                        progress(rep)
                    continue
                try:
                    chunks = self.chunker.chunk(item)
                except Exception as exc:  # noqa: BLE001 - one page never stops the run; its indexed copy is kept
                    reason = f"{type(exc).__name__}: {exc}"
                    log.warning("skipping %s of %s: %s", item.doc_id, source.name, reason)
                    rep.skipped += 1
                    rep.errors.append(f"{item.doc_id}: {reason}")
                    rep.failed_pages.append(item.doc_id)
                    continue
                batch.append((item, prev, chunks))
                if len(batch) >= self.batch_pages:
                    self._write(batch, rep)
                    batch = []
                    if progress:
                        progress(rep)
            if batch:
                self._write(batch, rep)
            if source.complete_listing:
                gone = [p for doc_id, p in known.items() if doc_id not in seen]
                if gone:
                    self._delete(source.name, gone, rep)
            if rep.added or rep.updated or rep.deleted or rep.repair.bm25_added or rep.repair.bm25_removed:
                self.index.keyword.optimize()
        rep.seconds = clock.elapsed()
        if progress:
            progress(rep)
        return rep

    def _write(self, batch: list[tuple[Document, PageEntry | None, list[Chunk]]], rep: IndexReport) -> None:
        chunks: list[Chunk] = []
        entries: list[PageEntry] = []
        for doc, _, cs in batch:
            chunks.extend(cs)
            flags = flag_chunks(c.text for c in cs)
            entries.append(PageEntry(f"{doc.source}:{doc.doc_id}", doc.source, doc.doc_id, doc.hash,
                                     tuple(c.chunk_id for c in cs), flags.sensitive, flags.injection, doc.access))
        emb = self.index.embedder
        before = (getattr(emb, "computed", 0), getattr(emb, "cached", 0))
        vectors = emb.embed([c.embedding_text() for c in chunks])
        rep.embedded += getattr(emb, "computed", len(chunks)) - before[0]
        rep.embeddings_cached += getattr(emb, "cached", 0) - before[1]
        keys = [e.doc_key for e in entries]
        man = self.index.manifest
        man.begin(keys)
        self.index.keyword.replace(keys, chunks)
        self.index.dense.replace(keys, chunks, vectors)
        man.commit(entries, [])
        rep.chunks_written += len(chunks)
        for _, prev, _ in batch:
            if prev is not None:
                rep.updated += 1
                rep.chunks_deleted += len(prev.chunk_ids)
            else:
                rep.added += 1

    def remove_source(self, name: str) -> IndexReport:
        """Delete every page of source ``name`` from both stores and the manifest (``chatops sources remove``).

        Returns:
            The counts (``deleted`` pages, ``chunks_deleted``); zero for a name with no pages.
        """
        with timed("chatops.index.remove", {"chatops.source": name}) as clock:
            rep = IndexReport(source=name)
            pages = list(self.index.manifest.pages_of(name).values())
            if pages:
                self._delete(name, pages, rep)
                self.index.keyword.optimize()
        rep.seconds = clock.elapsed()
        return rep

    def _delete(self, source: str, pages: list[PageEntry], rep: IndexReport) -> None:
        keys = [p.doc_key for p in pages]
        man = self.index.manifest
        man.begin(keys)
        self.index.keyword.delete(keys)
        self.index.dense.delete(keys)
        man.commit([], keys)
        rep.deleted += len(pages)
        rep.chunks_deleted += sum(len(p.chunk_ids) for p in pages)
        log.info("deleted %d page(s) of %s", len(pages), source)
