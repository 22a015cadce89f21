"""Key terms of a question and their coverage by evidence.

A question's key terms are its words minus chat filler (:data:`agent.text.QUESTION_STOPWORDS`),
analysed like the index (Porter stems), each weighted by its inverse document frequency. The
coverage of a set of chunks is the IDF-weighted share of key terms that occur in them (title,
section headings or text). Baselines on the handbook showed no score threshold separates
answerable from unanswerable questions; whether the evidence mentions what the question is
about is the signal the gate adds.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from connectors.models import Chunk

from .text import QUESTION_STOPWORDS

__all__ = ["KeyTerms", "key_terms", "chunk_terms"]

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9$%/#@._+-]*")


@dataclass(frozen=True, slots=True)
class KeyTerms:
    """Analysed key terms with IDF weights, in question order."""

    weights: dict[str, float]

    @property
    def total(self) -> float:
        """Sum of weights."""
        return sum(self.weights.values())

    def coverage(self, covered: set[str]) -> float:
        """IDF-weighted share of key terms in ``covered`` (1.0 when there are no key terms)."""
        total = self.total
        if total <= 0:
            return 1.0
        return sum(w for t, w in self.weights.items() if t in covered) / total

    def missing(self, covered: set[str]) -> list[str]:
        """Key terms absent from ``covered``, heaviest first."""
        return sorted((t for t in self.weights if t not in covered), key=lambda t: -self.weights[t])


def key_terms(question: str, analyze: Callable[[str], list[str]], idf: Callable[[str], float]) -> KeyTerms:
    """Key terms of ``question``: filler words dropped, the rest analysed and IDF-weighted."""
    words = [w.strip(".,;:!?()[]{}\"'`").lower() for w in _WORD.findall(question)]
    words = [w for w in words if w and w.replace("'", "") not in QUESTION_STOPWORDS]
    weights: dict[str, float] = {}
    for w in words:
        for t in analyze(w):
            if t not in weights:
                weights[t] = idf(t)
    return KeyTerms(weights)


def chunk_terms(chunks: Iterable[Chunk], analyze: Callable[[str], list[str]]) -> set[str]:
    """Analysed terms of the chunks' titles, headings and texts."""
    out: set[str] = set()
    for c in chunks:
        out.update(analyze(f"{c.title}\n{' '.join(c.section_path)}\n{c.text}"))
    return out
