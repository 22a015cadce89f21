"""Reconciliation: make both stores hold exactly the chunks the manifest records.

Run at the start of every indexing run (:meth:`index.indexer.Indexer.run`, and so every
sync). A store can lose chunks behind the manifest's back (its folder deleted, a damaged copy
moved aside and started empty, a restored backup); without this check an incremental run would
report every page "unchanged" and leave search broken.

First the counts: when both stores hold as many chunks as the manifest records, nothing more is
read. Otherwise the chunk id sets are compared and

- a chunk one store lacks is copied from the other: BM25 gets the record Qdrant keeps as payload,
  Qdrant gets the record Whoosh stores plus its vector (from the embedding cache, else computed);
- a chunk both stores lack makes its page be forgotten (its remaining chunks deleted from both),
  so the run's scan indexes the page again from the source; only pages of the source being run
  are forgotten (another source's wait for its own run, which can fetch them again);
- a chunk the manifest does not know is deleted from the store holding it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from .knowledge import KnowledgeIndex
from core.models import Chunk

__all__ = ["RepairReport", "reconcile"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class RepairReport:
    """What one reconciliation changed.

    Attributes:
        bm25_added, dense_added: chunks copied into the BM25 (Whoosh) and dense (Qdrant) store.
        bm25_removed, dense_removed: chunks the manifest does not know, deleted from each store.
        pages_forgotten: doc keys whose chunks neither store had; the scan re-indexes them.
        rebuilt: stores found damaged on open and started empty (see :class:`KnowledgeIndex`).
    """

    bm25_added: int = 0
    dense_added: int = 0
    bm25_removed: int = 0
    dense_removed: int = 0
    pages_forgotten: list[str] = field(default_factory=list)
    rebuilt: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """True when anything was repaired."""
        return bool(self.bm25_added or self.dense_added or self.bm25_removed or self.dense_removed
                    or self.pages_forgotten or self.rebuilt)

    def describe(self) -> str:
        """One line, e.g. ``repaired 107 chunks in bm25, 0 in dense; ...`` (``""`` when nothing changed)."""
        if not self.changed:
            return ""
        parts = [f"repaired {self.bm25_added} chunks in bm25, {self.dense_added} in dense"]
        if self.bm25_removed or self.dense_removed:
            parts.append(f"removed {self.bm25_removed} stray chunks from bm25, {self.dense_removed} from dense")
        if self.pages_forgotten:
            parts.append(f"{len(self.pages_forgotten)} pages lost from both stores are indexed again")
        parts.extend(f"rebuilt the damaged {r}" for r in self.rebuilt)
        return "; ".join(parts)

    def as_dict(self) -> dict[str, int | list[str]]:
        """JSON-ready dict (``pages_forgotten`` as a count)."""
        return {"bm25_added": self.bm25_added, "dense_added": self.dense_added, "bm25_removed": self.bm25_removed,
                "dense_removed": self.dense_removed, "pages_forgotten": len(self.pages_forgotten),
                "rebuilt": list(self.rebuilt)}


def reconcile(index: KnowledgeIndex, source: str | None = None, batch: int = 256) -> RepairReport:
    """Repair both stores of ``index`` against its manifest (see the module docstring).

    Args:
        index: the open index (its ``rebuilt`` list is moved into the report).
        source: the source about to be indexed: only its pages lost from both stores are forgotten
            (``None``: any source's).
        batch: chunks copied per store write.

    Returns:
        What changed.

    Raises:
        IndexCorruptError, DiskFullError, EmbeddingError: from the stores and the embedder.
    """
    rep = RepairReport(rebuilt=list(index.rebuilt))
    index.rebuilt.clear()
    pages = index.manifest.all_pages()
    owner = {cid: p for p in pages for cid in p.chunk_ids}
    if index.keyword.doc_count == len(owner) == index.dense.count:
        return rep
    wanted = set(owner)
    in_bm25, in_dense = index.keyword.chunk_ids(), index.dense.chunk_ids()
    stray_bm25, stray_dense = in_bm25 - wanted, in_dense - wanted
    if stray_bm25:
        index.keyword.delete_chunks(stray_bm25)
        rep.bm25_removed = len(stray_bm25)
    if stray_dense:
        index.dense.delete_chunks(stray_dense)
        rep.dense_removed = len(stray_dense)
    lost = wanted - in_bm25 - in_dense
    wanted -= lost  # (a lost chunk of another source stays lost until that source's run)
    keys = sorted({owner[c].doc_key for c in lost if source is None or owner[c].source == source})
    if keys:
        index.manifest.begin(keys)
        index.keyword.delete(keys)
        index.dense.delete(keys)
        index.manifest.forget(keys)
        rep.pages_forgotten = keys
        forgotten = set(keys)
        wanted -= {c for c, p in owner.items() if p.doc_key in forgotten}
    to_bm25 = sorted(wanted - in_bm25)
    for start in range(0, len(to_bm25), batch):
        part = index.dense.fetch(to_bm25[start:start + batch])
        index.keyword.replace([], [chunk for chunk, _ in part.values()])
        rep.bm25_added += len(part)
    to_dense = sorted(wanted - in_dense)
    for start in range(0, len(to_dense), batch):
        chunks: list[Chunk] = list(index.keyword.chunks(to_dense[start:start + batch]).values())
        vectors = index.embedder.embed([c.embedding_text() for c in chunks])
        index.dense.replace([], chunks, vectors)
        rep.dense_added += len(chunks)
    if rep.changed:
        log.warning("index %s did not match its manifest: %s", index.path, rep.describe())
    return rep
