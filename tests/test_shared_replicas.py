"""One ``chatops worker`` and two ``chatops serve --role web`` replicas on one shared index (issue 12).

The real topology, every piece its own process: the Qdrant stand-in (``QdrantStandInProcess``: Qdrant's
REST wire format, executed by qdrant-client's local engine), one PostgreSQL database created for the test
(``tests/pg.py``), the Confluence stand-in as the source on a 10 s schedule (the shortest a schedule may
be), the Slack stand-in, and three console-script subprocesses with their own data dirs and the same
``QDRANT_URL``, ``DATABASE_URL`` and sources. The worker holds the stand-in's API key; the web replicas
hold its read-only key (as a deployment would give them), so the stand-in's request log says whose
each request was, and a write by a web replica would be both visible and refused.

The test proves:

- the worker's start-up sync writes the collection; both web replicas become ready (``/readyz`` 200)
  without syncing: no request of theirs writes to Qdrant (the stand-in's log, by key), no page body is
  fetched from Confluence but the worker's fetch of the edit, and no web replica logs a sync;
- a signed Slack mention to each web replica is answered from the shared index with the same reply;
- a page edited on Confluence is fetched once by the worker's next sync, and then both web replicas
  answer the new text and never the old (their answer caches are keyed by the index version, which
  lives in the database);
- ``/kb reindex`` from an admin on a web replica queues a job that the worker (its pid) runs;
- the web replicas' data dirs (and the worker's) hold no index file: no ``index/`` folder, no Whoosh,
  Qdrant or manifest file;
- every process stops cleanly on SIGTERM, without a traceback.

Timings of the same scenario at 200 pages are measured by ``bench/shared_replicas.py``.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

import httpx

from index.identity import shared_index_id
from state import StateStore

from tests.chatops_procs import ChatopsProcess, Replica, ask, content_runs, page_bodies
from tests.standins.confluence import CLOUD_EMAIL, CLOUD_TOKEN, ConfluenceStandIn
from tests.helpers import seed_embedding_cache, wait_for
from tests.pg import pg_database
from tests.standins.qdrant import READ_POSTS, LoggedRequest, QdrantStandInProcess
from tests.standins.slack import APP_TOKEN, BOT_TOKEN, SIGNING_SECRET, SlackStandin, manifest_scopes
from tests.test_replicas import NEW, OLD, PAGES

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

ALICE, ADMIN = "UALICE01", "UADMIN01"
WRITE_KEY, READ_KEY = "worker-write-key", "web-read-only-key"
CHANNEL = "C0SHARED"


def writes(requests: list[LoggedRequest]) -> list[LoggedRequest]:
    """The requests that change the stand-in's data (every PUT/DELETE; a POST other than a read)."""
    return [r for r in requests if r.method in {"PUT", "DELETE"} or (r.method == "POST" and not READ_POSTS.fullmatch(r.path))]


def answer(replica: Replica, slack: SlackStandin) -> str:
    """The reply of ``replica`` to Alice's question about the VPN gateway (text and blocks, as JSON), its
    turn id (in the feedback buttons: one per turn) replaced by ``<turn>``."""
    reply = ask(replica, slack, "what is the VPN gateway address?", ALICE, CHANNEL)
    return re.sub(r"\b[0-9a-f]{32}\b", "<turn>", reply)


def sources_config(path: Path, confluence: ConfluenceStandIn, page_size: int = 25) -> Path:
    """``chatops.yml``: the Confluence stand-in's ENG space as source ``eng``, synced every 10 s."""
    path.write_text(
        "sources:\n"
        f"  - {{name: eng, type: confluence, base_url: '{confluence.cloud_url}', deployment: cloud, spaces: [ENG],\n"
        f"     page_size: {page_size}, public_groups: [confluence-users], overlap_minutes: 0,\n"
        "     permissions_interval: 'off', schedule: {interval: 10s}}\n", encoding="utf-8")
    return path


def index_files(data: Path) -> list[str]:
    """Paths under ``data`` that belong to an index (an ``index`` folder, Whoosh, Qdrant or manifest files)."""
    return [str(p.relative_to(data)) for p in data.rglob("*")
            if re.search(r"index|whoosh|qdrant|manifest|\.seg$|_MAIN_", str(p.relative_to(data)), re.IGNORECASE)]


def test_a_worker_writes_the_shared_index_and_two_web_replicas_answer_from_it(tmp_path: Path,
                                                                              embedding_cache_dir: Path) -> None:
    cache = embedding_cache_dir / "embeddings.sqlite"
    slack = SlackStandin(BOT_TOKEN, APP_TOKEN, manifest_scopes()).start()
    slack.add_user(ALICE)
    slack.add_user(ADMIN)
    slack.add_conversation(CHANNEL)
    confluence = ConfluenceStandIn().start()
    procs: list[ChatopsProcess] = []
    store: StateStore | None = None
    with pg_database("chatops_shared_replicas") as db, \
            QdrantStandInProcess(api_key=WRITE_KEY, read_only_api_key=READ_KEY, strict=True) as qdrant:
        try:
            confluence.add_space("ENG")
            ids = {title: confluence.add_page("ENG", title, body) for title, body in PAGES.items()}
            env = {"CHATOPS_CONFIG": str(sources_config(tmp_path / "chatops.yml", confluence)), "DATABASE_URL": db,
                   "QDRANT_URL": qdrant.url, "CONFLUENCE_EMAIL": CLOUD_EMAIL, "CONFLUENCE_API_TOKEN": CLOUD_TOKEN}
            web_env = env | {"QDRANT_API_KEY": READ_KEY, "SLACK_BOT_TOKEN": BOT_TOKEN,
                             "SLACK_SIGNING_SECRET": SIGNING_SECRET, "SLACK_API_URL": slack.api_url,
                             "ADMIN_USER_IDS": ADMIN}
            StateStore(db).close()  # migrate once here, so the processes' start-ups only find the head
            for name in ("worker", "web-a", "web-b"):
                if cache.is_file():  # the warm embedding cache, as the other CLI tests use it
                    seed_embedding_cache(tmp_path / name, cache)
            index_id = shared_index_id(qdrant.url, "chunks")

            worker = ChatopsProcess("worker", tmp_path, env | {"QDRANT_API_KEY": WRITE_KEY}, ["worker"])
            procs.append(worker)
            m = wait_for(lambda: worker.alive() and re.search(r"worker running for index (\S+)", worker.log()), 90,
                         "the worker to start")
            assert m.group(1) == index_id
            webs = [Replica(name, tmp_path, web_env, ("--role", "web")) for name in ("web-a", "web-b")]
            procs += webs
            for w in webs:
                wait_for(w.listening, 90, f"{w.name} to listen")
            store = StateStore(db)

            # The worker's start-up sync writes the collection; each page body is fetched once, by it.
            first = wait_for(lambda: content_runs(store, index_id), 60, "the worker's start-up sync")[0]
            assert first.status == "ok", first.error
            assert (first.summary["added"], first.summary["fetched"]) == (len(PAGES), len(PAGES)), first.summary
            for w in webs:
                try:
                    ready = wait_for(lambda w=w: _ready(w), 30, f"{w.name} to be ready")
                except AssertionError as exc:
                    raise AssertionError(f"{exc}; its last /readyz: {_readyz[-1:]}") from None
                assert ready.json()["checks"]["index"]["detail"].startswith(f"{len(PAGES)} pages"), ready.json()

            # Both web replicas answer from the shared index, the same reply.
            replies = [answer(w, slack) for w in webs]
            assert OLD in replies[0] and replies[0] == replies[1], replies

            # An edit is fetched once, by the worker's next sync; then both replicas answer the new text only.
            before = len(content_runs(store, index_id))
            edited = datetime.now(timezone.utc)
            mark = len(confluence.requests)
            confluence.edit_page(ids["VPN Setup"], body=PAGES["VPN Setup"].replace(OLD, NEW))
            [run] = wait_for(lambda: [r for r in content_runs(store, index_id)[before:]
                                      if r.started_at > edited and r.summary.get("updated") == 1], 40,
                             "the worker's sync of the edit")
            assert run.status == "ok" and run.summary["fetched"] == 1, run.summary
            assert page_bodies(confluence, mark) == [ids["VPN Setup"]]
            replies = [answer(w, slack) for w in webs]
            for w, reply in zip(webs, replies):
                assert NEW in reply and OLD not in reply, (w.name, reply)
            assert replies[0] == replies[1]

            # /kb reindex on a web replica: queued, and the worker runs it.
            resp = _command(webs[0], "reindex eng", slack.response_url("ri"))
            assert resp.status_code == 200, resp.text
            [summary] = slack.wait_for(lambda s: [c for c in s.calls_to("response_url") if c.key == "ri"], timeout=30)
            text = json.dumps(summary.params)
            job_id = int(re.search(r"queued for the worker as job (\d+)", text).group(1))
            done = wait_for(lambda: (j := store.index_job(job_id)) and j.status in {"done", "failed"} and j, 30,
                            "the worker to run the queued job")
            assert done.status == "done" and done.owner.split(":")[1] == str(worker.proc.pid), done
            assert done.index_id == index_id and [r["status"] for r in done.result] == ["ok"]

            # The only single-page body Confluence served is the worker's fetch of the edit (syncs read the
            # other bodies in the listing): no web replica fetched a page.
            assert page_bodies(confluence, 0) == [ids["VPN Setup"]]
            # The stand-in's log: the worker (its key) wrote; the web replicas (the read-only key) only read.
            log = qdrant.requests
            assert writes([r for r in log if r.key == "api"]), "the worker wrote nothing"
            assert [r for r in log if r.key == "read-only"], "the web replicas read nothing"
            assert [(r.method, r.path) for r in writes([r for r in log if r.key != "api"])] == []
            assert {r.key for r in log if r.path not in ("/", "/healthz")} <= {"api", "read-only"}
            for p in procs:
                assert index_files(p.data) == [], (p.name, index_files(p.data))
        finally:
            if store is not None:
                store.close()
            codes = {p.name: p.stop() for p in procs}
            confluence.stop()
            slack.stop()
    for p in procs:
        assert codes[p.name] == 0, p.log()[-3000:]
        assert "Traceback" not in p.log(), p.log()[-3000:]
        if p.name != "worker":
            assert "sync of eng" not in p.log(), p.log()[-3000:]


_readyz: list[str] = []


def _ready(replica: Replica) -> httpx.Response | None:
    """``/readyz`` of ``replica`` when 200 (else None, the answer kept in ``_readyz``)."""
    resp = httpx.get(replica.url + "/readyz")
    _readyz.append(resp.text)
    return resp if resp.status_code == 200 else None


def _command(replica: Replica, text: str, response_url: str) -> httpx.Response:
    """The admin's signed ``/kb`` slash command to ``replica``."""
    from tests.standins.slack import SlackSender

    sender = SlackSender(replica.url, SIGNING_SECRET)
    try:
        return sender.command(text, ADMIN, CHANNEL, response_url)
    finally:
        sender.close()
