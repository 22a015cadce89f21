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

Files about the folder rather than pages of it are left out: ``exclude`` globs, by default
:data:`DEFAULT_EXCLUDE` (``README.md``, ``SOURCE.md``, ``LICENSE*`` and ``CONTRIBUTING.md`` at the root).
A page left out is not listed, so the indexer deletes a copy indexed before (the listing is complete).

Links (with ``url_base``): a Markdown page's front matter ``permalink:`` (as Jekyll publishes it) wins;
else ``url_template`` (placeholders :data:`URL_PLACEHOLDERS`) or the path without its suffix.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from string import Formatter
from urllib.parse import quote

import frontmatter

from core.access import Access
from .errors import SourceUnavailableError
from core.models import Document
from .safe_files import RefusedFileError, read_regular_file
from .templates import strip_mdx
from .text import clean_markdown, first_heading, html_to_markdown

__all__ = ["FolderSource", "folder_source_name", "SkippedPage", "MARKDOWN_SUFFIXES", "HTML_SUFFIXES", "DEFAULT_EXCLUDE",
           "URL_PLACEHOLDERS", "check_url_template", "check_exclude"]

log = logging.getLogger(__name__)

MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdx"})
HTML_SUFFIXES = frozenset({".html", ".htm"})
MAX_FILE_BYTES = 5_000_000

#: Left out of a folder source unless its ``exclude`` says otherwise: files about the folder (where it
#: came from, its licence, how to contribute), not pages of it. Matched at the root only.
DEFAULT_EXCLUDE: tuple[str, ...] = ("README.md", "SOURCE.md", "LICENSE*", "CONTRIBUTING.md")

#: The placeholders of ``url_template``, for a page ``_peopleops/benefits.md`` with ``url_base``
#: ``https://handbook.example.com``.
URL_PLACEHOLDERS = {
    "url_base": "the url_base, without a trailing / (https://handbook.example.com)",
    "path": "the path without its suffix, an index page as its folder (_peopleops/benefits; a/index.md: a/)",
    "dir": "the page's folder, empty at the root (_peopleops)",
    "stem": "the file name without its suffix (benefits)",
    "file": "the file name (benefits.md)",
    "jekyll_path": "path with the leading _ of each folder dropped, as Jekyll publishes a collection "
                   "(peopleops/benefits)",
}
_JEKYLL_VARIABLE = re.compile(r"(^|/):[a-z_]+")  # a permalink pattern such as /:categories/:title/


def check_url_template(template: str, url_base: str | None = None) -> str:
    """``template`` when it is a usable ``url_template``, else :class:`ValueError` saying what to write.

    It must name only :data:`URL_PLACEHOLDERS` (``{path}``, ``{stem}``...), use ``{url_base}`` only when a
    ``url_base`` is given, and make an ``http(s)://`` URL.
    """
    allowed = ", ".join("{" + k + "}" for k in URL_PLACEHOLDERS)
    try:
        names = [f for _, f, spec, conv in Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise ValueError(f"url_template {template!r} is not a valid template ({exc}); write placeholders as "
                         f"{allowed}, e.g. '{{url_base}}/{{jekyll_path}}'") from None
    unknown = sorted({n for n in names if n not in URL_PLACEHOLDERS})
    if unknown:
        raise ValueError(f"url_template {template!r} names unknown placeholder(s) {', '.join(unknown)}; "
                         f"use {allowed}")
    if "url_base" in names and not url_base:
        raise ValueError(f"url_template {template!r} uses {{url_base}} but the source sets no url_base; set url_base "
                         "(the site's address) or write the address into the template")
    sample = _fill(template, "a/b.md", (url_base or "https://example.com").rstrip("/"))
    if not re.match(r"^https?://[^/\s]+", sample):
        raise ValueError(f"url_template {template!r} must make an http(s) URL (e.g. '{{url_base}}/{{path}}'), "
                         f"not {sample!r}")
    return template


def check_exclude(patterns: list[str]) -> list[str]:
    """``patterns`` stripped, when each is a usable glob; else :class:`ValueError` saying what to write."""
    out = []
    for p in patterns:
        if not isinstance(p, str) or not p.strip():
            raise ValueError("exclude entries are globs of paths relative to the folder, e.g. README.md or drafts/*")
        p = p.strip()
        if p.startswith("/") or "\\" in p:
            raise ValueError(f"exclude pattern {p!r}: write paths relative to the folder with / (e.g. drafts/*)")
        out.append(p)
    return out


def _page_path(doc_id: str) -> str:
    """The path of ``doc_id`` as a site publishes it: no suffix, ``index`` pages as their folder."""
    stem = doc_id.rsplit(".", 1)[0]
    if stem == "index":
        return ""
    if stem.endswith("/index"):
        return stem[: -len("index")]
    return stem


def _fill(template: str, doc_id: str, url_base: str) -> str:
    """``template`` with the placeholders of :data:`URL_PLACEHOLDERS` for ``doc_id`` (each quoted for a URL);
    doubled ``/`` after the host (an empty ``{dir}``) collapse to one."""
    folder, _, file = doc_id.rpartition("/")
    path = _page_path(doc_id)
    values = {"url_base": url_base, "path": quote(path), "dir": quote(folder), "stem": quote(file.rsplit(".", 1)[0]),
              "file": quote(file), "jekyll_path": quote("/".join(part[1:] if part.startswith("_") else part
                                                                 for part in path.split("/")))}
    url = template.format_map(values)
    scheme, sep, rest = url.partition("://")
    return scheme + sep + re.sub(r"/{2,}", "/", rest) if sep else url


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
            publish them, unless a Markdown page's front matter has ``permalink:`` (``/peopleops/benefits``:
            ``url_base`` + the permalink; a full ``http(s)`` URL as it is); otherwise ``file://`` URLs of the files.
        url_template: for sites that publish pages under other paths: the URL of a page without a
            permalink, with the placeholders of :data:`URL_PLACEHOLDERS` (``{url_base}/{jekyll_path}``,
            ``{url_base}/{path}.html``); checked by :func:`check_url_template`.
        exclude: globs of paths relative to ``root`` (``/`` separators, matched with :mod:`fnmatch`, so
            ``*`` also matches ``/``: ``drafts/*`` is everything under ``drafts``, ``*/README.md`` every
            folder's README but the root's) whose files are not pages; default :data:`DEFAULT_EXCLUDE`;
            ``[]`` reads every page.
        access: who may read every page (a folder has no per-page read control): public by
            default; a source's ``audience`` in ``chatops.yml`` sets it
            (:func:`connectors.config.audience_access`).

    Raises:
        ValueError: for a ``url_template`` or ``exclude`` pattern :func:`check_url_template` or
            :func:`check_exclude` refuses.
        SourceUnavailableError: from :meth:`scan` when ``root`` is not a readable directory.
    """

    #: the folder is listed completely on every scan, so pages not seen were deleted.
    complete_listing = True

    def __init__(self, root: str | os.PathLike[str], name: str | None = None, url_base: str | None = None,
                 access: Access | None = None, url_template: str | None = None,
                 exclude: list[str] | tuple[str, ...] | None = None) -> None:
        self.root = Path(root).expanduser().resolve()
        self.access = access if access is not None else Access.everyone()
        self.name = name or folder_source_name(self.root)
        self.url_base = url_base.rstrip("/") + "/" if url_base else None
        self.url_template = check_url_template(url_template, url_base) if url_template else None
        self.exclude = tuple(check_exclude(list(DEFAULT_EXCLUDE if exclude is None else exclude)))
        #: Files the last scan left out by :attr:`exclude` (root-relative paths).
        self.excluded: list[str] = []

    def __repr__(self) -> str:
        return f"FolderSource({str(self.root)!r}, name={self.name!r})"

    def url_for(self, doc_id: str, permalink: str | None = None) -> str:
        """The page URL for ``doc_id``, whose front matter may give a ``permalink`` (see the class docstring).

        Without ``url_base`` a template or permalink still applies when it makes a full URL on its own."""
        if permalink:
            link = permalink.strip()
            if re.match(r"^https?://", link):
                return quote(link, safe=_URL_SAFE)
            if self.url_base is not None:
                return self.url_base + quote(link.lstrip("/"), safe=_URL_SAFE)
        if self.url_template is not None:
            return _fill(self.url_template, doc_id, (self.url_base or "").rstrip("/"))
        if self.url_base is None:
            return (self.root / doc_id).as_uri()
        return self.url_base + quote(_page_path(doc_id))

    def is_excluded(self, doc_id: str) -> bool:
        """True when the root-relative path ``doc_id`` matches one of :attr:`exclude`."""
        return any(fnmatch.fnmatchcase(doc_id, pattern) for pattern in self.exclude)

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
        self.excluded = []
        for folder in linked:
            doc_id = folder.relative_to(self.root).as_posix() + "/"
            reason = "is a linked folder; links are not followed (only files inside the folder are indexed)"
            log.warning("skipping %s in %s: %s", doc_id, self.root, reason)
            yield SkippedPage(self.name, doc_id, reason)
        for path in files:
            doc_id = path.relative_to(self.root).as_posix()
            if self.is_excluded(doc_id):
                self.excluded.append(doc_id)  # not listed: a copy indexed before is deleted (complete listing)
                continue
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
        meta: dict[str, object] = {}
        permalink = None
        if path.suffix.lower() in HTML_SUFFIXES:
            title, body = html_to_markdown(raw)
        else:
            post = frontmatter.loads(raw)
            meta = dict(post.metadata or {})
            content = strip_mdx(post.content) if path.suffix.lower() == ".mdx" else post.content
            body = clean_markdown(content)
            title = str(meta.get("title") or "").strip()
            permalink = _permalink(meta.get("permalink"), doc_id)
        if not title:
            title = first_heading(body) or _title_from_path(doc_id)
        mtime = datetime.fromtimestamp(mtime_s, tz=timezone.utc)
        space = doc_id.split("/", 1)[0] if "/" in doc_id else ""
        return Document(
            source=self.name, doc_id=doc_id, title=title, url=self.url_for(doc_id, permalink), text=body,
            updated_at=mtime, space=space,
            access=self.access,  # a folder has no per-page read control: its audience (public by default)
        )


_URL_SAFE = "/:%#?=&+,;@!$'()*~"


def _permalink(value: object, doc_id: str) -> str | None:
    """A front matter ``permalink`` usable as a link, else ``None`` (a pattern with Jekyll variables such as
    ``/:title/`` is not resolved here: the page falls back to the template or its path)."""
    if not isinstance(value, str) or not value.strip():
        return None
    link = value.strip()
    if re.match(r"^https?://", link):
        return link
    if _JEKYLL_VARIABLE.search(link) or any(c.isspace() for c in link):
        log.info("page %s: permalink %r is a pattern, not a path; linking it by its path", doc_id, link)
        return None
    return link


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
