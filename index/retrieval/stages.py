"""The engine's small stages (fusion and pseudo-relevance feedback have modules of their own):

- :class:`QueryEmbedder`: text to query vector, remembered;
- :class:`DenseCandidates`: the dense store's nearest chunks for the viewer, remembered per viewer;
- :class:`KeywordCandidates`: the keyword store's BM25 hits for the viewer;
- :class:`Hydrate`: the chunks and cosines of fused candidates that only BM25 found;
- :class:`Deduplicate`: the fused list cut to ``k`` passages, one per text, as :class:`~index.retrieval.query.Evidence`.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
from cachetools import LRUCache

from core.access import Viewer
from core.models import Chunk, content_hash

from ..embeddings import Embedder
from ..stores import StoredChunk
from .feedback import KeywordQuery
from .identifiers import contains
from .ports import DenseStore, KeywordStore
from .query import Candidates, Evidence, Query

__all__ = ["QueryEmbedder", "DenseCandidates", "KeywordCandidates", "Hydrate", "Deduplicate", "head_size"]


def head_size(k: int) -> int:
    """How many fused candidates :class:`Hydrate` completes for ``k`` passages: ``2k + 10`` (room for duplicates)."""
    return k * 2 + 10


class QueryEmbedder:
    """Text to its query vector (shape ``(dim,)``), the last ``size`` texts remembered (a retry, the gate's
    cosine to the question and the calibration ask for the same texts again).

    Args:
        embedder: the index's embedder.
        size: texts remembered (least recently used dropped first).
    """

    def __init__(self, embedder: Embedder, size: int = 512) -> None:
        self.embedder = embedder
        self._cache: LRUCache[str, np.ndarray] = LRUCache(maxsize=size)
        self._lock = threading.Lock()

    def run(self, text: str) -> np.ndarray:
        """The vector of ``text``.

        Raises:
            EmbeddingError: from the embedder (a remote API that failed, a model that cannot run).
        """
        key = content_hash(text)
        with self._lock:
            v = self._cache.get(key)
        if v is None:
            v = self.embedder.embed([text])[0]
            with self._lock:
                self._cache[key] = v
        return v


#: The dense cache's key: (dense text's hash, index version, viewer's :meth:`~core.access.Viewer.cache_key`).
DenseKey = tuple[str, int, str]


class DenseCandidates:
    """The dense ranker: the ``limit`` chunks nearest to the query vector that the viewer may read.

    The last ``cache_size`` answers are remembered under (text, index version, the viewer's access set), so a
    retry that keeps the dense query does not search twice, a write makes every entry stale, and one viewer never
    gets another's hits.

    Args:
        store: the dense store.
        limit: candidates per search.
        cache_size: answers remembered.
    """

    def __init__(self, store: DenseStore, limit: int = 60, cache_size: int = 64) -> None:
        self.store = store
        self.limit = limit
        self._cache: LRUCache[DenseKey, list[StoredChunk]] = LRUCache(maxsize=cache_size)
        self._lock = threading.Lock()

    @staticmethod
    def key(query: Query, version: int) -> DenseKey:
        """The cache key of ``query``'s dense search at index ``version``."""
        return content_hash(query.embedded), version, query.viewer.cache_key()

    def cached(self, key: DenseKey) -> list[StoredChunk] | None:
        """The remembered hits under ``key``, else ``None``."""
        with self._lock:
            return self._cache.get(key)

    def remember(self, key: DenseKey, hits: list[StoredChunk]) -> None:
        """Remember ``hits`` under ``key`` (the shared index's paired search brings them)."""
        with self._lock:
            self._cache[key] = hits

    def clear(self) -> None:
        """Forget every remembered answer (benchmarks time real searches)."""
        with self._lock:
            self._cache.clear()

    def run(self, vector: np.ndarray, key: DenseKey, viewer: Viewer) -> list[StoredChunk]:
        """The hits for ``vector`` (shape ``(dim,)``), best first, each with its cosine as score: remembered under
        ``key`` (:meth:`key`), else searched with ``viewer``'s pre-filter and remembered.

        Raises:
            ValueError: when ``viewer`` is not a :class:`~core.access.Viewer` (from the store).
        """
        hits = self.cached(key)
        if hits is None:
            hits = self.store.search(vector, limit=self.limit, viewer=viewer)
            self.remember(key, hits)
        return hits


class KeywordCandidates:
    """The BM25 ranker: the keyword store's ``limit`` best ``(chunk id, score)`` pairs the viewer may read.

    Args:
        store: the keyword store.
        limit: candidates per search.
    """

    def __init__(self, store: KeywordStore, limit: int = 60) -> None:
        self.store = store
        self.limit = limit

    def run(self, query: KeywordQuery, viewer: Viewer) -> list[tuple[str, float]]:
        """BM25 hits of ``query`` (its text with its boosts), best first.

        Raises:
            ValueError: when ``viewer`` is not a :class:`~core.access.Viewer` (from the store).
        """
        return self.store.search_ids(query.text, limit=self.limit, boosts=query.boosts, viewer=viewer)


class Hydrate:
    """Completes the head of the fused list (:func:`head_size`): a candidate only BM25 found gets its chunk and its
    vector from the dense store, and its cosine to the query vector; with ``cosine_to`` (another text than the dense
    query) every head candidate's cosine is measured against that text's vector instead (the cosines of the rest
    are dropped). A candidate the dense store does not hold (in BM25 but not yet in the dense store) stays without
    a chunk, and :class:`Deduplicate` leaves it out: never show what cannot be verified.

    Args:
        store: the dense store.
        embed: the query embedder (for ``cosine_to``).
    """

    def __init__(self, store: DenseStore, embed: QueryEmbedder) -> None:
        self.store = store
        self.embed = embed

    def run(self, query: Query, fused: Sequence[tuple[str, float]], found: Candidates, vector: np.ndarray) -> None:
        """Add to ``found`` the chunks and cosines of ``fused``'s head for ``query`` (``vector``: its dense query's)."""
        head = [cid for cid, _ in fused[: head_size(query.k)]]
        missing = [cid for cid in head if cid not in found.chunks]
        for cid, (chunk, v) in self.store.fetch(missing).items():
            found.chunks[cid] = chunk
            found.cosines[cid] = float(np.dot(v, vector))
        if query.cosine_to and query.cosine_to != query.embedded:
            vq = self.embed.run(query.cosine_to)
            found.cosines = {cid: float(np.dot(v, vq)) for cid, v in self.store.vectors(head).items()}


class Deduplicate:
    """The fused list as at most ``k`` :class:`~index.retrieval.query.Evidence`, best first: a candidate without a
    chunk is left out, and so is one whose text another candidate of the same page already has (same page and
    text, another chunk id). Each carries its ranks and raw scores in every list, its cosine, and the query's
    identifiers its text holds verbatim."""

    def run(self, query: Query, fused: Sequence[tuple[str, float]], found: Candidates,
            identifiers: Sequence[str] = ()) -> list[Evidence]:
        """Evidence for ``query`` from ``fused`` (``(chunk id, score)``, best first) and ``found``."""
        ranks: dict[str, dict[str, int]] = {}
        raw: dict[str, dict[str, float]] = {}
        for name, hits in found.lists.items():
            for r, (cid, score) in enumerate(hits, start=1):
                ranks.setdefault(cid, {})[name] = r
                raw.setdefault(cid, {})[name] = score
        out: list[Evidence] = []
        seen: set[tuple[str, str]] = set()  # (page, text): Python's own string hash, no digest per candidate
        for cid, score in fused:
            c: Chunk | None = found.chunks.get(cid)
            if c is None:
                continue
            if (c.doc_id, c.text) in seen:
                continue
            seen.add((c.doc_id, c.text))
            exact = tuple(t for t in identifiers if contains(c.text, t))
            out.append(Evidence(c, score, ranks.get(cid, {}), raw.get(cid, {}), found.cosines.get(cid), exact))
            if len(out) >= query.k:
                break
        return out
