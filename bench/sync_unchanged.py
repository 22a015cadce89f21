"""Benchmark: syncing an unchanged 1,000-page Confluence source costs only listing calls.

Starts the stand-in Confluence (``tests/standins/confluence/``) on 127.0.0.1 with 1,000 pages in one
space, syncs it once from scratch (Cloud REST v2 and Data Center REST v1 in turn) into a real index
(Whoosh + local Qdrant, the bundled embedder), then syncs it again unchanged and prints the HTTP
calls that second run made, by endpoint, and its wall time. Then one page is edited and one trashed,
and a third run shows the cost of a small change.

Usage: ``.venv/bin/python bench/sync_unchanged.py [--pages 1000] [--cache DIR]`` (the embedding
cache defaults to ``$CHATOPS_TEST_CACHE`` or ``~/.cache/chatops-bench`` so repeated runs skip the model).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

from app.config import parse_config
from connectors.factory import build_source
from index.embeddings import CachedEmbedder, EmbeddingCache, OnnxMiniLMEmbedder
from index.knowledge import KnowledgeIndex
from index.sync import SyncEngine
from state import StateStore
from state.store import sqlite_url
from tests.standins.confluence import CLOUD_EMAIL, CLOUD_TOKEN, DC_TOKEN, ConfluenceStandIn


def endpoint(path: str) -> str:
    """A request path with ids replaced, e.g. ``/wiki/api/v2/spaces/{id}/pages``."""
    return re.sub(r"/\d+(?=/|$)", "/{id}", path)


def body(i: int) -> str:
    """Storage-format body of page ``i``: two short sections (about two chunks)."""
    return (f"<h2>Overview</h2><p>Service {i:04d} handles part {i % 37} of the order pipeline and is owned by "
            f"team {i % 23}.</p><h2>Runbook</h2><p>Restart service {i:04d} with the deploy tool; page the owner "
            f"when the error rate stays above {1 + i % 5}% for ten minutes.</p>")


def run(kind: str, pages: int, s: ConfluenceStandIn, engine: SyncEngine) -> None:
    """First sync, unchanged re-sync (calls by endpoint) and a small change, for ``cloud`` or ``datacenter``."""
    url = s.cloud_url if kind == "cloud" else s.dc_url
    cfg = parse_config({"sources": [{"name": f"bench-{kind}", "type": "confluence", "base_url": url,
                                     "deployment": kind, "spaces": ["ENG"], "page_size": 250 if kind == "cloud" else 200}]})
    env = {"CONFLUENCE_EMAIL": CLOUD_EMAIL, "CONFLUENCE_API_TOKEN": CLOUD_TOKEN, "CONFLUENCE_TOKEN": DC_TOKEN}
    source = build_source(cfg.sources[0], environ=env)
    try:
        first = engine.run(source)
        assert first.status == "ok", first.error
        f = first.summary
        print(f"{kind}: first sync {f.added} pages, {f.chunks_written} chunks in {f.seconds:.1f} s "
              f"({f.calls} HTTP calls, {f.embedded} passages embedded, the rest from the cache)")
        mark = len(s.requests)
        again = engine.run(source)
        a = again.summary
        assert again.status == "ok" and a.unchanged == pages and a.fetched == 0, a
        calls = Counter(endpoint(p) for _, p, _ in s.requests[mark:])
        print(f"{kind}: unchanged re-sync of {pages} pages: {a.calls} HTTP calls, {a.seconds:.2f} s, "
              f"0 pages fetched, 0 written")
        for ep, n in sorted(calls.items()):
            print(f"    {n:3d} x GET {ep}")
        ids = sorted(s.pages, key=int)
        s.edit_page(ids[10], body=f"<h2>Overview</h2><p>Retired ({kind}): use service 0011 instead.</p>")
        s.trash(ids[20])
        third = engine.run(source)
        t = third.summary
        print(f"{kind}: after 1 edit + 1 trash: {t.updated} updated, {t.deleted} deleted, "
              f"{t.calls} HTTP calls, {t.seconds:.2f} s")
        s.pages[ids[20]].status = "current"  # restore for the next deployment kind
    finally:
        source.close()


def main() -> int:
    """Run the benchmark and print its figures; returns the exit code."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=1000)
    ap.add_argument("--cache", default=os.environ.get("CHATOPS_TEST_CACHE") or str(Path.home() / ".cache" / "chatops-bench"))
    args = ap.parse_args()
    Path(args.cache).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, ConfluenceStandIn() as s:
        s.add_space("ENG")
        long_ago = datetime.now(timezone.utc) - timedelta(days=30)  # an established space, not one made a minute ago
        for i in range(args.pages):
            s.add_page("ENG", f"Service {i:04d}", body(i), modified=long_ago + timedelta(seconds=i))
        emb = CachedEmbedder(OnnxMiniLMEmbedder(), EmbeddingCache(Path(args.cache) / "embeddings.sqlite"))
        index = KnowledgeIndex(Path(tmp) / "index", emb)
        store = StateStore(sqlite_url(Path(tmp) / "state.sqlite"))
        try:
            engine = SyncEngine(index, store)
            t0 = time.perf_counter()
            for kind in ("cloud", "datacenter"):
                run(kind, args.pages, s, engine)
            print(f"total {time.perf_counter() - t0:.1f} s")
        finally:
            index.close()
            store.close()
            emb.cache.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
