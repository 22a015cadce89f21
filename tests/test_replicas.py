"""Two ``chatops serve`` replicas on one PostgreSQL database, each with its own data dir (issue 12, step 1).

The real thing: two console-script subprocesses (as ``tests/test_slack_serve.py`` starts one), one state
database created for the test on ``$CHATOPS_TEST_PG_URL`` (skipped when the server is unreachable,
failed instead with ``CHATOPS_TEST_REQUIRE_PG=1``), the Confluence stand-in as their source on a 10 s
schedule (the shortest a schedule may be), and the Slack stand-in.

Each replica's index has its own id (``index_id`` in its manifest), and its cursor, runs and lock
``sync:<index id>:eng`` are its own. The test proves:

- both replicas sync at start-up, each every page (neither waits for the other's lock, neither starts
  from the other's watermark);
- a second, unchanged sync of each replica fetches no page body (the stand-in's request log, and each
  run's own summary: nothing fetched, nothing written);
- a page edited between syncs is fetched once by *each* replica at its next sync (with one shared
  cursor, the replica that synced second would list nothing: the other had moved the watermark past
  the edit), and then both answer a signed Slack mention with the new text, never the old.

Timings (each replica's first and second sync: calls and seconds) are measured by
``bench/replica_sync.py`` from the same scenario; this test asserts behaviour only.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pytest

from state import StateStore

from tests.chatops_procs import Replica, ask, page_bodies
from tests.standins.confluence import CLOUD_EMAIL, CLOUD_TOKEN, ConfluenceStandIn
from tests.helpers import wait_for
from tests.pg import pg_database
from tests.standins.slack import APP_TOKEN, BOT_TOKEN, SIGNING_SECRET, SlackStandin, manifest_scopes

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

ALICE = "UALICE01"
OLD, NEW = "vpn-gw-amber.example.com", "vpn-gw-cobalt.example.com"
PAGES = {
    "VPN Setup": f"<h2>Gateway</h2><p>The VPN gateway address is {OLD}. Connect with the corporate VPN client "
                 "and sign in with your single sign-on account.</p>",
    "Laptop Refresh": "<h2>Policy</h2><p>Every employee gets a new laptop every three years; IT orders it.</p>",
    "On-call Handbook": "<h2>Paging</h2><p>The on-call engineer answers a page within 15 minutes.</p>",
    "Expenses": "<h2>Deadlines</h2><p>Submit expenses within 30 days of the purchase, with the receipt.</p>",
}


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A new PostgreSQL database for the test, dropped afterwards."""
    with pg_database("chatops_replicas") as url:
        yield url


def test_two_replicas_with_their_own_index_on_one_database_both_follow_an_edit(tmp_path: Path, pg_url: str) -> None:
    slack = SlackStandin(BOT_TOKEN, APP_TOKEN, manifest_scopes()).start()
    slack.add_user(ALICE)
    slack.add_conversation("C0REPLICA")
    confluence = ConfluenceStandIn().start()
    replicas: list[Replica] = []
    store: StateStore | None = None
    try:
        confluence.add_space("ENG")
        ids = {title: confluence.add_page("ENG", title, body) for title, body in PAGES.items()}
        config = tmp_path / "chatops.yml"
        config.write_text(
            "sources:\n"
            f"  - {{name: eng, type: confluence, base_url: '{confluence.cloud_url}', deployment: cloud, spaces: [ENG],\n"
            "     public_groups: [confluence-users], overlap_minutes: 0, permissions_interval: 'off',\n"
            "     schedule: {interval: 10s}}\n", encoding="utf-8")
        env = {"CHATOPS_CONFIG": str(config), "DATABASE_URL": pg_url, "CONFLUENCE_EMAIL": CLOUD_EMAIL,
               "CONFLUENCE_API_TOKEN": CLOUD_TOKEN, "SLACK_BOT_TOKEN": BOT_TOKEN,
               "SLACK_SIGNING_SECRET": SIGNING_SECRET, "SLACK_API_URL": slack.api_url}
        StateStore(pg_url).close()  # migrate once here, so the replicas' start-ups only find the head
        replicas = [Replica(name, tmp_path, env) for name in ("replica-a", "replica-b")]
        for r in replicas:
            wait_for(r.listening, 90, f"{r.name} to listen")
        store = StateStore(pg_url)
        # Start-up: each replica syncs every page into its own index, from its own (empty) cursor.
        for r in replicas:
            wait_for(lambda r=r: r.content_runs(store), 60, f"{r.name}'s start-up sync")
        a, b = replicas
        assert a.index_id() != b.index_id()
        for r in replicas:
            first = r.content_runs(store)[0]
            assert first.status == "ok", first.error
            assert (first.summary["added"], first.summary["fetched"]) == (len(PAGES), len(PAGES)), first.summary
        synced = len(confluence.requests)
        # The next scheduled sync of each: nothing changed, so nothing is fetched or written.
        for r in replicas:
            wait_for(lambda r=r: len(r.content_runs(store)) >= 2, 40, f"{r.name}'s second sync")
            second = r.content_runs(store)[1]
            s = second.summary
            assert second.status == "ok" and (s["mode"], s["fetched"], s["added"], s["updated"], s["deleted"]) == \
                ("incremental", 0, 0, 0, 0), s
        assert page_bodies(confluence, synced) == []  # the stand-in saw no page body fetched since

        before = {r.name: len(r.content_runs(store)) for r in replicas}
        edited = datetime.now(timezone.utc)
        mark = len(confluence.requests)
        confluence.edit_page(ids["VPN Setup"], body=PAGES["VPN Setup"].replace(OLD, NEW))

        def took_the_edit(r: Replica):
            return [run for run in r.content_runs(store)[before[r.name]:]
                    if run.started_at > edited and run.summary.get("updated") == 1]
        for r in replicas:
            [run] = wait_for(lambda r=r: took_the_edit(r), 40, f"{r.name}'s sync of the edit")
            assert run.status == "ok" and run.summary["fetched"] == 1, run.summary
        assert page_bodies(confluence, mark) == [ids["VPN Setup"]] * 2  # once per replica, nothing else

        for r in replicas:
            reply = ask(r, slack, "what is the VPN gateway address?", ALICE)
            assert NEW in reply and OLD not in reply, (r.name, reply)
            ready = httpx.get(r.url + "/readyz").json()
            assert ready["checks"]["index"]["ok"], ready
    finally:
        if store is not None:
            store.close()
        codes = {r.name: r.stop() for r in replicas}
        confluence.stop()
        slack.stop()
    for r in replicas:
        assert codes[r.name] == 0, r.log()[-3000:]
        assert "Traceback" not in r.log(), r.log()[-3000:]
