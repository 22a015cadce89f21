"""The extractive composer: the answer is the passage that answers, quoted whole, from as few pages as it takes.

The supporting chunks are cut into answer units (:mod:`agent.units`: sentences, list items, table rows). Each
unit is scored by two signals that carry to any wiki:

- *coverage*: the IDF-weighted share of the question's specific terms (:attr:`agent.terms.KeyTerms.specific`)
  that the unit holds with the context it is read in (page title, section headings, a list's lead-in, a
  table's header, the sentences beside it in its paragraph);
- *similarity*: the cosine between the question and the unit (with its title and section) under the bundled
  embedding model, which bridges paraphrases ("kid" for "child", "yearly" for "annual") without a word list.

A unit that states the answer type the question asks for (:func:`agent.answertype.states_type`: a number for
"how many", a period for "how long", ...) ranks above every unit that does not (for "how many hours", a unit
counting hours above one counting days, when any does: :func:`agent.answertype.states_unit`); among those,
``coverage + similarity_weight * similarity`` orders them.

The best unit is quoted with what makes it readable on its own: a list item with its list's lead-in and the
list itself (up to ``list_items`` items, as a Markdown list: the unit's own item with every sentence of it when
that is short (``paragraph_chars``), else with its next one, the other items by their first sentence; a list
without a lead-in under its heading, in bold), a table row with its header row (as a small Markdown table), a
sentence with its whole paragraph (for a sentence continuing a list item: the item's sentences) when
that is short (``paragraph_chars``), else with the sentence before it when that one holds question terms the
unit lacks (the topic sentence an answer leans on: "It must be ..." after the sentence naming the passcode), and with
the next one when the unit is a lead-in ending in ":" (or both fit in ``neighbour_chars``); a lead-in ending in ":" with a
fenced code block right below it comes with the block's body (the command it introduces), shown as a code block. Further units come from the
page already quoted while they add a specific term no quoted unit holds, state the type the question asks for
(a question asking for none gives no unit this pass) or score within ``other_page_margin`` of the best, up to
``max_units``; a unit of another page only (once) when it states the asked type, scores within
``other_page_margin`` of the best and holds in its own words a specific term no quoted unit holds (not only in
its page's title or headings: a page titled "New teammate setup" says nothing new about a new hire's laptop):
another page answers what
the first did not, never the same fact again. A multi-part question gets this per part, each from its own
support (the passages the part's gate accepted and every retrieved passage of the first one's page); a part with no support or no unit that speaks to it is named in a closing line ("Nothing found on: ...").

Every quoted piece becomes a citation whose quote is its exact text in the chunk (:mod:`agent.citations`
checks it), and nothing :mod:`screening` flags is ever a unit.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from tools.knowledge_search import Evidence

from .answertype import asked_type, asked_unit, mask_asked, states_type, states_unit
from .rewrite import definition_target, defines
from .models import Citation
from .terms import KeyTerms
from .text import Span, display_text
from .units import (Unit, code_after, is_code, is_list_item, item_start, list_block, next_list_item, paragraph_of,
                    quotable, units_of)

__all__ = ["Composer", "ComposerConfig", "Draft", "PartEvidence", "Similarity"]

#: ``similarity(question, texts) -> cosines`` (shape ``(len(texts),)``), e.g. the bundled embedding model's.
Similarity = Callable[[str, Sequence[str]], np.ndarray]

_ORDERED = re.compile(r"\s*\d{1,3}[.)]\s+")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+")
# "how do I request access?", "what are the steps": a procedure, answered by its steps.
_ASKS_STEPS = re.compile(r"^\W*(?:and\s+)?how\s+(?:do|can|should|would|could|to)\b|\bhow\s+(?:do|can|should)\s+"
                         r"(?:i|we|you)\b|\b(?:steps?|procedure)\b", re.I)


@dataclass(frozen=True, slots=True)
class ComposerConfig:
    """Sizes and weights of the composer.

    Attributes:
        window: chunks of the support read for units.
        max_units: units quoted per question (or per part), context sentences and list items not counted.
        list_items: items of a list quoted with its lead-in.
        max_chars: the answer's length budget (characters of quoted text).
        similarity_weight: weight of the unit's cosine against its coverage (both in [0, 1]).
        embedded_units: at most this many units (the best by coverage and type) are embedded per question.
        other_page_margin: a unit of another page is quoted (once) only when it states the asked type as the best
            unit does, its score (coverage plus weighted similarity) is within this of the best's and it holds a
            specific term no quoted unit holds.
        neighbour_chars: a sentence is quoted with the next one of its paragraph when both fit in this many
            characters (a short statement and the sentence that completes it).
        paragraph_chars: a sentence whose whole paragraph fits in this many characters is quoted with its
            paragraph (the facts an answer needs sit beside the sentence that matched best).
    """

    window: int = 8
    max_units: int = 3
    list_items: int = 8
    max_chars: int = 900
    similarity_weight: float = 2.0
    embedded_units: int = 24
    neighbour_chars: int = 320
    other_page_margin: float = 0.3
    paragraph_chars: int = 400


@dataclass(slots=True)
class Draft:
    """An answer before validation: Markdown with ``[n]`` markers, its citations and the parts not answered."""

    text: str
    citations: list[Citation]
    unanswered: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class PartEvidence:
    """One part of a question (the whole question when it has one part) with what its own search found.

    Attributes:
        text: the part as the user wrote it.
        terms: its key terms.
        evidence: its passages, the supporting ones first.
        supported: whether the gate accepted its evidence (an unsupported part is only named).
        support: the chunk ids the gate accepted (empty: any of ``evidence``); the part is answered from these and
            from every passage of ``evidence`` on the page of the first of them (the sentence that answers may sit
            in a passage of that page the gate did not count).
    """

    text: str
    terms: KeyTerms
    evidence: list[Evidence]
    supported: bool = True
    support: frozenset[str] = frozenset()


@dataclass(slots=True)
class _Scored:
    unit: Unit
    coverage: float
    typed: bool  # states what the question asks for (True for every unit when it asks for nothing in particular)
    similarity: float = 0.0
    asked: bool = True  # whether the question asks for a type at all

    @property
    def score(self) -> tuple[bool, float]:
        return self.typed, self.coverage + self.similarity


class Composer:
    """Builds a cited extractive answer (see the module docstring).

    Args:
        config: sizes and weights.
        analyze: the index analyzer (text to stemmed terms).
        similarity: question-to-text cosines (None: coverage and type alone order the units).
    """

    def __init__(self, config: ComposerConfig, analyze: Callable[[str], list[str]],
                 similarity: Similarity | None = None) -> None:
        self.config = config
        self.analyze = analyze
        self.similarity = similarity

    # -- scoring -------------------------------------------------------------------------------
    def rank(self, question: str, terms: KeyTerms, evidence: list[Evidence],
             support: frozenset[str] = frozenset()) -> list[_Scored]:
        """The units of ``evidence`` (those of ``support`` when given), best first (see the module docstring)."""
        units = [u for u in units_of(evidence, self.analyze, self.config.window)
                 if not support or u.chunk_id in support]
        spec = _topic(terms, self.analyze)
        total = sum(terms.weights[t] for t in spec)
        kind = asked_type(question)
        target = definition_target(question)
        procedure = kind is None and bool(_ASKS_STEPS.search(question))
        scored = []
        for u in units:
            have = u.terms | u.context | u.near
            cov = sum(terms.weights[t] for t in spec if t in have) / total if total > 0 else 0.0
            if target is not None:  # "what's PTEP?": a unit that defines it ("post-termination exercise period (PTEP)")
                typed = defines(u.span.text, target)
            elif procedure:  # "how do I declare an incident?": the steps, a list or the lead-in of one
                typed = u.kind == "item" or self._leads_list(u)
            else:
                typed = kind is None or states_type(mask_asked(u.span.text, kind, terms.weights, self.analyze), kind,
                                                          _setting(u))
            scored.append(_Scored(u, cov, typed, asked=target is not None or procedure or kind is not None))
        unit = asked_unit(question) if kind is not None and kind.startswith("period") else None
        if unit is not None and any(s.typed and states_unit(s.unit.span.text, unit) for s in scored):
            for s in scored:  # "how many hours": a sentence counting hours before one counting days
                s.typed = s.typed and states_unit(s.unit.span.text, unit)
        scored.sort(key=lambda s: (s.typed, s.coverage, -s.unit.rank), reverse=True)
        if self.similarity is not None and scored:
            head = scored[: self.config.embedded_units]
            sims = self.similarity(question, [_unit_text(s.unit) for s in head])
            for s, sim in zip(head, sims):
                s.similarity = self.config.similarity_weight * float(sim)
        scored.sort(key=lambda s: s.score, reverse=True)
        return scored

    # -- answers -------------------------------------------------------------------------------
    def answer(self, parts: list[PartEvidence]) -> Draft:
        """Answer each part (one for a plain question) from its own support; see the module docstring.

        Returns:
            The draft; ``Draft.text`` is empty when no part has a unit to quote.
        """
        blocks: list[list[tuple[Evidence, list[Span], str]]] = []
        unanswered: list[str] = []
        quoted: set[tuple[str, int]] = set()
        for part in parts:
            if not part.supported:
                unanswered.append(part.text)
                continue
            ranked = self.rank(part.text, part.terms, part.evidence, _with_first_page(part.evidence, part.support))
            picks = self._pick(ranked, part.terms, quoted)
            if not picks:
                unanswered.append(part.text)
                continue
            blocks.append(picks)
        return self._render(blocks, unanswered if len(parts) > 1 else [])

    def _pick(self, ranked: list[_Scored], terms: KeyTerms, quoted: set[tuple[str, int]]
              ) -> list[tuple[Evidence, list[Span], str]]:
        """The best unit with its context, then units of the same page that add a term or the asked type."""
        cfg = self.config
        if not ranked:
            return []
        best = ranked[0]
        if best.coverage <= 0 and best.similarity <= 0:
            return []
        page = best.unit.ev.chunk.doc_id
        spec = set(_topic(terms, self.analyze))
        out: list[tuple[Evidence, list[Span], str]] = []
        covered: set[str] = set()
        used = 0
        other_page = False
        said: set[str] = set()
        for s in ranked:
            if len(out) >= cfg.max_units:
                break
            u = s.unit
            have = (u.terms | u.context | u.near) & spec
            if u.key in quoted:
                continue
            # as good an answer as the best: the asked type, and a score within other_page_margin of the best's
            close = s.typed == best.typed and sum(s.score[1:]) >= sum(best.score[1:]) - cfg.other_page_margin
            if u.ev.chunk.doc_id != page:
                # Another page only for what the quoted one leaves out: a part of the question it does not speak to,
                # said in the unit's own words (its title, headings and neighbours say what the page is about).
                if other_page or not out or not close or not ((u.terms & spec) - covered):
                    continue
                other_page = True
            elif out and not (have - covered) and not ((s.typed and s.asked) or close):
                continue  # a unit of the quoted page earns its place by a term no quote holds, the type, or its score
            if out and s.coverage <= 0:
                continue
            spans, shape = self._context(u, terms)
            if any((u.chunk_id, sp.start) in quoted for sp in spans) or _said(u.span.text) in said:
                continue  # already quoted, or the same words from another copy of the page (one template)
            size = sum(len(sp.text) for sp in spans)
            if out and used + size > cfg.max_chars:
                continue
            out.append((u.ev, spans, shape))
            quoted.update((u.chunk_id, sp.start) for sp in spans)
            said.update(_said(sp.text) for sp in spans)
            covered |= have
            used += size
        return out

    def _context(self, u: Unit, terms: KeyTerms) -> tuple[list[Span], str]:
        """The spans quoted for ``u`` and how they are shown: ``"prose"``, ``"list"`` or ``"table"``."""
        text = u.ev.chunk.text
        if u.kind == "row":
            return ([u.lead, u.span] if u.lead is not None else [u.span]), "table"
        if u.kind == "item":
            lead, items = list_block(text, u.span)
            groups: dict[int | None, list[Span]] = {}  # an item's sentences, by the item's line
            for x in items:
                groups.setdefault(item_start(text, x), []).append(x)
            # the unit's own item whole when short (else with the sentence after it), the others by their first
            # sentence (the step or rule they state)
            mine = item_start(text, u.span)
            cap = self.config.paragraph_chars
            whole = [(g if sum(len(x.text) for x in g) <= cap else g[:2]) if k == mine else g[:1]
                     for k, g in groups.items()]
            if len(whole) > self.config.list_items:
                i = next(j for j, g in enumerate(whole) if any(x.start == u.span.start for x in g))
                lo = max(0, min(i - self.config.list_items // 2, len(whole) - self.config.list_items))
                whole = whole[lo:lo + self.config.list_items]
            return ([lead] if lead is not None else []) + [x for g in whole for x in g], "list"
        para = [p for p in paragraph_of(text, u.span) if quotable(text, p)]
        if len(para) > 1 and sum(len(p.text) for p in para) <= self.config.paragraph_chars:
            items = _list_led_by(text, para[-1])
            return ([*para, *items[: self.config.list_items]], "list") if items else (self._with_code(text, para), "prose")
        spans = [u.span]
        before, after = u.before, u.after  # neither a question nor flagged (agent.units.quotable)
        if before is not None:
            lacking = set(terms.specific) - u.terms
            if lacking & set(self.analyze(before.text)):
                spans.insert(0, before)  # a question ("Moving abroad?") is never quoted, not even as context
        if after is not None and (u.span.text.rstrip().endswith(":")
                                  or len(u.span.text) + len(after.text) <= self.config.neighbour_chars):
            spans.append(after)
        items = _list_led_by(text, u.span) if after is None else []
        return ([*spans, *items[: self.config.list_items]], "list") if items else (self._with_code(text, spans), "prose")

    def _with_code(self, text: str, spans: list[Span]) -> list[Span]:
        """``spans`` and, when the last one is a lead-in ending in ":" with a fenced code block right below it
        ("... using the `/genie` command:"), the block's body (up to ``neighbour_chars``)."""
        if not spans[-1].text.rstrip().endswith(":"):
            return spans
        code = code_after(text, spans[-1], self.config.neighbour_chars)
        return [*spans, code] if code is not None else spans

    @staticmethod
    def _leads_list(u: Unit) -> bool:
        """Whether ``u`` is the last sentence of its paragraph and the lead-in of the list right below it."""
        return u.kind == "sentence" and u.after is None and bool(_list_led_by(u.ev.chunk.text, u.span))

    @staticmethod
    def _render(blocks: list[list[tuple[Evidence, list[Span], str]]], unanswered: list[str]) -> Draft:
        numbers: dict[str, int] = {}
        citations: list[Citation] = []
        paragraphs: list[str] = []
        for picks in blocks:
            for ev, spans, shape in picks:
                ch = ev.chunk
                n = numbers.setdefault(ch.chunk_id, len(numbers) + 1)
                for sp in spans:
                    citations.append(Citation(n, ch.chunk_id, ch.doc_id, ch.title, ch.url, ch.section, sp.text))
                shown = _show(ch.text, spans, shape, n)
                if shape == "list" and is_list_item(ch.text[:spans[0].start].rsplit("\n", 1)[-1]):
                    heading = _heading_above(ch.text, spans[0].start) or (ch.section_path or ("",))[-1]
                    if heading:  # a list without a lead-in is read under its heading ("Highly restricted")
                        shown = f"**{display_text(heading)}:**\n{shown}"
                paragraphs.append(shown)
        text = "\n\n".join(paragraphs)
        if unanswered and paragraphs:
            text += "\n\nNothing found on: " + "; ".join(f"\u201c{u}\u201d" for u in unanswered) + "."
        return Draft(text, citations, unanswered)


#: Words that ask for an answer type ("how long", "how often"), not about a topic.
_TYPE_WORDS = ("long", "often", "many", "much", "soon", "fast", "quickly", "far", "big", "large")


def _topic(terms: KeyTerms, analyze: Callable[[str], list[str]]) -> list[str]:
    """The question's specific terms without those that only ask for an answer type ("how *often*")."""
    asking = {t for w in _TYPE_WORDS for t in analyze(w)}
    return [t for t in terms.specific if t not in asking or terms.surface.get(t, t) not in _TYPE_WORDS]


def _heading_above(text: str, pos: int) -> str:
    """The text of the nearest Markdown heading line above ``pos`` in ``text`` ("" when none)."""
    for line in reversed(text[:pos].split("\n")):
        m = _HEADING.match(line)
        if m:
            return line[m.end():].strip()
    return ""


def _list_led_by(text: str, span: Span) -> list[Span]:
    """The items of the list ``span`` (a sentence) is the lead-in line of, else ``[]``."""
    first = next_list_item(text, span)
    if first is None:
        return []
    lead, items = list_block(text, first)
    return items if lead is not None and lead.start == span.start else []


def _with_first_page(evidence: list[Evidence], support: frozenset[str]) -> frozenset[str]:
    """``support`` (chunk ids) and the ids of every passage of ``evidence`` on the page of its first supporting
    passage; empty (any passage) when ``support`` is."""
    page = next((e.chunk.doc_id for e in evidence if e.chunk.chunk_id in support), None)
    return support | {e.chunk.chunk_id for e in evidence if e.chunk.doc_id == page} if page is not None else support


def _said(text: str) -> str:
    """A span's words, normalised: two pages made from one template say the same thing once."""
    return " ".join(re.findall(r"\w+", text.lower()))


def _setting(u: Unit) -> str:
    """The text a unit is read in: its page title, section headings and lead (a table's header row, a list's lead-in)."""
    c = u.ev.chunk
    return f"{c.title}\n{' '.join(c.section_path)}\n{u.lead.text if u.lead is not None else ''}"


def _unit_text(u: Unit) -> str:
    """What the similarity reads for a unit: its page title and section, then its text (and its lead-in)."""
    c = u.ev.chunk
    lead = f"{display_text(u.lead.text)} " if u.lead is not None else ""
    return f"{c.title} {' '.join(c.section_path)}: {lead}{display_text(u.span.text)}"


def _show(text: str, spans: list[Span], shape: str, n: int) -> str:
    """Quoted spans as Markdown: prose joined, a list as a list (its lead-in first), a table row under its header."""
    if shape == "table":
        cells = [[display_text(c.strip()) for c in sp.text.strip().strip("|").split("|")] for sp in spans]
        width = max(len(r) for r in cells)
        lines = ["| " + " | ".join(r + [""] * (width - len(r))) + " |" for r in cells]
        if len(lines) > 1:
            lines.insert(1, "|" + "---|" * width)
        lines[-1] += f" [{n}]"
        return "\n".join(lines)
    if shape == "list":
        out: list[str] = []
        prose = False  # the lead-in may be a few sentences: one line
        for sp in spans:
            line = text[:sp.start].rsplit("\n", 1)[-1]
            if is_list_item(line):
                mark = _ORDERED.match(line)
                out.append(f"{mark.group().strip() if mark else '-'} {display_text(sp.text)}")
                prose = False
            elif out and not prose and item_start(text, sp) is not None:  # the item's next sentence
                out[-1] += " " + display_text(sp.text)
            elif prose:
                out[-1] += " " + display_text(sp.text)
            else:
                out.append(display_text(sp.text))
                prose = True
        out[-1] += f" [{n}]"
        return "\n".join(out)
    shown = " ".join(display_text(sp.text) for sp in spans if not is_code(text, sp)) + f" [{n}]"
    return shown + "".join(f"\n```\n{sp.text}\n```" for sp in spans if is_code(text, sp))
