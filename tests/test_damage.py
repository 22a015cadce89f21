"""Damaged data dirs and a full disk, through the real ``chatops`` console script.

Every test starts from a copy of one data dir indexed once from a copy of the example wiki (real
Whoosh, local-mode Qdrant, manifest and embedding cache), then damages it the way disks and people
do: garbage over ``manifest.sqlite``, a Whoosh segment or Qdrant's SQLite file; a store's folder
deleted; the embedding cache overwritten; a tmpfs too small for the index.

- Readers (``ask``, ``status``, ``serve`` start-up) and, for the manifest, every command exit 2 with
  a message that names the damaged file and says what to do, and no traceback.
- An indexing run (``index``, ``sync``) reconciles the stores with the manifest first: a deleted or
  damaged store is rebuilt from the other one (the summary says how many chunks were repaired), and
  search finds the pages again, instead of "13 unchanged" over a broken index.
- A damaged embedding cache is moved aside and rebuilt by itself; a failing cache read falls back
  to computing the vectors.
- A full disk exits 2 with "no space left", and the next run after space was freed completes.
- ``chatops serve`` answers a question over a damaged index with a short "unavailable" reply,
  reports not ready on ``/readyz``, and posts no traceback.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import sqlite3
import subprocess
from pathlib import Path

import httpx
import numpy as np
import pytest

from index.embeddings import CachedEmbedder, EmbeddingCache

from tests.helpers import WIKI, WIKI_PAGES, chatops_command, cli_environment, run_chatops, seed_embedding_cache, wait_for

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

QUESTION = "how do I declare an incident?"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory, wiki_index, embedding_cache_dir: Path) -> tuple[Path, Path]:
    """``(data dir, wiki)``: a wiki copy indexed once by ``chatops index``; tests damage copies of it."""
    root = tmp_path_factory.mktemp("damage")
    wiki = root / "wiki"
    shutil.copytree(WIKI, wiki)
    data = seed_embedding_cache(root / "data", embedding_cache_dir / "embeddings.sqlite")
    proc = run_chatops(["index", f"folder:{wiki}"], data, cwd=root)
    assert proc.returncode == 0, proc.stderr
    return data, wiki


@pytest.fixture
def data(pristine: tuple[Path, Path], tmp_path: Path) -> Path:
    """A private copy of the indexed data dir."""
    dest = tmp_path / "data"
    shutil.copytree(pristine[0], dest)
    return dest


@pytest.fixture
def wiki(pristine: tuple[Path, Path]) -> Path:
    """The wiki the data dir was indexed from (read-only)."""
    return pristine[1]


def _garble(path: Path, size: int = 20000) -> None:
    """Replace a file's bytes with deterministic garbage."""
    path.write_bytes(np.random.default_rng(7).integers(0, 256, size, dtype=np.uint8).tobytes())


def _segment(data: Path) -> Path:
    [seg] = (data / "index" / "whoosh").glob("*.seg")
    return seg


def _chatops(args: list[str], data: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return run_chatops(args, data, cwd=data.parent, **env)


def _assert_usage_error(proc: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr[-3000:]
    for fragment in fragments:
        assert fragment in proc.stderr, proc.stderr[-3000:]


def _cited(data: Path, retriever: str = "hybrid") -> list[dict]:
    proc = _chatops(["ask", "--json", "--retriever", retriever, QUESTION], data)
    assert proc.returncode == 0, proc.stderr[-3000:]
    reply = json.loads(proc.stdout)
    assert not reply["refused"], reply["text"]
    return reply["citations"]


# -- a damaged manifest: every command says so ----------------------------------------------------------

@pytest.mark.parametrize("command", ["index", "ask", "status", "sync", "serve"])
def test_damaged_manifest_exits_2_with_what_to_do(data: Path, wiki: Path, command: str) -> None:
    _garble(data / "index" / "manifest.sqlite", 5000)
    args = {"index": ["index", f"folder:{wiki}"], "ask": ["ask", QUESTION], "status": ["status"],
            "sync": ["sync"], "serve": ["serve", "--port", "0", "--no-sync"]}[command]
    proc = _chatops(args, data, CHATOPS_SOURCES=f"folder:{wiki}", SLACK_BOT_TOKEN="xoxb-1-2",
                    SLACK_SIGNING_SECRET="s" * 32, SLACK_API_URL="http://127.0.0.1:9/api/")
    manifest = data / "index" / "manifest.sqlite"
    _assert_usage_error(proc, f"the index manifest at {manifest} is damaged (sqlite: file is not a database)",
                        f"move the folder {data / 'index'} away", "chatops sync --full")


# -- damaged or deleted stores: readers say what to do, an indexing run repairs ------------------------

def test_damaged_whoosh_segment_stops_readers_and_the_next_index_run_rebuilds_it(data: Path, wiki: Path) -> None:
    _garble(_segment(data))
    _assert_usage_error(_chatops(["ask", QUESTION], data), f"the BM25 index at {_segment(data)} is damaged",
                        "run `chatops index SOURCE...` or `chatops sync`")
    proc = _chatops(["index", f"folder:{wiki}"], data)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"repaired {_chunks(proc.stdout)} chunks in bm25, 0 in dense" in proc.stdout
    assert "rebuilt the damaged bm25" in proc.stdout
    assert len(list((data / "index").glob("whoosh.corrupt-*"))) == 1
    assert _cited(data, "bm25")


def test_deleted_whoosh_folder_is_refilled_by_an_incremental_index_run(data: Path, wiki: Path) -> None:
    shutil.rmtree(data / "index" / "whoosh")
    proc = _chatops(["index", f"folder:{wiki}"], data)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"0 added, 0 updated, 0 deleted, {WIKI_PAGES} unchanged" in proc.stdout
    assert f"repaired {_chunks(proc.stdout)} chunks in bm25, 0 in dense" in proc.stdout
    assert _cited(data, "bm25")
    again = _chatops(["index", f"folder:{wiki}"], data)
    assert "repaired" not in again.stdout  # consistent now: nothing more to do


def test_deleted_qdrant_collection_is_refilled_by_sync(data: Path, wiki: Path) -> None:
    shutil.rmtree(data / "index" / "qdrant" / "collection" / "chunks")
    proc = _chatops(["sync"], data, CHATOPS_SOURCES=f"folder:{wiki}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = re.search(r"repaired 0 chunks in bm25, (\d+) in dense", proc.stdout)
    assert m and int(m.group(1)) > WIKI_PAGES, proc.stdout
    assert f"{WIKI_PAGES} unchanged" in proc.stdout
    assert _cited(data, "dense")


def test_damaged_qdrant_storage_stops_readers_and_sync_rebuilds_it(data: Path, wiki: Path) -> None:
    [storage] = (data / "index" / "qdrant").rglob("storage.sqlite")
    _garble(storage, 5000)
    _assert_usage_error(_chatops(["ask", QUESTION], data),
                        f"the vector index at {storage} is damaged (sqlite: file is not a database)")
    proc = _chatops(["sync"], data, CHATOPS_SOURCES=f"folder:{wiki}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "rebuilt the damaged dense" in proc.stdout and "in dense" in proc.stdout
    assert _cited(data, "dense")


def test_a_dense_collection_of_named_vectors_stops_readers_and_sync_rebuilds_it(data: Path, wiki: Path) -> None:
    """The embedded dense collection made again with a named vector (the shared index's layout, as another
    store would make it): readers exit 2 saying so (not an AttributeError's traceback), sync rebuilds it."""
    from qdrant_client import QdrantClient, models

    client = QdrantClient(path=str(data / "index" / "qdrant"))
    try:
        [collection] = [c.name for c in client.get_collections().collections]
        dim = client.get_collection(collection).config.params.vectors.size  # one unnamed vector: VectorParams
        client.delete_collection(collection)
        client.create_collection(collection, vectors_config={"dense": models.VectorParams(
            size=dim, distance=models.Distance.COSINE)})
    finally:
        client.close()
    _assert_usage_error(_chatops(["ask", QUESTION], data),
                        f"the Qdrant collection {collection!r} does not hold the one unnamed vector of the vector "
                        "index", "chatops index SOURCE")
    proc = _chatops(["sync"], data, CHATOPS_SOURCES=f"folder:{wiki}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "rebuilt the damaged dense" in proc.stdout and "in dense" in proc.stdout
    assert _cited(data, "dense")


def test_both_stores_deleted_pages_are_indexed_again(data: Path, wiki: Path) -> None:
    shutil.rmtree(data / "index" / "whoosh")
    shutil.rmtree(data / "index" / "qdrant")
    proc = _chatops(["index", f"folder:{wiki}"], data)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"{WIKI_PAGES} added" in proc.stdout
    assert f"{WIKI_PAGES} pages lost from both stores are indexed again" in proc.stdout
    assert _cited(data)


def _chunks(stdout: str) -> int:
    return int(re.search(r"index holds \d+ pages / (\d+) chunks", stdout).group(1))


# -- the embedding cache rebuilds itself ----------------------------------------------------------------

def test_damaged_embedding_cache_is_moved_aside_and_rebuilt(data: Path, tmp_path: Path) -> None:
    small = tmp_path / "small"
    shutil.copytree(WIKI / "it", small)
    cache = data / "cache" / "embeddings.sqlite"
    _garble(cache, 8000)
    proc = _chatops(["index", f"folder:{small}"], data)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "the embedding cache" in proc.stderr and "was damaged" in proc.stderr
    assert len(list(cache.parent.glob("embeddings.sqlite.corrupt-*"))) == 1
    con = sqlite3.connect(cache)
    try:
        assert con.execute("PRAGMA quick_check").fetchone() == ("ok",)
        assert con.execute("SELECT count(*) FROM embeddings").fetchone()[0] > 0  # refilled by the run
    finally:
        con.close()


def test_failing_cache_read_falls_back_to_computing(tmp_path: Path, embedder) -> None:
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite")
    cached = CachedEmbedder(embedder.inner, cache)
    first = cached.embed(["vacation days per year"])
    cache.close()  # drop pooled connections: the next read opens the file again
    _garble(tmp_path / "embeddings.sqlite", 8000)
    again = cached.embed(["vacation days per year", "expense report deadline"])
    assert again.shape == (2, embedder.dim)
    assert np.allclose(again[0], first[0], atol=1e-5)
    assert cached.computed == 3 and cached.cached == 0
    cache.close()


# -- a full disk ---------------------------------------------------------------------------------------

@pytest.fixture
def tmpfs(tmp_path: Path):
    """A tmpfs mounted in ``tmp_path/small`` (root only); yields ``(mount point, resize)``."""
    point = tmp_path / "small"
    point.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(point)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.strip() or proc.returncode}); needs root")

    def resize(kib: int) -> None:
        subprocess.run(["mount", "-o", f"remount,size={kib}k", str(point)], check=True)

    yield point, resize
    subprocess.run(["umount", "-l", str(point)], check=False)


def test_full_disk_exits_2_and_the_next_run_completes(tmpfs, pristine: tuple[Path, Path]) -> None:
    point, resize = tmpfs
    _, wiki = pristine
    cache = pristine[0] / "cache" / "embeddings.sqlite"
    resize(cache.stat().st_size // 1024 + 600)  # the cache fits, the index (about 900 KiB) does not
    data = point / "data"
    seed_embedding_cache(data, cache)
    proc = run_chatops(["index", f"folder:{wiki}"], data, cwd=point)
    _assert_usage_error(proc, "no space left to write", "free some disk space")
    resize(cache.stat().st_size // 1024 + 4096)
    proc = run_chatops(["index", f"folder:{wiki}"], data, cwd=point)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"index holds {WIKI_PAGES} pages" in proc.stdout
    assert _cited(data)


# -- serve: a damaged index gets a short reply and /readyz says why ------------------------------------

def test_serve_answers_unavailable_over_a_damaged_index(data: Path, tmp_path: Path) -> None:
    from tests.standins.slack import APP_TOKEN, BOT_TOKEN, BOT_USER_ID, SIGNING_SECRET, SlackSender, SlackStandin, manifest_scopes

    standin = SlackStandin(BOT_TOKEN, APP_TOKEN, manifest_scopes()).start()
    standin.add_user("UALICE01")
    standin.add_conversation("C0DAMAGE1")
    log_path = tmp_path / "serve.log"
    env = cli_environment(data, SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SIGNING_SECRET,
                          SLACK_API_URL=standin.api_url)
    with open(log_path, "w") as log:
        proc = subprocess.Popen([*chatops_command(), "serve", "--host", "127.0.0.1", "--port", "0", "--no-sync"],
                                cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        m = wait_for(lambda: re.search(r"serving on http://127\.0\.0\.1:(\d+)", log_path.read_text()), 90,
                     "the server to listen")
        url = f"http://127.0.0.1:{m.group(1)}"
        _garble(_segment(data))  # damaged while serving, before any query opened it
        msg = standin.user_message("C0DAMAGE1", "UALICE01", f"<@{BOT_USER_ID}> {QUESTION}")
        sender = SlackSender(url, SIGNING_SECRET)
        resp, _ = sender.event({"type": "app_mention", "user": "UALICE01", "text": msg["text"], "ts": msg["ts"],
                                "channel": "C0DAMAGE1", "event_ts": msg["ts"]})
        sender.close()
        assert resp.status_code == 200
        [post] = standin.wait_for(lambda s: s.answers("C0DAMAGE1", msg["ts"]), timeout=30)
        assert "knowledge index is unavailable" in post.params["text"]
        ready = httpx.get(url + "/readyz")
        assert ready.status_code == 503
        assert "the BM25 index" in ready.json()["checks"]["index"]["detail"]
        # the turn counts as an error in the metrics
        from prometheus_client.parser import text_string_to_metric_families

        errors = [s.value for f in text_string_to_metric_families(httpx.get(url + "/metrics").text) for s in f.samples
                  if s.name == "chatops_turns_total" and s.labels.get("outcome") == "error"]
        assert errors == [1.0]
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(30)
        standin.stop()
    output = log_path.read_text()
    assert code == 0, output[-3000:]
    assert output.count("the knowledge index is unavailable") == 1, output[-3000:]
    assert "Traceback" not in output, output[-3000:]


# -- reconciliation in-process: which pages a run may forget -------------------------------------------

def test_pages_lost_from_both_stores_are_forgotten_only_by_their_own_source(index_factory, tmp_path: Path) -> None:
    from connectors.folder import FolderSource
    from index.indexer import Indexer

    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(WIKI / "it", a)
    shutil.copytree(WIKI / "finance", b)
    index = index_factory()
    Indexer(index).run(FolderSource(a, name="a"))
    Indexer(index).run(FolderSource(b, name="b"))
    index.close()
    shutil.rmtree(tmp_path / "index" / "whoosh")
    shutil.rmtree(tmp_path / "index" / "qdrant")
    index = index_factory()
    rep = Indexer(index).run(FolderSource(a, name="a"))
    assert rep.repair.pages_forgotten and all(k.startswith("a:") for k in rep.repair.pages_forgotten)
    assert rep.added == len(rep.repair.pages_forgotten) and rep.unchanged == 0
    assert index.manifest.pages_of("b")  # b's pages wait for b's own run
    rep = Indexer(index).run(FolderSource(b, name="b"))
    assert rep.repair.pages_forgotten and all(k.startswith("b:") for k in rep.repair.pages_forgotten)
    assert rep.added == len(rep.repair.pages_forgotten)
    assert index.consistency().ok


def test_only_indexing_runs_read_the_whole_cache_on_open(tmp_path: Path, embedder) -> None:
    path = tmp_path / "embeddings.sqlite"
    cache = EmbeddingCache(path)
    CachedEmbedder(embedder.inner, cache).embed([f"passage number {i} about the office" for i in range(200)])
    cache.close()
    with open(path, "r+b") as f:  # damage pages past the header: still "a database" until they are read
        f.seek(path.stat().st_size // 2)
        f.write(np.random.default_rng(7).integers(0, 256, 8192, dtype=np.uint8).tobytes())
    reader = EmbeddingCache(path, verify=False)  # `chatops ask`: no full read at start-up
    assert not list(tmp_path.glob("embeddings.sqlite.corrupt-*"))
    reader.close()
    EmbeddingCache(path, verify=True).close()  # an indexing run checks the whole file and rebuilds it
    assert len(list(tmp_path.glob("embeddings.sqlite.corrupt-*"))) == 1


# -- every file of the data dir's layout (issue 24 item 4) ----------------------------------------------
#
#   index/manifest.sqlite                        the record of what the index holds
#   index/qdrant/meta.json                       local Qdrant's collection configuration (JSON)
#   index/qdrant/collection/chunks/storage.sqlite local Qdrant's points
#   index/whoosh/_MAIN_<n>.toc                   Whoosh's table of contents
#   index/whoosh/MAIN_<id>.seg                   a Whoosh segment
#   index/gate_calibration.json                  the gate's fitted thresholds (derived; readers fall back)
#   cache/embeddings.sqlite                      the embedding cache (rebuilds itself, tested above)
#   state.sqlite                                 the state store (not derived: restore or start anew)

def _layout_file(data: Path, which: str) -> Path:
    index = data / "index"
    return {"manifest": index / "manifest.sqlite", "qdrant meta": index / "qdrant" / "meta.json",
            "qdrant storage": index / "qdrant" / "collection" / "chunks" / "storage.sqlite",
            "whoosh toc": next((index / "whoosh").glob("_*.toc")), "whoosh segment": _segment(data)}[which]


@pytest.mark.parametrize("which, advice", [
    ("manifest", "chatops index --full SOURCE..."),
    ("qdrant meta", "run `chatops index SOURCE...` or `chatops sync`"),
    ("qdrant storage", "run `chatops index SOURCE...` or `chatops sync`"),
    ("whoosh toc", "run `chatops index SOURCE...` or `chatops sync`"),
    ("whoosh segment", "run `chatops index SOURCE...` or `chatops sync`"),
])
def test_each_damaged_index_file_is_named_and_index_full_repairs_it(data: Path, wiki: Path, which: str,
                                                                     advice: str) -> None:
    damaged = _layout_file(data, which)
    _garble(damaged, 3000)
    for args in (["ask", QUESTION], ["status"] if which == "manifest" else ["ask", "--retriever", "bm25", QUESTION]):
        proc = _chatops(args, data)
        _assert_usage_error(proc, f"at {damaged} is damaged", advice)
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr  # one line, no parser noise
    if which != "manifest":  # a store: any indexing run repairs it; the manifest needs a full run
        assert _chatops(["index", f"folder:{wiki}"], data).returncode == 0
        _garble(_layout_file(data, which), 3000)
    proc = _chatops(["index", "--full", f"folder:{wiki}"], data)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"index holds {WIKI_PAGES} pages" in proc.stdout
    assert "rebuilt the damaged" in proc.stdout
    assert list((data / "index").glob("*.corrupt-*"))  # the damaged copy is kept beside the rebuilt one
    assert _cited(data, "bm25") and _cited(data, "dense")


def test_damaged_qdrant_meta_json_is_repaired_by_sync_full(data: Path, wiki: Path) -> None:
    meta = data / "index" / "qdrant" / "meta.json"
    meta.write_text('{"collections": {"chunks": ', encoding="utf-8")  # cut off mid-write
    _assert_usage_error(_chatops(["ask", QUESTION], data), f"the vector index at {meta} is damaged")
    proc = _chatops(["sync", "--full"], data, CHATOPS_SOURCES=f"folder:{wiki}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _cited(data, "dense")


def test_damaged_manifest_is_repaired_by_sync_full(data: Path, wiki: Path) -> None:
    _garble(data / "index" / "manifest.sqlite", 5000)
    proc = _chatops(["sync", "--full"], data, CHATOPS_SOURCES=f"folder:{wiki}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(list((data / "index").glob("manifest.sqlite.corrupt-*"))) == 1
    assert _cited(data)


def test_damaged_gate_calibration_warns_naming_it_and_index_refits_it(data: Path, wiki: Path) -> None:
    calibration = data / "index" / "gate_calibration.json"
    _garble(calibration, 400)
    proc = _chatops(["ask", QUESTION], data)
    assert proc.returncode == 0, proc.stderr[-3000:]  # derived thresholds: the defaults answer meanwhile
    [warning] = [line for line in proc.stderr.splitlines() if "gate calibration" in line]
    assert str(calibration) in warning and "chatops calibrate" in warning
    proc = _chatops(["index", "--full", f"folder:{wiki}"], data)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "gate calibration:" in proc.stdout
    assert json.loads(calibration.read_text(encoding="utf-8"))["relevance_floor"] > 0


def test_damaged_state_database_names_the_file_and_what_to_do(data: Path) -> None:
    state = data / "state.sqlite"
    _garble(state, 5000)
    proc = _chatops(["status"], data)
    _assert_usage_error(proc, f"the state database {state} is damaged", "restore it from a backup",
                        f"mv {state} {state}.damaged")
    assert len(proc.stderr.strip().splitlines()) == 1
    state.rename(state.with_name("state.sqlite.damaged"))
    proc = _chatops(["status"], data)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"{WIKI_PAGES} pages" in proc.stdout or str(WIKI_PAGES) in proc.stdout
