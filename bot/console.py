"""Terminal rendering of replies and index reports (pure functions)."""

from __future__ import annotations

from agent.models import Reply
from index.indexer import IndexReport

__all__ = ["render_reply", "render_report", "section_path", "SECTION_SEPARATOR"]

#: The one separator of a page's title and its headings wherever the CLI shows where a passage is
#: (``ask``, ``chat``): ``Glossary › Company and people terms › PTO``. The index stores a chunk's
#: heading path joined by ``" > "`` (:attr:`connectors.models.Chunk.section`); it is shown through
#: :func:`section_path` only.
SECTION_SEPARATOR = " \u203a "
_STORED_SEPARATOR = " > "


def render_reply(reply: Reply) -> str:
    """The reply text, then its numbered sources (title, section, link)."""
    lines = [reply.text]
    if reply.citations:
        lines.append("")
        lines.append("Sources:")
        seen: set[int] = set()
        for c in sorted(reply.citations, key=lambda c: c.n):
            if c.n in seen:
                continue
            seen.add(c.n)
            where = section_path(c.title, c.section)
            lines.append(f"  [{c.n}] {where}\n      {c.url or c.doc_id}")
    if reply.pending_action:
        lines.append("")
        lines.append(f"Pending action: {reply.pending_action.summary} (confirm to run)")
    return "\n".join(lines)


def section_path(title: str, section: str = "") -> str:
    """``title › heading › subheading`` from a page title and a stored heading path (``"A > B"``);
    empty parts are dropped, so a page without headings reads as its title alone."""
    parts = [title, *section.split(_STORED_SEPARATOR)] if section else [title]
    return SECTION_SEPARATOR.join(p.strip() for p in parts if p and p.strip())


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
