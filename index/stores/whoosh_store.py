"""Whoosh store: BM25F over title, headings and body, with one searcher kept open.

BM25F (Robertson, Zaragoza & Taylor 2004, "Simple BM25 extension to multiple weighted fields")
combines the weighted term frequencies of all fields *before* saturation, with one length
normalisation over the weighted length. With a shared ``b`` that is exactly BM25 over a single
field in which each field's text appears ``weight`` times, which is how this store indexes it:
the ``content`` field holds the title and the heading path twice (weight 2) and the body once.
One field instead of three also cuts the query's matcher tree by three, which in Whoosh's pure
Python query engine is the difference between ~200 ms and tens of milliseconds per query.

Access control (issue 11): each chunk's :meth:`core.access.Access.tokens` are indexed in the
``access`` keyword field, and every search takes the asker's :class:`core.access.Viewer` and
runs with a filter query (an ``Or`` of ``Term("access", token)`` over :meth:`Viewer.tokens`): a chunk
the viewer may not read is never a candidate. The filter does not change the scores, so a page the
viewer may read ranks exactly where it would without the filter. A viewer scoped to some sources (a
channel's ``sources:`` in the sources file) adds one condition to that filter: the chunk's ``doc_key``
starts with ``<source>:``.

Scoring uses ``K1=1.2, B=0.75``. Queries are OR-ed term queries, bounded to ``max_terms``
distinct terms; stop words are removed and terms stemmed (Porter) by the analyzer, the same one
used at index time. In an index of at least ``prune_min_docs`` chunks, terms found in more than
``max_df_ratio`` of them are dropped while at least two rarer terms remain: their IDF is small, so they barely move the ranking, but their long
posting lists are what a pure-Python engine spends its time on (a query's cost is proportional
to the number of postings it visits).

Ranking (issue 12): Whoosh keeps the index and its statistics, but an OR of terms is scored by
:class:`index.stores.bm25_arrays.SnapshotScorer`: per searcher snapshot, each term's postings are read once
into arrays (an LRU of terms) and a query is ranked with NumPy, to the same scores (bit for bit), order and
filters as Whoosh's own matchers, which still rank what it does not cover (non-positive boosts, a segment it
cannot read). :meth:`WhooshStore.warm` reads the longest posting lists ahead of the first searches.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace as dc_replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from whoosh import fields, index, scoring
from whoosh.analysis import RegexTokenizer, StemmingAnalyzer
from whoosh.idsets import BitSet
from whoosh.query import And, Or, Prefix, Term

if TYPE_CHECKING:  # Whoosh ships no types: these name what is passed (the type checker sees Any)
    from whoosh.columns import ColumnReader
    from whoosh.searching import Searcher
    from whoosh.writing import IndexWriter

from core.access import Access, Viewer
from core.errors import IndexCorruptError, IndexLockedError
from index.faults import REBUILD_STORE, StoreGuard
from core.models import Chunk
from .bm25_arrays import SnapshotScorer, Unsupported, bitset_mask
from .records import SECTION_SEP, StoredChunk, chunk_from_record, chunk_to_record, viewer_sources, viewer_tokens

__all__ = ["WhooshStore"]

log = logging.getLogger(__name__)

FIELD_WEIGHTS = {"title": 2, "headings": 2, "body": 1}
ALLOWED_CACHE = 256  # access token sets whose readable documents a searcher keeps (see _allowed_docs)
#: Terms whose document frequency a searcher keeps (see ``_frequencies``; a few dozen bytes each).
DF_CACHE = 65536
#: A token: letters and digits, joined by inner dots or underscores (``v1.2.3``, ``user_id``, ``e.g``). No
#: Markdown punctuation ever belongs to one (``passcode.**`` is ``passcode``, ``_foo_`` is ``foo``), while
#: ``E42``, ``/genie`` (``genie``), ``#help`` (``help``) and ``foo-bar`` (``foo`` and ``bar``) stay searchable.
#: (Whoosh's default pattern, ``[\w\*]+(\.?[\w\*]+)*``, keeps asterisks and underscores.)
TOKEN_PATTERN = r"[^\W_]+(?:(?:\.|_+)[^\W_]+)*"


def analyzer() -> StemmingAnalyzer:
    """The analyzer of the ``content`` field and of queries: :data:`TOKEN_PATTERN` tokens, lower-cased,
    stop words removed, Porter stems."""
    return StemmingAnalyzer(expression=TOKEN_PATTERN)


class _PreloadedOr(Or):  # type: ignore[misc]  # Or is Any: Whoosh ships no types
    """OR query whose matcher preloads each term's postings into arrays (Whoosh's ARRAY_MATCHER)
    instead of a binary tree of union matchers: same scores, about half the time per query."""

    matcher_type = Or.ARRAY_MATCHER


def _access_field() -> fields.KEYWORD:
    """The ``access`` field: one term per access token (tokens joined with ``\x1f`` in the value, so a
    group name with spaces or commas stays one term), stored for :meth:`WhooshStore.chunks`."""
    f = fields.KEYWORD(stored=True, scorable=False)
    f.analyzer = RegexTokenizer(r"[^\x1f]+")
    return f


def _schema() -> fields.Schema:
    ana = analyzer()
    return fields.Schema(
        chunk_id=fields.ID(stored=True, unique=True, sortable=True),
        doc_key=fields.ID(stored=True),
        source=fields.STORED(), doc_id=fields.STORED(), url=fields.STORED(),
        section_path=fields.STORED(), ordinal=fields.STORED(), updated_at=fields.STORED(),
        access=_access_field(), access_unresolved=fields.STORED(), text=fields.STORED(), title_raw=fields.STORED(),
        content=fields.TEXT(analyzer=ana),
    )


def bm25f_content(title: str, headings: str, body: str) -> str:
    """The ``content`` field: each field's text repeated by its BM25F weight."""
    parts = [title] * FIELD_WEIGHTS["title"] + [headings] * FIELD_WEIGHTS["headings"] + [body] * FIELD_WEIGHTS["body"]
    return "\n".join(p for p in parts if p)


class WhooshStore:
    """Chunks in a Whoosh index on disk (a :class:`~index.stores.base.ChunkStore` searched by text).

    Args:
        path: the index folder (created when missing).
        max_terms: at most this many distinct query terms are searched (bounds latency).
        max_df_ratio: terms in a larger share of chunks are dropped while two rarer ones remain...
        prune_min_docs: ...in indexes of at least this many chunks (small ones are fast anyway).

    Raises:
        IndexCorruptError: when the folder holds an index that cannot be opened, or (from any
            method) a segment that cannot be read; :attr:`damage` keeps the first such error.
        DiskFullError: when a write finds no space (from any method).
    """

    def __init__(self, path: str | os.PathLike[str], max_terms: int = 16, max_df_ratio: float = 0.06,
                 prune_min_docs: int = 2000) -> None:
        self.path = Path(path)
        self.max_terms = max_terms
        self.max_df_ratio = max_df_ratio
        self.prune_min_docs = prune_min_docs
        self._analyzer = analyzer()
        self._lock = threading.Lock()
        self._guard = StoreGuard("the BM25 index", self.path, REBUILD_STORE)
        with self._guard():
            self.path.mkdir(parents=True, exist_ok=True)
            # Opened in two steps so a failure names the file: the table of contents, then every segment.
            with StoreGuard("the BM25 index", self._newest("_*.toc"), REBUILD_STORE)():
                exists = index.exists_in(str(self.path))  # reads the table of contents
            if exists:
                with StoreGuard("the BM25 index", self._newest("_*.toc"), REBUILD_STORE)():
                    self._ix = index.open_dir(str(self.path))
                with StoreGuard("the BM25 index", self._newest("*.seg"), REBUILD_STORE)():
                    self._ix.reader().close()  # opens every segment: a damaged one fails here, not mid-query
                if "access" not in self._ix.schema and self._ix.doc_count_all() == 0:
                    self._ix = index.create_in(str(self.path), _schema())  # empty and old: start it new
            else:
                self._ix = index.create_in(str(self.path), _schema())
        self._searcher: Searcher | None = None

    def _newest(self, pattern: str) -> Path:
        """The one file of the index folder matching ``pattern`` (the newest of several), else the folder (to
        name in an error)."""
        found = sorted(self.path.glob(pattern), key=lambda p: p.stat().st_mtime)
        return found[-1] if len(found) == 1 or pattern.endswith(".toc") and found else self.path

    @property
    def outdated(self) -> bool:
        """True when the index was built before access control (no ``access`` field): searches find
        nothing in it and writes fail; :class:`index.knowledge.KnowledgeIndex` rebuilds or refuses it."""
        return "access" not in self._ix.schema

    @property
    def damage(self) -> IndexCorruptError | None:
        """The first :class:`IndexCorruptError` a read or write ran into, else ``None``."""
        return self._guard.damage

    # -- writing -----------------------------------------------------------------------------
    def replace(self, doc_keys: Iterable[str], chunks: Sequence[Chunk], vectors: np.ndarray | None = None) -> None:
        """Delete every chunk of ``doc_keys``, add ``chunks``, and commit (one transaction).

        ``vectors`` is ignored (the :class:`~index.stores.base.ChunkStore` signature; BM25 keeps none).

        Raises:
            IndexLockedError: when another writer holds the index for more than 60 s.
        """
        with self._guard():
            writer = self._writer()
            try:
                for key in doc_keys:
                    writer.delete_by_term("doc_key", key)
                for c in chunks:
                    self._add(writer, c)
            except BaseException:
                writer.cancel()
                raise
            writer.commit()
        self._invalidate()

    @staticmethod
    def _add(writer: IndexWriter, c: Chunk) -> None:
        rec = chunk_to_record(c)
        writer.add_document(
            chunk_id=rec["chunk_id"], doc_key=rec["doc_key"], source=rec["source"],
            doc_id=rec["doc_id"], url=rec["url"], section_path=rec["section_path"],
            ordinal=rec["ordinal"], updated_at=rec["updated_at"],
            access=SECTION_SEP.join(rec["access"]), access_unresolved=rec["access_unresolved"],
            text=rec["text"], title_raw=rec["title"],
            content=bm25f_content(c.title, " ".join(c.section_path), c.text),
        )

    def set_access(self, access: Mapping[str, Access]) -> int:
        """Give every chunk of each document key its new access (doc key to :class:`Access`), in one commit.

        Whoosh cannot update one field in place: each chunk is deleted and added again from its stored
        fields (the same ``content``, so the same BM25 scores). Nothing is embedded. Unknown keys are
        ignored.

        Returns:
            The number of chunks updated.

        Raises:
            IndexLockedError: when another writer holds the index for more than 60 s.
        """
        if not access:
            return 0
        searcher = self._get_searcher()
        with self._guard():
            found = {key: [chunk_from_record({**rec, "title": rec.get("title_raw", "")})
                           for rec in searcher.documents(doc_key=key)] for key in access}
        keys = [k for k, cs in found.items() if cs]
        if not keys:
            return 0
        self.replace(keys, [dc_replace(c, access=access[k]) for k in keys for c in found[k]])
        return sum(len(found[k]) for k in keys)

    def delete(self, doc_keys: Iterable[str]) -> None:
        """Delete every chunk of ``doc_keys`` (unknown keys are ignored), in one commit.

        Raises:
            IndexLockedError: when another writer holds the index for more than 60 s.
        """
        self.replace(doc_keys, [])

    def delete_chunks(self, chunk_ids: Iterable[str]) -> None:
        """Delete the chunks with these ids (unknown ids are ignored), in one commit."""
        ids = list(chunk_ids)
        if not ids:
            return
        with self._guard():
            writer = self._writer()
            try:
                for cid in ids:
                    writer.delete_by_term("chunk_id", cid)
            except BaseException:
                writer.cancel()
                raise
            writer.commit()
        self._invalidate()

    def _writer(self) -> IndexWriter:
        from whoosh.writing import LockError

        try:
            return self._ix.writer(timeout=60.0, limitmb=128)
        except LockError as exc:
            raise IndexLockedError(f"the BM25 index in {self.path} is locked by another writer; retry later") from exc

    def optimize(self) -> None:
        """Merge all segments into one (faster queries; call after a run that changed pages)."""
        with self._guard():
            self._ix.optimize()
        self._invalidate()

    def clear(self) -> None:
        """Remove every chunk."""
        with self._guard():
            self._ix = index.create_in(str(self.path), _schema())
        self._invalidate()

    # -- reading -----------------------------------------------------------------------------
    def _invalidate(self) -> None:
        with self._lock:
            if self._searcher is not None:
                self._searcher.close()
                self._searcher = None

    def _get_searcher(self) -> Searcher:
        with self._guard(), self._lock:
            if self._searcher is None:
                self._searcher = self._ix.searcher(weighting=scoring.BM25F(B=0.75, K1=1.2))
            elif not self._searcher.up_to_date():
                if self._searcher.reader().segments() is None:  # Whoosh cannot refresh a searcher of an empty index
                    self._searcher.close()
                    self._searcher = self._ix.searcher(weighting=scoring.BM25F(B=0.75, K1=1.2))
                else:
                    self._searcher = self._searcher.refresh()
            return self._searcher

    def warm(self) -> None:
        """Read what the first searches of the current snapshot would otherwise read, off the users' path
        (:meth:`index.knowledge.KnowledgeIndex.warm`, which sync runs call after writing): the array scorer's
        field lengths and longest posting lists (:meth:`~index.stores.bm25_arrays.SnapshotScorer.preload`)
        and the chunks a public viewer may read."""
        searcher = self._get_searcher()
        with self._guard():
            if searcher.doc_count_all() == 0:
                return
            scorer = self._array_scorer(searcher)
            if scorer is not None:
                scorer.preload()
            allowed = self._allowed_docs(searcher, viewer_tokens(Viewer.public(), "the BM25"))
            if allowed:
                self._allowed_mask(searcher, allowed)

    def analyze(self, text: str) -> list[str]:
        """The index terms of ``text`` (lower-cased, stop words removed, stemmed), in order."""
        return [t.text for t in self._analyzer(text)]

    def search_ids(self, query: str, limit: int = 50, boosts: dict[str, float] | None = None, *,
                   viewer: Viewer) -> list[tuple[str, float]]:
        """BM25F search over the chunks ``viewer`` may read, returning ``(chunk_id, score)`` pairs, best first.

        The access test is a filter query inside the search (not a cut of a top-k afterwards), so
        ``limit`` readable chunks come back whenever there are that many matching ones.
        Reads chunk ids from a column instead of loading stored documents, which would cost more
        than the search itself.

        Args:
            query: free text; analysed like the indexed text.
            limit: the number of hits to return at most.
            boosts: optional per-term weights (analysed term to weight), e.g. for expansion terms.
            viewer: who will see the result (:class:`core.access.Viewer`).

        Raises:
            ValueError: when ``viewer`` is not a :class:`Viewer`.
        """
        tokens = viewer_tokens(viewer, "the BM25")
        sources = viewer_sources(viewer)
        searcher = self._get_searcher()
        terms = self.query_terms(query, searcher)
        if not terms:
            return []
        boosts = boosts or {}
        clauses = [Term("content", t, boost=boosts.get(t, 1.0)) for t in terms]
        with self._guard():
            allowed = self._allowed_docs(searcher, tokens, sources)
            if not allowed:  # nothing readable (and Whoosh would take an empty filter set for no filter)
                return []
            col = self._id_column(searcher)
            scorer = self._array_scorer(searcher)
            if scorer is not None:
                top = scorer.top(terms, boosts, self._allowed_mask(searcher, allowed), limit)
                if top is not None:
                    return [(col[d], s) for d, s in top]
            results = searcher.search(_PreloadedOr(clauses), limit=limit, filter=allowed, optimize=False)
            return [(col[hit.docnum], float(hit.score)) for hit in results]

    @staticmethod
    def _array_scorer(searcher: Searcher) -> SnapshotScorer | None:
        """The searcher's :class:`~index.stores.bm25_arrays.SnapshotScorer` (made on first use, kept with
        the snapshot), or ``None`` when the index holds something it does not read (Whoosh then ranks)."""
        scorer: SnapshotScorer | bool | None = getattr(searcher, "_chatops_bm25", None)  # False: not readable
        if scorer is None:
            try:
                scorer = SnapshotScorer(searcher, "content")
            except Unsupported as exc:
                log.info("BM25 ranks with Whoosh's own matchers (%s not read by the array path)", exc)
                scorer = False
            searcher._chatops_bm25 = scorer
        return scorer if isinstance(scorer, SnapshotScorer) else None

    @staticmethod
    def _allowed_mask(searcher: Searcher, allowed: BitSet) -> np.ndarray:
        """``allowed`` (one of :meth:`_allowed_docs`' sets) as a boolean array, kept with it."""
        masks: dict[int, tuple[BitSet, np.ndarray]] | None = getattr(searcher, "_chatops_masks", None)
        if masks is None:
            masks = searcher._chatops_masks = {}
        hit = masks.get(id(allowed))
        if hit is None or hit[0] is not allowed:
            if len(masks) >= ALLOWED_CACHE:
                masks.pop(next(iter(masks)))
            hit = masks[id(allowed)] = (allowed, bitset_mask(allowed, searcher.doc_count_all()))
        return hit[1]

    def search(self, query: str, limit: int = 50, boosts: dict[str, float] | None = None, *,
               viewer: Viewer) -> list[StoredChunk]:
        """BM25F search returning the stored chunks ``viewer`` may read with their scores, best first (see
        :meth:`search_ids`, which the retrieval tool uses: reading stored chunks costs more than the search)."""
        hits = self.search_ids(query, limit=limit, boosts=boosts, viewer=viewer)
        found = self.chunks(cid for cid, _ in hits)
        return [StoredChunk(found[cid], score) for cid, score in hits if cid in found]

    @staticmethod
    def _allowed_docs(searcher: Searcher, tokens: Sequence[str], sources: Sequence[str] | None = None) -> BitSet:
        """The documents readable with any of ``tokens`` (and, for a scoped viewer, of one of ``sources``:
        their ``doc_key`` starts with ``<source>:``), as a bit set kept with ``searcher``.

        Whoosh turns a filter query into a bit set on every search by walking the postings of each
        access term (most of a 100k-chunk index for ``public``: tens of milliseconds in Python).
        The set depends only on the searcher's snapshot and the tokens, so it is computed once per
        snapshot and token set (a write makes a new searcher, and with it a new cache); at most
        ``ALLOWED_CACHE`` token sets are kept, the oldest dropped first.
        """
        cache: dict[tuple[tuple[str, ...], tuple[str, ...] | None], BitSet] | None = getattr(
            searcher, "_chatops_allowed", None)
        if cache is None:
            cache = searcher._chatops_allowed = {}
        key = (tuple(sorted(set(tokens))), None if sources is None else tuple(sorted(set(sources))))
        docs = cache.get(key)
        if docs is None:
            query = Or([Term("access", t) for t in key[0]])
            if key[1] is not None:  # the channel's scope: one more condition of the same pre-filter
                query = And([query, Or([Prefix("doc_key", f"{s}:") for s in key[1]])])
            docs = BitSet(searcher.docs_for_query(query), size=searcher.doc_count_all())
            if len(cache) >= ALLOWED_CACHE:
                cache.pop(next(iter(cache)))
            cache[key] = docs
        return docs

    @staticmethod
    def _id_column(searcher: Searcher) -> ColumnReader:
        col = getattr(searcher, "_chatops_ids", None)
        if col is None:
            col = searcher._chatops_ids = searcher.reader().column_reader("chunk_id")
        return col

    @staticmethod
    def _frequencies(searcher: Searcher) -> Callable[[str], int]:
        """The snapshot's document frequency of a ``content`` term, remembered with the snapshot (a look-up in
        Whoosh's term table costs tens of microseconds; pseudo-relevance feedback and the gate ask for the same
        terms again and again); at most :data:`DF_CACHE` terms, least recently used dropped first."""
        df: Callable[[str], int] | None = getattr(searcher, "_chatops_df", None)
        if df is None:
            df = searcher._chatops_df = functools.lru_cache(maxsize=DF_CACHE)(
                lambda term: searcher.doc_frequency("content", term))
        return df

    def query_terms(self, query: str, searcher: Searcher | None = None) -> list[str]:
        """The terms a query is run with: analysed, de-duplicated, frequent ones pruned, bounded."""
        searcher = searcher or self._get_searcher()
        df = self._frequencies(searcher)
        with self._guard():
            terms = [t for t in dict.fromkeys(self.analyze(query)) if df(t) > 0]
            n = searcher.doc_count()
            if n >= self.prune_min_docs:
                rare = [t for t in terms if df(t) <= self.max_df_ratio * n]
                if len(rare) >= 2:
                    terms = rare
        return terms[: self.max_terms]

    def doc_frequency(self, term: str) -> int:
        """Number of chunks containing the analysed ``term``."""
        searcher = self._get_searcher()
        with self._guard():
            return self._frequencies(searcher)(term)

    def doc_frequencies(self, terms: Iterable[str]) -> dict[str, int]:
        """:meth:`doc_frequency` of each of ``terms``, from one snapshot (taking the searcher, which checks that
        it is current, costs more than a term's look-up: pseudo-relevance feedback asks for about a hundred)."""
        searcher = self._get_searcher()
        df = self._frequencies(searcher)
        with self._guard():
            return {t: df(t) for t in terms}

    @property
    def doc_count(self) -> int:
        """Number of chunks in the index."""
        searcher = self._get_searcher()
        with self._guard():
            n: int = searcher.doc_count()
            return n

    @property
    def count(self) -> int:
        """Number of chunks in the index (:attr:`doc_count`, the :class:`~index.stores.base.ChunkStore` name)."""
        return self.doc_count

    def chunk_ids(self) -> set[str]:
        """Every chunk id in the index (read from the id column; for consistency checks)."""
        searcher = self._get_searcher()
        with self._guard():
            if searcher.doc_count_all() == 0:  # an empty index has no columns
                return set()
            col = self._id_column(searcher)
            return {col[n] for n in searcher.reader().all_doc_ids()}

    def chunks(self, chunk_ids: Iterable[str]) -> dict[str, Chunk]:
        """The stored chunks among ``chunk_ids`` (unknown ids are absent), to rebuild another store."""
        searcher = self._get_searcher()
        out: dict[str, Chunk] = {}
        with self._guard():
            for cid in dict.fromkeys(chunk_ids):
                docnum = searcher.document_number(chunk_id=cid)
                if docnum is not None:
                    rec = searcher.stored_fields(docnum)
                    out[cid] = chunk_from_record({**rec, "title": rec.get("title_raw", "")})
        return out

    def close(self) -> None:
        """Close the open searcher."""
        self._invalidate()
