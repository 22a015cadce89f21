"""Terminal rendering of replies and index reports (pure functions)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.layout import section_path, sections

from .markdown_blocks import ListBlock, Prose, list_lines, parse_blocks, table_lines

if TYPE_CHECKING:  # annotations only: `chatops ask` loads no indexer (its sources and chunker)
    from agent.models import Reply
    from index.indexer import IndexReport

__all__ = ["render_reply", "render_text", "render_report"]


def render_text(markdown: str) -> str:
    """An answer's Markdown for the terminal: prose as written, each list line by line (``1.`` … or ``•``,
    an item's later lines indented under its first), each table in columns aligned under a ``─`` rule
    (:func:`bot.markdown_blocks.table_lines`); blocks one blank line apart (a list item's own blocks on the
    next line, so that its list stays tight)."""
    return _render(markdown, "\n\n")


def _render(markdown: str, sep: str) -> str:
    parts = []
    for block in parse_blocks(markdown):
        if isinstance(block, Prose):
            parts.append(block.text)
        elif isinstance(block, ListBlock):
            parts.append("\n".join(list_lines(block, lambda item: _render(item, "\n"), bullet="\u2022")))
        else:
            parts.append("\n".join(table_lines(block)))
    return sep.join(parts)


def render_reply(reply: Reply) -> str:
    """The reply text (:func:`render_text`), then its numbered sources (title › section, link), then a pending
    action: three sections (:func:`app.layout.sections`)."""
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
    return sections(render_text(reply.text), "\n".join(sources), pending)


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
