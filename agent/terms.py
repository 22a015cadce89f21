"""Key terms of a question, how specific each is in the corpus, and their coverage by evidence.

A question's key terms are its words minus chat filler (:data:`agent.text.QUESTION_STOPWORDS`),
analysed like the index (Porter stems), each weighted by its inverse document frequency over the
index's chunks, ``idf = ln(1 + N / (df + 0.5))`` (:meth:`tools.knowledge_search.KnowledgeSearch.idf`).

From the IDF alone the share of chunks holding a term follows (``df / N``), which sorts key terms
into three kinds the evidence gate (:mod:`agent.gate`) treats differently:

- **common** terms are in at least :data:`COMMON_SHARE` of the chunks (the organisation's name,
  "team", "work"): a chunk that contains one says nothing about whether it answers the question;
- **absent** terms are in no chunk (a typo, a chat abbreviation, or a word the wiki does not use,
  such as "yoga" for a page on the "wellness stipend"): no evidence can contain them, so their
  absence from the evidence is no sign of a near miss, and the dense similarity has to decide;
- **specific** terms are the rest, heaviest (rarest) first: what the question is about. The
  corpus uses them, so evidence that answers should quote them.

The question's answer type (:func:`agent.answertype.asked_type`) rides along for the gate.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from core.models import Chunk

from .answertype import asked_type
from .text import QUESTION_STOPWORDS

__all__ = ["KeyTerms", "key_terms", "chunk_terms", "COMMON_SHARE"]

#: A term in at least this share of the chunks carries no evidence (a ratio, not a corpus constant).
COMMON_SHARE = 0.2
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9$%/#@._+-]*")
_NEVER_A_TERM = "zqxjvkq0absent"  # a term no index holds: its IDF is the IDF of an absent term


@dataclass(frozen=True, slots=True)
class KeyTerms:
    """Analysed key terms with IDF weights, in question order.

    Attributes:
        weights: term to IDF weight.
        absent: terms no chunk of the index contains.
        common: terms in at least :data:`COMMON_SHARE` of the chunks.
        answer_type: what the question asks for (:data:`agent.answertype.ANSWER_TYPES`) or None.
        surface: term to the question's own word it came from (``"sabbat"`` -> ``"sabbatical"``), so
            what people read (a refusal's "not found: ...") is their words, never index stems.
    """

    weights: dict[str, float]
    absent: frozenset[str] = frozenset()
    common: frozenset[str] = frozenset()
    answer_type: str | None = None
    surface: dict[str, str] = field(default_factory=dict, compare=False)

    def words(self, terms: Iterable[str]) -> list[str]:
        """The question's own words for ``terms`` (a term without one is kept as it is)."""
        return [self.surface.get(t, t) for t in terms]

    @property
    def total(self) -> float:
        """Sum of weights."""
        return sum(self.weights.values())

    @property
    def informative(self) -> dict[str, float]:
        """Key terms that can be evidence (not common), with weights; all terms when every one is common."""
        out = {t: w for t, w in self.weights.items() if t not in self.common}
        return out or dict(self.weights)

    @property
    def specific(self) -> list[str]:
        """Informative terms the corpus contains, rarest first: what evidence that answers should quote."""
        return sorted((t for t in self.informative if t not in self.absent), key=lambda t: -self.weights[t])

    def coverage(self, covered: set[str]) -> float:
        """IDF-weighted share of key terms in ``covered`` (1.0 when there are no key terms)."""
        total = self.total
        if total <= 0:
            return 1.0
        return sum(w for t, w in self.weights.items() if t in covered) / total

    def evidence_coverage(self, covered: set[str]) -> float:
        """IDF-weighted share of the *specific* terms in ``covered`` (1.0 when the question has none)."""
        spec = self.specific
        total = sum(self.weights[t] for t in spec)
        if total <= 0:
            return 1.0
        return sum(self.weights[t] for t in spec if t in covered) / total

    def missing(self, covered: set[str]) -> list[str]:
        """Key terms absent from ``covered``, heaviest first."""
        return sorted((t for t in self.weights if t not in covered), key=lambda t: -self.weights[t])


def key_terms(question: str, analyze: Callable[[str], list[str]], idf: Callable[[str], float]) -> KeyTerms:
    """Key terms of ``question``: filler words dropped, the rest analysed, IDF-weighted and sorted into
    common, absent and specific ones (see the module docstring).

    ``idf`` must be ``ln(1 + N / (df + 0.5))`` of the index (the share ``df / N`` is read back from it);
    another function gives weights but no common or absent terms.
    """
    words = [w.strip(".,;:!?()[]{}\"'`").lower() for w in _WORD.findall(question)]
    words = [w for w in words if w and w.replace("'", "") not in QUESTION_STOPWORDS]
    weights: dict[str, float] = {}
    surface: dict[str, str] = {}
    for w in words:
        for t in analyze(w):
            if t not in weights:
                weights[t] = idf(t)
                surface[t] = w
    absent_idf = idf(_NEVER_A_TERM)
    n = 0.5 * math.expm1(absent_idf)  # N, from idf(absent) = ln(1 + N / 0.5)
    absent, common = set(), set()
    if n >= 1:
        for t, w in weights.items():
            if w >= absent_idf - 1e-9:
                absent.add(t)
            elif (n / math.expm1(w) - 0.5) / n >= COMMON_SHARE if w > 0 else True:
                common.add(t)
    return KeyTerms(weights, frozenset(absent), frozenset(common), asked_type(question), surface)


def chunk_terms(chunks: Iterable[Chunk], analyze: Callable[[str], list[str]]) -> set[str]:
    """Analysed terms of the chunks' titles, headings and texts."""
    out: set[str] = set()
    for c in chunks:
        out.update(analyze(f"{c.title}\n{' '.join(c.section_path)}\n{c.text}"))
    return out
