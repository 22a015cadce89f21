"""What a new user and an operator meet first, through the real ``chatops`` subprocess and server.

- An empty or fresh data dir: ``chatops ask`` exits 2 naming the data dir and the command to run,
  never a traceback; a relative ``CHATOPS_DATA_DIR`` is resolved once and ``chatops status`` shows it.
- Sources are named on purpose: a folder source without ``name=`` is named after its folder, so
  indexing a second folder never deletes the first one's pages; ``chatops sources list|remove``;
  ``chatops index`` runs are recorded and ``chatops status`` shows them.
- Readiness is honest: ``/readyz`` is 503 until every configured source has synced once (unless the
  index already held pages), and its counts come from aggregate queries.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from bot.index_guard import FirstSync, index_readiness
from index.manifest import Manifest
from state import StateStore
from state.store import sqlite_url

from tests.helpers import WIKI, WIKI_PAGES, chatops_command, cli_environment, run_chatops, seed_embedding_cache, wait_for

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast


@pytest.fixture
def data(tmp_path: Path, wiki_index, embedding_cache_dir: Path) -> Path:
    """A fresh data dir with a warm embedding cache (``wiki_index`` has filled the session cache)."""
    return seed_embedding_cache(tmp_path / "data", embedding_cache_dir / "embeddings.sqlite")


def _two_folders(tmp_path: Path) -> tuple[Path, Path]:
    """Two folders of pages: ``handbook`` (the example wiki) and ``runbooks`` (its engineering part)."""
    handbook = tmp_path / "handbook"
    shutil.copytree(WIKI, handbook)
    runbooks = tmp_path / "runbooks"
    shutil.copytree(WIKI / "engineering", runbooks)
    return handbook, runbooks


def test_ask_on_an_empty_index_exits_2_with_the_data_dir_and_what_to_run(tmp_path: Path) -> None:
    proc = run_chatops(["ask", "what is the travel budget?"], Path("fresh-data"), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"the index in {tmp_path / 'fresh-data'} is empty" in proc.stderr
    assert "chatops index folder:PATH" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout == ""  # no refusal dressed up as an answer


def test_a_meeting_request_still_works_on_an_empty_index(tmp_path: Path) -> None:
    proc = run_chatops(["ask", "book a 30 min sync with bob@example.com tomorrow at 3pm"], tmp_path / "d", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "chatops actions confirm" in proc.stdout


def test_a_relative_data_dir_is_resolved_once_and_shown_by_status(tmp_path: Path) -> None:
    proc = run_chatops(["status"], Path("rel-data"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == f"data dir: {tmp_path / 'rel-data'}"


def test_folders_are_named_after_themselves_and_never_delete_each_other(tmp_path: Path, data: Path) -> None:
    handbook, runbooks = _two_folders(tmp_path)
    first = run_chatops(["index", f"folder:{handbook}"], data, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith(f"handbook: {WIKI_PAGES} added")
    second = run_chatops(["index", f"folder:{runbooks}"], data, cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert second.stdout.startswith("runbooks: ") and ", 0 deleted" in second.stdout
    listed = run_chatops(["sources", "list", "--json"], data, cwd=tmp_path)
    rows = {r["source"]: r for r in json.loads(listed.stdout)}
    assert rows["handbook"]["pages"] == WIKI_PAGES and rows["runbooks"]["pages"] > 0
    assert not rows["handbook"]["configured"]
    # runs of `chatops index` are recorded like syncs: status never says "never run" after an index
    status = run_chatops(["status"], data, cwd=tmp_path)
    lines = {ln.split(":", 1)[0]: ln for ln in status.stdout.splitlines()}
    assert re.search(rf"handbook: {WIKI_PAGES} pages, \d+ chunks; last run \S+ ok: {WIKI_PAGES} added", lines["handbook"])
    assert "never run" not in status.stdout


def test_sources_remove_asks_for_yes_then_removes_only_that_source(tmp_path: Path, data: Path) -> None:
    handbook, runbooks = _two_folders(tmp_path)
    for folder in (handbook, runbooks):
        assert run_chatops(["index", f"folder:{folder}"], data, cwd=tmp_path).returncode == 0
    unsure = run_chatops(["sources", "remove", "runbooks"], data, cwd=tmp_path)
    assert unsure.returncode == 2 and "--yes" in unsure.stderr
    unknown = run_chatops(["sources", "remove", "nope", "--yes"], data, cwd=tmp_path)
    assert unknown.returncode == 2 and "handbook, runbooks" in unknown.stderr
    done = run_chatops(["sources", "remove", "runbooks", "--yes"], data, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert re.match(r"runbooks: removed \d+ pages \(\d+ chunks\)", done.stdout)
    rows = {r["source"]: r for r in json.loads(run_chatops(["sources", "list", "--json"], data, cwd=tmp_path).stdout)}
    assert set(rows) == {"handbook"} and rows["handbook"]["pages"] == WIKI_PAGES
    # the removed source's pages are gone from retrieval too, the other's still answer
    ask = run_chatops(["ask", "--json", "how do I declare an incident?"], data, cwd=tmp_path)
    cited = {c["doc_id"] for c in json.loads(ask.stdout)["citations"]}
    assert cited and all(not d.startswith("runbooks") for d in cited)
    store = StateStore(sqlite_url(data / "state.sqlite"))
    try:
        assert store.last_runs("runbooks") == []
        assert store.get_cursor("runbooks", index_id=Manifest(data / "index" / "manifest.sqlite").get("index_id")) is None
    finally:
        store.close()


def test_readiness_waits_for_the_first_sync_of_every_source(index_factory, tmp_path: Path) -> None:
    index = index_factory(tmp_path / "empty-index")
    store = StateStore(sqlite_url(tmp_path / "state.sqlite"))
    try:
        names = ["handbook", "runbooks"]
        first = FirstSync(index, store, lambda: names)
        ok, detail = index_readiness(index, first)
        assert not ok and detail == "0 pages, 0 chunks; waiting for the first sync of handbook, runbooks"
        store.finish_run(store.start_run("handbook", index_id="another-replica"), "ok", {})  # not this index's
        assert index_readiness(index, first) == (False, detail)
        store.finish_run(store.start_run("handbook", index_id=index.index_id), "ok", {})
        store.finish_run(store.start_run("runbooks", index_id=index.index_id), "failed", {}, error="boom")
        assert index_readiness(index, first) == (False, "0 pages, 0 chunks; waiting for the first sync of runbooks")
        store.finish_run(store.start_run("runbooks", index_id=index.index_id), "ok", {})
        assert index_readiness(index, first) == (True, "0 pages, 0 chunks")
        ok, detail = index_readiness(index, FirstSync(index, store, lambda: []))
        assert not ok and "no source is configured" in detail
    finally:
        store.close()


def test_readiness_is_immediate_over_an_index_with_pages(wiki_index, tmp_path: Path) -> None:
    store = StateStore(sqlite_url(tmp_path / "state.sqlite"))
    try:
        ok, detail = index_readiness(wiki_index, FirstSync(wiki_index, store, lambda: ["never-synced"]))
        chunks = sum(len(p.chunk_ids) for p in wiki_index.manifest.all_pages())
        assert ok and detail == f"{WIKI_PAGES} pages, {chunks} chunks"
        assert wiki_index.manifest.counts() == (WIKI_PAGES, chunks)
    finally:
        store.close()


def test_serve_is_not_ready_before_its_first_sync(tmp_path: Path, data: Path) -> None:
    handbook, _ = _two_folders(tmp_path)
    env = cli_environment(data, TEAMS_ALLOW_UNAUTHENTICATED="true", CHATOPS_SOURCES=f"folder:{handbook}")
    log_path = tmp_path / "serve.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen([*chatops_command(), "serve", "--host", "127.0.0.1", "--port", "0", "--no-sync"],
                                cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        m = wait_for(lambda: re.search(r"serving on http://127\.0\.0\.1:(\d+)", log_path.read_text()), 90, "the server")
        ready = httpx.get(f"http://127.0.0.1:{m.group(1)}/readyz", timeout=10)
        assert ready.status_code == 503
        assert ready.json()["checks"]["index"] == {
            "ok": False, "detail": "0 pages, 0 chunks; waiting for the first sync of handbook"}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    assert "Traceback" not in log_path.read_text()


# -- a CLI that guides ----------------------------------------------------------------------------------
HEAVY = {"qdrant_client", "onnxruntime", "whoosh", "slack_bolt", "slack_sdk", "botbuilder", "openai", "sqlalchemy",
         "dateparser", "numpy", "opentelemetry"}


def test_help_and_usage_errors_import_nothing_heavy() -> None:
    # `chatops --help` must answer at once: the index, the model and the platforms load only in the command
    code = ("import sys, contextlib, io\nfrom bot.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    try:\n        main(['--help'])\n"
            "    except SystemExit:\n        pass\n"
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({sorted(HEAVY)!r})))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env=cli_environment(Path("unused")))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_version_and_every_subcommand_has_a_description_and_examples(tmp_path: Path) -> None:
    from importlib.metadata import version

    from bot.cli import build_parser

    proc = run_chatops(["--version"], tmp_path / "d", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == f"chatops {version('chatops-bot')}"
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in sub.choices.items():
        assert parser.description and len(parser.description) > 40, name
        assert parser.epilog and parser.epilog.startswith("examples:\n  chatops " + name), name
    index_help = run_chatops(["index", "--help"], tmp_path / "d", cwd=tmp_path).stdout
    for spec in ("folder:PATH[?name=NAME&url_base=URL&url_template=T&exclude=GLOB]", "confluence:URL?space=KEY",
                 "mediawiki:API_URL"):
        assert spec in index_help


# -- logs --------------------------------------------------------------------------------------------
def test_every_turn_logs_one_json_record_with_its_trace_id_and_never_the_question(tmp_path: Path, data: Path) -> None:
    handbook, _ = _two_folders(tmp_path)
    assert run_chatops(["index", f"folder:{handbook}"], data, cwd=tmp_path).returncode == 0
    question = "how do I declare an incident?"
    proc = run_chatops(["ask", "--json", question], data, cwd=tmp_path, CHATOPS_LOG_FORMAT="json",
                       CHATOPS_LOG_LEVEL="INFO")  # ask logs at WARNING unless asked (tests/test_cli.py)
    assert proc.returncode == 0, proc.stderr
    trace_id = json.loads(proc.stdout)["trace"]["trace_id"]
    records = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    [turn] = [r for r in records if r.get("trace_id") == trace_id]
    assert turn["level"] == "INFO" and turn["platform"] == "cli" and turn["route"] == "knowledge"
    assert turn["outcome"] == "answered" and turn["citations"] >= 1 and turn["timings_ms"]["total"] > 0
    assert question not in proc.stderr and "declare-incident" not in proc.stderr


def test_logs_mask_configured_secrets_in_json_and_text() -> None:
    import io
    import logging

    from bot.logs import configure_logging

    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    for fmt in ("json", "text"):
        out = io.StringIO()
        configure_logging("INFO", fmt, secrets=("sup3r-s3cret-value",), stream=out)
        logging.getLogger("chatops.test").info("calling with sup3r-s3cret-value and xoxb-123-456-abcdef")
        text = out.getvalue()
        assert "sup3r-s3cret-value" not in text and "xoxb-123" not in text and "[redacted]" in text
        if fmt == "json":
            assert json.loads(text.splitlines()[-1])["logger"] == "chatops.test"
    root.handlers[:], _ = saved
    root.setLevel(saved[1])


# -- the first hour of an operator (issue 24 items 7, 9, 10) ----------------------------------------------

class _Serve:
    """``chatops serve --host 127.0.0.1 --port PORT`` in a subprocess, its output in a log file."""

    def __init__(self, tmp_path: Path, data: Path, port: int = 0, **env: str) -> None:
        self.log_path = tmp_path / f"serve-{len(list(tmp_path.glob('serve-*.log')))}.log"
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                [*chatops_command(), "serve", "--host", "127.0.0.1", "--port", str(port), "--no-sync"], cwd=tmp_path,
                env=cli_environment(data, TEAMS_ALLOW_UNAUTHENTICATED="true", **env), stdout=log,
                stderr=subprocess.STDOUT)
        self.url = ""

    def log(self) -> str:
        return self.log_path.read_text()

    def wait_listening(self) -> str:
        m = wait_for(lambda: re.search(r"serving on http://127\.0\.0\.1:(\d+)", self.log()), 90, "the server")
        self.url = f"http://127.0.0.1:{m.group(1)}"
        return self.url

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)


def _one_line_error(proc_or_code, output: str, *fragments: str) -> None:
    assert proc_or_code == 2, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    errors = [line for line in output.splitlines() if line.startswith("chatops: ")]
    assert len(errors) == 1, output[-3000:]
    for fragment in fragments:
        assert fragment in errors[0], errors[0]


def test_serve_on_a_port_in_use_exits_2_with_one_line(tmp_path: Path, data: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = _Serve(tmp_path, data, port=port)
        code = server.proc.wait(120)
    _one_line_error(code, server.log(), f"cannot listen on 127.0.0.1:{port}", "already in use", "--port N")


@pytest.mark.parametrize("command", [["status"], ["ask", "what is the travel budget?"], ["serve", "--port", "0"],
                                     ["index", "folder:."]])
def test_a_data_dir_that_is_a_file_exits_2_with_one_line(tmp_path: Path, command: list[str]) -> None:
    not_a_folder = tmp_path / "data"
    not_a_folder.write_text("oops", encoding="utf-8")
    for data_dir in (not_a_folder, not_a_folder / "below"):
        proc = run_chatops(command, data_dir, cwd=tmp_path, TEAMS_ALLOW_UNAUTHENTICATED="true")
        _one_line_error(proc.returncode, proc.stderr, "CHATOPS_DATA_DIR", str(not_a_folder), "is a file",
                        "point CHATOPS_DATA_DIR at a folder")


def test_an_idle_server_logs_no_scheduler_lines_at_info(tmp_path: Path, data: Path) -> None:
    """At DEBUG the scheduler's per-run lines are there, as DEBUG records: it did run its jobs every 5 s."""
    server = _Serve(tmp_path, data, CHATOPS_LOG_LEVEL="DEBUG", CHATOPS_LOG_FORMAT="json")
    server.wait_listening()
    queue_runs = re.compile(r"queued re-index jobs \(every 5 s\)[^\n]*executed successfully")
    wait_for(lambda: len(queue_runs.findall(server.log())) >= 2, 60, "two runs of the queue job")
    assert server.stop() == 0
    records = [json.loads(line) for line in server.log().splitlines() if line.startswith("{")]
    scheduler = [r for r in records if r["logger"].startswith("apscheduler")]
    runs = [r for r in scheduler if "Running job" in r["message"] or "executed successfully" in r["message"]]
    assert len(runs) >= 4 and {r["level"] for r in runs} == {"DEBUG"}, runs[:4]
    assert not [r for r in scheduler if r["level"] == "INFO"]


def test_the_scheduler_at_info_writes_nothing_per_run(tmp_path: Path) -> None:
    """The same scheduler and logging set-up as ``chatops serve`` at INFO, run for a few fast ticks."""
    import asyncio
    import io

    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    from bot.logs import configure_logging

    stream = io.StringIO()
    configure_logging("INFO", "json", stream=stream)
    ran: list[int] = []

    async def tick() -> None:
        ran.append(1)

    async def main() -> None:
        scheduler = AsyncIOScheduler()
        scheduler.add_job(tick, trigger="interval", seconds=0.1, id="tick")
        scheduler.start()
        await asyncio.sleep(0.75)
        scheduler.shutdown(wait=False)

    try:
        asyncio.run(main())
    finally:
        configure_logging("WARNING", "text")
    assert len(ran) >= 4
    assert [line for line in stream.getvalue().splitlines() if "apscheduler" in line] == []


def test_privacy_and_terms_are_served_with_defaults_the_package_links(tmp_path: Path, data: Path) -> None:
    import zipfile

    from app.settings import Settings
    from bot.teams.package import build_package

    server = _Serve(tmp_path, data, TEAMS_APP_NAME="Handbook bot", RETENTION_DAYS_CONVERSATIONS="14")
    try:
        url = server.wait_listening()
        settings = Settings(MicrosoftAppId="0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", teams_bot_domain="chatops.example.com")
        with zipfile.ZipFile(build_package(settings, tmp_path / "app.zip")) as zf:
            developer = json.loads(zf.read("manifest.json"))["developer"]
        assert developer["privacyUrl"] == "https://chatops.example.com/privacy"
        assert developer["termsOfUseUrl"] == "https://chatops.example.com/terms"
        privacy = httpx.get(url + "/privacy", timeout=10)
        terms = httpx.get(url + "/terms", timeout=10)
    finally:
        assert server.stop() == 0
    assert privacy.status_code == 200 and privacy.headers["content-type"].startswith("text/plain")
    assert "Handbook bot: privacy" in privacy.text and "14 days" in privacy.text and "chatops forget" in privacy.text
    assert terms.status_code == 200 and "Handbook bot: terms of use" in terms.text


def test_privacy_and_terms_from_settings(tmp_path: Path, data: Path) -> None:
    import zipfile

    from app.settings import Settings
    from bot.teams.package import build_package

    page = tmp_path / "privacy.html"
    page.write_text("<h1>Acme privacy</h1><p>We keep questions for 7 days.</p>", encoding="utf-8")
    env = {"PRIVACY_TEXT_FILE": str(page), "TERMS_URL": "https://intranet.example.com/legal/terms"}
    server = _Serve(tmp_path, data, **env)
    try:
        url = server.wait_listening()
        privacy = httpx.get(url + "/privacy", timeout=10)
        terms = httpx.get(url + "/terms", timeout=10, follow_redirects=False)
    finally:
        assert server.stop() == 0
    assert privacy.status_code == 200 and privacy.headers["content-type"].startswith("text/html")
    assert privacy.text == page.read_text(encoding="utf-8")
    assert terms.status_code == 302 and terms.headers["location"] == env["TERMS_URL"]
    settings = Settings(MicrosoftAppId="0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", teams_bot_domain="chatops.example.com",
                        privacy_url="https://intranet.example.com/legal/privacy", terms_url=env["TERMS_URL"])
    with zipfile.ZipFile(build_package(settings, tmp_path / "app.zip")) as zf:
        developer = json.loads(zf.read("manifest.json"))["developer"]
    assert developer["privacyUrl"] == "https://intranet.example.com/legal/privacy"
    assert developer["termsOfUseUrl"] == env["TERMS_URL"]


@pytest.mark.parametrize("env, fragments", [
    ({"PRIVACY_TEXT_FILE": "missing.txt"}, ["PRIVACY_TEXT_FILE names", "missing.txt", "cannot be read"]),
    ({"TERMS_URL": "http://intranet.example.com/terms"}, ["TERMS_URL must be an https:// URL"]),
])
def test_a_bad_privacy_or_terms_setting_exits_2_with_one_line(tmp_path: Path, env: dict, fragments: list) -> None:
    proc = run_chatops(["serve", "--port", "0", "--no-sync"], tmp_path / "d", cwd=tmp_path,
                       TEAMS_ALLOW_UNAUTHENTICATED="true", **env)
    _one_line_error(proc.returncode, proc.stderr, *fragments)
