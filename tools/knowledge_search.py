"""``knowledge.search``: hybrid retrieval over the knowledge index.

BM25F candidates from Whoosh and dense candidates from Qdrant (cosine over all-MiniLM-L6-v2
vectors, or the configured embeddings API) are fused with weighted reciprocal rank fusion
(:mod:`tools.fusion`), de-duplicated (same chunk id, or the same text in another chunk), and
returned as :class:`Evidence` with each retriever's rank and raw score, so later steps (the
evidence gate, the trace, ablations) can see why a chunk was found. ``retriever="bm25"`` or
``"dense"`` returns one ranker alone for ablations.

A query naming a code-like exact term (a code, command, ticket id or version:
:func:`tools.identifiers.is_code`) is fused with BM25 weighted up (``identifier_bm25_weight``):
a small dense model does not know "E42", so a dense-weighted fusion would push the one passage that
holds it out of the evidence gate's window. Each :class:`Evidence` says which of the query's
identifiers its text holds verbatim (``exact``), for the gate, the planner and the answerer.

Access (issue 11): every search runs for the :class:`connectors.access.Viewer` in the
:class:`~tools.context.ToolContext` (``ctx.viewer``, from ``Turn.viewer``; a missing one raises
``ValueError``: a programming error, never "everyone"). Both stores apply it as a pre-filter inside
their query, so every candidate, every pseudo-relevance feedback passage (taken from the filtered
dense hits) and every returned passage is one the viewer may read; the dense-candidate cache is keyed
by :meth:`Viewer.cache_key`. The viewer is not a tool argument: the language model cannot pick it.

A channel's scope (``channels:`` of the sources file) rides on the same viewer
(:attr:`Viewer.sources`): both stores add it to their pre-filter, so a question asked in a scoped
channel only ever ranks chunks of that channel's sources (and the cache key tells scoped viewers apart).

The shared index (``QDRANT_URL``: :attr:`index.knowledge.KnowledgeIndex.hybrid`, one Qdrant collection with
both vectors, :mod:`index.stores.qdrant_hybrid`) is searched in as few round trips as the steps allow:
without pseudo-relevance feedback (``prf`` off, e.g. the LLM planner gave expansion terms, or
``retriever="bm25"``) the dense and the BM25 queries go in ONE ``query_batch_points`` call; with it, the dense
query first (its top passages give the feedback terms), then the BM25 query: two calls. Either way the BM25
hits come back with their chunks and their cosines to the dense query (computed by the server), so nothing
is fetched afterwards. Fusion stays here, client-side: the measured weighted RRF, each retriever's own rank
and raw score for the gate (see :mod:`index.stores.qdrant_hybrid` for why the server's fusion is not used).
The embedded index (Whoosh and local Qdrant) runs the steps below unchanged.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import ClassVar, Literal

import numpy as np
from pydantic import BaseModel, Field

from index.knowledge import KnowledgeIndex
from index.stores import StoredChunk
from connectors.access import Viewer
from connectors.models import Chunk, content_hash
from telemetry.tracing import span

from .base import ToolContext
from .fusion import reciprocal_rank_fusion
from .identifiers import contains, identifiers, is_code
from .prf import feedback_terms

__all__ = ["KnowledgeSearch", "KnowledgeSearchArgs", "Evidence", "SearchResult", "SearchConfig"]

Retriever = Literal["hybrid", "bm25", "dense"]


class KnowledgeSearchArgs(BaseModel):
    """Arguments of ``knowledge.search``."""

    query: str = Field(min_length=1, max_length=4000, description="What to look for, in words a page would use.")
    k: int = Field(default=8, ge=1, le=100, description="Number of passages to return.")
    retriever: Retriever = Field(default="hybrid", description="hybrid (BM25 + dense, fused), bm25 or dense.")
    dense_query: str | None = Field(default=None, max_length=4000,
                                    description="Text to embed instead of the query (e.g. a hypothetical answer).")
    expansion: list[str] = Field(default_factory=list, max_length=32,
                                 description="Extra keyword terms for BM25 (query expansion), weighted down.")
    prf: bool = Field(default=True, description="Add pseudo-relevance feedback terms from the top dense passages to BM25.")
    cosine_to: str | None = Field(default=None, max_length=4000,
                                  description="Text the reported cosines are measured against (default: the dense query).")


@dataclass(frozen=True, slots=True)
class Evidence:
    """One retrieved chunk.

    Attributes:
        chunk: the passage.
        score: the fused score (RRF) or the single retriever's score.
        ranks: retriever name to 1-based rank in its own list.
        scores: retriever name to raw score (BM25F score; cosine similarity in [-1, 1]).
        cosine: cosine similarity of the chunk's vector to the dense query's vector, computed for
            every returned chunk, also those only BM25 found (the evidence gate reads it); ``None``
            only when the chunk's vector is missing.
        exact: the query's identifiers (:func:`tools.identifiers.identifiers`, as written in the
            query) that the chunk's text holds verbatim; ``()`` when the query names none.
    """

    chunk: Chunk
    score: float
    ranks: dict[str, int] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)
    cosine: float | None = None
    exact: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        """Trace-friendly summary."""
        c = self.chunk
        return {"chunk_id": c.chunk_id, "doc_id": c.doc_id, "title": c.title, "section": c.section,
                "score": round(self.score, 5), "ranks": self.ranks,
                "scores": {k: round(v, 4) for k, v in self.scores.items()},
                "cosine": None if self.cosine is None else round(self.cosine, 4),
                **({"exact": list(self.exact)} if self.exact else {})}


@dataclass(slots=True)
class SearchResult:
    """Evidence plus per-stage timings in milliseconds."""

    evidence: list[Evidence]
    timings_ms: dict[str, float]
    query: str
    retriever: str
    feedback_terms: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class SearchConfig:
    """Retrieval parameters.

    Attributes:
        rrf_k: RRF constant (Cormack et al. use 60).
        dense_weight, bm25_weight: RRF weights per retriever.
        candidates: candidates taken from each retriever before fusion.
        expansion_weight: BM25 weight of expansion and feedback terms relative to query terms.
        prf_docs, prf_terms: pseudo-relevance feedback from this many top dense passages, this many terms.
        identifier_bm25_weight: the BM25 weight instead of ``bm25_weight`` when the query names a
            code-like identifier (a code, command, ticket id or version; not a bare acronym such as
            "PRs", which the dense model reads well enough).
    """

    rrf_k: int = 60
    dense_weight: float = 1.0
    bm25_weight: float = 0.6
    candidates: int = 60
    expansion_weight: float = 0.3
    prf_docs: int = 3
    prf_terms: int = 6
    identifier_bm25_weight: float = 1.5


class KnowledgeSearch:
    """The ``knowledge.search`` tool over one :class:`~index.knowledge.KnowledgeIndex`."""

    name: ClassVar[str] = "knowledge.search"
    description: ClassVar[str] = (
        "Search the company knowledge base (Confluence, wiki, handbook) and return numbered passages "
        "with titles, sections and links. Use for any question about the company, its policies, "
        "processes, tools or people.")
    Args: ClassVar[type[BaseModel]] = KnowledgeSearchArgs
    side_effect: ClassVar[bool] = False
    permission: ClassVar[str] = "everyone"

    def __init__(self, index: KnowledgeIndex, config: SearchConfig | None = None, query_cache_size: int = 512) -> None:
        self.index = index
        self.config = config or SearchConfig()
        self._qcache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._qcache_size = query_cache_size
        self._dcache: OrderedDict[tuple[str, int, str], list] = OrderedDict()
        self._lock = threading.Lock()

    def embed_query(self, text: str) -> np.ndarray:
        """The query vector (shape ``(dim,)``), from a small LRU cache."""
        key = content_hash(text)
        with self._lock:
            v = self._qcache.get(key)
            if v is not None:
                self._qcache.move_to_end(key)
                return v
        v = self.index.embedder.embed([text])[0]
        with self._lock:
            self._qcache[key] = v
            if len(self._qcache) > self._qcache_size:
                self._qcache.popitem(last=False)
        return v

    def run(self, args: KnowledgeSearchArgs, ctx: ToolContext | None = None) -> SearchResult:  # type: ignore[override]
        """Search (:meth:`_run`) in a ``chatops.search`` span when tracing is on (the retriever and the number of
        results as attributes, never the query)."""
        with span("chatops.search", {"chatops.retriever": args.retriever}) as sp:
            result = self._run(args, ctx)
            sp.set_attribute("chatops.results", len(result.evidence))
            return result

    def _run(self, args: KnowledgeSearchArgs, ctx: ToolContext | None = None) -> SearchResult:
        """Search; see the module docstring.

        Steps: embed the query (always: every returned chunk gets its cosine to the query, which
        the evidence gate reads); dense candidates; feedback terms from the top dense passages
        (``prf``, hybrid only); one BM25F search with the query, expansion and feedback terms;
        weighted RRF; de-duplication; chunks and vectors of BM25-only hits fetched from Qdrant.
        Both searches are restricted to what ``ctx.viewer`` may read. On a shared index the dense and
        BM25 searches share one call when there is no feedback step, and the BM25 hits bring their chunks
        and cosines (see the module docstring).

        Raises:
            ValueError: when ``ctx`` carries no :class:`~connectors.access.Viewer`.
        """
        viewer = ctx.viewer if ctx is not None else None
        if not isinstance(viewer, Viewer):
            raise ValueError("knowledge.search needs the asker's access context (ToolContext.viewer, from "
                             "Turn.viewer); without one it cannot tell what the asker may read")
        cfg = self.config
        timings: dict[str, float] = {}
        lists: dict[str, list[tuple[str, float]]] = {}
        chunks: dict[str, Chunk] = {}
        cosines: dict[str, float] = {}
        feedback: list[str] = []
        t = time.perf_counter()
        vec = self.embed_query(args.dense_query or args.query)
        timings["embed"] = (time.perf_counter() - t) * 1000
        dense_text = args.dense_query or args.query
        pair = self.index.hybrid if args.retriever != "dense" else None  # shared: both queries in one collection
        prf = args.prf and args.retriever == "hybrid"
        dense_key = self._dense_key(dense_text, viewer)  # reads the index version once (a shared index: a query)

        def take_dense(hits: list[StoredChunk]) -> None:
            for h in hits:
                chunks[h.chunk.chunk_id] = h.chunk
                cosines[h.chunk.chunk_id] = h.score
            lists["dense"] = [(h.chunk.chunk_id, h.score) for h in hits]

        if args.retriever in ("hybrid", "dense"):
            t = time.perf_counter()
            hits = self._cached_dense(dense_key)
            if hits is None and (pair is None or prf):  # feedback terms need the dense top passages first
                hits = self.index.qdrant.search(vec, limit=self.config.candidates, viewer=viewer)
                self._remember_dense(dense_key, hits)
            if hits is not None:
                take_dense(hits)
                timings["dense"] = (time.perf_counter() - t) * 1000
        if args.retriever in ("hybrid", "bm25"):
            t = time.perf_counter()
            base = set(self.analyze(args.query))
            extra = [x for term in args.expansion for x in self.analyze(term) if x not in base]
            if prf and lists.get("dense"):
                # Only the viewer's filtered dense hits: no term of a page they may not read gets in.
                top = [chunks[cid] for cid, _ in lists["dense"][: cfg.prf_docs]]
                feedback = feedback_terms(top, base | set(extra), self.analyze, self.idf, cfg.prf_terms)
            added = list(dict.fromkeys(extra + feedback))
            q = " ".join([args.query, *added])
            boosts = {x: cfg.expansion_weight for x in added}
            if pair is None:
                lists["bm25"] = self.index.whoosh.search_ids(q, limit=cfg.candidates, boosts=boosts, viewer=viewer)
                timings["bm25"] = (time.perf_counter() - t) * 1000
            else:
                with_dense = args.retriever == "hybrid" and "dense" not in lists
                both = pair.search_pair(vec, q, limit=cfg.candidates, boosts=boosts, viewer=viewer, dense=with_dense)
                if with_dense:
                    self._remember_dense(dense_key, both.dense)
                    take_dense(both.dense)
                for h in both.bm25:  # their payloads and cosines came with the response: nothing to fetch
                    chunks.setdefault(h.chunk.chunk_id, h.chunk)
                for cid, cos in both.cosines.items():
                    cosines.setdefault(cid, cos)
                lists["bm25"] = [(h.chunk.chunk_id, h.score) for h in both.bm25]
                timings["dense+bm25" if with_dense else "bm25"] = (time.perf_counter() - t) * 1000
        t = time.perf_counter()
        ranks: dict[str, dict[str, int]] = {}
        raw: dict[str, dict[str, float]] = {}
        for name, hits in lists.items():
            for r, (cid, score) in enumerate(hits, start=1):
                ranks.setdefault(cid, {})[name] = r
                raw.setdefault(cid, {})[name] = score
        exact_terms = identifiers(" ".join(dict.fromkeys([args.query, args.dense_query or args.query])))
        if args.retriever == "hybrid":
            code_like = any(is_code(x) for x in exact_terms)
            bm25_weight = max(cfg.bm25_weight, cfg.identifier_bm25_weight) if code_like else cfg.bm25_weight
            fused = reciprocal_rank_fusion({n: [c for c, _ in h] for n, h in lists.items()}, k=cfg.rrf_k,
                                           weights={"dense": cfg.dense_weight, "bm25": bm25_weight})
        else:
            fused = list(lists[args.retriever])
        head = [cid for cid, _ in fused[: args.k * 2 + 10]]
        missing = [cid for cid in head if cid not in chunks]
        for cid, (chunk, v) in self.index.qdrant.fetch(missing).items():
            chunks[cid] = chunk
            cosines[cid] = float(np.dot(v, vec))
        if args.cosine_to and args.cosine_to != (args.dense_query or args.query):
            vq = self.embed_query(args.cosine_to)
            vectors = self.index.qdrant.vectors(head)
            cosines = {cid: float(np.dot(v, vq)) for cid, v in vectors.items()}
        out: list[Evidence] = []
        seen_text: set[str] = set()
        for cid, score in fused:
            c = chunks.get(cid)
            if c is None:  # in BM25 but not (yet) in Qdrant: never show what cannot be verified
                continue
            th = content_hash(c.doc_id, c.text)
            if th in seen_text:
                continue
            seen_text.add(th)
            exact = tuple(t for t in exact_terms if contains(c.text, t))
            out.append(Evidence(c, score, ranks.get(cid, {}), raw.get(cid, {}), cosines.get(cid), exact))
            if len(out) >= args.k:
                break
        timings["fuse"] = (time.perf_counter() - t) * 1000
        return SearchResult(out, timings, args.query, args.retriever, feedback)

    def _dense_key(self, text: str, viewer: Viewer) -> tuple[str, int, str]:
        """The dense-candidate cache's key: (text, index version, viewer's access set), so a retry that keeps
        the dense query does not search twice, a write makes every entry stale, and one viewer never gets
        another's hits."""
        return content_hash(text), self.index.version, viewer.cache_key()

    def _cached_dense(self, key: tuple[str, int, str]) -> list[StoredChunk] | None:
        """The cached dense candidates under ``key`` (:meth:`_dense_key`), else ``None``."""
        with self._lock:
            return self._dcache.get(key)

    def _remember_dense(self, key: tuple[str, int, str], hits: list[StoredChunk]) -> None:
        with self._lock:
            self._dcache[key] = hits
            if len(self._dcache) > 64:
                self._dcache.popitem(last=False)

    # -- helpers the agent uses to judge evidence ------------------------------------------------
    def analyze(self, text: str) -> list[str]:
        """Index terms of ``text`` (the BM25 analyzer: lower-case, stop words out, Porter stems)."""
        return self.index.whoosh.analyze(text)

    def idf(self, term: str) -> float:
        """Inverse document frequency of an analysed term over chunks: ``ln(1 + N / (df + 0.5))``."""
        n = max(self.index.whoosh.doc_count, 1)
        return float(np.log1p(n / (self.index.whoosh.doc_frequency(term) + 0.5)))
