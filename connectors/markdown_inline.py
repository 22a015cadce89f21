"""Markdown inline syntax reduced to text, rendered from markdown-it-py's inline tokens.

Two renderings of one line (or heading) of CommonMark inline content (:data:`PARSER`: CommonMark with
raw HTML, GFM tables), both pure and total (any text is valid Markdown):

* :func:`clean_inline`, for page text: a link becomes its label (inline, reference or autolink), an
  image ``[image: alt]`` (nothing when its alt text is empty), inline HTML (tags, comments) goes;
  everything else stays as written, emphasis markers, escapes, entities and code spans included.
* :func:`plain_inline`, for headings and titles: as :func:`clean_inline`, and emphasis markers and code
  spans' backticks go too, escapes and entities are read (``\\*`` is ``*``, ``&amp;`` is ``&``).

Reference links resolve against the page's link reference definitions: pass the ``env`` that
:func:`parse_blocks` filled for the whole page, whose tokens also show which lines the definitions
took, so the caller can drop them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline, autolink, backtick
from markdown_it.token import Token

__all__ = ["PARSER", "clean_inline", "plain_inline", "parse_blocks"]

_InlineRule = Callable[[StateInline, bool], bool]
#: ``[label][ref]`` / ``[label][]`` left as text because ``ref`` has no definition on the page. Kept as a
#: regex over text tokens: CommonMark reads such a reference as plain text and markdown-it-py gives it no
#: token, yet on exported pages the definition was usually there and lost (a definition whose URL was a
#: template tag, ``[ref]: {% page "/x/" %}``, is empty once templates are stripped), so the label is kept
#: and the ``[ref]`` goes, as before this module.
_UNRESOLVED_REF = re.compile(r"\[([^\]]+)\]\[[^\]]*\]")


def _keep_source(rule: _InlineRule, kind: str) -> _InlineRule:
    """Wrap an inline rule so the ``kind`` token it pushes keeps the source it was read from in ``meta["source"]``.

    A code span's ``content`` has one space stripped from each side and an autolink's label is
    normalised (CommonMark), so neither could be written back as it was without it.
    """
    def with_source(state: StateInline, silent: bool) -> bool:
        start, n = state.pos, len(state.tokens)
        if not rule(state, silent):
            return False
        if not silent:
            for tok in state.tokens[n:]:
                if tok.type == kind:
                    tok.meta["source"] = state.src[start:state.pos]
                    break
        return True
    return with_source


def _parser(**options: bool) -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": True, **options}).enable("table")
    # Escapes and entities stay separate ``text_special`` tokens, so their source can be written back.
    md.disable("text_join")
    md.inline.ruler.at("backticks", _keep_source(backtick, "code_inline"))
    md.inline.ruler.at("autolink", _keep_source(autolink, "link_open"))
    # Only the text is rendered: no URL is normalised, and none is refused (``javascript:`` links too
    # are links, reduced to their label). markdown-it-py declares these as methods; assigning them on the
    # instance is how it is configured (its docs do the same), hence the two ignores.
    md.normalizeLink = md.normalizeLinkText = lambda url: url  # type: ignore[method-assign,assignment]
    md.validateLink = lambda url: True  # type: ignore[method-assign]
    return md


#: CommonMark with raw HTML and GFM tables; code spans keep their source.
PARSER = _parser()
#: Block structure only; each link reference definition is a ``definition`` token with its lines.
_BLOCK_PARSER = _parser(inline_definitions=True).disable("inline")
#: In a heading, ``*`` and backticks left as text (``**Q: why? **``, whose closing run follows a space, is
#: no emphasis in CommonMark) are emphasis gone wrong, so they go too; ``_`` stays (``snake_case``).
_STRAY_MARKS = str.maketrans("", "", "*`")
_EMPHASIS = frozenset({"em_open", "em_close", "strong_open", "strong_close", "s_open", "s_close"})


def parse_blocks(md: str) -> tuple[list[Token], dict[str, Any]]:
    """Parse ``md``'s block structure only (no inline pass).

    Returns:
        ``(tokens, env)``: the block tokens (each with ``map``, its ``[first, end)`` source lines; a link
        reference definition is a ``definition`` token) and the ``env`` to pass to :func:`clean_inline` /
        :func:`plain_inline`, whose ``"references"`` resolve reference links.
    """
    env: dict[str, Any] = {}
    return _BLOCK_PARSER.parse(md, env), env


def _render(tokens: Sequence[Token], marks: bool) -> str:
    out: list[str] = []
    autolink = False
    for tok in tokens:
        kind = tok.type
        if autolink:  # inside ``<https://...>``, already written as it was
            autolink = kind != "link_close"
        elif kind == "text":
            text = _UNRESOLVED_REF.sub(r"\1", tok.content) if "][" in tok.content else tok.content
            out.append(text if marks else text.translate(_STRAY_MARKS))
        elif kind == "text_special":  # an escape or an entity: its source, or what it stands for
            out.append(tok.markup if marks else tok.content)
        elif kind == "code_inline":
            out.append(tok.meta.get("source", tok.markup + tok.content + tok.markup) if marks else tok.content)
        elif kind in _EMPHASIS:
            if marks:
                out.append(tok.markup)
        elif kind == "image":
            alt = tok.content.strip()  # the alt text as written
            out.append(f"[image: {alt}]" if alt else "")
        elif kind == "link_open" and "source" in tok.meta:  # an autolink: the URL stays as written
            out.append(tok.meta["source"])
            autolink = True
        elif kind in ("softbreak", "hardbreak"):
            out.append("\n")
        # link_open / link_close (the label's tokens lie between them) and html_inline render as nothing
    return "".join(out)


def clean_inline(text: str, env: dict[str, Any] | None = None) -> str:
    """``text`` with links reduced to their labels, images to ``[image: alt]`` and inline HTML dropped.

    Everything else is kept as written (emphasis, escapes, entities, code spans: nothing inside a code
    span is touched). ``env`` is :func:`parse_blocks`'s, for reference links (without it, only inline
    links and autolinks are links).
    """
    # Every construct rendered differently from its source (a link, an image, inline HTML) holds one of these.
    if "<" not in text and "](" not in text and "][" not in text and not ("[" in text and env and env.get("references")):
        return text
    return _render(PARSER.parseInline(text, {} if env is None else env)[0].children or [], marks=True)


def plain_inline(text: str, env: dict[str, Any] | None = None) -> str:
    """``text`` as :func:`clean_inline` renders it, without emphasis markers or code spans' backticks.

    Escapes and entities are read (``\\_`` is ``_``, ``&amp;`` is ``&``); leading and trailing spaces go.
    """
    return _render(PARSER.parseInline(text, {} if env is None else env)[0].children or [], marks=False).strip()
