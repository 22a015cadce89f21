"""The extractive answerer: a few verbatim sentences from the evidence, each with ``[n]``.

Sentences (:func:`agent.text.sentence_spans`) of the supporting chunks are picked greedily, in
the manner of Maximal Marginal Relevance (Carbonell & Goldstein 1998) with a coverage objective
(the key terms of a multi-part question should each be answered):

- *new coverage*: the IDF-weighted share of the question's key terms the sentence contains that
  earlier picks did not (already covered terms count a third);
- *vocabulary*: overlap with the feedback terms of the evidence (the words the pages use for
  what was asked, e.g. "acknowledge" for "ack"), which bridges paraphrases;
- *definition*: for "what's X?", a bonus for a sentence that defines X ("Long Name (X)");
- *answer type*: a bonus when the question asks for a quantity, time or amount ("how long",
  "how much", "when", "max") and the sentence states one, or asks for a command and the
  sentence shows one, or asks which option / setting / status to pick and the sentence names one
  in quotes or code ("use the \"Out Sick\" option"), or asks whether something is allowed ("am
  I allowed to...", "can I...", "do I need approval...") and the sentence states a rule (must,
  required, approval, prohibited, allowed), or asks where (:func:`agent.answertype.asked_type`
  ``place``) and the sentence names a concrete place with a key term (a ``#channel``, a link, a
  path, an ``@handle`` or an address);
- *priors*: the chunk's cosine to the question and its rank;
- *redundancy*: minus the term overlap (Jaccard) with the sentences already picked.

- *identifier*: when the question names an exact term (``E42``, ``/genie``, ``PTEP``:
  :func:`tools.identifiers.identifiers`), the sentences holding it come first.

Sentences overlapping a finding of :mod:`screening` (a credential, personal data, an instruction
addressed to an assistant; judged in the whole chunk) are never candidates. A table row is quoted
only when the question asks for what it holds (it names one of the question's identifiers, or at
least two of its key terms or half of their weight, or one key term and the figure or command the
question asks for): "E108 | Restart the agent" answers nothing
about VPN access. A quoted row is shown with its table's header row (``Code: E42; Fix: Restart``),
both quoted verbatim.

Answers stay short: at most ``max_sentences`` (5), each after the first kept only while its
marginal gain (new coverage, priors, minus redundancy) is at least 0.15 and it earns its place: it adds
a key term no pick holds yet, or it holds the answer type asked for (the figure, command, option,
rule or place above), or it comes from a passage a pick already quotes. A sentence of another passage
that adds none of these (a definition when the question asks how, another topic's cadence) is left
out however close its page is to the question, and at most ``topic_sentences`` (3) picks may lack the
answer type asked for: the rest only state it. The first ``chunks`` passages are read; a question
asking for a figure, a command or an identifier also reads the next ``chunks``, but only for
sentences that state what was asked and hold a key term (the sentence with ``/genie whoisoncall`` may sit
in the ninth passage). A multi-part question (``parts``) reads
``2 * chunks`` passages and gets its parts answered one by one: up to ``part_sentences`` for each
part's own key terms, with the answer type that part asks for (a figure for "how fast", a command
for "which channel"); a part no sentence speaks to is named in a closing line ("Nothing found on:
..."). When the planner has gated each part on its own search (:meth:`ExtractiveAnswerer.answer_parts`),
each part is answered from its own passages, the ones its gate accepted first, scored as a question of
its own (its answer type, its command, its rule); the words all parts share (the question's setting,
"zoom is down") count a third for it, and only its own words make a sentence one that answers it; a
part its gate refused is only named. When the gate asked for several citations, the picks span at least that many distinct
chunks. A sentence alone between two picked sentences of one paragraph is quoted too (an answer
with a hole in the middle of a paragraph reads as a non sequitur), and so is the sentence right after a
picked one that opens by pointing back to it ("This means...", "If any of the above..."). A how-to
question ("how do we call each other?") also gets the steps after a picked sentence that names the way:
when it ends with ":" or is followed in its paragraph by a lead-in that does ("To use Slack calling, do the
following:"), the lead-in and up to ``steps`` items of its list are quoted (:meth:`ExtractiveAnswerer._add_steps`). Each picked sentence becomes a citation whose quote is the sentence's exact
text in the chunk.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from tools.identifiers import contains, identifiers
from tools.knowledge_search import Evidence

from .models import Citation
from .answertype import asked_type
from .rewrite import defines
from .screen import span_flagged
from .terms import KeyTerms
from .text import Span, display_text, sentence_spans

__all__ = ["ExtractiveAnswerer", "ExtractiveConfig", "Draft", "PartEvidence", "table_header"]

_FIGURE = re.compile(r"(?:[$€£]\s?\d|\d+(?:[.,]\d+)?\s*(?:%|days?|weeks?|months?|years?|hours?|minutes?|mins?|"
                     r"business days|lines|per|utc|am|pm|usd|eur)|\b\d{1,2}(?:st|nd|rd|th)\b|\b\d{1,2}:\d{2}\b|"
                     r"\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|weekly|daily|monthly|annually|"
                     r"bi-weekly|biweekly|quarterly|yearly)\b)", re.I)
_ASKS_FIGURE = re.compile(r"\bhow (?:much|many|long|often|quickly|fast|soon|far|big|large)\b|\b(?:when|max|maximum|minimum|"
                          r"limits?|budgets?|deadlines?|costs?|prices?|size|retention|notice|allowance|stipend|pays?|paid|"
                          r"expensed?|reimburs\w*|covers?|covered)\b", re.I)
_ASKS_COMMAND = re.compile(r"\b(?:command|slash|cli|shortcut|channel)\b", re.I)
_COMMAND = re.compile(r"(?:^|\s|`)/[a-z][\w-]*|#[a-z][\w-]+")
# "what option do I pick?", "which status should I set?": the answer is a label the page names in
# quotes or code ("use the \"Out Sick\" option"), not a sentence that merely mentions options.
_ASKS_LABEL = re.compile(r"\b(?:what|which|whats|what's)\s+(?:\w+\s+)?(?:option|setting|type|field|button|label|status|"
                         r"category|value|choice|template|form|menu|tab)s?\b", re.I)
# "am I allowed to...?", "can I...?", "do I need approval...?": the answer is a rule, so a sentence stating
# one (an obligation, a permission, a prohibition, an approval step) is preferred to one on the topic.
_ASKS_RULE = re.compile(r"^\W*(?:am i|are we|is it|are you)\s+(?:\w+\s+)?(?:allowed|permitted|ok|okay|fine|able)\b|"
                        r"^\W*(?:can|may|could)\s+(?:i|we)\b|\b(?:do|does)\s+(?:i|we|it)\s+need\s+"
                        r"(?:\w+\s+)?(?:approval|permission|sign-?off)\b", re.I)
_RULE = re.compile(r"\b(?:must|required?|requires|allowed|not allowed|permitted|prohibited|forbidden|approval|approve[ds]?|"
                   r"permission|may not|cannot|can't|need to|needs to|have to|has to|not permitted|exceeds?)\b", re.I)
# "where do we tell users?", "where's the recording?": the answer is a concrete location (a #channel, a
# link, a path, an @handle or an address), not a sentence that merely mentions a tool.
_PLACE = re.compile(r"(?:^|[\s(`])#[a-z][\w-]+|https?://|\[[^\]\n]+\]\(|(?:^|[\s`])/[\w-]+/|@[\w-]+|"
                    r"\b[\w.+-]+@[\w-]+\.\w")
_LABEL = re.compile(r"\"[^\"\n]{2,40}\"|\u201c[^\u201d\n]{2,40}\u201d|`[^`\n]{2,40}`|\*\*[^*\n]{2,40}\*\*")


@dataclass(frozen=True, slots=True)
class ExtractiveConfig:
    """Sizes and weights of the answerer (``part_sentences``: at most this many per part of a
    multi-part question; ``topic_sentences``: at most this many picks that do not state the answer
    type asked for, the rest of ``max_sentences`` only for sentences that do)."""

    max_sentences: int = 5
    topic_sentences: int = 3
    part_sentences: int = 2
    steps: int = 4
    max_chars: int = 1000
    mmr_lambda: float = 0.7
    chunks: int = 8


@dataclass(slots=True)
class Draft:
    """An answer before validation: Markdown with markers and its citations."""

    text: str
    citations: list[Citation]
    unanswered: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class PartEvidence:
    """One part of a multi-part question with what its own search found.

    Attributes:
        text: the part as the user wrote it ("which channel do I report it in").
        terms: the part's key terms.
        evidence: the passages of the part's own search, the ones its gate accepted first.
        supported: whether the part's gate accepted its evidence (an unsupported part is only named).
        support: the chunk ids the part's gate accepted; when the answer needs more sources than its
            best sentences span, it takes them from these chunks (empty: from any of ``evidence``).
    """

    text: str
    terms: KeyTerms
    evidence: list[Evidence]
    supported: bool = True
    support: frozenset[str] = frozenset()


@dataclass(slots=True, eq=False)
class _Cand:
    ev: Evidence
    span: Span
    terms: set[str]
    score: float
    chunk_rank: int
    row: bool = False
    header: Span | None = None
    figure: bool = False
    command: bool = False
    typed: bool = False  # holds the answer type the question asks for (see _candidates)


def _is_row(text: str, span: Span) -> bool:
    return text[:span.start].rsplit("\n", 1)[-1].lstrip().startswith("|")


def table_header(text: str, row_start: int) -> Span | None:
    """The header row of the Markdown table whose row starts at ``row_start`` in ``text``, or ``None``.

    The header is the table's first line when the line after it is a delimiter row (``|---|---|``);
    the span is the header's cells, without the leading ``|`` (as :func:`agent.text.sentence_spans`
    gives rows). ``None`` when the row is the header itself or the table has no header in ``text``.
    """
    line_start = text.rfind("\n", 0, row_start) + 1
    lines: list[tuple[int, str]] = []
    pos = line_start
    while True:
        prev_end = pos - 1
        if prev_end <= 0:
            break
        prev_start = text.rfind("\n", 0, prev_end) + 1
        line = text[prev_start:prev_end]
        if not line.lstrip().startswith("|"):
            break
        lines.append((prev_start, line))
        pos = prev_start
    if len(lines) < 2:
        return None
    (h_start, header), (_, delim) = lines[-1], lines[-2]
    if not set(delim.strip()) <= set("|-: "):
        return None
    lead = len(header) - len(header.lstrip(" |"))
    body = header.rstrip()
    return Span(h_start + lead, h_start + len(body), text[h_start + lead:h_start + len(body)])


def _cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split("|")]


def _row_display(header: str, row: str) -> str:
    """A table row with its header: ``Code: E42; Fix: Restart the agent``."""
    heads, cells = _cells(header), _cells(row)
    if len(heads) != len(cells):
        return f"{display_text(header)} — {display_text(row)}"
    return "; ".join(f"{display_text(h)}: {display_text(c)}" if h else display_text(c)
                     for h, c in zip(heads, cells) if c)


# A sentence opening like this continues the one before it (discourse anaphora and result connectives).
# "how do we call each other?", "how do I request access?": a procedure, answered by its steps.
_ASKS_STEPS = re.compile(r"^\W*(?:and\s+)?how\s+(?:do|can|should|would|could|to)\b|\bhow\s+(?:do|can|should)\s+"
                         r"(?:i|we|you)\b|\b(?:steps?|procedure)\b", re.I)
_POINTS_BACK = re.compile(r"(?:This|That|These|Those|Such|Otherwise|Therefore|Thus|Hence|In that case|If so|If not|"
                          r"If (?:any|all|none|one) of (?:the )?(?:above|these|those|this|them))\b")
_LIST_MARK = re.compile(r"\s*(?:[-*+]|\d{1,3}[.)])\s+")
_HEADING_LINE = re.compile(r"(?m)^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")


def _item_heading(text: str, span: Span, section: str) -> str | None:
    """The context a list item sits in, for an item of a bulleted or numbered list: the heading above it
    (the last Markdown heading before it in ``text``, else the last heading of the chunk's ``section``
    path, "A > B" gives "B"; left out when the item already names it) and the list's lead-in line
    ("**Do not:**", "Examples:"), as the item's prefix: "Heading — Lead-in: " or "Heading — ". ``None``
    for a sentence that is not a list item or has no context."""
    line = text[:span.start].rsplit("\n", 1)[-1]
    if not _LIST_MARK.fullmatch(line):
        return None
    found = _HEADING_LINE.findall(text[:span.start])
    heading = (found[-1] if found else (section or "").split(" > ")[-1]).strip().strip("*_ ")
    if heading.lower() in span.text.lower():
        heading = ""
    lead = ""
    for prev in reversed(text[:span.start].split("\n")[:-1]):
        if not prev.strip() or _LIST_MARK.match(prev) or prev.startswith((" ", "\t")):
            continue  # blank lines, the list's other items and their continuation lines
        if not _HEADING_LINE.match(prev):
            bare = prev.strip().strip("*_ ")
            if bare.endswith(":") and len(bare) <= 100:
                lead = display_text(bare)
        break
    if heading and heading.lower() in lead.lower():
        heading = ""  # "Cross-border moves require the following:" already says where it is
    joined = " \u2014 ".join(x for x in (display_text(heading) if heading else "", lead) if x)
    if not joined:
        return None
    return f"{joined} " if lead else f"{joined} \u2014 "


@functools.lru_cache(maxsize=4096)
def _spans(text: str) -> tuple[Span, ...]:
    """:func:`agent.text.sentence_spans`, cached by chunk text (the same passages come back turn after turn)."""
    return tuple(sentence_spans(text))


class ExtractiveAnswerer:
    """Builds a cited answer from evidence without an LLM."""

    def __init__(self, config: ExtractiveConfig, analyze: Callable[[str], list[str]]) -> None:
        self.config = config
        self.analyze = analyze

    def answer(self, evidence: list[Evidence], terms: KeyTerms, min_sources: int = 1,
               question: str = "", vocabulary: list[str] | None = None, define: str | None = None,
               parts: list[tuple[str, KeyTerms]] | None = None) -> Draft:
        """Pick sentences from ``evidence`` (best first) for a question with key terms ``terms``.

        Args:
            evidence: supporting passages first.
            terms: the question's key terms with IDF weights.
            min_sources: distinct chunks the picks must span (the gate's requirement).
            question: the question text (for the answer-type bonus and its identifiers).
            vocabulary: analysed feedback terms (words the evidence uses for the topic).
            define: for a "what's X?" question, the term X; sentences defining it get a bonus.
            parts: for a multi-part question, ``(part text, part key terms)`` per part; each part
                gets its own best sentence, and parts nothing speaks to are listed in
                :attr:`Draft.unanswered` and named at the end of the text.

        Returns:
            The draft; ``Draft.text`` is empty when no sentence qualifies.
        """
        cfg = self.config
        wants_figure = bool(_ASKS_FIGURE.search(question))
        multi = bool(parts and len(parts) >= 2)
        cands = self._candidates(evidence, terms, question, vocabulary, define, multi)
        picked: list[_Cand] = []
        unanswered: list[str] = []
        if multi:
            shared = set.intersection(*(set(pt.weights) for _, pt in parts))
            per_part = max(1, min(cfg.part_sentences, cfg.max_sentences // len(parts)))
            for part_text, part_terms in parts:
                own = {t: w for t, w in part_terms.weights.items() if t not in shared} or dict(part_terms.weights)
                figure = bool(_ASKS_FIGURE.search(part_text))
                got = self._pick(cands, KeyTerms(own), picked, per_part, require_hit=True, figure=figure,
                                 asks_figure=figure, command=bool(_ASKS_COMMAND.search(part_text)))
                if not got:
                    unanswered.append(part_text)
                picked.extend(got)
            if not picked:
                picked = self._pick(cands, terms, [], cfg.max_sentences, asks_figure=wants_figure)
        else:
            picked = self._pick(cands, terms, [], cfg.max_sentences, asks_figure=wants_figure)
        picked = self._spread(picked, cands, terms, min_sources)
        filled = self._fill_gaps(picked, min_sources, displace=not multi)
        if not multi and _ASKS_STEPS.search(question):
            filled = self._add_steps(filled, set(map(id, picked)))
        return self._render(filled, unanswered)

    def _spread(self, picked: list[_Cand], cands: list[_Cand], terms: KeyTerms, min_sources: int) -> list[_Cand]:
        """``picked`` plus the best candidates of other chunks until the picks span ``min_sources`` chunks."""
        picked = list(picked)
        key = set(terms.weights)
        distinct = {p.ev.chunk.chunk_id for p in picked}
        if len(distinct) < min_sources:
            covered = {x for p in picked for x in p.terms & key}
            ids = {id(p) for p in picked}
            rest = [c for c in cands if id(c) not in ids]
            for c in sorted(rest, key=lambda c: -self._gain(c, terms, covered, picked)):
                if len(distinct) >= min_sources:
                    break
                if c.ev.chunk.chunk_id in distinct:
                    continue
                picked.append(c)
                distinct = {p.ev.chunk.chunk_id for p in picked}
        return picked

    def answer_parts(self, parts: list[PartEvidence], min_sources: int = 1) -> Draft:
        """Answer a multi-part question part by part, each from the evidence its own gate accepted.

        Each supported part's sentences are read from its own passages (its support first) and scored
        for its own words and answer type, as a question of its own would be (:meth:`answer`'s priors:
        the figure for "how fast", the command for "which channel", the rule for "do I need
        approval"); up to ``part_sentences`` are picked per part, for the terms the other parts do not
        share. A part the gate found nothing for (``supported`` False), and a supported part no
        sentence speaks to, is named in the closing line ("Nothing found on: ...").

        Args:
            parts: every part of the question, in question order.
            min_sources: distinct chunks the picks must span (the parts' gates' requirement).

        Returns:
            The draft; ``Draft.unanswered`` lists the parts without an answer, in question order.
        """
        cfg = self.config
        answered = [p for p in parts if p.supported]
        shared = set.intersection(*(set(p.terms.weights) for p in parts)) if len(parts) >= 2 else set()
        per_part = max(1, min(cfg.part_sentences, cfg.max_sentences // max(len(parts), 1)))
        picked: list[_Cand] = []
        unanswered: list[str] = []
        procedural: set[int] = set()
        pool: list[_Cand] = []
        union: dict[str, float] = {}
        for part in parts:
            if not part.supported:
                unanswered.append(part.text)
                continue
            # The words every part shares (the question's setting: "zoom is down ... outage") still tell
            # a part's sentences apart, at a third of their weight; only the part's own words make a hit.
            own = {t: w / 3 if t in shared else w for t, w in part.terms.weights.items()}
            cands = self._candidates(part.evidence, part.terms, part.text, None, None, multi=False)
            pool.extend(c for c in cands if not part.support or c.ev.chunk.chunk_id in part.support)
            union.update(part.terms.weights)
            figure = bool(_ASKS_FIGURE.search(part.text))
            got = self._pick(cands, KeyTerms(own), picked, per_part, require_hit=True, figure=figure,
                             asks_figure=figure, command=bool(_ASKS_COMMAND.search(part.text)),
                             hit=set(own) - shared or None)
            if not got:
                unanswered.append(part.text)
            picked.extend(got)
            if _ASKS_STEPS.search(part.text):
                procedural.update(map(id, got))
        if not picked or not answered:
            return Draft("", [], unanswered)
        picked = self._spread(picked, pool, KeyTerms(union), min_sources)
        return self._render(self._add_steps(self._fill_gaps(picked, min_sources, displace=False), procedural),
                            unanswered)

    def _candidates(self, evidence: list[Evidence], terms: KeyTerms, question: str, vocabulary: list[str] | None,
                    define: str | None, multi: bool) -> list[_Cand]:
        """The sentences of ``evidence`` that may be quoted, each with its prior (see :meth:`answer`)."""
        cfg = self.config
        key = set(terms.weights)
        vocab = set(vocabulary or ()) - key
        wants_figure = bool(_ASKS_FIGURE.search(question))
        wants_command = bool(_ASKS_COMMAND.search(question))
        wants_label = bool(_ASKS_LABEL.search(question))
        wants_rule = bool(_ASKS_RULE.search(question))
        wants_place = asked_type(question) == "place"
        exact = identifiers(question)
        cands: list[_Cand] = []
        # A multi-part question reads twice as many passages (each part's may rank lower); so does a
        # question asking for an answer type (a figure, a command) or an identifier, but past the
        # first ``chunks`` passages only for sentences that state what was asked.
        typed = wants_figure or wants_command or bool(exact)
        window = cfg.chunks * 2 if multi or typed else cfg.chunks
        for rank, ev in enumerate(evidence[:window]):
            cos = max(ev.cosine or 0.0, 0.0)
            text = ev.chunk.text
            if rank >= cfg.chunks and not multi and not (
                    (wants_figure and _FIGURE.search(text)) or (wants_command and _COMMAND.search(text))
                    or any(contains(text, x) for x in exact)):
                continue  # nothing in this later passage states what was asked: not worth splitting
            for span in _spans(text):
                if span_flagged(text, span.start, span.end):
                    continue  # a credential, personal data or a planted instruction is never quoted
                heading = text[:span.start].rsplit("\n", 1)[-1].lstrip().startswith("#")
                if heading and not (define and defines(span.text, define)):
                    continue  # a heading line names a topic, it answers nothing (except "what's X?")
                t = set(self.analyze(span.text))
                has_exact = any(contains(span.text, x) for x in exact)
                figure = bool(_FIGURE.search(span.text))
                command = bool(_COMMAND.search(span.text))
                row = _is_row(text, span)
                header = None
                if row:
                    header = table_header(text, span.start)
                    if header is not None and header.start == span.start:
                        continue  # the header row itself answers nothing
                    asked = has_exact or len(t & key) >= 2 or terms.coverage(t) >= 0.5 or (
                        define is not None and defines(span.text, define)) or (
                        bool(t & key) and ((wants_figure and figure) or (wants_command and command)))
                    if not asked:
                        continue  # a table row answers only a question about what it holds
                prior = 0.3 * cos + 0.1 / (1 + rank)
                if vocab:
                    prior += 0.25 * len(t & vocab) / len(vocab)
                if rank >= cfg.chunks and not multi and not (
                        t & key and (has_exact or (wants_figure and figure) or (wants_command and command))):
                    continue  # a later passage is read only for a sentence stating what was asked
                typed = not multi and ((wants_figure and figure) or (wants_command and command)
                                       or (wants_label and bool(t & key) and bool(_LABEL.search(span.text)))
                                       or (wants_rule and rank < cfg.chunks and bool(_RULE.search(span.text)))
                                       or (wants_place and bool(t & key) and bool(_PLACE.search(span.text))))
                if not multi:  # a multi-part question's answer types are its parts' (see _pick)
                    prior += 0.25 * (wants_figure and figure) + 0.25 * (wants_command and command)
                    prior += 0.25 * (wants_label and bool(t & key) and bool(_LABEL.search(span.text)))
                    prior += 0.25 * (wants_rule and rank < cfg.chunks and bool(_RULE.search(span.text)))
                    prior += 0.25 * (wants_place and bool(t & key) and bool(_PLACE.search(span.text)))
                if define and defines(span.text, define):
                    prior += 0.5
                if has_exact:
                    prior += 1.0
                if span.text.rstrip().endswith("?"):
                    continue  # a question (an FAQ's, a section's "Moving to another country?") answers nothing
                if span.text.rstrip().endswith(":"):
                    prior -= 0.15  # a lead-in, not an answer
                cands.append(_Cand(ev, span, t, prior, rank, row, header, figure, command, typed))
        return cands

    def _fill_gaps(self, picked: list[_Cand], min_sources: int = 1, displace: bool = True) -> list[_Cand]:
        """``picked`` plus each sentence that sits alone between two picked sentences of one paragraph, and
        each sentence right after a picked one, in its paragraph, that opens by pointing back to it
        (:data:`_POINTS_BACK`: "This means you have to...", "If any of the above...": it says what
        the picked sentence implies, often the very fact asked).

        "Moving cross-border is more complex. [...] Notify the team 30 days prior." quoted without the
        sentence between them reads as a non sequitur and drops what it says (whom to notify), so the
        gap is quoted too, verbatim, while the answer stays within ``max_chars``. A paragraph is a run
        of prose without a blank line; a gap that is a question, a heading, a table row or flagged by
        :mod:`screening` is left out. A continuation that does not fit displaces the picks made after
        its sentence (weaker ones, last first) while the answer keeps ``min_sources`` distinct chunks
        (``displace``; never in a multi-part answer, whose picks answer different parts).
        """
        picked = list(picked)
        used = sum(len(c.span.text) for c in picked)
        at = {(c.ev.chunk.chunk_id, c.span.start) for c in picked}
        extra: list[_Cand] = []
        for c in list(picked):
            if c not in picked:
                continue  # displaced by an earlier pick's continuation
            text = c.ev.chunk.text
            spans = _spans(text)
            idx = next((i for i, s in enumerate(spans) if s.start == c.span.start), None)
            if idx is None or idx + 1 >= len(spans):
                continue
            gap = spans[idx + 1]
            if (c.ev.chunk.chunk_id, gap.start) in at or "\n\n" in text[c.span.start:gap.end]:
                continue  # already quoted, or not the same paragraph
            between = idx + 2 < len(spans) and (c.ev.chunk.chunk_id, spans[idx + 2].start) in at and (
                "\n\n" not in text[gap.start:spans[idx + 2].end])
            if not between and not _POINTS_BACK.match(gap.text):
                continue
            line = text[:gap.start].rsplit("\n", 1)[-1].lstrip()
            if (gap.text.rstrip().endswith("?") or line.startswith(("#", "|")) or _is_row(text, gap)
                    or span_flagged(text, gap.start, gap.end)):
                continue
            while displace and not between and used + len(gap.text) > self.config.max_chars and picked[-1] is not c:
                rest = picked[:-1]
                if len({p.ev.chunk.chunk_id for p in rest}) < min_sources:
                    break
                used -= len(picked[-1].span.text)
                at.discard((picked[-1].ev.chunk.chunk_id, picked[-1].span.start))
                picked = rest
            if used + len(gap.text) > self.config.max_chars:
                continue
            at.add((c.ev.chunk.chunk_id, gap.start))
            used += len(gap.text)
            extra.append(_Cand(c.ev, gap, set(self.analyze(gap.text)), 0.0, c.chunk_rank))
        return [*picked, *extra]

    def _add_steps(self, picked: list[_Cand], procedural: set[int]) -> list[_Cand]:
        """``picked`` plus the steps that follow a picked sentence of a how-to question (``procedural``:
        the ids of such picks): when the sentence ends with ":" or is followed, in its paragraph, by a
        lead-in that does ("To use Slack calling, do the following:"), the lead-in and up to ``steps``
        items of the list it introduces are quoted too, verbatim, while the answer stays within
        ``max_chars``. "If Zoom is down, use Slack for calls" names the way; the steps say how, and
        that is what was asked. A step flagged by :mod:`screening` ends the list's quoting.
        """
        out = list(picked)
        used = sum(len(c.span.text) for c in out)
        at = {(c.ev.chunk.chunk_id, c.span.start) for c in out}
        for c in picked:
            if id(c) not in procedural or c.row:
                continue
            text = c.ev.chunk.text
            spans = _spans(text)
            idx = next((i for i, x in enumerate(spans) if x.start == c.span.start), None)
            if idx is None:
                continue
            lead = idx
            if not c.span.text.rstrip().endswith(":"):
                nxt = idx + 1
                if nxt >= len(spans) or not spans[nxt].text.rstrip().endswith(":") or "\n\n" in text[c.span.end:spans[nxt].start]:
                    continue
                lead = nxt
            chosen = [spans[lead]] if lead != idx else []
            for item in spans[lead + 1:]:
                line = text[:item.start].rsplit("\n", 1)[-1]
                if not _LIST_MARK.fullmatch(line) or span_flagged(text, item.start, item.end):
                    break
                chosen.append(item)
                if len(chosen) - (lead != idx) >= self.config.steps:
                    break
            if len(chosen) <= (lead != idx):
                continue  # no list follows the lead-in
            for x in chosen:
                if (c.ev.chunk.chunk_id, x.start) in at:
                    continue
                if used + len(x.text) > self.config.max_chars:
                    break
                at.add((c.ev.chunk.chunk_id, x.start))
                used += len(x.text)
                out.append(_Cand(c.ev, x, set(self.analyze(x.text)), 0.0, c.chunk_rank))
        return out

    def _gain(self, c: _Cand, terms: KeyTerms, covered: set[str], picked: list[_Cand]) -> float:
        total = terms.total or 1.0
        hit = c.terms & set(terms.weights)
        new = sum(terms.weights[x] for x in hit - covered) / total
        old = sum(terms.weights[x] for x in hit & covered) / total
        red = max((len(c.terms & p.terms) / max(len(c.terms | p.terms), 1) for p in picked), default=0.0)
        lam = self.config.mmr_lambda
        return lam * (new + old / 3 + c.score) - (1 - lam) * red

    def _pick(self, cands: list[_Cand], terms: KeyTerms, already: list[_Cand], limit: int,
              require_hit: bool = False, figure: bool = False, asks_figure: bool = False,
              command: bool = False, hit: set[str] | None = None) -> list[_Cand]:
        """Greedy picks for ``terms``: the best first, then only sentences that earn their place.

        After the first pick, a sentence is kept only while its marginal gain is at least 0.15 and it
        earns its place: it adds coverage of a key term no pick holds yet, or it holds the answer type
        asked for (:attr:`_Cand.typed`; with ``figure`` a quantity, with ``command`` a command), or it
        comes from a passage a pick already quotes (its context: "Currently, early exercise is
        available in the US and UK" after "Early exercise is generally allowed in countries where...").
        A sentence from another passage that adds none of these (a definition when the question asks
        how, another topic's cadence) is skipped, however close its page is to the question. At most
        ``topic_sentences`` picks may lack the answer type; past them only sentences stating it are
        picked (the answer "25-minute meetings" may be the fourth sentence on 1-1s).

        ``require_hit``: the first pick must contain one of ``terms`` (a part nothing speaks to gets
        none), or, with ``figure`` (the part asks how long / how much), state a quantity. With
        ``asks_figure`` (the question asks for one), a sentence stating a quantity with a key term is
        kept even without new coverage when no pick states one yet. ``hit``: the terms that count for
        ``require_hit`` (all of ``terms`` when None).
        """
        key = set(terms.weights)
        hits = key if hit is None else hit
        covered: set[str] = set()
        used = sum(len(c.span.text) for c in already)
        out: list[_Cand] = []
        pool = list(cands)  # a sentence answering two parts may serve both (it is shown once)
        bonus = {id(c): 0.25 * (figure and c.figure) + 0.25 * (command and c.command) for c in pool}
        bonus = {k: v for k, v in bonus.items() if v}

        def states_type(c: _Cand) -> bool:
            return c.typed or (figure and c.figure) or (command and c.command)

        while pool and len(out) < limit:
            best = max(pool, key=lambda c: self._gain(c, terms, covered, [*already, *out]) + bonus.get(id(c), 0.0))
            pool.remove(best)
            new = (best.terms & key) - covered
            typed = states_type(best)
            earns = (typed or sum(not states_type(c) for c in out) < self.config.topic_sentences) and (
                bool(new) or typed or best.ev.chunk.chunk_id in {c.ev.chunk.chunk_id for c in out})
            if not out:
                if require_hit and hits and not new & hits and not bonus.get(id(best)):
                    break
            elif (self._gain(best, terms, covered, [*already, *out]) < 0.15 or (require_hit and not new & hits)
                  or not earns):
                if asks_figure and not any(_FIGURE.search(c.span.text) for c in [*already, *out]):
                    # the question asks how much / how long and no pick says it yet: the best figure
                    figures = [c for c in pool if _FIGURE.search(c.span.text) and c.terms & key]
                    if figures:
                        top = max(figures, key=lambda c: self._gain(c, terms, covered, [*already, *out]))
                        pool.remove(top)
                        out.append(top)
                        used += len(top.span.text)
                        continue
                quoted = {c.ev.chunk.chunk_id for c in out}
                if not any((c.terms & key) - covered or states_type(c) or c.ev.chunk.chunk_id in quoted
                           for c in pool):
                    break  # nothing left could earn its place
                continue
            if used + len(best.span.text) > self.config.max_chars and (out or already):
                continue
            out.append(best)
            covered |= best.terms & key
            used += len(best.span.text)
        return out

    @staticmethod
    def _render(picked: list[_Cand], unanswered: list[str]) -> Draft:
        # Present the best sentence's chunk first, then in evidence order; within a chunk, in text order.
        first_rank: dict[str, int] = {}
        for i, c in enumerate(picked):
            first_rank.setdefault(c.ev.chunk.chunk_id, i)
        seen: set[tuple[str, int]] = set()
        unique = []
        for c in picked:
            if (c.ev.chunk.chunk_id, c.span.start) not in seen:
                seen.add((c.ev.chunk.chunk_id, c.span.start))
                unique.append(c)
        unique.sort(key=lambda c: (first_rank[c.ev.chunk.chunk_id], c.span.start))
        numbers: dict[str, int] = {}
        citations: list[Citation] = []
        lines: list[str] = []
        context: tuple[str, str] | None = None
        for c in unique:
            ch = c.ev.chunk
            if ch.chunk_id not in numbers:
                numbers[ch.chunk_id] = len(numbers) + 1
            n = numbers[ch.chunk_id]
            heading = None if c.row else _item_heading(ch.text, c.span, ch.section)
            if heading and context != (ch.chunk_id, heading):
                # A list item is shown in its context ("Passwords — Do not: Use a password that is the same")
                citations.append(Citation(n, ch.chunk_id, ch.doc_id, ch.title, ch.url, ch.section, c.span.text))
                lines.append(f"{heading}{display_text(c.span.text)} [{n}]")
                context = (ch.chunk_id, heading)
                continue
            context = (ch.chunk_id, heading) if heading else None
            if c.row and c.header is not None:
                citations.append(Citation(n, ch.chunk_id, ch.doc_id, ch.title, ch.url, ch.section, c.header.text))
                citations.append(Citation(n, ch.chunk_id, ch.doc_id, ch.title, ch.url, ch.section, c.span.text))
                lines.append(f"{_row_display(c.header.text, c.span.text)} [{n}]")
            else:
                citations.append(Citation(n, ch.chunk_id, ch.doc_id, ch.title, ch.url, ch.section, c.span.text))
                lines.append(f"{display_text(c.span.text)} [{n}]")
        text = " ".join(lines)
        if unanswered and lines:
            text += "\n\nNothing found on: " + "; ".join(f"“{u}”" for u in unanswered) + "."
        return Draft(text, citations, unanswered)
