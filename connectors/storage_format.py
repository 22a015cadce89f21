"""Confluence storage format (XHTML with ``ac:`` and ``ri:`` elements) to Markdown, headings kept.

The storage format is what ``/wiki/api/v2/pages/{id}?body-format=storage`` (Cloud) and
``expand=body.storage`` (Data Center, REST v1) return; see Atlassian's "Confluence Storage Format"
reference. BeautifulSoup's ``html.parser`` keeps the namespaced tags under their full names
(``ac:structured-macro``) and CDATA sections as text, which ``lxml`` would not, so macros are
rewritten in the tree first and ``markdownify`` runs last:

- ``code`` and ``noformat`` macros become fenced code blocks that keep their ``language``
  parameter and their text byte for byte (they bypass ``markdownify`` through placeholders);
- ``info``, ``note``, ``warning``, ``tip`` and ``panel`` become block quotes opened by their label
  and title (``> **Note: Before you start**``); ``expand``, ``excerpt``, ``section``/``column``,
  ``details`` and other macros with a rich-text body keep that body;
- ``toc``, ``jira``, ``children``, ``pagetree``, ``recently-updated``, ``attachments``,
  ``anchor``, ``include`` and similar generated-content macros are dropped; ``status`` keeps its title;
- links (``ac:link`` and ``<a>``) become their text (the link body, else the target page's title);
- images become ``[image: ALT]`` (the alt text, else the title, else the file name);
- task lists become ``- [ ]``/``- [x]`` items; emoticons, placeholders and comment markers go.

Headings stay ATX headings (``## Booking``), so the chunker cuts at them and citations carry the
section path.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from bs4 import BeautifulSoup, NavigableString, Tag
from markdownify import markdownify

from .text import clean_markdown, flatten_deep_html

__all__ = ["storage_to_markdown", "render_markdown", "fenced_block", "DROPPED_MACROS", "QUOTE_MACROS"]

#: Macros whose output Confluence generates from elsewhere (no page text of their own).
DROPPED_MACROS = frozenset({
    "toc", "toc-zone-marker", "jira", "jiraissues", "children", "pagetree", "pagetreesearch", "recently-updated",
    "attachments", "anchor", "include", "excerpt-include", "livesearch", "contentbylabel", "content-report-table",
    "blog-posts", "profile", "profile-picture", "roadmap", "gallery", "viewfile", "view-file", "multimedia",
    "widget", "create-from-template", "space-details", "popular-labels", "related-labels", "listlabels",
    "change-history", "contributors", "contributors-summary", "page-index", "task-report", "tasks-report-macro",
})
#: Macros rendered as a block quote, with the label that opens the quote.
QUOTE_MACROS = {"info": "Info", "note": "Note", "warning": "Warning", "tip": "Tip", "panel": ""}
CODE_MACROS = frozenset({"code", "noformat"})
_BLOCK_PARENTS = frozenset({"div", "body", "blockquote", "td", "th", "li", "ac:rich-text-body", "ac:layout-cell",
                            "ac:layout-section", "ac:layout"})

_PLACEHOLDER = "CHATOPSBLOCK{0}X"
_PLACEHOLDER_RE = re.compile(r"^([ >]*)CHATOPSBLOCK(\d+)X[ \t]*$", re.M)


def fenced_block(code: str, language: str = "") -> str:
    """A Markdown fenced code block holding ``code`` verbatim.

    The fence is one backtick longer than the longest backtick run inside (CommonMark), at least three.
    """
    longest = max((len(m) for m in re.findall(r"`+", code)), default=0)
    fence = "`" * max(3, longest + 1)
    lang = re.sub(r"[^\w+#.-]", "", language or "")
    return f"{fence}{lang}\n{code.strip(chr(10))}\n{fence}"


def render_markdown(soup: BeautifulSoup | Tag, blocks: list[str]) -> str:
    """Run ``markdownify`` over a prepared tree and put the placeholder ``blocks`` back.

    Args:
        soup: the tree, where each fenced block was replaced by ``<p>CHATOPSBLOCK{i}X</p>``.
        blocks: the fenced blocks by index.

    Returns:
        Markdown with ATX headings, ``-`` bullets, no escaping of ``_`` and ``*`` (identifiers stay
        searchable and quotable), cleaned by :func:`connectors.text.clean_markdown`. Markup nested
        deeper than :data:`connectors.text.MAX_HTML_DEPTH` is flattened first (in place).
    """
    flatten_deep_html(soup)
    md = markdownify(str(soup), heading_style="ATX", bullets="-", escape_underscores=False,
                     escape_asterisks=False, strip=["span"])
    md = clean_markdown(md)

    def put_back(m: re.Match[str]) -> str:
        prefix, i = m.group(1), int(m.group(2))
        block = blocks[i] if i < len(blocks) else ""
        if prefix.strip():  # inside a block quote: quote every line of the block
            quoted = "\n".join(f"{prefix}{line}".rstrip() if line else prefix.rstrip() for line in block.split("\n"))
            return quoted
        return block

    return _PLACEHOLDER_RE.sub(put_back, md).strip()


def storage_to_markdown(storage: str) -> str:
    """Convert a page body in Confluence storage format to Markdown (see the module docstring).

    Args:
        storage: the ``body.storage.value`` string (an XHTML fragment).

    Returns:
        Markdown text; ``""`` for an empty body. Never raises on odd markup: unknown elements
        keep their text.
    """
    if not storage or not storage.strip():
        return ""
    soup = BeautifulSoup(storage, "html.parser")
    blocks: list[str] = []

    def placeholder(block: str) -> Tag:
        p = soup.new_tag("p")
        p.string = _PLACEHOLDER.format(len(blocks))
        blocks.append(block)
        return p

    # Innermost macros first (reverse document order), so a code block inside a panel is done
    # before the panel is turned into a quote.
    for macro in reversed(soup.find_all(["ac:structured-macro", "ac:macro"])):
        _rewrite_macro(soup, macro, placeholder)
    for link in soup.find_all("ac:link"):
        link.replace_with(NavigableString(_link_text(link)))
    for a in soup.find_all("a"):
        a.replace_with(NavigableString(a.get_text()))
    for img in soup.find_all("ac:image"):
        text = NavigableString(_image_text(img))
        if img.parent is soup or (img.parent is not None and img.parent.name in _BLOCK_PARENTS):
            p = soup.new_tag("p")  # a block-level image is a paragraph of its own
            p.append(text)
            img.replace_with(p)
        else:
            img.replace_with(text)
    for img in soup.find_all("img"):
        alt = _attr(img, "alt").strip()
        img.replace_with(NavigableString(f"[image: {alt}]" if alt else ""))
    for tl in soup.find_all("ac:task-list"):
        _rewrite_tasks(soup, tl)
    for emo in soup.find_all(["ac:emoticon"]):
        fallback = _attr(emo, "ac:emoji-fallback")
        emo.replace_with(NavigableString(fallback if not fallback.startswith(":") else ""))
    for t in soup.find_all("time"):
        t.replace_with(NavigableString(_attr(t, "datetime") or t.get_text()))
    for tag in soup.find_all(["ac:placeholder", "ac:parameter"]):
        tag.decompose()
    for tag in soup.find_all(True):
        if tag.name.startswith("ri:"):
            tag.decompose()
    for tag in soup.find_all(True):
        if tag.name.startswith("ac:"):
            tag.unwrap()
    return render_markdown(soup, blocks)


def _attr(tag: Tag, name: str) -> str:
    """The value of ``tag``'s attribute ``name``; "" when it has none (a multi-valued one, ``class``, joined by
    spaces: no attribute read here is one)."""
    value = tag.get(name)
    if value is None:
        return ""
    return value if isinstance(value, str) else " ".join(value)


def _param(macro: Tag, name: str) -> str:
    for p in macro.find_all("ac:parameter", recursive=False):
        if p.get("ac:name") == name:
            return p.get_text().strip()
    return ""


def _rewrite_macro(soup: BeautifulSoup, macro: Tag, placeholder: Callable[[str], Tag]) -> None:
    name = _attr(macro, "ac:name").strip().lower()
    if name in CODE_MACROS:
        body = macro.find("ac:plain-text-body")
        code = body.get_text() if body else ""
        lang = _param(macro, "language") if name == "code" else ""
        macro.replace_with(placeholder(fenced_block(code, lang)))
        return
    if name in DROPPED_MACROS:
        macro.decompose()
        return
    rich = macro.find("ac:rich-text-body")
    if name in QUOTE_MACROS:
        quote = soup.new_tag("blockquote")
        label = QUOTE_MACROS[name]
        title = _param(macro, "title")
        head = ": ".join(x for x in (label, title) if x)
        if head:
            p = soup.new_tag("p")
            strong = soup.new_tag("strong")
            strong.string = head
            p.append(strong)
            quote.append(p)
        if rich is not None:
            for child in list(rich.contents):
                quote.append(child.extract())
        macro.replace_with(quote)
        return
    if name == "status":
        title = _param(macro, "title")
        macro.replace_with(NavigableString(f"[{title}]" if title else ""))
        return
    if rich is not None:
        div = soup.new_tag("div")
        title = _param(macro, "title") if name == "expand" else ""
        if title:
            p = soup.new_tag("p")
            strong = soup.new_tag("strong")
            strong.string = title
            p.append(strong)
            div.append(p)
        for child in list(rich.contents):
            div.append(child.extract())
        macro.replace_with(div)
        return
    plain = macro.find("ac:plain-text-body")
    if plain is not None and plain.get_text().strip():
        macro.replace_with(placeholder(fenced_block(plain.get_text())))
        return
    macro.decompose()


def _link_text(link: Tag) -> str:
    body = link.find("ac:link-body")
    if body is not None and body.get_text().strip():
        return body.get_text()
    plain = link.find("ac:plain-text-link-body")
    if plain is not None and plain.get_text().strip():
        return plain.get_text()
    page = link.find(["ri:page", "ri:blog-post"])
    if page is not None:
        return _attr(page, "ri:content-title")
    att = link.find("ri:attachment")
    if att is not None:
        return _attr(att, "ri:filename")
    space = link.find("ri:space")
    if space is not None:
        return _attr(space, "ri:space-key")
    url = link.find("ri:url")
    if url is not None:
        return _attr(url, "ri:value")
    return _attr(link, "ac:anchor").strip()


def _image_text(img: Tag) -> str:
    alt = (_attr(img, "ac:alt") or _attr(img, "ac:title")).strip()
    if not alt:
        att = img.find("ri:attachment")
        url = img.find("ri:url")
        alt = _attr(att, "ri:filename") if att is not None else (_attr(url, "ri:value") if url is not None else "")
    return f"[image: {alt.strip()}]" if alt.strip() else ""


def _rewrite_tasks(soup: BeautifulSoup, tl: Tag) -> None:
    ul = soup.new_tag("ul")
    for task in tl.find_all("ac:task", recursive=False):
        status = task.find("ac:task-status")
        body = task.find("ac:task-body")
        li = soup.new_tag("li")
        done = status is not None and status.get_text().strip().lower() == "complete"
        li.append(NavigableString("[x] " if done else "[ ] "))
        if body is not None:
            for child in list(body.contents):
                li.append(child.extract())
        ul.append(li)
    tl.replace_with(ul)
