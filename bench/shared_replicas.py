"""Benchmark: one ``chatops worker`` and two ``chatops serve --role web`` replicas on one shared index.

The scenario of ``tests/test_shared_replicas.py`` with timings: the Qdrant stand-in in its own process
(``tests/standins/qdrant/``: Qdrant's REST wire format executed by qdrant-client's local engine, NOT a
Qdrant server: its figures are the stand-in's), a new PostgreSQL database on ``$CHATOPS_TEST_PG_URL`` (or
``--database-url``), the Confluence stand-in with ``--pages`` pages in one space on a 10 s schedule, the
Slack stand-in, and three console-script subprocesses with their own data dirs (the bundled local
embedder). The worker holds the stand-in's API key, the web replicas its read-only key, so the stand-in's
log tells their requests apart.

It prints, for the worker's start-up sync, its next (unchanged) sync and the sync after one page was
edited: mode, pages fetched, added/updated, Confluence calls and seconds (the run's own summary), and the
Qdrant requests the worker made in that phase; the Qdrant writes the web replicas made (0); then, after
the edit's commit (the run's recorded end), how long until each web replica's reply to a signed Slack
mention carried the new text, and one answer's latency for scale.

Usage: ``.venv/bin/python bench/shared_replicas.py [--pages 200] [--database-url URL]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from contextlib import nullcontext
from datetime import datetime, timezone
from pathlib import Path

from tests.chatops_procs import ChatopsProcess, Replica, ask, content_runs, page_bodies
from tests.standins.confluence import CLOUD_EMAIL, CLOUD_TOKEN, ConfluenceStandIn
from index.identity import shared_index_id
from tests.pg import pg_database
from tests.standins.qdrant import QdrantStandInProcess
from bench.replica_sync import body, row, wait
from tests.standins.slack import APP_TOKEN, BOT_TOKEN, SIGNING_SECRET, SlackStandin, manifest_scopes
from state import StateStore
from tests.test_shared_replicas import READ_KEY, WRITE_KEY, sources_config, writes

USER, CHANNEL = "UBENCH01", "C0BENCH"
QUESTION = "how do I restart service 0000?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=200)
    ap.add_argument("--database-url", default=None)
    args = ap.parse_args()
    slack = SlackStandin(BOT_TOKEN, APP_TOKEN, manifest_scopes()).start()
    slack.add_user(USER)
    slack.add_conversation(CHANNEL)
    confluence = ConfluenceStandIn().start()
    procs: list[ChatopsProcess] = []
    store = None
    database = nullcontext(args.database_url) if args.database_url else pg_database("chatops_bench")
    try:
        with database as db, tempfile.TemporaryDirectory() as tmp, \
                QdrantStandInProcess(api_key=WRITE_KEY, read_only_api_key=READ_KEY, strict=True) as qdrant:
            root = Path(tmp)
            confluence.add_space("ENG")
            ids = [confluence.add_page("ENG", f"Service {i:04d}", body(i)) for i in range(args.pages)]
            env = {"CHATOPS_CONFIG": str(sources_config(root / "chatops.yml", confluence, page_size=250)),
                   "DATABASE_URL": db, "QDRANT_URL": qdrant.url, "CONFLUENCE_EMAIL": CLOUD_EMAIL,
                   "CONFLUENCE_API_TOKEN": CLOUD_TOKEN}
            web_env = env | {"QDRANT_API_KEY": READ_KEY, "SLACK_BOT_TOKEN": BOT_TOKEN,
                             "SLACK_SIGNING_SECRET": SIGNING_SECRET, "SLACK_API_URL": slack.api_url}
            StateStore(db).close()
            store = StateStore(db)
            index_id = shared_index_id(qdrant.url, "chunks")

            def worker_requests() -> int:
                return sum(1 for r in qdrant.requests if r.key == "api")

            t0 = time.perf_counter()
            procs.append(ChatopsProcess("worker", root, env | {"QDRANT_API_KEY": WRITE_KEY}, ["worker"]))
            webs = [Replica(n, root, web_env, ("--role", "web")) for n in ("web-a", "web-b")]
            procs += webs
            for w in webs:
                wait(w.listening, 300, f"{w.name} to listen")
            wait(lambda: content_runs(store, index_id), 900, "the worker's start-up sync")
            first_done = time.perf_counter() - t0
            q_first = worker_requests()
            mark = len(confluence.requests)
            wait(lambda: len(content_runs(store, index_id)) >= 2, 120, "the worker's second sync")
            q_second = worker_requests() - q_first
            quiet_bodies = page_bodies(confluence, mark)
            for w in webs:
                wait(lambda w=w: ask(w, slack, QUESTION, USER, CHANNEL), 60, f"{w.name}'s first answer")
            latency = []
            for w in webs:
                t = time.perf_counter()
                ask(w, slack, QUESTION, USER, CHANNEL)
                latency.append(time.perf_counter() - t)

            before = len(content_runs(store, index_id))
            q_before = worker_requests()
            edited = datetime.now(timezone.utc)
            mark = len(confluence.requests)
            confluence.edit_page(ids[0], body=body(0).replace("deploy tool", "release tool"))

            def edit_run():
                return next((x for x in content_runs(store, index_id)[before:]
                             if x.started_at > edited and x.summary.get("updated") == 1), None)
            edit = wait(edit_run, 120, "the worker's sync of the edit")
            seen = time.time()
            after = {}
            while len(after) < len(webs) and time.time() - seen < 60:
                for w in webs:
                    if w.name not in after and "release tool" in ask(w, slack, QUESTION, USER, CHANNEL):
                        after[w.name] = time.time() - edit.finished_at.timestamp()
            q_edit = worker_requests() - q_before
            edit_bodies = page_bodies(confluence, mark)
            web_writes = writes([r for r in qdrant.requests if r.key != "api"])
            runs = content_runs(store, index_id)

            print(f"{args.pages} pages; 1 worker + 2 web replicas on one shared index (the Qdrant stand-in: "
                  f"qdrant-client's local engine behind HTTP, not a Qdrant server) and one database "
                  f"({db.split('://')[0]}); the start-up sync done {first_done:.1f} s after launch\n")
            print("| sync (worker) | mode | fetched | added/updated | Confluence calls | seconds | Qdrant requests |")
            print("|---|---|---|---|---|---|---|")
            for phase, run, q in (("first (start-up)", runs[0], q_first), ("second (unchanged)", runs[1], q_second),
                                  ("after one edit", edit, q_edit)):
                print(row("worker", phase, run)[len("| worker "):] + f" {q} |")
            print(f"\npage bodies served by Confluence: unchanged sync {len(quiet_bodies)}, after the edit "
                  f"{len(edit_bodies)}; Qdrant writes by the web replicas: {len(web_writes)}")
            print("seconds from the edit sync's recorded end to the reply with the new text: "
                  + ", ".join(f"{n} {s:.2f}" for n, s in sorted(after.items()))
                  + f" (one answer takes {min(latency):.2f}-{max(latency):.2f} s)")
    finally:
        if store is not None:
            store.close()
        for p in procs:
            p.stop()
        confluence.stop()
        slack.stop()


if __name__ == "__main__":
    main()
