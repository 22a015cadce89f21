"""Terminal rendering of replies and index reports (pure functions)."""

from __future__ import annotations

from agent.models import Reply
from index.indexer import IndexReport

from app.layout import section_path, sections

__all__ = ["render_reply", "render_report"]


def render_reply(reply: Reply) -> str:
    """The reply text, then its numbered sources (title › section, link), then a pending action: three
    sections (:func:`app.layout.sections`)."""
    sources = []
    if reply.citations:
        sources.append("Sources:")
        seen: set[int] = set()
        for c in sorted(reply.citations, key=lambda c: c.n):
            if c.n in seen:
                continue
            seen.add(c.n)
            sources.append(f"  [{c.n}] {section_path(c.title, c.section)}\n      {c.url or c.doc_id}")
    pending = f"Pending action: {reply.pending_action.summary} (confirm to run)" if reply.pending_action else ""
    return sections(reply.text, "\n".join(sources), pending)


def render_report(rep: IndexReport, pages: int, chunks: int) -> str:
    """One line per index run: page counts, chunks, seconds; then what reconciliation repaired and skipped pages."""
    line = (f"{rep.source}: {rep.added} added, {rep.updated} updated, {rep.deleted} deleted, "
            f"{rep.unchanged} unchanged, {rep.skipped} skipped; {rep.chunks_written} chunks written "
            f"({rep.embedded} embedded, {rep.embeddings_cached} from cache), {rep.chunks_deleted} removed; "
            f"index holds {pages} pages / {chunks} chunks; {rep.seconds:.1f} s")
    if rep.repair.changed:
        line += f"\n  {rep.repair.describe()}"
    if rep.errors:
        line += "\n" + "\n".join(f"  skipped {e}" for e in rep.errors[:20])
        if len(rep.errors) > 20:
            line += f"\n  ... and {len(rep.errors) - 20} more"
    return line
