"""Embedded dense-index candidates side by side: build time, memory, access-filtered top-30 latency, recall@10.

Usage: python bench/vector_candidates.py [--sizes 10000,30000,100000] [--queries N] [--only a,b]
       [--local-max N]   (local-mode Qdrant's filter is a Python loop: skipped above N points)
       [--noise 0.06]    (spread of the synthetic vectors around their topics: 0.15 is harder)

Data: ``n`` synthetic 384-d unit vectors around ``n / 100`` topic centres (real sentence embeddings
are clustered; uniform random vectors are the worst case for a graph index and not what a wiki
gives), in pages of 12 chunks that share their access: 85 % of pages are public, the rest readable
by one of 40 groups (as in a company wiki: most pages open, some spaces restricted). Queries are
new points near random topic centres.

Two filters, each applied inside the search (never a post-filter of a top-k):

- ``broad``: a viewer with ``public`` plus three groups (about 86 % of the points readable);
- ``narrow``: one group's token alone (about 0.4 %): the restrictive case where a graph search
  filtered node by node degrades, and an exact pass over the allowed rows is the right plan (what
  Qdrant's own query planner does by payload-index cardinality).

Candidates (each optional: skipped with a note when its package is missing):

- ``qdrant-local``: ``qdrant-client`` local mode with a ``MatchAny`` filter (what ran before the mirror);
- ``numpy-gather``: :class:`index.stores.local_dense.DenseMirror` as first written (gathers the readable
  rows, then scores them);
- ``numpy-exact``: the same mirror with its planner (one product over every row and a mask when most
  rows are readable, the gather when few are);
- ``qdrant-edge``: ``qdrant-edge-py``'s ``EdgeShard`` (Qdrant's Rust engine in process: HNSW m=16,
  ef_construct=100, keyword payload index on ``access``, hnsw_ef=128);
- ``hnswlib``: ``hnswlib`` 0.8 (M=16, ef_construction=100, ef=128) with its ``filter`` callback, and an
  exact pass when fewer than 5 % of the rows are allowed;
- ``faiss-hnsw``: ``faiss-cpu`` ``IndexHNSWFlat`` (M=16, efConstruction=100, efSearch=128) with an
  ``IDSelectorBitmap`` in ``SearchParametersHNSW``, and the same exact pass for narrow filters.

Recall@10 is each candidate's top 10 against the exact filtered top 10 (NumPy over every row).
Memory is the process's resident-set growth while the candidate was built (approximate: allocator
reuse can hide some). ``disk`` is what a persistent candidate wrote.
"""

from __future__ import annotations

import argparse
import gc
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np


from index.stores.local_dense import DenseMirror, MirrorPoint

DIM = 384
K = 30
GROUPS = 40
PUBLIC_SHARE = 0.85
NARROW_SHARE = 0.05  # hnswlib/faiss: below this share of allowed rows, scan them exactly
EF_SEARCH = 128


@dataclass
class Corpus:
    """Synthetic vectors (``(n, DIM)`` float32, unit), each row's access tokens, and queries."""

    vectors: np.ndarray
    tokens: list[tuple[str, ...]]
    queries: np.ndarray
    filters: dict[str, tuple[str, ...]]

    def mask(self, tokens: Sequence[str]) -> np.ndarray:
        """Rows readable with any of ``tokens``."""
        want = set(tokens)
        return np.fromiter((bool(want.intersection(t)) for t in self.tokens), dtype=bool, count=len(self.tokens))


def make_corpus(n: int, queries: int, noise: float = 0.06, seed: int = 7) -> Corpus:
    """``n`` clustered unit vectors in pages of 12 with shared access, and ``queries`` query vectors.

    ``noise`` is the per-dimension spread around a topic centre: 0.06 puts a chunk at cosine ~0.65 from
    its centre and ~0.4 from its topic's other chunks (sentence embeddings of one wiki space look so);
    0.15 makes topics overlap (cosine ~0.3 to the centre), a harder case for a graph index."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(1, n // 100), DIM)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    topic = rng.integers(0, len(centres), size=n // 12 + 1).repeat(12)[:n]  # a page stays on one topic
    vecs = centres[topic] + rng.standard_normal((n, DIM)).astype(np.float32) * noise
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    pages = n // 12 + 1
    public = rng.random(pages) < PUBLIC_SHARE
    group = rng.integers(0, GROUPS, size=pages)
    page_tokens = [("public",) if public[p] else (f"group:g{group[p]}",) for p in range(pages)]
    tokens = [page_tokens[i // 12] for i in range(n)]
    q = centres[rng.integers(0, len(centres), size=queries)] + rng.standard_normal((queries, DIM)).astype(np.float32) * noise
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return Corpus(vecs.astype(np.float32), tokens, q.astype(np.float32),
                  {"broad": ("public", "group:g1", "group:g2", "group:g3"), "narrow": ("group:g5",)})


def exact_top(c: Corpus, mask: np.ndarray, q: np.ndarray, k: int) -> list[int]:
    """Exact filtered top ``k`` row ids (the recall reference)."""
    s = c.vectors @ q
    s[~mask] = -np.inf
    top = np.argsort(-s, kind="stable")[: min(k, int(mask.sum()))]
    return [int(i) for i in top]


class Candidate:
    """One index: ``build`` from a corpus, then ``search(query, tokens, mask, k)`` returns row ids best first."""

    name = ""
    max_queries: int | None = None

    def build(self, c: Corpus, tmp: Path) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def search(self, q: np.ndarray, tokens: tuple[str, ...], mask: np.ndarray, k: int) -> list[int]:
        raise NotImplementedError  # pragma: no cover - interface

    def disk(self) -> int | None:
        """Bytes written to disk, or ``None`` for an in-memory index."""
        return None

    def note(self) -> str:
        """Anything to know about the built index (e.g. how many vectors its graph covers)."""
        return ""

    def close(self) -> None:
        """Release the index."""


class NumpyExact(Candidate):
    """The store's exact mirror (:class:`DenseMirror`)."""

    name = "numpy-exact"

    def build(self, c: Corpus, tmp: Path) -> None:
        self.m = DenseMirror((MirrorPoint(str(i), c.vectors[i], c.tokens[i]) for i in range(len(c.tokens))), DIM)

    def search(self, q, tokens, mask, k):
        return [int(i) for i, _ in self.m.search(q, tokens, k)]

    def note(self):
        return f"vectors {self.m._matrix.nbytes / 2**20:.0f} MB as float32 (RSS growth can hide reused memory)"  # noqa: SLF001


class NumpyGather(NumpyExact):
    """The mirror as it was before: always gather the readable rows, then score them."""

    name = "numpy-gather"

    def build(self, c: Corpus, tmp: Path) -> None:
        super().build(c, tmp)
        self.m.gather_below = 2.0


class QdrantLocal(Candidate):
    """``qdrant-client`` local mode: payload filter evaluated in Python."""

    name = "qdrant-local"
    max_queries = 5

    def build(self, c: Corpus, tmp: Path) -> None:
        from qdrant_client import QdrantClient, models

        self.models = models
        self.path = tmp / "qlocal"
        self.client = QdrantClient(path=str(self.path))
        self.client.create_collection("b", vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE))
        no_fsync(self.client, "b")
        for s in range(0, len(c.tokens), 256):
            self.client.upsert("b", points=[models.PointStruct(id=i, vector=c.vectors[i].tolist(),
                                                               payload={"access": list(c.tokens[i])})
                                            for i in range(s, min(s + 256, len(c.tokens)))], wait=True)

    def search(self, q, tokens, mask, k):
        m = self.models
        f = m.Filter(must=[m.FieldCondition(key="access", match=m.MatchAny(any=list(tokens)))])
        return [int(p.id) for p in self.client.query_points("b", query=q.tolist(), query_filter=f, limit=k).points]

    def disk(self):
        return _du(self.path)

    def close(self):
        self.client.close()


class QdrantEdge(Candidate):
    """``qdrant-edge-py``: Qdrant's segment engine (HNSW, payload index, WAL) in process."""

    name = "qdrant-edge"

    def build(self, c: Corpus, tmp: Path) -> None:
        import qdrant_edge as qe

        self.qe = qe
        self.path = tmp / "edge"
        cfg = qe.EdgeConfig(vectors=qe.EdgeVectorParams(size=DIM, distance=qe.Distance.Cosine),
                            hnsw_config=qe.HnswIndexConfig(m=16, ef_construct=100, full_scan_threshold=10000))
        self.shard = qe.EdgeShard.create(str(self.path), cfg)
        self.shard.update(qe.UpdateOperation.create_field_index("access", qe.PayloadSchemaType.Keyword))
        for s in range(0, len(c.tokens), 1000):
            self.shard.update(qe.UpdateOperation.upsert_points(
                [qe.Point(i, c.vectors[i].tolist(), {"access": list(c.tokens[i])})
                 for i in range(s, min(s + 1000, len(c.tokens)))]))
        self.shard.optimize()
        self.shard.flush()

    def search(self, q, tokens, mask, k):
        qe = self.qe
        f = qe.Filter(must=[qe.FieldCondition(key="access", match=qe.MatchAny(any=list(tokens)))])
        res = self.shard.query(qe.QueryRequest(limit=k, query=qe.Query.Nearest(q.tolist()), filter=f,
                                               params=qe.SearchParams(hnsw_ef=EF_SEARCH), with_payload=False))
        return [int(p.id) for p in res]

    def disk(self):
        return _du(self.path)

    def note(self):
        info = self.shard.info()
        return f"{info.indexed_vectors_count:,} of {info.points_count:,} in HNSW, {info.segments_count} segments"

    def close(self):
        self.shard.close()


class _Narrow:
    """An exact pass over the allowed rows when few are allowed (shared by the graph indexes)."""

    vectors: np.ndarray

    def narrow(self, q: np.ndarray, mask: np.ndarray, k: int) -> list[int] | None:
        rows = np.flatnonzero(mask)
        if len(rows) >= NARROW_SHARE * len(mask):
            return None
        s = self.vectors[rows] @ q
        kk = min(k, len(rows))
        top = np.argpartition(-s, kk - 1)[:kk] if kk else np.array([], dtype=np.int64)
        return [int(rows[i]) for i in top[np.argsort(-s[top], kind="stable")]]


class Hnswlib(Candidate, _Narrow):
    """``hnswlib`` with its per-label ``filter`` callback (a Python call per visited node)."""

    name = "hnswlib"

    def build(self, c: Corpus, tmp: Path) -> None:
        import hnswlib

        self.vectors = c.vectors
        self.index = hnswlib.Index(space="ip", dim=DIM)
        self.index.init_index(max_elements=len(c.tokens), ef_construction=100, M=16)
        self.index.add_items(c.vectors, np.arange(len(c.tokens)), num_threads=2)
        self.index.set_ef(EF_SEARCH)
        self.path = tmp / "hnswlib.bin"
        self.index.save_index(str(self.path))

    def search(self, q, tokens, mask, k):
        exact = self.narrow(q, mask, k)
        if exact is not None:
            return exact
        labels, _ = self.index.knn_query(q, k=k, filter=lambda label: bool(mask[label]))
        return [int(x) for x in labels[0]]

    def disk(self):
        return self.path.stat().st_size


class FaissHnsw(Candidate, _Narrow):
    """``faiss-cpu`` HNSW with an ``IDSelectorBitmap`` (the filter runs in C++ inside the graph search)."""

    name = "faiss-hnsw"

    def build(self, c: Corpus, tmp: Path) -> None:
        import faiss

        self.faiss = faiss
        faiss.omp_set_num_threads(2)
        self.vectors = c.vectors
        self.index = faiss.IndexHNSWFlat(DIM, 16, faiss.METRIC_INNER_PRODUCT)
        self.index.hnsw.efConstruction = 100
        self.index.add(c.vectors)
        faiss.omp_set_num_threads(1)
        self.path = tmp / "faiss.index"
        faiss.write_index(self.index, str(self.path))

    def search(self, q, tokens, mask, k):
        exact = self.narrow(q, mask, k)
        if exact is not None:
            return exact
        bits = np.packbits(mask, bitorder="little")
        sel = self.faiss.IDSelectorBitmap(len(mask), self.faiss.swig_ptr(bits))
        params = self.faiss.SearchParametersHNSW(sel=sel, efSearch=EF_SEARCH)
        _, labels = self.index.search(q[None, :], k, params=params)
        return [int(x) for x in labels[0] if x >= 0]

    def disk(self):
        return self.path.stat().st_size


CANDIDATES: dict[str, Callable[[], Candidate]] = {
    "qdrant-local": QdrantLocal, "numpy-gather": NumpyGather, "numpy-exact": NumpyExact, "qdrant-edge": QdrantEdge,
    "hnswlib": Hnswlib, "faiss-hnsw": FaissHnsw,
}


def no_fsync(client, collection: str) -> None:
    """Local-mode Qdrant commits (and fsyncs) its SQLite file once per point: at 100k points on a
    shared disk that is most of a synthetic fill. Benchmarks fill with ``synchronous=OFF`` (set-up
    only: searches are served from memory and do not touch the file)."""
    storage = client._client.collections[collection].storage  # noqa: SLF001 - bench set-up only
    if storage is not None:
        storage.storage.execute("PRAGMA synchronous=OFF")


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _rss() -> int:
    """Resident set size of this process in bytes (Linux ``/proc``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _pct(times: list[float], p: float) -> float:
    times = sorted(times)
    return times[min(len(times) - 1, int(p * len(times)))]


def run_size(n: int, names: Sequence[str], queries: int, local_max: int, noise: float = 0.06) -> None:
    """Build every candidate at ``n`` points and print one line per candidate and filter."""
    c = make_corpus(n, queries, noise)
    masks = {f: c.mask(t) for f, t in c.filters.items()}
    truth = {f: [exact_top(c, masks[f], q, 10) for q in c.queries] for f in c.filters}
    share = {f: masks[f].mean() * 100 for f in c.filters}
    print(f"\n{n:,} points (broad filter {share['broad']:.1f} % readable, narrow {share['narrow']:.2f} %)")
    for name in names:
        cand = CANDIDATES[name]()
        if name == "qdrant-local" and n > local_max:
            print(f"  {name:<13} skipped above {local_max:,} points (--local-max)")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            gc.collect()
            before = _rss()
            t = time.perf_counter()
            try:
                cand.build(c, Path(tmp))
            except ImportError as exc:
                print(f"  {name:<13} skipped ({exc})")
                continue
            build = time.perf_counter() - t
            gc.collect()
            mem = (_rss() - before) / 2**20
            disk = cand.disk()
            head = f"  {name:<13} build {build:6.1f} s  mem {mem:6.0f} MB  disk {'-' if disk is None else f'{disk / 2**20:.0f} MB':>7}"
            for f, tokens in c.filters.items():
                qs = c.queries[: cand.max_queries or len(c.queries)]
                times, hits = [], []
                for i, q in enumerate(qs):
                    t = time.perf_counter()
                    got = cand.search(q, tokens, masks[f], K)
                    times.append((time.perf_counter() - t) * 1000)
                    exp = truth[f][i]
                    hits.append(len(set(got[:10]) & set(exp)) / len(exp) if exp else float(not got))
                print(f"{head}  {f:<6} p50 {statistics.median(times):7.1f} ms  p95 {_pct(times, 0.95):7.1f} ms  "
                      f"recall@10 {statistics.mean(hits):.3f}  ({len(qs)} q)", flush=True)
                head = " " * len(head)
            if cand.note():
                print(" " * 16 + cand.note())
            cand.close()
            del cand
            gc.collect()
            shutil.rmtree(tmp, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,30000,100000")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--only", default=",".join(CANDIDATES), help="comma-separated candidate names")
    ap.add_argument("--local-max", type=int, default=30000)
    ap.add_argument("--noise", type=float, default=0.06, help="spread around topic centres (see make_corpus)")
    args = ap.parse_args(argv)
    names = [x for x in args.only.split(",") if x]
    unknown = sorted(set(names) - set(CANDIDATES))
    if unknown:
        ap.error(f"unknown candidates {unknown}; choose from {', '.join(CANDIDATES)}")
    print(f"dense candidates: top-{K}, access filter inside the search, {args.queries} queries per filter, "
          f"noise {args.noise}")
    for n in (int(x) for x in args.sizes.split(",") if x):
        run_size(n, names, args.queries, args.local_max, args.noise)


if __name__ == "__main__":
    main()
