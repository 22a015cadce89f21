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
  sentence shows one;
- *priors*: the chunk's cosine to the question and its rank;
- *redundancy*: minus the term overlap (Jaccard) with the sentences already picked.

Sentences overlapping a finding of :mod:`screening` (a credential, personal data, an instruction
addressed to an assistant; judged in the whole chunk) are never candidates.

Picking stops at ``max_sentences`` or ``max_chars``; when the gate asked for several citations,
the picks span at least that many distinct chunks. Each picked sentence becomes a citation whose
quote is the sentence's exact text in the chunk.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from tools.knowledge_search import Evidence

from .models import Citation
from .rewrite import defines
from .screen import span_flagged
from .terms import KeyTerms
from .text import Span, display_text, sentence_spans

__all__ = ["ExtractiveAnswerer", "ExtractiveConfig", "Draft"]

_FIGURE = re.compile(r"(?:[$€£]\s?\d|\d+(?:[.,]\d+)?\s*(?:%|days?|weeks?|months?|years?|hours?|minutes?|mins?|"
                     r"business days|lines|per|utc|am|pm|usd|eur)|\b\d{1,2}(?:st|nd|rd|th)\b|\b\d{1,2}:\d{2}\b|"
                     r"\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|weekly|daily|monthly|annually|"
                     r"bi-weekly|biweekly|quarterly|yearly)\b)", re.I)
_ASKS_FIGURE = re.compile(r"\bhow (?:much|many|long|often|quickly|soon|far|big|large)\b|\b(?:when|max|maximum|minimum|"
                          r"limit|budget|deadline|cost|price|size|retention|notice|allowance|stipend)\b", re.I)
_ASKS_COMMAND = re.compile(r"\b(?:command|slash|cli|shortcut|channel)\b", re.I)
_COMMAND = re.compile(r"(?:^|\s|`)/[a-z][\w-]*|#[a-z][\w-]+")


@dataclass(frozen=True, slots=True)
class ExtractiveConfig:
    """Sizes and weights of the answerer."""

    max_sentences: int = 5
    max_chars: int = 1000
    mmr_lambda: float = 0.7
    chunks: int = 8


@dataclass(slots=True)
class Draft:
    """An answer before validation: Markdown with markers and its citations."""

    text: str
    citations: list[Citation]


@dataclass(slots=True)
class _Cand:
    ev: Evidence
    span: Span
    terms: set[str]
    score: float
    chunk_rank: int


class ExtractiveAnswerer:
    """Builds a cited answer from evidence without an LLM."""

    def __init__(self, config: ExtractiveConfig, analyze: Callable[[str], list[str]]) -> None:
        self.config = config
        self.analyze = analyze

    def answer(self, evidence: list[Evidence], terms: KeyTerms, min_sources: int = 1,
               question: str = "", vocabulary: list[str] | None = None, define: str | None = None) -> Draft:
        """Pick sentences from ``evidence`` (best first) for a question with key terms ``terms``.

        Args:
            evidence: supporting passages first.
            terms: the question's key terms with IDF weights.
            min_sources: distinct chunks the picks must span (the gate's requirement).
            question: the question text (for the answer-type bonus).
            vocabulary: analysed feedback terms (words the evidence uses for the topic).
            define: for a "what's X?" question, the term X; sentences defining it get a bonus.
        """
        cfg = self.config
        key = set(terms.weights)
        total = terms.total or 1.0
        vocab = set(vocabulary or ()) - key
        wants_figure = bool(_ASKS_FIGURE.search(question))
        wants_command = bool(_ASKS_COMMAND.search(question))
        cands: list[_Cand] = []
        for rank, ev in enumerate(evidence[: cfg.chunks]):
            cos = max(ev.cosine or 0.0, 0.0)
            for span in sentence_spans(ev.chunk.text):
                if span_flagged(ev.chunk.text, span.start, span.end):
                    continue  # a credential, personal data or a planted instruction is never quoted
                heading = ev.chunk.text[:span.start].rsplit("\n", 1)[-1].lstrip().startswith("#")
                if heading and not (define and defines(span.text, define)):
                    continue  # a heading line names a topic, it answers nothing (except "what's X?")
                t = set(self.analyze(span.text))
                prior = 0.3 * cos + 0.1 / (1 + rank)
                if vocab:
                    prior += 0.25 * len(t & vocab) / len(vocab)
                if wants_figure and _FIGURE.search(span.text):
                    prior += 0.25
                if wants_command and _COMMAND.search(span.text):
                    prior += 0.25
                if define and defines(span.text, define):
                    prior += 0.5
                if span.text.rstrip().endswith((":", "?")):
                    prior -= 0.15  # a lead-in or a question, not an answer
                cands.append(_Cand(ev, span, t, prior, rank))
        picked: list[_Cand] = []
        covered: set[str] = set()
        used = 0

        def gain(c: _Cand) -> float:
            hit = c.terms & key
            new = sum(terms.weights[x] for x in hit - covered) / total
            old = sum(terms.weights[x] for x in hit & covered) / total
            red = max((len(c.terms & p.terms) / max(len(c.terms | p.terms), 1) for p in picked), default=0.0)
            return cfg.mmr_lambda * (new + old / 3 + c.score) - (1 - cfg.mmr_lambda) * red

        while cands and len(picked) < cfg.max_sentences:
            best = max(cands, key=gain)
            g = gain(best)
            cands.remove(best)
            if picked and g < 0.15:
                break
            if used + len(best.span.text) > cfg.max_chars and picked:
                continue
            picked.append(best)
            covered |= best.terms & key
            used += len(best.span.text)
        distinct = {p.ev.chunk.chunk_id for p in picked}
        if len(distinct) < min_sources:
            for c in sorted(cands, key=gain, reverse=True):
                if len(distinct) >= min_sources:
                    break
                if c.ev.chunk.chunk_id in distinct:
                    continue
                if len(picked) >= cfg.max_sentences:
                    picked.pop()
                picked.append(c)
                distinct = {p.ev.chunk.chunk_id for p in picked}
        # Present the best sentence's chunk first, then in evidence order; within a chunk, in text order.
        first_rank = {}
        for i, c in enumerate(picked):
            first_rank.setdefault(c.ev.chunk.chunk_id, i)
        picked.sort(key=lambda c: (first_rank[c.ev.chunk.chunk_id], c.span.start))
        numbers: dict[str, int] = {}
        citations: list[Citation] = []
        lines: list[str] = []
        for c in picked:
            ch = c.ev.chunk
            if ch.chunk_id not in numbers:
                numbers[ch.chunk_id] = len(numbers) + 1
            n = numbers[ch.chunk_id]
            citations.append(Citation(n, ch.chunk_id, ch.doc_id, ch.title, ch.url, ch.section, c.span.text))
            lines.append(f"{display_text(c.span.text)} [{n}]")
        return Draft(" ".join(lines), citations)
