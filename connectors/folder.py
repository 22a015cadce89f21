"""The ``folder:PATH`` source: a directory of exported Markdown and HTML pages.

Markdown files may start with YAML front matter; its ``title`` wins over the first heading.
Template syntax (Hugo shortcodes, Liquid/Jinja tags) is stripped and paragraphs' soft-wrapped lines
joined (:func:`connectors.text.clean_markdown`); ``.mdx`` pages lose their ``import``/``export``
statements and JSX components, keeping the components' text (:func:`connectors.templates.strip_mdx`).
HTML files are converted with :func:`connectors.text.html_to_markdown`. A page that cannot be
read, decoded or converted (whatever the error) is reported as a :class:`SkippedPage` with the
reason (and logged), and the scan goes on; the indexer keeps what it had indexed for that page.

Only regular files inside the root are read (:func:`connectors.safe_files.read_regular_file`):
symbolic links (to files or folders, inside the root or not), FIFOs, sockets and devices are
skipped with a reason, never followed or opened in a way that could block.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote

import frontmatter

from .access import Access
from .errors import SourceUnavailableError
from .models import Document
from .safe_files import RefusedFileError, read_regular_file
from .templates import strip_mdx
from .text import clean_markdown, first_heading, html_to_markdown

__all__ = ["FolderSource", "folder_source_name", "SkippedPage", "MARKDOWN_SUFFIXES", "HTML_SUFFIXES"]

log = logging.getLogger(__name__)

MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdx"})
HTML_SUFFIXES = frozenset({".html", ".htm"})
MAX_FILE_BYTES = 5_000_000


@dataclass(frozen=True, slots=True)
class SkippedPage:
    """A page the source could not read this time; the indexer leaves its indexed copy alone."""

    source: str
    doc_id: str
    reason: str


class FolderSource:
    """Reads every Markdown and HTML file under ``root``, recursively, in a stable order.

    A :class:`~connectors.base.Source` (a complete listing; no incremental ``sync``).

    Args:
        root: the folder to read.
        name: the source name stored with every chunk (default: the folder's own name, see
            :func:`folder_source_name`).
        url_base: when set, page URLs are ``url_base`` + the path without its suffix
            (``a/index.md`` maps to ``a/``, ``a/b.md`` to ``a/b``), as static-site generators
            publish them; otherwise ``file://`` URLs of the files.
        access: who may read every page (a folder has no per-page read control): public by
            default; a source's ``audience`` in ``chatops.yml`` sets it
            (:func:`connectors.config.audience_access`).

    Raises:
        SourceUnavailableError: from :meth:`scan` when ``root`` is not a readable directory.
    """

    #: the folder is listed completely on every scan, so pages not seen were deleted.
    complete_listing = True

    def __init__(self, root: str | os.PathLike[str], name: str | None = None, url_base: str | None = None,
                 access: Access | None = None) -> None:
        self.root = Path(root).expanduser().resolve()
        self.access = access if access is not None else Access.everyone()
        self.name = name or folder_source_name(self.root)
        self.url_base = url_base.rstrip("/") + "/" if url_base else None

    def __repr__(self) -> str:
        return f"FolderSource({str(self.root)!r}, name={self.name!r})"

    def url_for(self, doc_id: str) -> str:
        """The page URL for ``doc_id`` (see the class docstring)."""
        if self.url_base is None:
            return (self.root / doc_id).as_uri()
        stem = doc_id.rsplit(".", 1)[0]
        if stem == "index":
            stem = ""
        elif stem.endswith("/index"):
            stem = stem[: -len("index")]
        return self.url_base + quote(stem)

    def paths(self) -> list[Path]:
        """Every candidate page under the root, sorted, hidden files and folders excluded.

        Candidates are names with a page suffix, whatever they are (links and special files
        included, so :meth:`scan` can report them); linked folders are not descended into.
        """
        return self._walk()[0]

    def _walk(self) -> tuple[list[Path], list[Path]]:
        """``(candidate files, linked folders)`` under the root, both sorted."""
        if not self.root.is_dir():
            raise SourceUnavailableError(
                f"folder source {self.root} is not a readable directory: check the path in the source spec"
            )
        found: list[Path] = []
        linked: list[Path] = []
        for dirpath, dirnames, filenames in os.walk(self.root, followlinks=False):
            keep = []
            for d in sorted(dirnames):
                if d.startswith("."):
                    continue
                if os.path.islink(os.path.join(dirpath, d)):
                    linked.append(Path(dirpath) / d)  # os.walk lists it but must not (and does not) enter it
                else:
                    keep.append(d)
            dirnames[:] = keep
            for fn in filenames:
                if fn.startswith("."):
                    continue
                p = Path(dirpath) / fn
                if p.suffix.lower() in MARKDOWN_SUFFIXES | HTML_SUFFIXES:
                    found.append(p)
        return sorted(found), sorted(linked)

    def scan(self) -> Iterator[Document | SkippedPage]:
        """Yield a :class:`Document` per readable page and a :class:`SkippedPage` per failure.

        A page that raises anything while read or converted (an undecodable file, a link, a FIFO,
        markup too deep to convert) is skipped with ``"<ErrorType>: <message>"`` as its reason; a
        linked folder is reported as one :class:`SkippedPage` (``doc_id`` ending in ``/``).

        Raises:
            SourceUnavailableError: when the root folder is missing or unreadable.
        """
        files, linked = self._walk()
        for folder in linked:
            doc_id = folder.relative_to(self.root).as_posix() + "/"
            reason = "is a linked folder; links are not followed (only files inside the folder are indexed)"
            log.warning("skipping %s in %s: %s", doc_id, self.root, reason)
            yield SkippedPage(self.name, doc_id, reason)
        for path in files:
            doc_id = path.relative_to(self.root).as_posix()
            try:
                doc = self._read(path, doc_id)
            except Exception as exc:  # noqa: BLE001 - one bad page never stops the scan
                reason = str(exc) if isinstance(exc, RefusedFileError) else f"{type(exc).__name__}: {exc}"
                log.warning("skipping %s in %s: %s", doc_id, self.root, reason)
                yield SkippedPage(self.name, doc_id, reason)
            else:
                yield doc

    def _read(self, path: Path, doc_id: str) -> Document:
        data, mtime_s = read_regular_file(self.root, path, MAX_FILE_BYTES)
        raw = data.decode("utf-8")
        meta: dict = {}
        if path.suffix.lower() in HTML_SUFFIXES:
            title, body = html_to_markdown(raw)
        else:
            post = frontmatter.loads(raw)
            meta = dict(post.metadata or {})
            content = strip_mdx(post.content) if path.suffix.lower() == ".mdx" else post.content
            body = clean_markdown(content)
            title = str(meta.get("title") or "").strip()
        if not title:
            title = first_heading(body) or _title_from_path(doc_id)
        mtime = datetime.fromtimestamp(mtime_s, tz=timezone.utc)
        space = doc_id.split("/", 1)[0] if "/" in doc_id else ""
        return Document(
            source=self.name, doc_id=doc_id, title=title, url=self.url_for(doc_id), text=body,
            updated_at=mtime, space=space,
            access=self.access,  # a folder has no per-page read control: its audience (public by default)
        )


def folder_source_name(root: str | os.PathLike[str]) -> str:
    """The default name of a folder source: the folder's own name, with characters a source name may
    not hold turned into ``-`` (``./docs/my wiki`` is ``my-wiki``); ``folder`` when nothing is left.

    Two folders are two sources, so indexing one never deletes the other's pages.
    """
    base = Path(root).expanduser().resolve().name
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", base).strip("-._")[:100]
    return name if name and name[0].isalnum() else "folder"


def _title_from_path(doc_id: str) -> str:
    stem = doc_id.rsplit("/", 2)
    name = stem[-1].rsplit(".", 1)[0]
    if name == "index" and len(stem) > 1:
        name = stem[-2]
    return name.replace("-", " ").replace("_", " ").strip().capitalize()
