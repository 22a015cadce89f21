"""Writers and readers separated (issue 12, step 3): ``chatops worker`` and ``chatops serve --role web``.

- ``chatops worker`` (the real console script in a subprocess): syncs every source at start-up, then runs
  the re-index job a web replica queued for its index (the state store's ``index_jobs``: claimed once,
  finished with each source's result), and stops cleanly on SIGTERM.
- ``/kb reindex`` on a web replica (jobs built with ``writes=False``, over the real Bolt app and signed
  HTTP) answers "queued", stores a job naming the admin, and writes nothing; the writer of that index then
  runs it, and the page it added answers.
- A web replica has no sync or permission job in its scheduler (the worker's); a writer has the queue job.
- ``chatops serve --role web`` without ``QDRANT_URL`` exits 2 saying to set it (an embedded index is one
  process's).
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from app.jobs import IndexJobs, parse_sources
from app.settings import Settings
from app.wiring import build_agent
from bot.scheduler import JOB_PREFIX, PERMISSIONS_PREFIX, QUEUE_JOB_ID, add_queue_job, build_scheduler
from index.manifest import Manifest
from state import StateStore
from state.store import sqlite_url

from tests.helpers import WIKI, WIKI_PAGES, chatops_command, cli_environment, seed_embedding_cache, wait_for
from tests.standins.slack import APP_TOKEN, BOT_TOKEN, SIGNING_SECRET, SlackHarness
from tests.test_slack_app import ADMIN, acked, mention, new_channel, responses, section_text, source_lines, wait_posts

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

BIKES = ("# Bike storage\n\nThe bike storage room is on level minus one of the Lisbon office, next to the showers. "
         "Bike storage is open from 07:00 to 21:00 and needs your badge.\n")


def test_the_worker_syncs_at_start_and_runs_the_job_a_web_replica_queued(tmp_path: Path, wiki_index,
                                                                         embedding_cache_dir: Path) -> None:
    data = seed_embedding_cache(tmp_path / "data", embedding_cache_dir / "embeddings.sqlite")
    wiki = tmp_path / "wiki"
    shutil.copytree(WIKI, wiki)
    db = sqlite_url(tmp_path / "shared-state.sqlite")
    log_path = tmp_path / "worker.log"
    env = cli_environment(data, DATABASE_URL=db, CHATOPS_SOURCES=f"folder:{wiki}?name=handbook")
    with open(log_path, "w") as log:
        proc = subprocess.Popen([*chatops_command(), "worker"], cwd=tmp_path, env=env, stdout=log,
                                stderr=subprocess.STDOUT)
    store = StateStore(db)
    try:
        m = wait_for(lambda: re.search(r"worker running for index (\S+) \(handbook\)", log_path.read_text()), 90,
                     "the worker to start")
        index_id = m.group(1)
        manifest = Manifest(data / "index" / "manifest.sqlite")
        assert manifest.get("index_id") == index_id
        manifest.close()
        wait_for(lambda: f"start-up sync of handbook: {WIKI_PAGES} added" in log_path.read_text(), 90,
                 "the start-up sync")
        (wiki / "bike-storage.md").write_text(BIKES, encoding="utf-8")
        job = store.enqueue_index_job(index_id, "handbook", requested_by="slack:UADMIN01")  # as a web replica does
        done = wait_for(lambda: (j := store.index_job(job)) and j.status in {"done", "failed"} and j, 30,
                        "the worker to run the queued job")
        assert done.status == "done" and done.owner.split(":")[1] == str(proc.pid)
        [result] = done.result
        assert (result["source"], result["status"], result["summary"]["added"]) == ("handbook", "ok", 1)
        assert store.last_runs("handbook", index_id=index_id)[0].summary["added"] == 1
    finally:
        store.close()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(30)
    output = log_path.read_text()
    assert code == 0, output[-3000:]
    assert "chatops: stopping" in output and "Traceback" not in output


@pytest.fixture
def web_and_writer(tmp_path: Path, embedder):
    """A Slack harness whose jobs do not write (a web replica), and the writer's jobs on the same index."""
    from index.knowledge import KnowledgeIndex

    wiki = tmp_path / "wiki"
    shutil.copytree(WIKI, wiki)
    store = StateStore(sqlite_url(tmp_path / "state.sqlite"))
    index = KnowledgeIndex(tmp_path / "index", embedder)
    settings = Settings(chatops_data_dir=tmp_path / "data", chatops_sources=f"folder:{wiki}?name=handbook")
    runtime = build_agent(settings, index=index)
    writer = IndexJobs(runtime, store, parse_sources(settings.chatops_sources))
    assert writer.run()[0].summary.added == WIKI_PAGES
    web = IndexJobs(runtime, store, parse_sources(settings.chatops_sources), writes=False)
    h = SlackHarness(runtime, store, web, admin_ids=(ADMIN,))
    h.standin.add_user(ADMIN)
    yield h, web, writer, store, wiki, index
    h.close()
    index.close()
    store.close()


def test_kb_reindex_on_a_web_replica_queues_a_job_for_the_worker_and_writes_nothing(web_and_writer) -> None:
    h, web, writer, store, wiki, index = web_and_writer
    (wiki / "bike-storage.md").write_text(BIKES, encoding="utf-8")
    runs_before = len(store.last_runs("handbook"))
    ch = new_channel(h)
    acked(h.sender.command("reindex handbook", ADMIN, ch, h.standin.response_url("ri")))
    [summary] = h.standin.wait_for(lambda s: responses(h, "ri") or None, timeout=60)
    text = section_text(summary.params["blocks"])
    assert "*Re-index queued*" in text and "queued for the worker as job" in text
    job_id = int(re.search(r"job (\d+)", text).group(1))
    job = store.index_job(job_id)
    assert (job.status, job.source, job.index_id, job.requested_by) == \
        ("queued", "handbook", index.index_id, f"slack:{ADMIN}")
    assert len(store.last_runs("handbook")) == runs_before  # the web replica ran nothing
    assert "bike-storage.md" not in index.manifest.pages_of("handbook")
    assert [e.outcome for e in store.audit_entries(action="admin.reindex") if e.actor == ADMIN][:1] == ["ok"]
    with pytest.raises(RuntimeError):
        web.run_queued()  # a web replica never runs the queue
    [(ran, [result])] = writer.run_queued()  # the worker's next look at the queue
    assert ran == job_id and result.status == "ok" and result.summary.added == 1
    assert store.index_job(job_id).status == "done"
    msg, _ = mention(h, ch, "when is the bike storage open?", user=ADMIN)
    [post] = wait_posts(h, ch, msg["ts"])
    assert "07:00 to 21:00" in section_text(post.params["blocks"])
    assert any(line.startswith("*[1]* Bike storage") for line in source_lines(post.params["blocks"]))


def test_a_web_replica_schedules_no_sync_and_a_writer_runs_the_queue(tmp_path: Path, index_factory) -> None:
    store = StateStore(sqlite_url(tmp_path / "state.sqlite"))
    try:
        settings = Settings(chatops_data_dir=tmp_path / "data", chatops_sync_interval="15m")
        runtime = build_agent(settings, index=index_factory())
        from app.config import parse_config

        cfg = parse_config({"sources": [{"name": "eng", "type": "confluence", "base_url": "http://127.0.0.1:9/wiki",
                                         "deployment": "cloud", "spaces": ["ENG"], "schedule": {"interval": "30m"}}]})
        writer = build_scheduler(IndexJobs(runtime, store, cfg))
        add_queue_job(writer, IndexJobs(runtime, store, cfg))
        assert {j.id for j in writer.get_jobs()} == {JOB_PREFIX + "eng", PERMISSIONS_PREFIX + "eng", QUEUE_JOB_ID}
        web = build_scheduler(IndexJobs(runtime, store, cfg, writes=False))
        assert web.get_jobs() == []
    finally:
        store.close()


def test_serve_role_web_needs_qdrant_url(tmp_path: Path) -> None:
    env = cli_environment(tmp_path / "data", SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SIGNING_SECRET,
                          SLACK_APP_TOKEN=APP_TOKEN)
    env.pop("QDRANT_URL", None)
    proc = subprocess.run([*chatops_command(), "serve", "--role", "web", "--port", "0"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "--role web` reads a shared index: set QDRANT_URL" in proc.stderr and "Traceback" not in proc.stderr


def test_a_worker_without_sources_exits_2_saying_where_to_list_them(tmp_path: Path) -> None:
    env = cli_environment(tmp_path / "data")
    env.pop("CHATOPS_SOURCES", None)
    proc = subprocess.run([*chatops_command(), "worker"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "no sources configured: list them in chatops.yml" in proc.stderr and "Traceback" not in proc.stderr


def test_a_queued_reindex_reads_as_queued_in_teams_text() -> None:
    from app.admin import reindex_text
    from app.jobs import JobResult

    text = reindex_text([JobResult("*", "queued", None, "queued for the worker as job 3")])
    assert text.startswith("Re-index queued:") and "**every source**: queued for the worker as job 3" in text
    assert reindex_text([JobResult("eng", "failed", None, "boom")]).startswith("Re-index finished:")
