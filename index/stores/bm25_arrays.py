"""Whoosh's BM25F ranking of an OR of terms, computed over NumPy arrays instead of one posting at a time.

A query's cost in Whoosh is one Python call per posting it visits (166k-186k postings, 300-420 ms, for a
question made of frequent terms in a 30k-chunk index). :class:`SnapshotScorer` reads each term's postings
(document numbers and term frequencies) and every document's field length once per searcher snapshot,
keeps each term's BM25F contributions in an LRU of :data:`TERM_CACHE` terms, and ranks a query with a few
array operations.

It reproduces exactly what ``searcher.search(Or([Term(...), ...]), limit, filter=..., optimize=False)``
returns with :class:`whoosh.scoring.BM25F` (the same floating-point operations in the same order, so the
same scores to the last bit): per posting ``idf * ((tf * (K1 + 1)) / (tf + K1 * ((1 - B) + B * fl / avgfl)))``
(``whoosh.scoring.bm25``, with Whoosh's ``idf``, its average field length and its one-byte field lengths),
times the term's boost, summed over the query's terms in query order; documents scoring above zero that are
in the filter and not deleted are ranked by score, ties by ascending document number (Whoosh's collector).
It declines (returns ``None``) what it does not cover, for the caller to run Whoosh itself: a boost that is
not a positive finite number (Whoosh keeps a single term's non-positive scores but drops an OR's), a
weighting other than BM25F, or a segment whose postings or lengths it cannot read.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
from whoosh import scoring
from whoosh.util.numeric import byte_to_length

if TYPE_CHECKING:  # Whoosh ships no types: these name what is passed (the type checker sees Any)
    from whoosh.matching import Matcher
    from whoosh.reading import IndexReader
    from whoosh.searching import Searcher

__all__ = ["TERM_CACHE", "WARM_POSTINGS", "SnapshotScorer", "Unsupported", "bitset_mask"]

#: terms whose posting arrays (document numbers and BM25F contributions) a snapshot keeps, least recently used
#: dropped first; one term costs 12 bytes per posting (at most the index's chunk count).
TERM_CACHE = 1024
#: :meth:`SnapshotScorer.preload` reads the longest posting lists until this many postings are held (12 bytes each).
WARM_POSTINGS = 4_000_000
_LENGTHS = np.array([byte_to_length(b) for b in range(256)], dtype=np.int64)


class Unsupported(Exception):
    """The index holds something the array path does not read; the caller runs Whoosh itself."""


def bitset_mask(docs: Iterable[int], size: int) -> np.ndarray:
    """A boolean array of ``size`` documents, True for the document numbers in ``docs`` (a Whoosh
    :class:`~whoosh.idsets.BitSet`, read from its bytes, or any iterable of document numbers)."""
    bits = getattr(docs, "bits", None)
    if bits is not None:
        mask = np.unpackbits(np.frombuffer(bytes(bits), dtype=np.uint8), bitorder="little").astype(bool)
        out = np.zeros(size, dtype=bool)
        n = min(size, mask.size)
        out[:n] = mask[:n]
        return out
    out = np.zeros(size, dtype=bool)
    ids = np.fromiter(docs, dtype=np.int64)
    out[ids[ids < size]] = True
    return out


class SnapshotScorer:
    """BM25F over one field of one Whoosh searcher snapshot, with NumPy (see the module docstring).

    Args:
        searcher: a :class:`whoosh.searching.Searcher` whose weighting is :class:`whoosh.scoring.BM25F`;
            the scorer is only valid while that searcher's snapshot is (keep it with the searcher).
        fieldname: the scored text field.

    Raises:
        Unsupported: when the weighting is not BM25F or a segment's field lengths cannot be read.
    """

    def __init__(self, searcher: Searcher, fieldname: str) -> None:
        w = searcher.weighting
        if type(w) is not scoring.BM25F:
            raise Unsupported(f"weighting {type(w).__name__}")
        self._searcher = searcher
        self._field = fieldname
        self._B = w._field_B.get(fieldname, w.B)  # noqa: SLF001 - as BM25F.scorer picks it
        self._K1 = w.K1
        self._avgfl = searcher.avg_field_length(fieldname) or 1
        self.size = searcher.doc_count_all()
        self._leaves = searcher.reader().leaf_readers()
        lengths = np.zeros(self.size, dtype=np.int64)
        live = np.ones(self.size, dtype=bool)
        for leaf, base in self._leaves:
            n = leaf.doc_count_all()
            lengths[base:base + n] = _leaf_lengths(leaf, fieldname, n)
            if leaf.has_deletions():
                dead = leaf.deleted_docs_set  # a cached property of the segment reader
                dead = np.fromiter(dead() if callable(dead) else dead, dtype=np.int64)
                live[base + dead] = False
        self._lengths = lengths
        self.live = live
        self.postings = functools.lru_cache(maxsize=TERM_CACHE)(self._load)

    def _load(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """The documents holding ``term`` (global numbers, ascending) and its BM25F score in each."""
        docs, tfs = [], []
        for leaf, base in self._leaves:
            if (self._field, term) not in leaf:
                continue
            terms = getattr(leaf, "_terms", None)  # the segment's raw postings: deletions are masked by `live`
            if terms is None:
                raise Unsupported(f"segment reader {type(leaf).__name__}")
            d, t = _leaf_postings(terms.matcher(self._field, leaf._text_to_bytes(self._field, term),  # noqa: SLF001
                                                leaf.schema[self._field].format))
            docs.append(d + base)
            tfs.append(t)
        if not docs:
            return np.zeros(0, dtype=np.int32), np.zeros(0)
        doc = np.concatenate(docs).astype(np.int32)
        tf = np.concatenate(tfs)
        fl = self._lengths[doc].astype(np.float64)
        idf, B, K1, avgfl = self._searcher.idf(self._field, term), self._B, self._K1, self._avgfl
        return doc, idf * ((tf * (K1 + 1)) / (tf + K1 * ((1 - B) + B * fl / avgfl)))  # whoosh.scoring.bm25

    def preload(self, budget: int = WARM_POSTINGS) -> int:
        """Read the longest posting lists of the snapshot (most documents first, at most half the LRU's
        terms, until ``budget`` postings are held), off the users' path: a cold term costs one unpickled
        block per 128 postings, most of a question's time when it holds frequent terms.

        Returns:
            The number of terms read.
        """
        reader = self._searcher.reader()
        sizes = sorted(((reader.doc_frequency(self._field, t), t) for t in reader.lexicon(self._field)), reverse=True)
        held = n = 0
        for df, term in sizes[: TERM_CACHE // 2]:
            if held + df > budget:
                break
            try:
                self.postings(term.decode("utf-8") if isinstance(term, bytes) else term)
            except Unsupported:
                break
            held += df
            n += 1
        return n

    def top(self, terms: Sequence[str], boosts: Mapping[str, float], allowed: np.ndarray,
            limit: int | None) -> list[tuple[int, float]] | None:
        """The best ``limit`` (all when ``None``) documents of ``allowed`` (a boolean array of :attr:`size`)
        for the OR of ``terms``, as ``(docnum, score)`` pairs, best first; ``None`` when a boost is not a
        positive finite number or a segment cannot be read (the caller runs Whoosh)."""
        weights = [float(boosts.get(t, 1.0)) for t in terms]
        if any(not (math.isfinite(b) and b > 0) for b in weights):
            return None
        try:
            lists = [self.postings(t) for t in terms]
        except Unsupported:
            return None
        scores = np.zeros(self.size)
        for (doc, contrib), boost in zip(lists, weights):
            scores[doc] += contrib if boost == 1.0 else contrib * boost  # one posting per document and term
        cand = np.flatnonzero((scores > 0) & allowed & self.live)
        s = scores[cand]
        if limit is not None and len(cand) > limit:
            if limit <= 0:
                return []
            kth = np.partition(s, len(s) - limit)[len(s) - limit]
            keep = s >= kth  # the ties at the cut stay in, for the docnum order to decide
            cand, s = cand[keep], s[keep]
        order = np.lexsort((cand, -s))[:limit]
        return [(int(cand[i]), float(s[i])) for i in order]


def _leaf_lengths(leaf: IndexReader, fieldname: str, n: int) -> np.ndarray:
    """Each document's field length in one segment, as Whoosh's ``doc_field_length`` decodes it."""
    from whoosh.codec.whoosh3 import LENGTHS_COLUMN, _lenfield

    perdoc = getattr(leaf, "_perdoc", None)
    col = perdoc._cached_reader(_lenfield(fieldname), LENGTHS_COLUMN) if perdoc is not None else None  # noqa: SLF001
    if col is None or not all(hasattr(col, a) for a in ("_dbfile", "_basepos", "_count", "_fixedlen")) \
            or col._fixedlen != 1:  # noqa: SLF001
        raise Unsupported("field lengths")
    raw = np.zeros(n, dtype=np.uint8)
    count = min(col._count, n)  # noqa: SLF001
    if count:
        raw[:count] = np.frombuffer(bytes(col._dbfile.get(col._basepos, count)), dtype=np.uint8)  # noqa: SLF001
    return _LENGTHS[raw]


def _leaf_postings(m: Matcher) -> tuple[np.ndarray, np.ndarray]:
    """All of a leaf matcher's document numbers and weights: for Whoosh 3 postings a block at a time, the
    block's delta-coded ids summed by NumPy (what ``W3LeafMatcher._read_ids`` does one id at a time)."""
    ids, ws = [], []
    if all(hasattr(m, a) for a in ("_read_data", "_next_block", "_blocklength", "_byteids", "_atend")):
        while m.is_active():
            m._read_data()  # noqa: SLF001
            raw_ids, raw_w = m._data[0], m._data[1]  # noqa: SLF001
            n = m._blocklength  # noqa: SLF001
            ids.append(np.asarray(raw_ids, dtype=np.int64) if m._byteids else  # noqa: SLF001
                       np.cumsum(np.asarray(raw_ids, dtype=np.int64)))
            if raw_w is None:
                ws.append(np.ones(n))
            elif isinstance(raw_w, float):
                ws.append(np.full(n, float(np.float32(raw_w))))  # Whoosh widens it through array("f")
            else:
                ws.append(np.asarray(raw_w, dtype=np.float64))
            m._next_block()  # noqa: SLF001
    else:
        while m.is_active():
            ids.append(np.array([m.id()], dtype=np.int64))
            ws.append(np.array([m.weight()], dtype=np.float64))
            m.next()
    if not ids:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    return np.concatenate(ids), np.concatenate(ws)
