"""Exact, access-filtered nearest-neighbour search for Qdrant's local mode.

``qdrant-client``'s local mode evaluates a payload filter in Python, point by point, on every query
(about 50 µs a point: half a second on a 9,000-chunk handbook), which made the access pre-filter the
slowest step of a turn. This mirror keeps what the search needs in NumPy arrays instead: the
normalised vectors (one row per point), each point's id, and one boolean column per access token
(:meth:`connectors.access.Access.tokens`). A search ORs the viewer's token columns into a mask,
scores only the rows the mask allows (cosine = dot product of unit vectors, the measure the collection
uses) and takes the top ``limit`` with ``argpartition``. The access test is still applied before
ranking, never to a top-k afterwards: a point the viewer may not read is never a candidate. A search
scoped to some sources (a channel's ``sources:``) ANDs one more mask into it: the rows of those sources
(each point's source is the part of its document key before the first ``:``).

The mirror is built from the collection on first use (one scroll with vectors) and dropped whenever
the store writes; a Qdrant server (``QDRANT_URL``) filters with its own payload index and needs none of this.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

__all__ = ["DenseMirror", "MirrorPoint"]


@dataclass(frozen=True, slots=True)
class MirrorPoint:
    """One point as the mirror reads it: its Qdrant id, its vector, its access tokens and its document key."""

    id: str
    vector: np.ndarray
    tokens: tuple[str, ...]
    doc_key: str = ""


#: The column key of a source's rows (no access token starts with it: they are ``public``, ``user:``, ``group:``).
SOURCE_COLUMN = "\x1esource:"


def source_column(doc_key: str) -> str:
    """The column of the source of a point with ``doc_key`` (``"<source>:<doc id>"``)."""
    return SOURCE_COLUMN + doc_key.partition(":")[0]


class DenseMirror:
    """The collection's vectors and access tokens as arrays, for exact filtered search.

    Args:
        points: every point of the collection (``(dim,)`` vectors).
        dim: the vector size.
    """

    def __init__(self, points: Iterable[MirrorPoint], dim: int) -> None:
        ids: list[str] = []
        rows: list[np.ndarray] = []
        columns: dict[str, list[int]] = {}
        for i, p in enumerate(points):
            ids.append(p.id)
            rows.append(np.asarray(p.vector, dtype=np.float32))
            for t in p.tokens:
                columns.setdefault(t, []).append(i)
            columns.setdefault(source_column(p.doc_key), []).append(i)
        self.ids = ids
        matrix = np.vstack(rows) if rows else np.zeros((0, dim), dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        self.matrix = matrix / np.where(norms == 0, 1.0, norms)
        self._columns = {t: np.asarray(idx, dtype=np.int64) for t, idx in columns.items()}

    def __len__(self) -> int:
        return len(self.ids)

    def mask(self, tokens: Iterable[str], sources: Iterable[str] | None = None) -> np.ndarray:
        """Rows readable with any of ``tokens`` (boolean array of ``len(self)``) and, when ``sources`` is
        given, of one of those sources (an empty ``sources`` allows no row)."""
        allowed = np.zeros(len(self.ids), dtype=bool)
        for t in tokens:
            idx = self._columns.get(t)
            if idx is not None:
                allowed[idx] = True
        if sources is not None:
            scope = np.zeros(len(self.ids), dtype=bool)
            for s in sources:
                idx = self._columns.get(SOURCE_COLUMN + s)
                if idx is not None:
                    scope[idx] = True
            allowed &= scope
        return allowed

    def search(self, query: np.ndarray, tokens: Iterable[str], limit: int,
               sources: Iterable[str] | None = None) -> list[tuple[str, float]]:
        """The ``limit`` allowed points nearest to ``query`` (shape ``(dim,)``) as ``(id, cosine)``, best
        first; ``sources``: only points of these sources (None: any)."""
        rows = np.flatnonzero(self.mask(tokens, sources))
        if not len(rows) or limit <= 0:
            return []
        q = np.asarray(query, dtype=np.float32)
        q = q / (np.linalg.norm(q) or 1.0)
        scores = self.matrix[rows] @ q
        k = min(limit, len(rows))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(self.ids[rows[i]], float(scores[i])) for i in top]


def scroll_points(scroll: Callable[[object], tuple[list, object]]) -> Iterator[MirrorPoint]:
    """Every point from a Qdrant ``scroll`` page function (``offset -> (points, next offset)``) as
    :class:`MirrorPoint` (payload keys ``access``, the access tokens, and ``doc_key``)."""
    offset = None
    while True:
        points, offset = scroll(offset)
        for p in points:
            payload = p.payload or {}
            yield MirrorPoint(str(p.id), np.asarray(p.vector, dtype=np.float32),
                              tuple(payload.get("access") or ()), str(payload.get("doc_key") or ""))
        if offset is None:
            return
