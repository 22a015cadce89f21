"""Benchmark: what resolving Confluence read access costs, on a first sync and on a permission sync.

Starts the stand-in Confluence (``tests/standins/confluence/``) on 127.0.0.1 with a 1,000-page space laid
out as a tree (20 sections of 49 pages under them, pages under pages), restrictions on 4 sections (inherited
by their pages) and on 1 page in 20, a space readable by ``confluence-users`` (the public group) and by two
groups, 300 users (one in 25 hiding their e-mail) in groups of up to 200. For Cloud REST v2 and Data
Center REST v1 in turn it prints, by endpoint, the HTTP calls and the wall time of:

1. a first sync (bodies, access, group members) into a real index (Whoosh + local Qdrant, the bundled embedder);
2. a permission sync of the unchanged space (space permissions, every page's restrictions, group members);
3. a permission sync after one restriction change (no new version) and one group change.

Usage: ``.venv/bin/python bench/permission_sync.py [--pages 1000] [--cache DIR]`` (the embedding cache
defaults to ``$CHATOPS_TEST_CACHE`` or ``~/.cache/chatops-bench`` so repeated runs skip the model).
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
    """A request path with ids and group names replaced, e.g. ``/wiki/rest/api/content/{id}/restriction/...``."""
    path = re.sub(r"/group/[^/]+/", "/group/{group}/", path)
    return re.sub(r"/\d+(?=/|$)", "/{id}", path)


def body(i: int) -> str:
    """Storage-format body of page ``i`` (the same as ``bench/sync_unchanged.py``'s, so the cache serves both)."""
    return (f"<h2>Overview</h2><p>Service {i:04d} handles part {i % 37} of the order pipeline and is owned by "
            f"team {i % 23}.</p><h2>Runbook</h2><p>Restart service {i:04d} with the deploy tool; page the owner "
            f"when the error rate stays above {1 + i % 5}% for ten minutes.</p>")


def seed(s: ConfluenceStandIn, pages: int) -> list[str]:
    """The space, people, groups and page tree described in the module docstring; returns the page ids."""
    s.member_page_cap = 200
    s.add_space("ENG")
    people = [f"user{i:03d}" for i in range(300)]
    for i, uid in enumerate(people):
        s.add_user(uid, None if i % 25 == 0 else f"{uid}@example.com")
    s.add_group("engineering", people[:200])
    s.add_group("hr", people[200:240])
    s.add_group("finance", people[240:280])
    s.add_group("contractors", people[280:])
    s.grant("ENG", ("group", "confluence-users"), ("group", "engineering"), ("group", "contractors"))
    long_ago = datetime.now(timezone.utc) - timedelta(days=30)
    ids: list[str] = []
    sections = 20
    for i in range(pages):
        if i < sections:
            parent = None
        elif i % 7 == 0 and len(ids) > sections:
            parent = ids[i - 1]  # a page under a page: deeper chains
        else:
            parent = ids[i % sections]
        groups = ["hr"] if i in (3, 4) else ["finance"] if i in (5, 6) else []
        users = [people[i % 300], people[(i * 7) % 300]] if i >= sections and i % 20 == 0 else []
        ids.append(s.add_page("ENG", f"Service {i:04d}", body(i), modified=long_ago + timedelta(seconds=i),
                              parent=parent, groups=groups, users=users))
    return ids


def show(label: str, s: ConfluenceStandIn, mark: int, summary) -> None:
    calls = Counter(endpoint(p) for _, p, _ in s.requests[mark:])
    print(f"  {label}: {summary.calls} HTTP calls, {summary.seconds:.2f} s")
    for ep, n in sorted(calls.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"    {n:5d} x GET {ep}")


def run(kind: str, pages: int, s: ConfluenceStandIn, ids: list[str], engine: SyncEngine) -> None:
    """First sync and two permission syncs for ``cloud`` or ``datacenter``."""
    url = s.cloud_url if kind == "cloud" else s.dc_url
    cfg = parse_config({"sources": [{"name": f"bench-{kind}", "type": "confluence", "base_url": url,
                                     "deployment": kind, "spaces": ["ENG"], "public_groups": ["confluence-users"],
                                     "page_size": 250 if kind == "cloud" else 200}]})
    env = {"CONFLUENCE_EMAIL": CLOUD_EMAIL, "CONFLUENCE_API_TOKEN": CLOUD_TOKEN, "CONFLUENCE_TOKEN": DC_TOKEN}
    source = build_source(cfg.sources[0], environ=env)
    try:
        print(f"{kind}:")
        mark = len(s.requests)
        first = engine.run(source)
        assert first.status == "ok", first.error
        show(f"first sync of {first.summary.added} pages (bodies + access)", s, mark, first.summary)
        print(f"    access: {dict(sorted(source.access.stats.items()))}")
        mark = len(s.requests)
        perm = engine.run_permissions(source)
        assert perm.status == "ok" and perm.summary.pages == pages, perm
        show(f"permission sync of {pages} unchanged pages", s, mark, perm.summary)
        s.restrict(ids[1], groups=["finance"])  # a whole section restricted, without a new version
        s.add_group("hr", s.groups["hr"][1:])  # someone leaves hr
        mark = len(s.requests)
        again = engine.run_permissions(source)
        assert again.status == "ok", again
        show(f"permission sync after 1 restriction + 1 group change ({again.summary.updated} pages' access rewritten)",
             s, mark, again.summary)
        s.restrict(ids[1])
        s.add_group("hr", [f"user{i:03d}" for i in range(200, 240)])
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
        ids = seed(s, args.pages)
        emb = CachedEmbedder(OnnxMiniLMEmbedder(), EmbeddingCache(Path(args.cache) / "embeddings.sqlite"))
        index = KnowledgeIndex(Path(tmp) / "index", emb)
        store = StateStore(sqlite_url(Path(tmp) / "state.sqlite"))
        try:
            engine = SyncEngine(index, store)
            t0 = time.perf_counter()
            for kind in ("cloud", "datacenter"):
                run(kind, args.pages, s, ids, engine)
            print(f"total {time.perf_counter() - t0:.1f} s")
        finally:
            index.close()
            store.close()
            emb.cache.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
