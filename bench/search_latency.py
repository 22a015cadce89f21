"""``knowledge.search`` latency at the corpus's size and on synthetic indexes up to 100,000 chunks.

Usage: python bench/search_latency.py [--index DIR] [--sizes 10000,30000,100000] [--queries N] [--dev FILE]
       [--candidates qdrant-local,numpy-gather,numpy-exact,qdrant-edge,hnswlib,faiss-hnsw] [--candidate-queries N]

Part 1 times hybrid, BM25-only and dense-only searches of real questions (the eval set's when
``../shared`` is present) on a real index (``--index``, e.g. ``.chatops/index``; built from the
example wiki when omitted). Part 2 builds synthetic indexes: chunks made of words drawn from the
corpus vocabulary with a Zipf-like distribution, and random unit vectors (so no embedding cost),
and times the same searches, to show how latency grows with index size in local mode, BM25 alone through the store's
NumPy ranking beside Whoosh's own matchers (with the number of identical rankings), then what re-writing
one page costs the next search. Part 3, at each size, compares the embedded dense-index
candidates of ``bench/vector_candidates.py`` (build time, memory, access-filtered top-30 p50/p95,
recall@10 against the exact scan); candidates whose package is not installed are skipped.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from index.embeddings import CachedEmbedder, EmbeddingCache, OnnxMiniLMEmbedder  # noqa: E402
from connectors.folder import FolderSource  # noqa: E402
from index.knowledge import KnowledgeIndex  # noqa: E402
from index.indexer import Indexer  # noqa: E402
from connectors.models import Chunk, content_hash  # noqa: E402
from tools.knowledge_search import KnowledgeSearch, KnowledgeSearchArgs  # noqa: E402
from tools.context import ToolContext  # noqa: E402
from connectors.access import Access, Viewer  # noqa: E402
from bench.vector_candidates import CANDIDATES, no_fsync, run_size  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
#: the eval set next to the repository (``/work/main``) or next to its worktree's folder (``/work/wt/NAME``)
DEV = next((p for p in (ROOT.parent / "shared" / "eval" / "dev.jsonl", ROOT.parents[1] / "shared" / "eval" / "dev.jsonl")
            if p.is_file()), ROOT.parent / "shared" / "eval" / "dev.jsonl")
FALLBACK_QUESTIONS = [
    "how much is the home office budget?", "how do I declare an incident?", "when do patch releases go out?",
    "how many days of PTO do we get?", "what is the expense deadline?", "who approves long vacations?",
    "what does RFC mean?", "how do I report phishing?", "when is the all-hands?", "what laptop do I get?",
]


def questions(n: int, dev: Path = DEV) -> list[str]:
    """Up to ``n`` realistic questions (from the eval set ``dev`` when it exists)."""
    if dev.is_file():
        qs = [json.loads(line)["question"] for line in dev.read_text().splitlines() if line.strip()]
    else:
        qs = FALLBACK_QUESTIONS
    return (qs * (n // len(qs) + 1))[:n]


def time_searches(search: KnowledgeSearch, qs: list[str], retriever: str) -> tuple[float, float]:
    """p50 and p95 in ms of ``knowledge.search`` (k=30) over ``qs`` (each query embedded once first)."""
    for q in qs:
        search.embed_query(q)
    times = []
    for q in qs:
        t = time.perf_counter()
        search.run(KnowledgeSearchArgs(query=q, k=30, retriever=retriever, prf=retriever == "hybrid"),
                   ToolContext(viewer=Viewer.public()))
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(0.95 * len(times)))]


def report(label: str, search: KnowledgeSearch, qs: list[str]) -> None:
    """Print one line per retriever."""
    for r in ("hybrid", "bm25", "dense"):
        search._dcache.clear()  # noqa: SLF001 - time real searches, not the retry cache
        p50, p95 = time_searches(search, qs, r)
        print(f"{label:<28} {r:<7} p50 {p50:7.1f} ms   p95 {p95:7.1f} ms")


def bm25_side_by_side(label: str, index: KnowledgeIndex, qs: list[str]) -> None:
    """Time BM25 alone (top 50, a public viewer) through the store (NumPy over cached posting arrays) and
    through Whoosh's own matchers on the same query and filter (what the store ran before), and count the
    questions whose ranked ids and scores agree (within 1e-6)."""
    from whoosh.query import Term

    from index.stores.whoosh_store import _PreloadedOr

    store = index.whoosh
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
    print(f"{label:<28} bm25 top-50 p50 / p95: arrays {p(ours)}, Whoosh's matchers {p(theirs)}; "
          f"{same}/{len(qs)} rankings identical")


def synthetic(index: KnowledgeIndex, n: int, vocab: list[str], rng: random.Random) -> None:
    """Fill ``index`` with ``n`` synthetic chunks (Zipf-like words, random unit vectors)."""
    no_fsync(index.qdrant.client, index.qdrant.collection)
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
            index.whoosh.replace(keys, batch_chunks)
            index.qdrant.replace([], batch_chunks, np.stack(vecs))
            batch_chunks, vecs = [], []
    index.whoosh.optimize()


def after_write(index: KnowledgeIndex, n: int, question: str) -> None:
    """Time what a sync's write costs the next search: re-write one 12-chunk page, then one hybrid
    search (the dense mirror is updated in place), against rebuilding the mirror from the collection
    (what every write cost before: a scroll of every point with its vector)."""
    search = KnowledgeSearch(index)
    doc = "synthetic/0.md"
    chunks = [Chunk(content_hash(doc, "rewrite", str(i))[:32], "synthetic", doc, "Page 0", ("Section", "x"), "",
                    f"rewritten part {i} {question}", i, access=Access.everyone()) for i in range(12)]
    vecs = np.random.default_rng(1).standard_normal((12, index.embedder.dim)).astype(np.float32)
    t = time.perf_counter()
    index.whoosh.replace([chunks[0].key], chunks)
    index.qdrant.replace([chunks[0].key], chunks, vecs)
    write = (time.perf_counter() - t) * 1000
    t = time.perf_counter()
    search.run(KnowledgeSearchArgs(query=question, k=30), ToolContext(viewer=Viewer.public()))
    first = (time.perf_counter() - t) * 1000
    t = time.perf_counter()
    index.qdrant._mirror = None  # noqa: SLF001 - time a rebuild from the collection
    index.qdrant.warm()
    rebuild = (time.perf_counter() - t) * 1000
    print(f"synthetic {n:,} after a write   one 12-chunk page written in {write:.0f} ms, next hybrid search "
          f"{first:.0f} ms (mirror kept in step; a rebuild from the collection takes {rebuild:.0f} ms)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", help="an existing index folder (default: build one from examples/wiki)")
    ap.add_argument("--sizes", default="10000,30000,100000")
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--dev", type=Path, default=DEV, help="eval questions (JSON lines with 'question')")
    ap.add_argument("--candidates", default=",".join(CANDIDATES),
                    help="dense-index candidates to compare at each size (bench/vector_candidates.py); '' for none")
    ap.add_argument("--candidate-queries", type=int, default=100)
    args = ap.parse_args()
    names = [x for x in args.candidates.split(",") if x]
    if set(names) - set(CANDIDATES):
        ap.error(f"unknown candidates {sorted(set(names) - set(CANDIDATES))}; choose from {', '.join(CANDIDATES)}")
    qs = questions(args.queries, args.dev)
    print(f"{len(qs)} questions from {args.dev if args.dev.is_file() else 'the built-in list'}")
    with tempfile.TemporaryDirectory() as tmp:
        embedder = CachedEmbedder(OnnxMiniLMEmbedder(), EmbeddingCache(Path(tmp) / "emb.sqlite"))
        if args.index:
            index = KnowledgeIndex(args.index, embedder)
        else:
            index = KnowledgeIndex(Path(tmp) / "real", embedder)
            Indexer(index).run(FolderSource(ROOT / "examples" / "wiki"))
        stats = index.stats()
        report(f"real ({stats['chunks']} chunks)", KnowledgeSearch(index), qs)
        searcher = index.whoosh._get_searcher()  # noqa: SLF001
        vocab = [t for t, _ in sorted(((t.decode() if isinstance(t, bytes) else t, searcher.doc_frequency("content", t))
                                       for t in searcher.lexicon("content")), key=lambda x: -x[1])][:20000]
        index.close()
        rng = random.Random(7)
        for n in (int(x) for x in args.sizes.split(",") if x):
            t = time.perf_counter()
            syn = KnowledgeIndex(Path(tmp) / f"syn{n}", embedder)
            synthetic(syn, n, vocab, rng)
            syn.warm()  # as a sync run does after writing: the dense mirror is built off the users' path
            build = time.perf_counter() - t
            report(f"synthetic {n:,} (built {build:.0f} s)", KnowledgeSearch(syn), qs)
            bm25_side_by_side(f"synthetic {n:,}", syn, qs)
            after_write(syn, n, qs[0])
            syn.close()
            if names:
                run_size(n, names, args.candidate_queries, local_max=30000)


if __name__ == "__main__":
    main()
