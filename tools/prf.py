"""Pseudo-relevance feedback terms for BM25 (RM3-style).

Lavrenko & Croft 2001 ("Relevance-based language models"); RM3 as in Abdul-Jaleel et al. 2004
(UMass at TREC 2004): the terms weighing most in the top retrieved passages, absent from the
query, are added to it with a lower weight. Here the feedback passages are the top of the
*dense* ranking, so BM25 learns the page's vocabulary for a paraphrased question ("gym" finds
"wellness") while exact identifiers still match literally.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from connectors.models import Chunk

__all__ = ["feedback_terms"]


def feedback_terms(chunks: Sequence[Chunk], query_terms: set[str], analyze: Callable[[str], list[str]],
                   idf: Callable[[str], float], n_terms: int = 6) -> list[str]:
    """The ``n_terms`` analysed terms with the highest summed ``tf / length * idf`` over ``chunks``.

    Terms of the query, numbers and terms of two characters or fewer are excluded.
    """
    weights: Counter[str] = Counter()
    for c in chunks:
        tf = Counter(t for t in analyze(f"{c.title} {' '.join(c.section_path)} {c.text}")
                     if len(t) > 2 and not t.isdigit())
        length = sum(tf.values()) or 1
        for t, f in tf.items():
            if t not in query_terms:
                weights[t] += (f / length) * idf(t)
    return [t for t, _ in weights.most_common(n_terms)]
