"""``chatops serve`` as an operator runs it, and the same bot over Socket Mode.

- The real console script in a subprocess (its own data dir, ``CHATOPS_SOURCES`` pointing at a copy of
  the example wiki, ``SLACK_API_URL`` at the stand-in, DEBUG logs): it syncs the sources at start-up,
  delivers a scheduled message that is due as a DM (the outbox job, see tests/test_outbox.py),
  runs the retention purge at start-up (a stale conversation goes), reports ready, answers a signed
  mention with cited sources (recorded in the turn log), stops cleanly
  on SIGTERM, and its logs
  never contain the tokens or the signing secret. Missing Slack settings exit with status 2 and say
  which variable to set.
- Socket Mode: the bot connects to the stand-in's WebSocket (``apps.connections.open`` with the app
  token), acknowledges each envelope, answers mentions in the thread, answers ``/kb``, and answers a
  redelivered envelope once.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import pytest

from app.jobs import IndexJobs
from app.retention import RUN_SOURCE
from app.settings import Settings
from app.wiring import build_agent
from state import StateStore
from state.store import sqlite_url

from tests.helpers import WIKI, WIKI_PAGES, chatops_command, cli_environment, seed_embedding_cache, wait_for
from tests.standins.slack import (APP_TOKEN, BOT_TOKEN, BOT_USER_ID, SIGNING_SECRET, SlackHarness, SlackSender, SlackStandin,
                           manifest_scopes)

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

ALICE = "UALICE01"
SLACK_VARS = ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN", "SLACK_API_URL", "ADMIN_USER_IDS",
              "CHATOPS_SOURCES", "DATABASE_URL")


def _env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in cli_environment(data_dir).items() if k not in SLACK_VARS}
    env.update(extra)
    return env


_wait = wait_for


@pytest.fixture
def standin():
    s = SlackStandin(BOT_TOKEN, APP_TOKEN, manifest_scopes()).start()
    s.add_user(ALICE)
    yield s
    s.stop()


def test_chatops_serve_syncs_answers_and_stops_cleanly(tmp_path: Path, wiki_index, embedding_cache_dir: Path,
                                                       standin: SlackStandin) -> None:
    data = seed_embedding_cache(tmp_path / "data", embedding_cache_dir / "embeddings.sqlite")
    wiki = tmp_path / "wiki"
    shutil.copytree(WIKI, wiki)
    log_path = tmp_path / "serve.log"
    outbox = StateStore(sqlite_url(data / "state.sqlite"))
    outbox.schedule_message("rem-serve", platform="slack", user_id=ALICE, channel_id="C0SERVE01",
                            at=datetime.now(timezone.utc), text="Reminder: the retro starts in 5 minutes")
    outbox.append_history("teams:stale", "a question from long ago", author=ALICE)  # past RETENTION_DAYS_CONVERSATIONS
    with outbox.engine.begin() as conn:
        conn.execute(outbox.conversations.update().values(updated_at=datetime.now(timezone.utc) - timedelta(days=31)))
    outbox.close()
    env = _env(data, SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SIGNING_SECRET, SLACK_API_URL=standin.api_url,
               CHATOPS_SOURCES=f"folder:{wiki}?name=handbook&url_base=https://wiki.example.com/",
               CHATOPS_LOG_LEVEL="DEBUG", ADMIN_USER_IDS="UADMIN01")
    with open(log_path, "w") as log:
        proc = subprocess.Popen([*chatops_command(), "serve", "--host", "127.0.0.1", "--port", "0"], cwd=tmp_path,
                                env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        m = _wait(lambda: re.search(r"serving on http://127\.0\.0\.1:(\d+)", log_path.read_text()), 90,
                  "the server to listen")
        url = f"http://127.0.0.1:{m.group(1)}"
        assert httpx.get(url + "/healthz").json() == {"status": "ok"}

        def synced():
            r = httpx.get(url + "/readyz")
            return r.status_code == 200 and r.json()["checks"]["index"]["detail"].startswith(f"{WIKI_PAGES} pages") and r
        _wait(lambda: f"start-up sync of handbook: {WIKI_PAGES} added" in log_path.read_text(), 90,
              "the start-up sync")
        ready = _wait(synced, 30, "readiness").json()
        assert ready["checks"]["slack"]["ok"] and ready["checks"]["state"]["ok"]
        [dm] = standin.wait_for(lambda s: [c for c in s.calls_to("chat.postMessage", channel=ALICE) if c.ok], timeout=30)
        assert dm.params["text"] == "Reminder: the retro starts in 5 minutes"

        standin.add_conversation("C0SERVE01")
        msg = standin.user_message("C0SERVE01", ALICE, f"<@{BOT_USER_ID}> how do I declare an incident?")
        sender = SlackSender(url, SIGNING_SECRET)
        resp, _ = sender.event({"type": "app_mention", "user": ALICE, "text": msg["text"], "ts": msg["ts"],
                                "channel": "C0SERVE01", "event_ts": msg["ts"]})
        sender.close()
        assert resp.status_code == 200
        [post] = standin.wait_for(lambda s: s.answers("C0SERVE01", msg["ts"]), timeout=30)
        sources = [e["text"] for b in post.params["blocks"] if b["type"] == "context" for e in b["elements"]]
        assert sources and sources[0].startswith("*[1]* <https://wiki.example.com/engineering/incident-response#")
        # The question, its outcome and its cited pages went to the turn log (the knowledge-gap report's input).
        journal = StateStore(sqlite_url(data / "state.sqlite"))
        [turn] = journal.turn_records()
        journal.close()
        assert (turn.platform, turn.user_id, turn.channel_id, turn.outcome) == ("slack", ALICE, "C0SERVE01", "answered")
        assert turn.question.endswith("how do I declare an incident?")
        assert any(c["url"].startswith("https://wiki.example.com/engineering/incident-response") for c in turn.citations)
        # The retention job ran at start-up (then daily): the stale conversation is gone, the run recorded.
        journal = StateStore(sqlite_url(data / "state.sqlite"))
        [purge] = _wait(lambda: journal.last_runs(RUN_SOURCE), 30, "the retention run")
        assert purge.status == "ok" and purge.summary["purged"]["conversations"] == 1
        assert journal.get_history("teams:stale") == []
        journal.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(30)
    output = log_path.read_text()
    assert code == 0, output[-3000:]
    assert "chatops: stopping" in output
    assert "Sending a request" in output  # DEBUG logging was on
    assert "will be unused" not in output and "Traceback" not in output
    for secret in (BOT_TOKEN, SIGNING_SECRET, BOT_TOKEN.split("-", 1)[1]):
        assert secret not in output


def test_chatops_serve_says_which_setting_is_missing(tmp_path: Path) -> None:
    """One subprocess (the rest of the validation is unit-tested in test_slack_render.py)."""
    env = {**_env(tmp_path / "data"), "SLACK_BOT_TOKEN": "xoxb-1-2"}
    proc = subprocess.run([*chatops_command(), "serve", "--port", "0"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "SLACK_SIGNING_SECRET is not set" in proc.stderr and "Traceback" not in proc.stderr


def test_socket_mode_answers_events_and_commands(tmp_path: Path, wiki_index, session_wiki: Path) -> None:
    from connectors.folder import FolderSource

    store = StateStore(sqlite_url(tmp_path / "state.sqlite"))
    runtime = build_agent(Settings(chatops_data_dir=tmp_path / "data"), index=wiki_index)
    h = SlackHarness(runtime, store, IndexJobs(runtime, store, [FolderSource(session_wiki)]), socket_mode=True)
    try:
        s = h.standin
        s.add_user(ALICE)
        s.add_conversation("C0SOCK001")
        s.wait_for(lambda st: st.socket_connected() or None)
        assert [c.ok for c in s.calls_to("apps.connections.open")] == [True]
        msg = s.user_message("C0SOCK001", ALICE, f"<@{BOT_USER_ID}> how do I declare an incident?")
        payload = h.sender.envelope({"type": "app_mention", "user": ALICE, "text": msg["text"], "ts": msg["ts"],
                                     "channel": "C0SOCK001", "event_ts": msg["ts"]})
        envelope_id = s.socket_push("events_api", payload)
        s.wait_for(lambda st: any(a.get("envelope_id") == envelope_id for a in st.socket_acks) or None)
        [post] = s.wait_for(lambda st: st.answers("C0SOCK001", msg["ts"]))
        assert "/declare-incident" in json.dumps(post.params["blocks"])
        retry_id = s.socket_push("events_api", payload, retry_attempt=1)  # Slack redelivers: answered once
        s.wait_for(lambda st: any(a.get("envelope_id") == retry_id for a in st.socket_acks) or None)
        h.idle()
        assert len(s.answers("C0SOCK001", msg["ts"])) == 1

        url = s.response_url("sock-kb")
        command = {"token": "legacy", "team_id": "T0STANDIN", "channel_id": "C0SOCK001", "user_id": ALICE,
                   "command": "/kb", "text": "how do I report phishing?", "response_url": url, "trigger_id": "1.2"}
        cmd_id = s.socket_push("slash_commands", command)
        [ack] = s.wait_for(lambda st: [a for a in st.socket_acks if a.get("envelope_id") == cmd_id])
        assert "Searching the knowledge base" in ack["payload"]["text"]
        [reply] = s.wait_for(lambda st: [c for c in st.calls_to("response_url") if c.key == "sock-kb"])
        assert reply.params["response_type"] == "ephemeral" and "[1]" in json.dumps(reply.params["blocks"])
        ready = h.sender.http.get(h.server.url + "/readyz").json()
        assert ready["checks"]["slack-socket-mode"]["ok"] and "socket connected" in ready["checks"]["slack-socket-mode"]["detail"]
        assert h.sender.http.post(h.server.url + "/slack/events", content=b"{}").status_code == 404  # no HTTP route
    finally:
        h.close()
        store.close()
