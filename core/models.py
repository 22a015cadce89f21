"""The contracts between connectors, the indexer and the retrieval tool.

A connector yields :class:`Document` objects (and :class:`Tombstone` objects for pages deleted
upstream); the chunker turns a document into :class:`Chunk` objects, which both indexes store.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime

from .access import Access

__all__ = ["Document", "Tombstone", "Chunk", "content_hash"]


def content_hash(*parts: str) -> str:
    """Return a hex SHA-256 over ``parts`` joined by NUL bytes (stable across runs and machines)."""
    h = hashlib.sha256()
    for i, part in enumerate(parts):
        if i:
            h.update(b"\x00")
        h.update(part.encode("utf-8"))
    return h.hexdigest()


@dataclass(frozen=True, slots=True)
class Document:
    """One page from a source.

    Attributes:
        source: the source name (e.g. ``"folder"`` or a configured source name).
        doc_id: the page id within its source; for folders the path relative to the root with ``/``.
        title: the page title.
        url: a link to the page, or ``""`` when the source has no URL base.
        text: the page body as Markdown, headings kept as ``#`` lines (what the chunker reads).
        updated_at: last modification time (timezone-aware), or ``None`` when unknown.
        space: a grouping such as a Confluence space key or a top-level folder.
        access: who may read the page (:class:`core.access.Access`); every source sets it
            explicitly. The default, :meth:`Access.nobody`, fails closed: a document whose source said
            nothing about access is readable by nobody.
    """

    source: str
    doc_id: str
    title: str
    url: str
    text: str
    updated_at: datetime | None = None
    space: str = ""
    access: Access = field(default_factory=lambda: Access.nobody("the source gave no access"))

    @property
    def hash(self) -> str:
        """Content hash over everything that changes the chunks (title, url, text, and the access:
        its tokens and why it is unresolved), so a page whose access changed is written again."""
        return content_hash(self.title, self.url, self.text, "\x1f".join(self.access.tokens()),
                            self.access.unresolved)


@dataclass(frozen=True, slots=True)
class Tombstone:
    """A page deleted upstream: its chunks must leave both indexes."""

    source: str
    doc_id: str


@dataclass(frozen=True, slots=True)
class Chunk:
    """A heading-aware passage of a document, the unit both indexes store and the agent cites.

    Attributes:
        chunk_id: hex hash of (source, doc_id, section path, ordinal, text); stable for unchanged text.
        source, doc_id, title: copied from the document.
        section_path: the heading path, outermost first (``("Travel", "Hotels")``); empty at the top.
        url: the page URL plus the section anchor (``...#hotels``), or ``""``.
        text: the passage text (what quotes must be verbatim spans of).
        ordinal: position of the chunk within its document, from 0.
        updated_at: copied from the document.
        access: copied from the document (who may read the chunk; the stores filter on its tokens).
    """

    chunk_id: str
    source: str
    doc_id: str
    title: str
    section_path: tuple[str, ...]
    url: str
    text: str
    ordinal: int = 0
    updated_at: datetime | None = None
    access: Access = field(default_factory=lambda: Access.nobody("the chunk was made without access"))

    @property
    def section(self) -> str:
        """The heading path joined with `` > `` (``""`` at the top of the page)."""
        return " > ".join(self.section_path)

    @property
    def key(self) -> str:
        """The document key ``source/doc_id`` unique across sources."""
        return f"{self.source}:{self.doc_id}"

    def embedding_text(self) -> str:
        """The text given to the dense model: title and headings first, then the passage."""
        head = " > ".join((self.title, *self.section_path)) if self.title else self.section
        return f"{head}\n{self.text}" if head else self.text
