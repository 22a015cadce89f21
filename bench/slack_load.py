"""Load check of the Slack bot: N concurrent mentions, each acknowledged within 3 s and answered once.

Usage: python bench/slack_load.py [--mentions 50] [--concurrency 2] [--index DIR]

The real bot (Bolt ``AsyncApp`` behind ``bot.server.create_app``, aiohttp on 127.0.0.1) answers from a real
index of examples/wiki (built in a temporary folder unless ``--index`` names one) with a SQLite state
store; Slack's Web API is the tests' stand-in on 127.0.0.1 (tests/standins/slack/). All mentions are
sent at once as signed Events API requests; the ack time is each HTTP round trip, the answer time runs
from sending the mention to the stand-in showing the answer in its thread (the stopped stream, or the
``chat.postMessage`` when it was posted whole).

Prints p50/p95/max of both and exits 1 when a mention was acked late (>= 3 s), not acked with 200, or
not answered exactly once. All traffic stays on 127.0.0.1; the run is bounded by --timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from agent.models import Turn
from core.access import Viewer
from app.jobs import IndexJobs
from app.settings import Settings
from app.wiring import build_agent
from index.embeddings import CachedEmbedder, EmbeddingCache, OnnxMiniLMEmbedder
from connectors.folder import FolderSource
from index.knowledge import KnowledgeIndex
from index.indexer import Indexer
from tests.standins.slack import BOT_USER_ID, SIGNING_SECRET, SlackHarness, sign
from state import StateStore
from state.store import sqlite_url

ROOT = Path(__file__).resolve().parents[1]

QUESTIONS = [
    "how much is the home office budget?", "how do I declare an incident?", "when do patch releases go out?",
    "how many days of PTO do we get?", "what is the expense deadline?", "who approves long vacations?",
    "what does RFC mean?", "how do I report phishing?", "when is the all-hands?", "what laptop do I get?",
]


def pct(values: list[float], p: float) -> float:
    """The ``p``-th percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]


async def fire(url: str, bodies: list[bytes]) -> list[tuple[float, float, int]]:
    """POST every body at once; (sent_at, acked_at, status) per body, in ``time.monotonic()`` seconds."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30),
                                     connector=aiohttp.TCPConnector(limit=0)) as session:
        async def one(body: bytes) -> tuple[float, float, int]:
            headers = {"Content-Type": "application/json", **sign(SIGNING_SECRET, body)}
            t0 = time.monotonic()
            async with session.post(url, data=body, headers=headers) as resp:
                await resp.read()
                return t0, time.monotonic(), resp.status
        return list(await asyncio.gather(*(one(b) for b in bodies)))


def main() -> int:
    """Run the load check; 0 when every mention was acked in time and answered once."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mentions", type=int, default=50)
    ap.add_argument("--concurrency", type=int, default=2, help="answers computed at once (worker threads)")
    ap.add_argument("--index", type=Path, help="an existing index folder (default: build one of examples/wiki)")
    ap.add_argument("--timeout", type=float, default=120, help="give up waiting for answers after this many s")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="chatops-slack-load-"))
    cache_dir = Path(os.environ.get("CHATOPS_TEST_CACHE") or tmp / "cache").expanduser()
    cache_dir.mkdir(parents=True, exist_ok=True)
    embedder = CachedEmbedder(OnnxMiniLMEmbedder(), EmbeddingCache(cache_dir / "embeddings.sqlite"))
    index = KnowledgeIndex(args.index or tmp / "index", embedder)
    if index.stats()["pages"] == 0:
        t = time.monotonic()
        Indexer(index).run(FolderSource(ROOT / "examples" / "wiki"))
        print(f"indexed examples/wiki in {time.monotonic() - t:.1f} s")
    store = StateStore(sqlite_url(tmp / "state.sqlite"))
    runtime = build_agent(Settings(chatops_data_dir=tmp), index=index)
    jobs = IndexJobs(runtime, store, [])
    runtime.agent.answer(Turn(viewer=Viewer.public(), text="warm-up question"))  # loads the model's session before the clock starts
    h = SlackHarness(runtime, store, jobs, agent_concurrency=args.concurrency)
    failures: list[str] = []
    try:
        s = h.standin
        s.add_conversation("C0LOAD001")
        events = []
        for i in range(args.mentions):
            user = f"U0LOAD{i:04d}"
            s.add_user(user)
            msg = s.user_message("C0LOAD001", user, f"<@{BOT_USER_ID}> {QUESTIONS[i % len(QUESTIONS)]}")
            events.append(h.sender.envelope({"type": "app_mention", "user": user, "text": msg["text"],
                                             "ts": msg["ts"], "channel": "C0LOAD001", "event_ts": msg["ts"]}))
        bodies = [json.dumps(e).encode() for e in events]
        t_start = time.monotonic()
        results = asyncio.run(fire(h.server.url + "/slack/events", bodies))
        threads = {e["event"]["ts"]: r for e, r in zip(events, results)}

        def answered(st):
            done = {c.params.get("thread_ts") for c in st.answers("C0LOAD001")}
            return done >= set(threads)
        try:
            s.wait_for(answered, timeout=args.timeout)
        except AssertionError:
            failures.append("not every mention was answered in time")
        h.idle(args.timeout)
        total = time.monotonic() - t_start
        posts: dict[str, list] = {}
        for c in s.answers("C0LOAD001"):
            posts.setdefault(c.params.get("thread_ts"), []).append(c)
        acks, answers = [], []
        for ts, (sent, acked, status) in threads.items():
            acks.append(acked - sent)
            if status != 200:
                failures.append(f"mention {ts}: HTTP {status}")
            if acked - sent >= 3:
                failures.append(f"mention {ts}: acked after {acked - sent:.2f} s")
            got = posts.get(ts, [])
            if len(got) != 1:
                failures.append(f"mention {ts}: answered {len(got)} times")
            else:
                answers.append(got[0].at - sent)
        ms = lambda v: f"{v * 1000:.0f} ms"  # noqa: E731
        print(f"{args.mentions} concurrent mentions, {args.concurrency} answers at a time, "
              f"{runtime.index.stats()['chunks']} chunks indexed")
        print(f"ack:    p50 {ms(pct(acks, 50))}  p95 {ms(pct(acks, 95))}  max {ms(max(acks))}  (limit 3000 ms)")
        if answers:
            print(f"answer: p50 {ms(pct(answers, 50))}  p95 {ms(pct(answers, 95))}  max {ms(max(answers))}  "
                  f"mean {ms(statistics.mean(answers))}")
        print(f"answered {sum(len(v) == 1 for v in posts.values())}/{args.mentions} once each; all done in {total:.2f} s "
              f"({args.mentions / total:.1f} answers/s)")
    finally:
        h.close()
        store.close()
        index.close()
        embedder.cache.close()
    for f in failures[:20]:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
