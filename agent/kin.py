"""The corpus's own words for a question word it does not use, found with the embedding model.

A key term no chunk holds (:attr:`agent.terms.KeyTerms.absent`) is a typo, a chat word, or a word the
wiki does not use for something it may still talk about ("payday" where the wiki says "pay"). Its
*kin* are the words of the retrieved passages whose embedding (the index's own model, each word embedded
alone) is at least ``cosine`` close to the term's, nearest first, at most ``k``. A passage word that is
closer to one of the question's other words than to the term is no kin of it ("dayofweek" for
"payday" in "what day of the month is payday?": it echoes "day", which the question says already), and
neither is a word the question itself holds. No kin: a chat word, or a concept the window lacks.

Word vectors come through the embedder's cache (:class:`index.embeddings.CachedEmbedder`, keyed by the
word's text) and an in-process LRU of :data:`WORDS_REMEMBERED` words.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from cachetools import LRUCache

__all__ = ["Kin", "KinFinder", "WORDS_REMEMBERED"]

#: Word vectors (and word stems) kept in memory per process.
WORDS_REMEMBERED = 50_000
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*[A-Za-z]")


@dataclass(frozen=True, slots=True)
class Kin:
    """A corpus word for an absent term: its surface form, its index stem and its cosine to the term."""

    word: str
    stem: str
    cosine: float


class KinFinder:
    """Finds the kin of absent terms among the words of retrieved passages (see the module docstring).

    Args:
        embed: texts to unit vectors, shape ``(n, dim)`` (the index's embedder's ``embed``).
        analyze: the index analyzer (a word to its stems; a stop word gives none).
        cosine: the least cosine of a kin word to the term, in [-1, 1].
        k: at most this many kin per term, nearest first.

    Raises:
        ValueError: ``k`` below 1.
    """

    def __init__(self, embed: Callable[[Sequence[str]], np.ndarray], analyze: Callable[[str], list[str]],
                 cosine: float, k: int) -> None:
        if k < 1:
            raise ValueError("k must be at least 1")
        self._embed = embed
        self._analyze = analyze
        self.cosine = cosine
        self.k = k
        self._vectors: LRUCache[str, np.ndarray] = LRUCache(WORDS_REMEMBERED)
        self._stems: LRUCache[str, str | None] = LRUCache(WORDS_REMEMBERED)

    def _stem(self, word: str) -> str | None:
        """The word's one index stem (None for a stop word or a word the analyzer splits)."""
        try:
            return self._stems[word]
        except KeyError:
            got = self._analyze(word)
            stem = self._stems[word] = got[0] if len(got) == 1 else None
            return stem

    def vectors(self, words: Sequence[str]) -> np.ndarray:
        """Unit vectors of ``words`` (each embedded alone), shape ``(len(words), dim)``, remembered."""
        todo = list(dict.fromkeys(w for w in words if w not in self._vectors))
        if todo:
            for w, v in zip(todo, self._embed(todo), strict=True):
                self._vectors[w] = v
        if not words:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self._vectors[w] for w in words])

    def words(self, texts: Iterable[str], exclude: set[str]) -> dict[str, str]:
        """Lower-cased words of ``texts`` to their stems, stop words and stems in ``exclude`` left out."""
        out: dict[str, str] = {}
        for text in texts:
            for w in _WORD.findall(text):
                w = w.lower()
                if w in out:
                    continue
                stem = self._stem(w)
                if stem and stem not in exclude:
                    out[w] = stem
        return out

    def closeness(self, term: str, others: Sequence[str]) -> float:
        """The cosine of ``term`` to the closest of ``others`` (-1.0 when there are none)."""
        if not others:
            return -1.0
        return float((self.vectors(list(others)) @ self.vectors([term])[0]).max())

    def kin(self, term: str, others: Sequence[str], texts: Iterable[str], exclude: set[str]) -> list[Kin]:
        """The kin of the question word ``term`` among the words of ``texts``, nearest first.

        ``others`` are the question's other key words (a passage word closer to one of them than to
        ``term`` is not kin); ``exclude`` the question's stems (never kin).
        """
        words = self.words(texts, exclude)
        if not words:
            return []
        listed = list(words)
        vecs = self.vectors(listed)
        cos = vecs @ self.vectors([term])[0]
        if others:
            echo = (vecs @ self.vectors(list(others)).T).max(axis=1)
            cos = np.where(cos > echo, cos, -1.0)
        out: list[Kin] = []
        seen: set[str] = set()
        for i in np.argsort(-cos, kind="stable"):
            if cos[i] < self.cosine or len(out) >= self.k:
                break
            stem = words[listed[i]]
            if stem not in seen:
                seen.add(stem)
                out.append(Kin(listed[i], stem, float(cos[i])))
        return out
