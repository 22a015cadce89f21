"""The sync engine, the index jobs, the scheduler and the ``chatops sync``/``status`` commands.

Real indexes, the real embedder, a real SQLite state store, real processes. Covers: jobs built from a
sources file (folder source) with run summaries and status rows; one run per source at a time across
processes (a lock taken by another process makes the run ``busy``; a lock left by a killed process
on this host is taken over); the APScheduler jobs (one per scheduled source, ``max_instances=1``,
``coalesce``, misfire grace) and a scheduled run inside a running event loop; ``chatops sync`` and
``chatops status`` as subprocesses against the stand-in Confluence, with their configuration errors;
a ``chatops sync`` killed with SIGKILL mid-run: nothing is lost or duplicated and the next run
completes; and a folder whose HTML page is nested 600 ``<div>`` deep, then whose converter raises on
one page: the run commits the other pages, the cursor moves, the broken page is skipped with its reason.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from app.jobs import IndexJobs
from bot.scheduler import build_scheduler, next_run_times, start_scheduler
from app.settings import Settings
from app.wiring import build_agent
from index.manifest import Manifest
from connectors.folder import FolderSource
from index.sync import SyncEngine
from tools.knowledge_search import KnowledgeSearch, KnowledgeSearchArgs
from state import StateStore
from state.store import sqlite_url

from tests.standins.confluence import CLOUD_EMAIL, CLOUD_TOKEN, ConfluenceStandIn
from tests.helpers import ROOT, WIKI_PAGES, chatops_command, cli_environment, seed_embedding_cache, public_ctx

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast


@pytest.fixture
def store(tmp_path: Path):
    st = StateStore(sqlite_url(tmp_path / "state.sqlite"))
    yield st
    st.close()


def yaml_file(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "chatops.yml"
    p.write_text(text, encoding="utf-8")
    return p


def jobs_for(tmp_path: Path, index, store, config: Path, **settings) -> IndexJobs:
    s = Settings(chatops_data_dir=tmp_path / "data", chatops_config=config, **settings)
    return IndexJobs.from_settings(build_agent(s, index=index), store, s)


# -- jobs from a sources file -------------------------------------------------------------------------

def test_jobs_from_a_sources_file_sync_a_folder_and_report_status(tmp_path, wiki_copy, index_factory, store) -> None:
    cfg = yaml_file(tmp_path, f"sources:\n  - {{name: handbook, type: folder, path: '{wiki_copy}', "
                              f"schedule: {{interval: 15m}}}}\n")
    jobs = jobs_for(tmp_path, index_factory(), store, cfg)
    assert jobs.names() == ["handbook"]
    [first] = jobs.run()
    assert (first.status, first.summary.added, first.summary.errors) == ("ok", WIKI_PAGES, [])
    (wiki_copy / "company" / "glossary.md").unlink()
    [second] = jobs.run("handbook")
    s = second.summary
    assert (s.added, s.updated, s.deleted, s.unchanged) == (0, 0, 1, WIKI_PAGES - 1)
    [row] = jobs.status()
    assert row["source"] == "handbook" and row["pages"] == WIKI_PAGES - 1 and row["chunks"] > row["pages"]
    assert row["last_status"] == "ok" and row["last_summary"].deleted == 1 and row["schedule"] == "every 15m"
    assert row["next_run"] is None  # no scheduler attached
    assert [r.status for r in jobs.run("nope")] == ["unknown"]


def test_a_folder_page_nested_too_deep_or_failing_to_convert_never_stops_the_sync(tmp_path, index_factory, store,
                                                                                   monkeypatch) -> None:
    import connectors.folder as folder

    wiki = tmp_path / "wiki"
    wiki.mkdir()
    (wiki / "bikes.md").write_text("# Bike storage\n\nBikes are parked in the basement garage, level minus two.\n",
                                   encoding="utf-8")
    (wiki / "pantry.html").write_text(
        "<html><head><title>Pantry</title></head><body>" + "<div>" * 600 + "<h2>Kumquat storage</h2><p>Kumquats are "
        "stored in the cold room on shelf nine.</p>" + "</div>" * 600 + "</body></html>", encoding="utf-8")
    index = index_factory()
    engine = SyncEngine(index, store)
    source = FolderSource(wiki, name="handbook")
    res = engine.run(source)
    assert res.status == "ok", res.error
    assert (res.summary.added, res.summary.skipped, res.summary.errors) == (2, 0, []), res.summary
    first = store.get_cursor("handbook", index_id=index.index_id)["synced_at"]
    pantry = [index.dense.get(c) for c in index.manifest.pages_of("handbook")["pantry.html"].chunk_ids]
    assert any(c.section_path == ("Kumquat storage",) and "shelf nine" in c.text for c in pantry), pantry
    hits = KnowledgeSearch(index).run(KnowledgeSearchArgs(query="where are bikes parked", k=3), public_ctx()).evidence
    assert hits[0].chunk.doc_id == "bikes.md"

    real = folder.html_to_markdown

    def broken(html: str):
        if "shelf ten" in html:
            raise RuntimeError("converter bug on this page")
        return real(html)

    monkeypatch.setattr(folder, "html_to_markdown", broken)
    (wiki / "pantry.html").write_text((wiki / "pantry.html").read_text(encoding="utf-8").replace("nine", "ten"),
                                      encoding="utf-8")
    (wiki / "desks.md").write_text("# Desks\n\nHot desks are booked in the office app.\n", encoding="utf-8")
    time.sleep(0.01)
    again = engine.run(source)
    assert again.status == "ok", again.error
    assert (again.summary.added, again.summary.skipped) == (1, 1), again.summary
    assert again.summary.errors == ["pantry.html: RuntimeError: converter bug on this page"]
    assert store.get_cursor("handbook", index_id=index.index_id)["synced_at"] > first
    assert set(index.manifest.pages_of("handbook")) == {"bikes.md", "pantry.html", "desks.md"}  # old copy kept


def test_a_missing_credential_fails_only_that_source(tmp_path, wiki_copy, index_factory, store, monkeypatch) -> None:
    monkeypatch.delenv("CONFLUENCE_TOKEN", raising=False)
    cfg = yaml_file(tmp_path, f"""sources:
  - {{name: docs, type: folder, path: '{wiki_copy}'}}
  - {{name: dc, type: confluence, base_url: 'http://127.0.0.1:9/confluence', deployment: datacenter, spaces: [A]}}
""")
    jobs = jobs_for(tmp_path, index_factory(), store, cfg)
    results = {r.source: r for r in jobs.run()}
    assert results["docs"].status == "ok"
    assert results["dc"].status == "failed" and "CONFLUENCE_TOKEN" in results["dc"].error
    assert store.last_runs("dc")[0].error == results["dc"].error


# -- locks ------------------------------------------------------------------------------------------------

def _hold_lock_in_another_process(db: Path, lock: str, owner: str) -> None:
    code = ("import sys; from datetime import timedelta; from state import StateStore; "
            "s = StateStore(sys.argv[1]); assert s.acquire_lock(sys.argv[2], sys.argv[3], ttl=timedelta(minutes=5))")
    subprocess.run([sys.executable, "-c", code, sqlite_url(db), lock, owner], check=True, cwd=ROOT,
                   env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60)


def test_one_run_per_source_across_processes(tmp_path, wiki_copy, index_factory, store) -> None:
    from connectors.folder import FolderSource

    engine = SyncEngine(index_factory(), store)
    source = FolderSource(wiki_copy, name="handbook")
    _hold_lock_in_another_process(tmp_path / "state.sqlite", engine.lock_name("handbook"), "other-host:4242:abc")
    busy = engine.run(source)
    assert busy.status == "busy" and "already running" in busy.error
    assert store.get_cursor("handbook", index_id=engine.index.index_id) is None and store.last_runs("handbook") == []

    store.release_lock(engine.lock_name("handbook"), "other-host:4242:abc")
    assert engine.run(source).status == "ok"


def test_a_lock_left_by_a_killed_process_on_this_host_is_taken_over(tmp_path, wiki_copy, index_factory, store) -> None:
    from connectors.folder import FolderSource

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    engine = SyncEngine(index_factory(), store)
    _hold_lock_in_another_process(tmp_path / "state.sqlite", engine.lock_name("handbook"),
                                  f"{socket.gethostname()}:{gone.pid}:dead")
    res = engine.run(FolderSource(wiki_copy, name="handbook"))
    assert res.status == "ok" and res.summary.added == WIKI_PAGES


# -- the scheduler ----------------------------------------------------------------------------------------

def test_scheduler_has_one_job_per_scheduled_source(tmp_path, wiki_copy, index_factory, store) -> None:
    cfg = yaml_file(tmp_path, f"""scheduler: {{misfire_grace_seconds: 90, timezone: Europe/Paris}}
sources:
  - {{name: a, type: folder, path: '{wiki_copy}', schedule: {{interval: 20m}}}}
  - {{name: b, type: folder, path: '{wiki_copy}', schedule: {{cron: '0 6 * * *'}}}}
  - {{name: c, type: folder, path: '{wiki_copy}'}}
""")
    jobs = jobs_for(tmp_path, index_factory(), store, cfg, chatops_sync_interval="off")
    sched = build_scheduler(jobs)
    by_id = {j.id: j for j in sched.get_jobs()}
    assert set(by_id) == {"sync:a", "sync:b"}  # c: no schedule and the default is off
    for job in by_id.values():
        assert (job.max_instances, job.coalesce, job.misfire_grace_time) == (1, True, 90)
    nxt = next_run_times(sched)
    assert set(nxt) == {"a", "b"}
    assert (nxt["b"].hour, nxt["b"].minute, str(nxt["b"].tzinfo)) == (6, 0, "Europe/Paris")
    assert jobs.scheduler is sched and {r["source"]: r["next_run"] is not None for r in jobs.status()} == \
        {"a": True, "b": True, "c": False}

    jobs_default = jobs_for(tmp_path, index_factory(tmp_path / "i2"), store, cfg, chatops_sync_interval="2h")
    assert {j.id for j in build_scheduler(jobs_default).get_jobs()} == {"sync:a", "sync:b", "sync:c"}


def test_a_scheduled_sync_runs_inside_the_event_loop(tmp_path, wiki_copy, index_factory, store) -> None:
    cfg = yaml_file(tmp_path, f"sources:\n  - {{name: docs, type: folder, path: '{wiki_copy}', schedule: {{interval: 1h}}}}\n")
    jobs = jobs_for(tmp_path, index_factory(), store, cfg)

    async def main() -> list:
        sched = start_scheduler(jobs)
        ticks = 0
        try:
            sched.get_job("sync:docs").modify(next_run_time=datetime.now(sched.timezone))
            deadline = time.monotonic() + 120
            while not store.last_runs("docs") or store.last_runs("docs")[0].status == "running":
                assert time.monotonic() < deadline, "the scheduled sync did not run"
                await asyncio.sleep(0.1)
                ticks += 1  # the loop kept turning while the sync ran in a worker thread
            return [store.last_runs("docs")[0], jobs.status()[0], ticks]
        finally:
            sched.shutdown(wait=False)

    run, row, ticks = asyncio.run(main())
    assert run.status == "ok" and run.summary["added"] == WIKI_PAGES
    assert ticks > 0
    nxt = datetime.fromisoformat(row["next_run"])
    assert timedelta(minutes=55) < nxt - datetime.now(nxt.tzinfo) <= timedelta(hours=1)


# -- the CLI ----------------------------------------------------------------------------------------------

@pytest.fixture
def cli_site(tmp_path: Path, embedding_cache_dir: Path):
    """A stand-in Confluence Cloud with three pages, a sources file naming it, and a data dir."""
    with ConfluenceStandIn() as s:
        s.add_space("ENG")
        for title in ("Deploys", "On-call", "Laptops"):
            s.add_page("ENG", title, f"<h2>{title}</h2><p>How {title.lower()} work at Acme.</p>")
        cfg = yaml_file(tmp_path, f"""sources:
  - name: eng
    type: confluence
    base_url: {s.cloud_url}
    deployment: cloud
    spaces: [ENG]
    auth: {{email_env: ACME_EMAIL, token_env: ACME_TOKEN}}
    schedule: {{interval: 30m}}
""")
        data = tmp_path / "data"
        data.mkdir()
        if (embedding_cache_dir / "embeddings.sqlite").exists():
            seed_embedding_cache(data, embedding_cache_dir / "embeddings.sqlite")
        yield s, cfg, data


def chatops(args: list[str], data: Path, cwd: Path, timeout: float = 180, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*chatops_command(), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=cli_environment(data, **env))


def test_chatops_sync_and_status(cli_site, tmp_path: Path) -> None:
    s, cfg, data = cli_site
    env = {"CHATOPS_CONFIG": str(cfg), "ACME_EMAIL": CLOUD_EMAIL, "ACME_TOKEN": CLOUD_TOKEN}
    first = chatops(["sync"], data, tmp_path, **env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("eng: ok, 3 added, 0 updated, 0 deleted, 0 unchanged, 0 skipped, 0 errors in ")
    again = chatops(["sync", "--source", "eng", "--json"], data, tmp_path, **env)
    assert again.returncode == 0, again.stderr
    [result] = json.loads(again.stdout)
    assert result["status"] == "ok" and result["summary"]["unchanged"] == 3 and result["summary"]["mode"] == "incremental"
    status = chatops(["status", "--json"], data, tmp_path, **env)
    assert status.returncode == 0, status.stderr
    [row] = json.loads(status.stdout)
    assert (row["source"], row["pages"], row["last_status"], row["schedule"]) == ("eng", 3, "ok", "every 30m")
    text = chatops(["status"], data, tmp_path, **env)
    assert text.returncode == 0 and "eng: 3 pages" in text.stdout and "schedule: every 30m" in text.stdout


def test_chatops_sync_errors(cli_site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """The same command in-process (``bot.cli.main``): exit codes and messages of configuration problems."""
    from bot.cli import main

    s, cfg, data = cli_site
    for var in ("CHATOPS_SOURCES", "ACME_EMAIL", "ACME_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CHATOPS_DATA_DIR", str(data))
    monkeypatch.setenv("CHATOPS_CONFIG", str(cfg))
    monkeypatch.chdir(tmp_path)

    def chatops_main(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        out = capsys.readouterr()
        return code, out.out, out.err

    code, _, err = chatops_main("sync", "--source", "nope")
    assert code == 2 and "no source named 'nope'" in err and "eng" in err
    code, out, _ = chatops_main("sync")
    assert code == 1 and "needs the environment variable ACME_TOKEN" in out
    monkeypatch.setenv("ACME_EMAIL", CLOUD_EMAIL)
    monkeypatch.setenv("ACME_TOKEN", "wrong")
    code, out, _ = chatops_main("sync")
    assert code == 1 and "401" in out and "cursor was not advanced" in out
    (tmp_path / "x").mkdir()
    monkeypatch.setenv("CHATOPS_CONFIG", str(yaml_file(tmp_path / "x", "sources:\n  - {name: a, type: wiki}\n")))
    code, _, err = chatops_main("sync")
    assert code == 2 and err.startswith("chatops:") and "type must be confluence, mediawiki or folder" in err
    monkeypatch.setenv("CHATOPS_CONFIG", str(tmp_path / "missing.yml"))
    code, _, err = chatops_main("status")
    assert code == 2 and "not found" in err


def test_a_killed_sync_loses_nothing_and_the_next_run_completes(tmp_path: Path, embedding_cache_dir: Path,
                                                                 index_factory, store) -> None:
    with ConfluenceStandIn() as s:
        s.add_space("ENG")
        ids = [s.add_page("ENG", f"Service {i:02d}", f"<h2>Owner</h2><p>Service {i:02d} is owned by team {i % 7}.</p>")
               for i in range(60)]
        # The first 48 pages (one index batch) go fast; then the server stalls, and the process is killed.
        s.slow("|".join(rf"/content/{pid}/restriction" for pid in ids[50:]), 3.0)
        cfg = yaml_file(tmp_path, f"sources:\n  - {{name: eng, type: confluence, base_url: '{s.cloud_url}', "
                                  "deployment: cloud, spaces: [ENG], page_size: 25}\n")
        data = tmp_path / "data"
        data.mkdir()
        if (embedding_cache_dir / "embeddings.sqlite").exists():
            seed_embedding_cache(data, embedding_cache_dir / "embeddings.sqlite")
        env = cli_environment(data, CHATOPS_CONFIG=str(cfg), CONFLUENCE_EMAIL=CLOUD_EMAIL,
                              CONFLUENCE_API_TOKEN=CLOUD_TOKEN)
        proc = subprocess.Popen([*chatops_command(), "sync"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        try:
            deadline = time.monotonic() + 120
            while s.count(r"/restriction/") < 51:
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "the sync never reached the slow pages"
                time.sleep(0.05)
            manifest = Manifest(data / "index" / "manifest.sqlite")
            while len(manifest.pages_of("eng")) < 48 and time.monotonic() < deadline:
                time.sleep(0.05)
            written = len(manifest.pages_of("eng"))
            manifest.close()
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        assert written == 48
        crashed = StateStore(sqlite_url(data / "state.sqlite"))
        assert crashed.get_cursor("eng", index_id=Manifest(data / "index" / "manifest.sqlite").get("index_id")) is None  # the killed run saved no cursor
        assert crashed.last_runs("eng")[0].status == "running"  # and never finished
        crashed.close()

        s.clear_faults()
        index = index_factory(data / "index")  # opening runs journal recovery
        rt_store = StateStore(sqlite_url(data / "state.sqlite"))
        try:
            from app.config import load_config
            from connectors.factory import build_source

            source = build_source(load_config(cfg).sources[0],
                                  environ={"CONFLUENCE_EMAIL": CLOUD_EMAIL, "CONFLUENCE_API_TOKEN": CLOUD_TOKEN})
            res = SyncEngine(index, rt_store).run(source)  # takes over the dead process's lock
            assert res.status == "ok", res.error
            assert res.summary.added + res.summary.unchanged == 60 and res.summary.added == 12
            pages = index.manifest.pages_of("eng")
            assert set(pages) == {f"page/{i}" for i in ids}
            assert index.consistency().ok
        finally:
            rt_store.close()


def test_a_sync_that_wrote_prepares_the_dense_search_so_the_next_turn_does_not(wiki_copy, index_factory, store) -> None:
    """After a run's writes the local-mode mirror is rebuilt in the sync's thread: the next search reads no
    point back from the collection (a search that had to rebuild it would scroll the whole collection)."""
    from core.access import Viewer

    index = index_factory()
    assert SyncEngine(index, store).run(FolderSource(wiki_copy, name="handbook")).status == "ok"
    calls: list = []
    real = index.dense.client.scroll
    index.dense.client.scroll = lambda *a, **k: calls.append(1) or real(*a, **k)
    try:
        hits = index.dense.search(index.embedder.embed(["expenses"])[0], 3, viewer=Viewer.public("dm"))
    finally:
        index.dense.client.scroll = real
    assert hits and calls == []
    index.dense.delete_chunks([hits[0].chunk.chunk_id])  # a write updates the mirror in place: still no rebuild
    index.dense.client.scroll = lambda *a, **k: calls.append(1) or real(*a, **k)
    try:
        after = index.dense.search(index.embedder.embed(["expenses"])[0], 3, viewer=Viewer.public("dm"))
    finally:
        index.dense.client.scroll = real
    assert calls == [] and after and hits[0].chunk.chunk_id not in {h.chunk.chunk_id for h in after}
