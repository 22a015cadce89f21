"""``knowledge.search`` latency at the corpus's size and on synthetic indexes up to 100,000 chunks.

Usage: python bench/search_latency.py [--index DIR] [--sizes 10000,30000,100000] [--queries N] [--dev FILE]
       [--mode embedded|shared|file|both|all] [--budget-s SECONDS]
       [--candidates qdrant-local,numpy-gather,numpy-exact,qdrant-edge,hnswlib,faiss-hnsw] [--candidate-queries N]
       [--rounds N]

``--mode`` picks the index layouts (comma-separated, default ``embedded``): ``embedded`` (Whoosh and
local-mode Qdrant under the index folder), ``shared`` (``QDRANT_URL``: one collection with a dense and a BM25
sparse vector, :class:`~index.stores.QdrantHybridStore`, over HTTP to the Qdrant stand-in
``tests/standins/qdrant/`` run as its own process: the real client code path, but the stand-in executes
requests with qdrant-client's local engine, so its figures are NOT a Qdrant server's), ``file`` (the shared
layout in qdrant-client's local mode, ``QDRANT_URL=file:PATH``, in this process); ``both`` is
``embedded,shared``, ``all`` the three. Every mode opens its index through
:class:`~index.knowledge.KnowledgeIndex` and searches through ``knowledge.search``. For ``shared`` it also
counts the HTTP requests per search in the stand-in's log (1 without pseudo-relevance feedback, 2 with).
A mode whose searches at a size would take longer than ``--budget-s`` (estimated linearly from the
previous size) is not measured there, and says so.

Part 1 times hybrid, BM25-only and dense-only searches of real questions (the eval set's when
``../shared`` is present) on a real index (``--index``, e.g. ``.chatops/index``; built from the
example wiki when omitted; warmed as a sync run leaves it): a first pass of each (hybrid first, so what it reads is
warm for the others), then ``--rounds`` warm passes of each in turn, with hybrid's time against the sum of BM25's
and dense's and hybrid's mean time per stage of the retrieval engine. Part 2 builds synthetic indexes: chunks made of words drawn from the
corpus vocabulary with a Zipf-like distribution, and random unit vectors (so no embedding cost),
and times the same searches, to show how latency grows with index size in local mode, BM25 alone through the store's
NumPy ranking beside Whoosh's own matchers (with the number of identical rankings), then what re-writing
one page costs the next search. Part 3, at each size, compares the embedded dense-index
candidates of ``bench/vector_candidates.py`` (build time, memory, access-filtered top-30 p50/p95,
recall@10 against the exact scan); candidates whose package is not installed are skipped.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np


from index.embeddings import CachedEmbedder, EmbeddingCache, OnnxMiniLMEmbedder
from connectors.folder import FolderSource
from index.knowledge import KnowledgeIndex
from index.indexer import Indexer
from core.models import Chunk, content_hash
from tools.knowledge_search import KnowledgeSearch, KnowledgeSearchArgs
from tools.context import ToolContext
from core.access import Access, Viewer
from bench.vector_candidates import CANDIDATES, no_fsync, run_size
from state import StateStore

ROOT = Path(__file__).resolve().parents[1]
#: the eval set next to the repository (``/work/main``) or next to its worktree's folder (``/work/wt/NAME``)
DEV = next((p for p in (ROOT.parent / "shared" / "eval" / "dev.jsonl", ROOT.parents[1] / "shared" / "eval" / "dev.jsonl")
            if p.is_file()), ROOT.parent / "shared" / "eval" / "dev.jsonl")
FALLBACK_QUESTIONS = [
    "how much is the home office budget?", "how do I declare an incident?", "when do patch releases go out?",
    "how many days of PTO do we get?", "what is the expense deadline?", "who approves long vacations?",
    "what does RFC mean?", "how do I report phishing?", "when is the all-hands?", "what laptop do I get?",
]
MODES = ("embedded", "shared", "file")
STANDIN_LABEL = "stand-in (qdrant-client local engine behind HTTP), not a Qdrant server"


class Indexes:
    """Opens a :class:`KnowledgeIndex` of one mode (see the module docstring) under ``tmp``.

    ``shared`` indexes live in one Qdrant stand-in process (in memory), one collection each; ``shared`` and
    ``file`` keep their manifest in one migrated SQLite state database, as ``QDRANT_URL`` deployments do.
    """

    def __init__(self, tmp: Path, embedder: CachedEmbedder, stack: contextlib.ExitStack, modes: list[str]) -> None:
        self.tmp, self.embedder, self.standin = tmp, embedder, None
        self.state_url = f"sqlite:///{tmp / 'state.sqlite'}"
        StateStore(self.state_url).close()
        if "shared" in modes:
            from tests.standins.qdrant import QdrantStandInProcess

            self.standin = stack.enter_context(QdrantStandInProcess())

    def open(self, mode: str, name: str) -> KnowledgeIndex:
        """A new index ``name`` of ``mode`` (opened as an indexing run does: ``repair=True``)."""
        folder = self.tmp / mode / name
        if mode == "embedded":
            return KnowledgeIndex(folder, self.embedder)
        url = self.standin.url if mode == "shared" else f"file:{folder / 'qdrant'}"
        return KnowledgeIndex(folder, self.embedder, qdrant_url=url, collection=name, database_url=self.state_url,
                              repair=True)

    def label(self, mode: str) -> str:
        return {"embedded": "embedded", "shared": "shared/stand-in", "file": "shared/local-file"}[mode]


def questions(n: int, dev: Path = DEV) -> list[str]:
    """Up to ``n`` realistic questions (from the eval set ``dev`` when it exists)."""
    if dev.is_file():
        qs = [json.loads(line)["question"] for line in dev.read_text().splitlines() if line.strip()]
    else:
        qs = FALLBACK_QUESTIONS
    return (qs * (n // len(qs) + 1))[:n]


def time_searches(search: KnowledgeSearch, qs: list[str], retriever: str,
                  stages: dict[str, list[float]] | None = None) -> list[float]:
    """The ms of each ``knowledge.search`` (k=30; hybrid with pseudo-relevance feedback, the planner's default) over
    ``qs``, each query embedded once first; each search's stage timings are added to ``stages`` when given."""
    for q in qs:
        search.embed_query(q)
    times = []
    for q in qs:
        t = time.perf_counter()
        res = search.run(KnowledgeSearchArgs(query=q, k=30, retriever=retriever, prf=retriever == "hybrid"),
                         ToolContext(viewer=Viewer.public()))
        times.append((time.perf_counter() - t) * 1000)
        for stage, ms in res.timings_ms.items():
            if stages is not None:
                stages.setdefault(stage, []).append(ms)
    return times


def p50_p95(times: list[float]) -> tuple[float, float]:
    xs = sorted(times)
    return statistics.median(xs), xs[min(len(xs) - 1, int(0.95 * len(xs)))]


def report(label: str, search: KnowledgeSearch, qs: list[str], standin=None, rounds: int = 0) -> float:
    """Print one line per retriever: its first pass over ``qs`` (hybrid first, so the posting lists and document
    frequencies it reads are warm for the others, as in a bot that just started), with the stand-in's HTTP requests
    per search when ``standin`` is given. With ``rounds``, then ``rounds`` more passes of each retriever in turn
    (warm caches: the three on equal footing), hybrid's cost against the sum of BM25's and dense's, and hybrid's
    mean milliseconds per stage. The dense-candidate cache is emptied before every pass (real searches, not the
    retry cache). Returns the seconds the first passes took."""
    t = time.perf_counter()
    for r in ("hybrid", "bm25", "dense"):
        search.engine.clear_cache()
        if standin is not None:
            standin.reset()
        p50, p95 = p50_p95(time_searches(search, qs, r))
        calls = "" if standin is None else f"   {requests_per_search(standin, len(qs))}"
        print(f"{label:<34} {r:<7} p50 {p50:7.1f} ms   p95 {p95:7.1f} ms{calls}")
    spent = time.perf_counter() - t
    if rounds:
        warm: dict[str, list[float]] = {"hybrid": [], "bm25": [], "dense": []}
        stages: dict[str, list[float]] = {}
        for _ in range(rounds):
            for r in warm:
                search.engine.clear_cache()
                warm[r] += time_searches(search, qs, r, stages if r == "hybrid" else None)
        (h50, h95), (b50, b95), (d50, d95) = (p50_p95(warm[r]) for r in warm)
        print(f"{label:<34} warm, {rounds} rounds: hybrid {h50:.1f} / {h95:.1f} ms, bm25 {b50:.1f} / {b95:.1f}, dense "
              f"{d50:.1f} / {d95:.1f} (p50 / p95); hybrid / (bm25 + dense): p50 {h50 / (b50 + d50):.2f}, "
              f"p95 {h95 / (b95 + d95):.2f}")
        print(f"{label:<34} hybrid's stages, warm (mean ms): "
              + ", ".join(f"{k} {statistics.mean(v):.1f}" for k, v in stages.items()))
    return spent


def requests_per_search(standin, searches: int) -> str:
    """The stand-in's logged requests since its last reset, per search, by endpoint."""
    by: dict[str, int] = {}
    for r in standin.requests:
        what = f"{r.method} {r.path.split('/', 3)[-1] if r.path.count('/') >= 3 else r.path}"
        by[what] = by.get(what, 0) + 1
    total = sum(by.values())
    parts = ", ".join(f"{k} {v / searches:.2f}" for k, v in sorted(by.items(), key=lambda kv: -kv[1]))
    return f"HTTP requests/search {total / searches:.2f} ({parts})"


def round_trips(search: KnowledgeSearch, standin, q: str) -> None:
    """Print the requests one hybrid search sends, with and without pseudo-relevance feedback (a fresh
    query each time, so no cache answers it)."""
    for prf in (False, True):
        search.engine.clear_cache()
        search.embed_query(q)
        standin.reset()
        search.run(KnowledgeSearchArgs(query=q, k=30, retriever="hybrid", prf=prf), ToolContext(viewer=Viewer.public()))
        paths = [f"{r.method} {r.path}" for r in standin.requests]
        print(f"{'':<34} hybrid {'with' if prf else 'without'} PRF: {len(paths)} HTTP request(s): {', '.join(paths)}")


def bm25_side_by_side(label: str, index: KnowledgeIndex, qs: list[str]) -> None:
    """Time BM25 alone (top 50, a public viewer) through the store (NumPy over cached posting arrays) and
    through Whoosh's own matchers on the same query and filter (what the store ran before), and count the
    questions whose ranked ids and scores agree (within 1e-6)."""
    from whoosh.query import Term

    from index.stores.whoosh_store import _PreloadedOr

    store = index.keyword
    viewer = Viewer.public()
    ours, theirs, same = [], [], 0
    for q in qs:
        t = time.perf_counter()
        got = store.search_ids(q, limit=50, viewer=viewer)
        ours.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        searcher = store._get_searcher()  # noqa: SLF001 - the reference ranking, as the store ran it before
        terms = store.query_terms(q, searcher)
        allowed = store._allowed_docs(searcher, viewer.tokens())  # noqa: SLF001
        col = store._id_column(searcher)  # noqa: SLF001
        want = [(col[h.docnum], float(h.score)) for h in searcher.search(
            _PreloadedOr([Term("content", x) for x in terms]), limit=50, filter=allowed, optimize=False)] if terms else []
        theirs.append((time.perf_counter() - t) * 1000)
        same += [c for c, _ in got] == [c for c, _ in want] and all(abs(a - b) <= 1e-6 for (_, a), (_, b) in zip(got, want))

    def p(xs: list[float]) -> str:
        xs = sorted(xs)
        return f"{statistics.median(xs):.1f} / {xs[min(len(xs) - 1, int(0.95 * len(xs)))]:.1f} ms"
    print(f"{label:<34} bm25 top-50 p50 / p95: arrays {p(ours)}, Whoosh's matchers {p(theirs)}; "
          f"{same}/{len(qs)} rankings identical")


def synthetic(index: KnowledgeIndex, n: int, vocab: list[str], rng: random.Random) -> float:
    """Fill ``index`` with ``n`` synthetic chunks (Zipf-like words, random unit vectors) through its stores'
    writes, 2,000 chunks a write; returns the seconds spent in the writes (text and vectors are made outside)."""
    if index.dense._is_local:  # noqa: SLF001 - bench set-up: local mode's SQLite file
        no_fsync(index.dense.client, index.dense.collection)
    writing = 0.0
    weights = [1 / (i + 1) for i in range(len(vocab))]
    batch_chunks: list[Chunk] = []
    vecs = []
    dim = index.embedder.dim
    nrng = np.random.default_rng(7)
    for i in range(n):
        words = rng.choices(vocab, weights=weights, k=rng.randint(60, 120))
        text = " ".join(words)
        doc = f"synthetic/{i // 12}.md"
        batch_chunks.append(Chunk(content_hash(doc, str(i))[:32], "synthetic", doc, f"Page {i // 12}",
                                  ("Section", words[0]), "", text, i % 12, access=Access.everyone()))
        v = nrng.standard_normal(dim).astype(np.float32)
        vecs.append(v / np.linalg.norm(v))
        if len(batch_chunks) == 2000 or i == n - 1:
            keys = sorted({c.key for c in batch_chunks})
            stacked = np.stack(vecs)
            t = time.perf_counter()
            index.keyword.replace(keys, batch_chunks)
            index.dense.replace([], batch_chunks, stacked)
            writing += time.perf_counter() - t
            batch_chunks, vecs = [], []
    t = time.perf_counter()
    index.keyword.optimize()
    return writing + time.perf_counter() - t


def corpus_vocabulary(index: KnowledgeIndex, size: int = 20000) -> list[str]:
    """The ``size`` most frequent index terms of the chunks' text (by document frequency), read through the
    index's stores and analyzer (so every mode gets the same words)."""
    df: dict[str, int] = {}
    for chunk in index.dense.chunks(index.dense.chunk_ids()).values():
        for term in set(index.keyword.analyze(chunk.text)):
            df[term] = df.get(term, 0) + 1
    return [t for t, _ in sorted(df.items(), key=lambda x: (-x[1], x[0]))][:size]


def after_write(label: str, index: KnowledgeIndex, question: str) -> None:
    """Time what a sync's write costs the next search: re-write one 12-chunk page, then one hybrid
    search (the dense mirror is updated in place), against rebuilding the mirror from the collection
    (what every write cost before: a scroll of every point with its vector; local mode only)."""
    search = KnowledgeSearch(index)
    doc = "synthetic/0.md"
    chunks = [Chunk(content_hash(doc, "rewrite", str(i))[:32], "synthetic", doc, "Page 0", ("Section", "x"), "",
                    f"rewritten part {i} {question}", i, access=Access.everyone()) for i in range(12)]
    vecs = np.random.default_rng(1).standard_normal((12, index.embedder.dim)).astype(np.float32)
    t = time.perf_counter()
    index.keyword.replace([chunks[0].key], chunks)
    index.dense.replace([chunks[0].key], chunks, vecs)
    write = (time.perf_counter() - t) * 1000
    t = time.perf_counter()
    search.run(KnowledgeSearchArgs(query=question, k=30), ToolContext(viewer=Viewer.public()))
    first = (time.perf_counter() - t) * 1000
    if not index.dense._is_local:  # noqa: SLF001 - a server keeps no mirror
        print(f"{label:<34} after a write: one 12-chunk page written in {write:.0f} ms, next hybrid search {first:.0f} ms")
        return
    t = time.perf_counter()
    index.dense._mirror = None  # noqa: SLF001 - time a rebuild from the collection
    index.dense.warm()
    rebuild = (time.perf_counter() - t) * 1000
    print(f"{label:<34} after a write: one 12-chunk page written in {write:.0f} ms, next hybrid search "
          f"{first:.0f} ms (mirror kept in step; a rebuild from the collection takes {rebuild:.0f} ms)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", help="an existing embedded index folder (default: build one from examples/wiki)")
    ap.add_argument("--sizes", default="10000,30000,100000")
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--dev", type=Path, default=DEV, help="eval questions (JSON lines with 'question')")
    ap.add_argument("--mode", default="embedded",
                    help="embedded, shared, file (comma-separated), both (embedded,shared) or all")
    ap.add_argument("--budget-s", type=float, default=300.0,
                    help="skip a mode at a size when its searches would take longer (estimated from the previous size)")
    ap.add_argument("--candidates", default=",".join(CANDIDATES),
                    help="dense-index candidates to compare at each size (bench/vector_candidates.py); '' for none")
    ap.add_argument("--candidate-queries", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3,
                    help="warm passes of each retriever over the questions on the real index, after the first (0: none)")
    args = ap.parse_args()
    names = [x for x in args.candidates.split(",") if x]
    if set(names) - set(CANDIDATES):
        ap.error(f"unknown candidates {sorted(set(names) - set(CANDIDATES))}; choose from {', '.join(CANDIDATES)}")
    modes = {"both": ["embedded", "shared"], "all": list(MODES)}.get(args.mode, args.mode.split(","))
    if set(modes) - set(MODES):
        ap.error(f"unknown modes {sorted(set(modes) - set(MODES))}; choose from {', '.join(MODES)}, both, all")
    qs = questions(args.queries, args.dev)
    print(f"{len(qs)} questions from {args.dev if args.dev.is_file() else 'the built-in list'}")
    if "shared" in modes:
        print(f"shared/stand-in figures: {STANDIN_LABEL}")
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        embedder = CachedEmbedder(OnnxMiniLMEmbedder(), EmbeddingCache(Path(tmp) / "emb.sqlite"))
        indexes = Indexes(Path(tmp), embedder, stack, modes)
        vocab: list[str] = []
        for mode in modes:
            if args.index and mode == "embedded":
                index = KnowledgeIndex(args.index, embedder)
            else:
                index = indexes.open(mode, "real")
                Indexer(index).run(FolderSource(ROOT / "examples" / "wiki"))
            index.warm()  # as a sync run leaves it (the synthetic indexes below are warmed too)
            standin = indexes.standin if mode == "shared" else None
            search = KnowledgeSearch(index)
            report(f"{indexes.label(mode)} real ({index.stats()['chunks']} chunks)", search, qs, standin, args.rounds)
            if standin is not None:
                round_trips(search, standin, qs[0])
            vocab = vocab or corpus_vocabulary(index)
            index.close()
        spent: dict[str, tuple[int, float]] = {}  # mode -> (size, seconds of its searches there)
        for n in (int(x) for x in args.sizes.split(",") if x):
            for mode in modes:
                label = f"{indexes.label(mode)} {n:,}"
                if mode in spent and spent[mode][1] * n / spent[mode][0] > args.budget_s:
                    size, seconds = spent[mode]
                    print(f"{label:<34} not measured (its searches would take ~{seconds * n / size:.0f} s, estimated "
                          f"from {seconds:.0f} s at {size:,} chunks, over the --budget-s {args.budget_s:.0f} s budget)")
                    continue
                rng = random.Random(7)  # every mode gets the same chunks
                t = time.perf_counter()
                syn = indexes.open(mode, f"syn{n}")
                writing = synthetic(syn, n, vocab, rng)
                syn.warm()  # as a sync run does after writing: the dense mirror is built off the users' path
                build = time.perf_counter() - t
                print(f"{label:<34} written in {writing:.1f} s ({n / writing:,.0f} chunks/s through the stores' "
                      f"writes), built and warmed in {build:.0f} s")
                standin = indexes.standin if mode == "shared" else None
                search = KnowledgeSearch(syn)
                spent[mode] = (n, report(label, search, qs, standin))
                if standin is not None:
                    round_trips(search, standin, qs[1 % len(qs)])
                if mode == "embedded":
                    bm25_side_by_side(label, syn, qs)
                after_write(label, syn, qs[0])
                if mode == "shared":  # free the stand-in's memory for the next size
                    syn.dense.client.delete_collection(syn.dense.collection)
                syn.close()
            if names and "embedded" in modes:
                run_size(n, names, args.candidate_queries, local_max=30000)


if __name__ == "__main__":
    main()
