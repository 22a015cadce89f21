"""The extractive answerer: a few verbatim sentences from the evidence, each with ``[n]``.

Sentences (:func:`agent.text.sentence_spans`) of the supporting chunks are scored by relevance:
the IDF-weighted share of the question's key terms they contain, plus small priors for the
chunk's cosine similarity and fused rank, plus a bonus for sentences that state a figure (digits,
amounts, durations), since questions in chat mostly ask for one. Sentences are then picked with
Maximal Marginal Relevance (Carbonell & Goldstein 1998, "The use of MMR, diversity-based reranking
for reordering documents and producing summaries"), redundancy measured as term overlap, until
``max_sentences`` or ``max_chars``; when the gate asked for several citations, the picks span at
least that many distinct chunks. Each picked sentence becomes a citation whose quote is the
sentence's exact text in the chunk.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from tools.knowledge_search import Evidence

from .models import Citation
from .terms import KeyTerms
from .text import Span, display_text, sentence_spans

__all__ = ["ExtractiveAnswerer", "ExtractiveConfig", "Draft"]

_FIGURE = re.compile(r"(?:[$€£]\s?\d|\d+(?:[.,]\d+)?\s*(?:%|days?|weeks?|months?|years?|hours?|minutes?|mins?|"
                     r"business days|lines|per|utc|am|pm)|\b\d{1,2}(?:st|nd|rd|th)\b|\b\d{1,2}:\d{2}\b)", re.I)


@dataclass(frozen=True, slots=True)
class ExtractiveConfig:
    """Sizes and weights of the answerer."""

    max_sentences: int = 4
    max_chars: int = 900
    mmr_lambda: float = 0.7
    chunks: int = 5


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

    def answer(self, evidence: list[Evidence], terms: KeyTerms, min_sources: int = 1) -> Draft:
        """Pick sentences from ``evidence`` (best first) for a question with key terms ``terms``."""
        cfg = self.config
        cands: list[_Cand] = []
        key = set(terms.weights)
        for rank, ev in enumerate(evidence[: cfg.chunks]):
            cos = ev.cosine or 0.0
            for span in sentence_spans(ev.chunk.text):
                t = set(self.analyze(span.text))
                rel = terms.coverage(t) if key else 0.0
                score = rel + 0.35 * max(cos, 0.0) + 0.15 / (1 + rank)
                if _FIGURE.search(span.text):
                    score += 0.1
                if key and not (t & key):
                    score -= 0.3
                cands.append(_Cand(ev, span, t, score, rank))
        picked: list[_Cand] = []
        total = 0
        while cands and len(picked) < cfg.max_sentences:
            def mmr(c: _Cand) -> float:
                red = max((len(c.terms & p.terms) / max(len(c.terms | p.terms), 1) for p in picked), default=0.0)
                return cfg.mmr_lambda * c.score - (1 - cfg.mmr_lambda) * red
            best = max(cands, key=mmr)
            cands.remove(best)
            if total + len(best.span.text) > cfg.max_chars and picked:
                continue
            if picked and best.score < 0.2:
                break
            picked.append(best)
            total += len(best.span.text)
        distinct = {p.ev.chunk.chunk_id for p in picked}
        if len(distinct) < min_sources:
            others = sorted((c for c in cands if c.ev.chunk.chunk_id not in distinct), key=lambda c: -c.score)
            for c in others:
                if len(distinct) >= min_sources:
                    break
                if c.ev.chunk.chunk_id in distinct:
                    continue
                if len(picked) >= cfg.max_sentences:
                    picked.pop()
                picked.append(c)
                distinct = {p.ev.chunk.chunk_id for p in picked}
        # Present in the evidence order, then in the order sentences appear in their chunk.
        picked.sort(key=lambda c: (c.chunk_rank, c.span.start))
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
