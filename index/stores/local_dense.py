"""Exact, access-filtered nearest-neighbour search for Qdrant's local mode.

``qdrant-client``'s local mode evaluates a payload filter in Python, point by point, on every query
(about 50 µs a point: half a second on a 9,000-chunk handbook), which made the access pre-filter the
slowest step of a turn. This mirror keeps what the search needs in NumPy arrays instead: the
normalised vectors (one row per point), each point's id and document key, and, per access token
(:meth:`core.access.Access.tokens`), the rows that carry it. A search ORs the viewer's token
rows into a mask and ranks only the rows the mask allows (cosine = dot product of unit vectors, the
measure the collection uses), taking the top ``limit`` with ``argpartition``. The access test is
applied before ranking, never to a top-k afterwards: a point the viewer may not read is never a candidate.
A search scoped to some sources (a channel's ``sources:``) ANDs one more set of rows into the mask: the
rows of those sources (each point's source is the part of its document key before the first ``:``).

Two plans, chosen per query by how many rows the viewer may read (as Qdrant's own planner chooses by
payload-index cardinality): when fewer than a quarter of the rows are readable, only those rows are
gathered and scored; otherwise every row is scored in one matrix-vector product and the unreadable
ones get ``-inf`` before the top-k (cheaper than copying most of the matrix). ``bench/vector_candidates.py``
measures both at 10k-100k points.

The mirror is built from the collection on first use (one scroll with vectors) and then kept in step
with the store's writes (:meth:`DenseMirror.add`, :meth:`DenseMirror.remove_docs`,
:meth:`DenseMirror.remove_ids`, :meth:`DenseMirror.set_tokens`) instead of being rebuilt: a removed row
is only marked dead, and the arrays are compacted once a third of the rows are dead. A Qdrant server
(``QDRANT_URL``) filters with its own payload index and needs none of this.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # types only: this module must not load qdrant-client (dense_snapshot's readers go without it)
    from qdrant_client.conversions.common_types import PointId
    from qdrant_client.models import Record, VectorStructOutput

__all__ = ["DenseMirror", "MirrorPoint", "dense_vector"]

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

    Not thread-safe: the owning store serialises every call (``QdrantStore`` holds its lock).

    Args:
        points: every point of the collection (``(dim,)`` vectors).
        dim: the vector size.
    """

    #: Score only the readable rows when fewer than this share of the rows are readable.
    gather_below: float = 0.25

    def __init__(self, points: Iterable[MirrorPoint], dim: int) -> None:
        self.dim = dim
        self._matrix = np.zeros((0, dim), dtype=np.float32)
        self._n = 0  # rows used in _matrix (the rest is spare capacity)
        self._live = np.zeros(0, dtype=bool)
        self._ids: list[str] = []
        self._docs: list[str] = []
        self._tokens: list[tuple[str, ...]] = []
        self._row: dict[str, int] = {}  # point id -> its live row
        self._doc_rows: dict[str, set[int]] = {}  # doc key -> its live rows
        self._columns: dict[str, list[int]] = {}  # token -> rows carrying it (dead rows included)
        self._column_cache: dict[str, np.ndarray] = {}
        self._dead = 0
        self.add(points)

    def __len__(self) -> int:
        """Number of live points."""
        return self._n - self._dead

    @property
    def ids(self) -> list[str]:
        """The live points' ids, in row order."""
        return [self._ids[r] for r in np.flatnonzero(self._live[: self._n])]

    def add(self, points: Iterable[MirrorPoint]) -> None:
        """Add ``points`` (a point whose id is already present replaces it)."""
        pts = list({p.id: p for p in points}.values())  # one id twice in a batch: the last one wins
        if not pts:
            return
        for p in pts:
            if p.id in self._row:
                self._kill(self._row[p.id])
        rows = np.vstack([np.asarray(p.vector, dtype=np.float32).reshape(1, self.dim) for p in pts])
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        rows /= np.where(norms == 0, 1.0, norms)
        self._reserve(self._n + len(pts))
        start = self._n
        self._matrix[start:start + len(pts)] = rows
        self._live[start:start + len(pts)] = True
        for i, p in enumerate(pts):
            self._append_meta(start + i, p.id, p.doc_key, tuple(p.tokens))
        self._n += len(pts)
        self._maybe_compact()

    def remove_docs(self, doc_keys: Iterable[str]) -> None:
        """Remove every point of ``doc_keys`` (unknown keys are ignored)."""
        for key in doc_keys:
            for r in list(self._doc_rows.get(key, ())):
                self._kill(r)
        self._maybe_compact()

    def remove_ids(self, ids: Iterable[str]) -> None:
        """Remove the points with these ids (unknown ids are ignored)."""
        for pid in ids:
            r = self._row.get(pid)
            if r is not None:
                self._kill(r)
        self._maybe_compact()

    def set_tokens(self, tokens_by_doc: Mapping[str, Iterable[str]]) -> None:
        """Give every point of each document key its new access tokens (vectors unchanged)."""
        moved = [MirrorPoint(self._ids[r], self._matrix[r].copy(), tuple(toks), key)
                 for key, toks in tokens_by_doc.items() for r in sorted(self._doc_rows.get(key, ()))]
        self.add(moved)

    def mask(self, tokens: Iterable[str], sources: Iterable[str] | None = None) -> np.ndarray:
        """Live rows readable with any of ``tokens`` (boolean array over the used rows) and, when ``sources``
        is given, of one of those sources (an empty ``sources`` allows no row)."""
        allowed = np.zeros(self._n, dtype=bool)
        for t in tokens:
            idx = self._column(t)
            if idx is not None:
                allowed[idx] = True
        if sources is not None:
            scope = np.zeros(self._n, dtype=bool)
            for s in sources:
                idx = self._column(SOURCE_COLUMN + s)
                if idx is not None:
                    scope[idx] = True
            allowed &= scope
        allowed &= self._live[: self._n]
        return allowed

    def search(self, query: np.ndarray, tokens: Iterable[str], limit: int,
               sources: Iterable[str] | None = None) -> list[tuple[str, float]]:
        """The ``limit`` allowed points nearest to ``query`` (shape ``(dim,)``) as ``(id, cosine)``, best
        first; ``sources``: only points of these sources (None: any)."""
        allowed = self.mask(tokens, sources)
        readable = int(allowed.sum())
        if not readable or limit <= 0:
            return []
        q = np.asarray(query, dtype=np.float32)
        q = q / (np.linalg.norm(q) or 1.0)
        k = min(limit, readable)
        if readable < self.gather_below * self._n:
            rows = np.flatnonzero(allowed)
            scores = self._matrix[rows] @ q
        else:
            rows = None
            scores = self._matrix[: self._n] @ q
            scores[~allowed] = -np.inf
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        if rows is not None:
            return [(self._ids[rows[i]], float(scores[i])) for i in top]
        return [(self._ids[i], float(scores[i])) for i in top]

    # -- bookkeeping -------------------------------------------------------------------------------
    def _append_meta(self, row: int, pid: str, doc_key: str, tokens: tuple[str, ...]) -> None:
        self._ids.append(pid)
        self._docs.append(doc_key)
        self._tokens.append(tokens)
        self._row[pid] = row
        self._doc_rows.setdefault(doc_key, set()).add(row)
        for t in (*tokens, source_column(doc_key)):  # the source's rows are a column too (a channel's scope)
            self._columns.setdefault(t, []).append(row)
            self._column_cache.pop(t, None)

    def _column(self, token: str) -> np.ndarray | None:
        cached = self._column_cache.get(token)
        if cached is None and token in self._columns:
            cached = self._column_cache[token] = np.asarray(self._columns[token], dtype=np.int64)
        return cached

    def _kill(self, row: int) -> None:
        if not self._live[row]:
            return
        self._live[row] = False
        self._dead += 1
        pid, key = self._ids[row], self._docs[row]
        if self._row.get(pid) == row:
            del self._row[pid]
        rows = self._doc_rows.get(key)
        if rows is not None:
            rows.discard(row)
            if not rows:
                del self._doc_rows[key]

    def _reserve(self, n: int) -> None:
        if n <= len(self._matrix):
            return
        cap = max(n, int(len(self._matrix) * 1.5), 1024)
        matrix = np.zeros((cap, self.dim), dtype=np.float32)
        matrix[: self._n] = self._matrix[: self._n]
        live = np.zeros(cap, dtype=bool)
        live[: self._n] = self._live[: self._n]
        self._matrix, self._live = matrix, live

    def _maybe_compact(self) -> None:
        """Drop dead rows once they are a third of the rows (keeps search cost proportional to live points)."""
        if self._dead <= max(64, self._n // 3):
            return
        keep = np.flatnonzero(self._live[: self._n])
        matrix = self._matrix[keep]
        meta = [(self._ids[r], self._docs[r], self._tokens[r]) for r in keep]
        self._matrix = np.zeros((0, self.dim), dtype=np.float32)
        self._live = np.zeros(0, dtype=bool)
        self._ids, self._docs, self._tokens = [], [], []
        self._row, self._doc_rows, self._columns, self._column_cache = {}, {}, {}, {}
        self._n = self._dead = 0
        self._reserve(len(keep))
        self._matrix[: len(keep)] = matrix
        self._live[: len(keep)] = True
        for i, (pid, key, toks) in enumerate(meta):
            self._append_meta(i, pid, key, toks)
        self._n = len(keep)


def scroll_points(scroll: Callable[[PointId | None], tuple[list[Record], PointId | None]], name: str | None = None,
                  ) -> Iterator[MirrorPoint]:
    """Every point from a Qdrant ``scroll`` page function (``offset -> (points, next offset)``) as
    :class:`MirrorPoint` (payload keys ``access``, the access tokens, and ``doc_key``); ``name``: the
    collection's dense vector is the named one (``None``: its one unnamed vector)."""
    offset = None
    while True:
        points, offset = scroll(offset)
        for p in points:
            payload = p.payload or {}
            yield MirrorPoint(str(p.id), dense_vector(p.vector, name), tuple(payload.get("access") or ()),
                              str(payload.get("doc_key") or ""))
        if offset is None:
            return


def dense_vector(vector: VectorStructOutput | None, name: str | None) -> np.ndarray:
    """A returned point's dense ``vector`` as float32: its one unnamed vector, or the named one ``name``.

    Raises:
        TypeError: when ``name`` is given and the point's vectors are not named.
    """
    if name is None:
        return np.asarray(vector, dtype=np.float32)
    if not isinstance(vector, dict):
        raise TypeError(f"the point's vectors are not named (wanted {name!r})")
    return np.asarray(vector[name], dtype=np.float32)
