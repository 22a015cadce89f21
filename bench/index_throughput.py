"""Indexing throughput: a first (cold) index of a folder, then a re-index of the unchanged folder.

Usage: python bench/index_throughput.py [FOLDER] [--warm-cache DIR] [--mode embedded|shared|file|both|all]

Prints pages/s, chunks/s, peak resident memory, and the unchanged re-index time as a share of
the first run (target: under 5%). By default the embedding cache starts empty, so the first run
embeds every chunk; ``--warm-cache DIR`` reuses an embedding cache to time everything but the model
(with several modes, the first mode's run fills the cache the next ones reuse: give ``--warm-cache``
for comparable figures).

``--mode`` (comma-separated; ``both`` = ``embedded,shared``, ``all`` = the three) picks the index layouts as in
``bench/search_latency.py``: ``embedded``, ``shared`` (one Qdrant collection over HTTP to the stand-in
``tests/standins/qdrant/`` in its own process: qdrant-client's local engine behind Qdrant's REST API, NOT a
Qdrant server; manifest in a SQLite state database) and ``file`` (the shared layout in local mode,
``QDRANT_URL=file:``). Every mode indexes through :class:`~index.indexer.Indexer` and
:class:`~index.knowledge.KnowledgeIndex`.
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import tempfile
import time
from pathlib import Path


from index.embeddings import CachedEmbedder, EmbeddingCache, OnnxMiniLMEmbedder
from connectors.folder import FolderSource
from index.indexer import Indexer
from bench.search_latency import MODES, STANDIN_LABEL, Indexes

ROOT = Path(__file__).resolve().parents[1]
#: the handbook next to the repository (``/work/main``) or next to its worktree's folder (``/work/wt/NAME``)
HANDBOOK = next((p for p in (ROOT.parent / "shared" / "corpus" / "sourcegraph-handbook",
                             ROOT.parents[1] / "shared" / "corpus" / "sourcegraph-handbook") if p.is_dir()),
                ROOT.parent / "shared" / "corpus" / "sourcegraph-handbook")


def peak_rss_mb() -> float:
    """Peak resident set size of this process in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?", default=str(HANDBOOK if HANDBOOK.is_dir() else ROOT / "examples" / "wiki"))
    ap.add_argument("--warm-cache", help="embedding cache folder to reuse")
    ap.add_argument("--mode", default="embedded", help="embedded, shared, file (comma-separated), both or all")
    args = ap.parse_args()
    modes = {"both": ["embedded", "shared"], "all": list(MODES)}.get(args.mode, args.mode.split(","))
    if set(modes) - set(MODES):
        ap.error(f"unknown modes {sorted(set(modes) - set(MODES))}; choose from {', '.join(MODES)}, both, all")
    print(f"corpus: {args.folder}")
    if "shared" in modes:
        print(f"shared/stand-in figures: {STANDIN_LABEL}")
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        cache_dir = Path(args.warm_cache) if args.warm_cache else Path(tmp) / "cache"
        embedder = CachedEmbedder(OnnxMiniLMEmbedder(), EmbeddingCache(cache_dir / "embeddings.sqlite"))
        indexes = Indexes(Path(tmp), embedder, stack, modes)
        source = FolderSource(args.folder)
        for mode in modes:
            index = indexes.open(mode, "index")
            rss0 = peak_rss_mb()
            t = time.perf_counter()
            first = Indexer(index).run(source)
            t_first = time.perf_counter() - t
            t = time.perf_counter()
            second = Indexer(index).run(source)
            t_second = time.perf_counter() - t
            pages, label = first.added, indexes.label(mode)
            print(f"{label}: first index: {pages} pages, {first.chunks_written} chunks in {t_first:.1f} s "
                  f"({pages / t_first:.1f} pages/s, {first.chunks_written / t_first:.1f} chunks/s); "
                  f"{first.embedded} embedded, {first.embeddings_cached} from cache")
            print(f"{label}: peak RSS: {peak_rss_mb():.0f} MiB (before indexing {rss0:.0f} MiB; this process only)")
            print(f"{label}: unchanged re-index: {second.unchanged} unchanged, {second.chunks_written} chunks written, "
                  f"{second.embedded} embedded, {t_second:.2f} s = {100 * t_second / t_first:.2f}% of the first run "
                  f"(target < 5%)")
            index.close()


if __name__ == "__main__":
    main()
