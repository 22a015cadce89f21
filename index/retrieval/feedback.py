"""Pseudo-relevance feedback terms for BM25 (RM3-style).

Lavrenko & Croft 2001 ("Relevance-based language models"); RM3 as in Abdul-Jaleel et al. 2004
(UMass at TREC 2004): the terms weighing most in the top retrieved passages, absent from the
query, are added to it with a lower weight. Here the feedback passages are the top of the
*dense* ranking, so BM25 learns the page's vocabulary for a paraphrased question ("gym" finds
"wellness") while exact identifiers still match literally.

:class:`PseudoRelevanceFeedback` is the engine's stage: it builds the BM25 query (:class:`KeywordQuery`) from the
question, the caller's expansion terms and the feedback terms of the viewer's own top dense passages.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from operator import itemgetter

import numpy as np

from core.models import Chunk
from screening import mask

from .ports import KeywordStore
from .query import Query

__all__ = ["feedback_terms", "KeywordQuery", "PseudoRelevanceFeedback"]


def feedback_terms(chunks: Sequence[Chunk], query_terms: set[str], analyze: Callable[[str], list[str]],
                   idf: Callable[[Collection[str]], Mapping[str, float]], n_terms: int = 6) -> list[str]:
    """The ``n_terms`` analysed terms with the highest summed ``tf / length * idf`` over ``chunks``.

    Terms of the query, numbers and terms of two characters or fewer are excluded, and so is whatever the
    screen (:func:`screening.mask`) leaves out of an answer: a credential's value or personal data on a
    feedback page would otherwise travel with the query into the trace (``--json``, the turn log).

    Args:
        chunks: the feedback passages, best first (each read as its title, heading path and text).
        query_terms: the query's analysed terms (never fed back).
        analyze: the keyword store's analyzer.
        idf: the IDF of every candidate term, asked once with all of them (a store reads them together).
        n_terms: terms returned at most.

    Returns:
        The terms, heaviest first (ties in first-seen order).
    """
    tfs = [Counter(t for t in analyze(f"{c.title} {' '.join(c.section_path)} {_screened(c.text)}")
                   if len(t) > 2 and not t.isdigit()) for c in chunks]
    weight_of = idf({t for tf in tfs for t in tf if t not in query_terms})
    weights: dict[str, float] = {}  # float sums, not counts: ranked below as Counter.most_common ranks
    for tf in tfs:
        length = sum(tf.values()) or 1
        for t, f in tf.items():
            if t not in query_terms:
                weights[t] = weights.get(t, 0) + (f / length) * weight_of[t]
    return [t for t, _ in heapq.nlargest(n_terms, weights.items(), key=itemgetter(1))]


@lru_cache(maxsize=4096)
def _screened(text: str) -> str:
    """``text`` with credentials and personal data left out (cached: the same passages feed many queries)."""
    return mask(text)


@dataclass(frozen=True, slots=True)
class KeywordQuery:
    """The BM25 query of one search.

    Attributes:
        text: the question followed by the added terms.
        boosts: each added term (analysed) to its BM25 weight (the question's own terms weigh 1.0).
        feedback: the pseudo-relevance feedback terms among the added ones.
    """

    text: str
    boosts: dict[str, float] = field(default_factory=dict)
    feedback: list[str] = field(default_factory=list)


class PseudoRelevanceFeedback:
    """The query-expansion stage: the question plus the caller's expansion terms plus, for a hybrid search with
    ``prf``, the :func:`feedback_terms` of the top ``docs`` dense passages (which are the viewer's own: every
    dense hit passed the store's access pre-filter, so no term of a page they may not read gets in), each
    added term weighted ``weight``.

    IDF here is ``ln(1 + N / (df + 0.5))`` over the keyword store's chunks, every candidate term's document frequency
    read in one call (:meth:`~index.retrieval.ports.KeywordStore.doc_frequencies`): one at a time, the store's
    freshness check per term cost more than the rest of the search.

    Args:
        keyword: the keyword store (its analyzer and document frequencies).
        docs: feedback passages (the top of the dense list).
        terms: feedback terms at most.
        weight: the BM25 weight of every added term (expansion and feedback).
    """

    def __init__(self, keyword: KeywordStore, docs: int = 3, terms: int = 6, weight: float = 0.3) -> None:
        self.keyword = keyword
        self.docs = docs
        self.terms = terms
        self.weight = weight

    def run(self, query: Query, dense: Sequence[Chunk] = ()) -> KeywordQuery:
        """The BM25 query of ``query``, with feedback from ``dense`` (the dense hits' chunks, best first) when
        ``query.feedback`` and there are any."""
        analyze = self.keyword.analyze
        base = set(analyze(query.text))
        extra = [x for term in query.expansion for x in analyze(term) if x not in base]
        feedback: list[str] = []
        if query.feedback and dense:
            feedback = feedback_terms(dense[: self.docs], base | set(extra), analyze, self.idf, self.terms)
        added = list(dict.fromkeys(extra + feedback))
        return KeywordQuery(" ".join([query.text, *added]), {x: self.weight for x in added}, feedback)

    def idf(self, terms: Collection[str]) -> dict[str, float]:
        """``ln(1 + N / (df + 0.5))`` of each analysed term, the document frequencies read together."""
        n = max(self.keyword.doc_count, 1)
        return {t: float(np.log1p(n / (df + 0.5))) for t, df in self.keyword.doc_frequencies(terms).items()}
