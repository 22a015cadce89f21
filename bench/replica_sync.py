"""Benchmark: two ``chatops serve`` replicas with their own index on one database, syncing one Confluence.

The scenario of ``tests/test_replicas.py`` with timings: the stand-in Confluence (``tests/standins/confluence/``)
with ``--pages`` pages in one space on a 10 s schedule, the Slack stand-in, one state database
(``--database-url``; default: a new PostgreSQL database on ``$CHATOPS_TEST_PG_URL`` or
``postgresql+psycopg://postgres@127.0.0.1:5432/postgres``, dropped afterwards), and two console-script
``chatops serve`` subprocesses with their own data dirs (the bundled local embedder). Each replica's runs
are read from the state store by its index id; for its start-up sync, its next (unchanged) sync and the
sync after one page was edited it prints: mode, pages fetched, added/updated, HTTP calls and seconds
(the run's own summary), then the page bodies the stand-in served in each phase.

Usage: ``.venv/bin/python bench/replica_sync.py [--pages 200] [--database-url URL]``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import sqlalchemy as sa

from tests.standins.confluence import CLOUD_EMAIL, CLOUD_TOKEN, ConfluenceStandIn
from tests.standins.slack import APP_TOKEN, BOT_TOKEN, SIGNING_SECRET, SlackStandin, manifest_scopes
from state import StateStore
from tests.chatops_procs import Replica, page_bodies

PG_ADMIN_URL = os.environ.get("CHATOPS_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")


def body(i: int) -> str:
    """Storage-format body of page ``i`` (about two chunks)."""
    return (f"<h2>Overview</h2><p>Service {i:04d} handles part {i % 37} of the order pipeline and is owned by "
            f"team {i % 23}.</p><h2>Runbook</h2><p>Restart service {i:04d} with the deploy tool; page the owner "
            f"when the error rate stays above {1 + i % 5}% for ten minutes.</p>")


def wait(predicate, timeout: float, what: str):
    """Poll ``predicate`` until truthy (returned) or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise SystemExit(f"timed out waiting for {what}")


def row(replica: str, phase: str, run) -> str:
    s = run.summary
    return (f"| {replica} | {phase} | {s.get('mode')} | {s.get('fetched')} | {s.get('added')}/{s.get('updated')} | "
            f"{s.get('calls')} | {s.get('seconds'):.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=200)
    ap.add_argument("--database-url", default=None)
    args = ap.parse_args()
    admin = None
    url = args.database_url
    if url is None:
        name = f"chatops_bench_{uuid.uuid4().hex[:10]}"
        admin = sa.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        url = sa.engine.make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    slack = SlackStandin(BOT_TOKEN, APP_TOKEN, manifest_scopes()).start()
    confluence = ConfluenceStandIn().start()
    replicas: list[Replica] = []
    store = None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            confluence.add_space("ENG")
            ids = [confluence.add_page("ENG", f"Service {i:04d}", body(i)) for i in range(args.pages)]
            config = root / "chatops.yml"
            config.write_text(
                "sources:\n"
                f"  - {{name: eng, type: confluence, base_url: '{confluence.cloud_url}', deployment: cloud, "
                "spaces: [ENG], page_size: 250,\n     public_groups: [confluence-users], overlap_minutes: 0, "
                "permissions_interval: 'off', schedule: {interval: 10s}}\n", encoding="utf-8")
            env = {"CHATOPS_CONFIG": str(config), "DATABASE_URL": url, "CONFLUENCE_EMAIL": CLOUD_EMAIL,
                   "CONFLUENCE_API_TOKEN": CLOUD_TOKEN, "SLACK_BOT_TOKEN": BOT_TOKEN,
                   "SLACK_SIGNING_SECRET": SIGNING_SECRET, "SLACK_API_URL": slack.api_url}
            StateStore(url).close()
            t0 = time.perf_counter()
            replicas = [Replica(n, root, env) for n in ("replica-a", "replica-b")]
            for r in replicas:
                wait(r.listening, 300, f"{r.name} to listen")
            store = StateStore(url)
            for r in replicas:
                wait(lambda r=r: r.content_runs(store), 600, f"{r.name}'s start-up sync")
            first_done = time.perf_counter() - t0
            mark = len(confluence.requests)
            for r in replicas:
                wait(lambda r=r: len(r.content_runs(store)) >= 2, 120, f"{r.name}'s second sync")
            quiet_bodies = page_bodies(confluence, mark)
            before = {r.name: len(r.content_runs(store)) for r in replicas}
            edited = datetime.now(timezone.utc)
            mark = len(confluence.requests)
            confluence.edit_page(ids[0], body=body(0).replace("deploy tool", "release tool"))
            for r in replicas:
                wait(lambda r=r: [x for x in r.content_runs(store)[before[r.name]:]
                                  if x.started_at > edited and x.summary.get("updated") == 1], 120, f"{r.name}'s edit sync")
            edit_bodies = page_bodies(confluence, mark)
            print(f"{args.pages} pages, 2 replicas, one database ({url.split('://')[0]}); both start-up syncs done "
                  f"{first_done:.1f} s after launch\n")
            print("| replica | sync | mode | fetched | added/updated | calls | seconds |")
            print("|---|---|---|---|---|---|---|")
            for r in replicas:
                runs = r.content_runs(store)
                edit = next(x for x in runs[before[r.name]:] if x.started_at > edited and x.summary.get("updated") == 1)
                print(row(r.name, "first (start-up)", runs[0]))
                print(row(r.name, "second (unchanged)", runs[1]))
                print(row(r.name, "after one edit", edit))
            print(f"\npage bodies served by the stand-in: unchanged syncs {len(quiet_bodies)}, "
                  f"after the edit {len(edit_bodies)} (one per replica)")
    finally:
        if store is not None:
            store.close()
        for r in replicas:
            r.stop()
        confluence.stop()
        slack.stop()
        if admin is not None:
            with admin.connect() as conn:
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            admin.dispose()


if __name__ == "__main__":
    main()
