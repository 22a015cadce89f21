"""``chatops ask`` loads only what a question needs (issue 24 item 12), and answers the same.

Real ``chatops`` processes (``python -X importtime -m bot.cli``: the modules each imported are read from its
import log) over a real index of the example wiki:

- no chat platform SDK (Slack, Teams, aiohttp), no OpenAI or Google client, and no ``qdrant-client``: the
  dense store is answered from its snapshot (``index/stores/dense_snapshot.py``), which ``chatops index``
  leaves when it closes the store;
- the ONNX model (``onnxruntime``) only for a question whose vector the embedding cache does not hold;
- a missing, damaged or out-of-date snapshot is not used: the process opens local-mode Qdrant as before, gives
  the same answer and leaves a current snapshot for the next one.

In-process, on an index with a restricted page: searches from the snapshot are the store's own, for every
viewer (the access pre-filter holds), and a reader holding the snapshot keeps Qdrant's one-process lock; a process
that opens the index again (the ask worker) reuses the snapshot's checked rows until the store changes.
No timings are asserted (``bench/ask_latency.py`` measures them).
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT, cli_environment, run_chatops, indexed_data_dir, seed_embedding_cache

from core.access import Access, Viewer, group, user
from core.errors import IndexLockedError
from connectors.folder import FolderSource
from core.models import content_hash
from index.indexer import Indexer
from index.knowledge import KnowledgeIndex
from index.stores.dense_snapshot import snapshot_file
from tools.context import ToolContext
from tools.knowledge_search import KnowledgeSearch, KnowledgeSearchArgs

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

QUESTION = "how do I declare an incident?"
NOT_FOR_ASKING = ("slack_bolt", "slack_sdk", "botbuilder", "botframework", "aiohttp", "openai", "googleapiclient",
                  "qdrant_client")
IMPORT_LINE = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)\s*$")


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, wiki_index, embedding_cache_dir: Path,
            session_wiki: Path) -> Path:
    """A data dir indexed once by ``chatops index`` (with the session's embedding cache)."""
    return indexed_data_dir(tmp_path_factory.mktemp("ask-loading") / "data", embedding_cache_dir / "embeddings.sqlite",
                            f"folder:{session_wiki}")


@pytest.fixture
def data(indexed: Path, tmp_path: Path) -> Path:
    """A copy of the indexed data dir for one test (they move and damage files)."""
    return Path(shutil.copytree(indexed, tmp_path / "data"))


def _snapshot(data: Path) -> Path:
    return snapshot_file(data / "index" / "qdrant", "chunks")


def _ask(data: Path, question: str = QUESTION) -> tuple[dict, set[str]]:
    """``chatops ask --json QUESTION`` as a real process: its answer and the modules it imported."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "bot.cli", "ask", "--json", question],
                          cwd=data.parent, env=cli_environment(data), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    modules = {m.group(1) for line in proc.stderr.splitlines() if (m := IMPORT_LINE.match(line))}
    assert modules, proc.stderr[-2000:]
    return json.loads(proc.stdout), modules


def _tops(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def _answer(reply: dict) -> tuple:
    """What a reader sees: the text and the cited pages and sections."""
    return reply["text"], reply["refused"], [(c["n"], c["chunk_id"], c["doc_id"], c["section"], c["url"], c["quote"])
                                             for c in reply["citations"]]


def test_the_index_run_leaves_a_snapshot_and_ask_loads_no_platform_sdk_nor_qdrant_client(data: Path) -> None:
    assert _snapshot(data).is_file()
    # The data dir's embedding cache is a copy of the session's, which may hold this question's vector (a
    # persistent CHATOPS_TEST_CACHE, or an in-process test that asked it): this process must compute it.
    con = sqlite3.connect(data / "cache" / "embeddings.sqlite")
    with con:
        con.execute("DELETE FROM embeddings WHERE text_hash = ?", (content_hash(QUESTION),))
    con.close()
    reply, modules = _ask(data)
    assert reply["citations"] and "incident" in reply["text"].lower()
    assert not _tops(modules) & set(NOT_FOR_ASKING), sorted(_tops(modules) & set(NOT_FOR_ASKING))
    assert "onnxruntime" in _tops(modules)  # a first question: its vector is computed
    again, modules = _ask(data)
    assert _answer(again) == _answer(reply)
    assert not _tops(modules) & {"onnxruntime", "tokenizers", *NOT_FOR_ASKING}  # cached vector: no model loaded


@pytest.mark.parametrize("damage", ["missing", "garbled", "not a database", "another store"])
def test_a_snapshot_that_is_not_current_is_not_used_and_is_written_again(data: Path, damage: str) -> None:
    reference, _ = _ask(data)
    snap = _snapshot(data)
    if damage == "missing":
        snap.unlink()
    elif damage == "garbled":  # pages past the header: still opens as a database
        raw = bytearray(snap.read_bytes())
        for i in range(len(raw) // 2, min(len(raw), len(raw) // 2 + 4096)):
            raw[i] ^= 0x5A
        snap.write_bytes(bytes(raw))
    elif damage == "not a database":
        snap.write_bytes(b"this is not an SQLite file" * 100)
    else:  # a well-formed snapshot, but of the store as it was: Qdrant's meta.json was written since
        meta = data / "index" / "qdrant" / "meta.json"
        meta.write_text(json.dumps(json.loads(meta.read_text(encoding="utf-8")), indent=1), encoding="utf-8")
    reply, modules = _ask(data)
    assert _answer(reply) == _answer(reference)
    assert "qdrant_client" in _tops(modules)  # answered by local-mode Qdrant, as before snapshots
    reply, modules = _ask(data)
    assert _answer(reply) == _answer(reference)
    assert "qdrant_client" not in _tops(modules)  # the fallback left a current snapshot


def test_a_snapshot_from_before_a_write_is_not_used(tmp_path: Path, wiki_index, embedding_cache_dir: Path) -> None:
    wiki = Path(shutil.copytree(ROOT / "examples" / "wiki", tmp_path / "wiki"))
    data = seed_embedding_cache(tmp_path / "data", embedding_cache_dir / "embeddings.sqlite")
    assert run_chatops(["index", f"folder:{wiki}"], data, cwd=tmp_path).returncode == 0
    old = _snapshot(data).read_bytes()
    (wiki / "people" / "bike-storage.md").write_text(
        "# Bike storage\n\nBikes are kept in the Quokkafrost room on level minus two; the door code is at reception.\n",
        encoding="utf-8")
    assert run_chatops(["index", f"folder:{wiki}"], data, cwd=tmp_path).returncode == 0
    assert _snapshot(data).read_bytes() != old  # the index run wrote a new one
    _snapshot(data).write_bytes(old)  # put the old one back: its digest is of the store before the run
    reply, modules = _ask(data, "where do I keep my bike?")
    assert "qdrant_client" in _tops(modules)
    assert any(c["doc_id"] == "people/bike-storage.md" for c in reply["citations"]), reply


# -- in-process: the snapshot's searches are the store's, for every viewer ---------------------------------

PAGE = "people/compensation-bands.md"
BODY = ("# Compensation bands\n\n## The Zanzibar band\n\nThe Zanzibar salary band for staff engineers pays between "
        "91,000 and 118,000 euros a year.\n")
READER = Viewer.person([user("hana@example.com"), group("handbook", "hr")])
VIEWERS = {"public": Viewer.public(), "colleague": Viewer.person([user("olga@example.com"), group("handbook", "it")]),
           "reader": READER, "reader-in-a-channel": Viewer(READER.principals, public_only=True, audience="channel")}


class _Restricting(FolderSource):
    def _read(self, path, doc_id):
        doc = super()._read(path, doc_id)
        return dataclasses.replace(doc, access=Access.only([group("handbook", "hr")])) if doc_id == PAGE else doc


def _results(index: KnowledgeIndex, viewer: Viewer, retriever: str) -> list:
    res = KnowledgeSearch(index).run(KnowledgeSearchArgs(query="what does the Zanzibar band pay?", k=10,
                                                         retriever=retriever), ToolContext(viewer=viewer))
    return [(e.chunk.chunk_id, e.chunk.text, round(e.score, 6), e.ranks) for e in res.evidence]


def test_searches_from_the_snapshot_are_the_stores_own_for_every_viewer(tmp_path: Path, wiki_copy: Path,
                                                                        embedder) -> None:
    (wiki_copy / PAGE).write_text(BODY, encoding="utf-8")
    path = tmp_path / "index"
    writer = KnowledgeIndex(path, embedder, repair=True)
    Indexer(writer).run(_Restricting(wiki_copy, name="handbook"))
    secret = set(writer.manifest.pages_of("handbook")[PAGE].chunk_ids)
    writer.close()
    reader = KnowledgeIndex(path, embedder)
    try:
        assert reader.dense.from_snapshot
        from_snapshot = {(v, r): _results(reader, viewer, r) for v, viewer in VIEWERS.items()
                         for r in ("hybrid", "dense")}
        assert reader.dense.from_snapshot  # reads never left the snapshot
        assert reader.dense.count == len(reader.dense.chunk_ids()) > 0
    finally:
        reader.close()
    for (name, retriever), got in from_snapshot.items():
        leaked = {cid for cid, *_ in got} & secret
        assert bool(leaked) == (name == "reader"), (name, retriever)
    snapshot_file(path / "qdrant", "chunks").unlink()
    reader = KnowledgeIndex(path, embedder)
    try:
        assert not reader.dense.from_snapshot  # local-mode Qdrant itself
        assert {(v, r): _results(reader, viewer, r) for v, viewer in VIEWERS.items()
                for r in ("hybrid", "dense")} == from_snapshot
    finally:
        reader.close()


def test_a_process_reading_the_same_snapshot_again_reuses_its_rows_until_the_store_changes(
        tmp_path: Path, wiki_copy: Path, embedder) -> None:
    """The ask worker opens the index for every question: the snapshot's rows are read and checked once while the store
    and the snapshot are unchanged (0.45-0.6 s on a 10k-chunk handbook), and read again after a write."""
    path = tmp_path / "index"
    writer = KnowledgeIndex(path, embedder, repair=True)
    Indexer(writer).run(FolderSource(wiki_copy, name="handbook"))
    writer.close()
    mirrors = []
    for _ in range(2):
        reader = KnowledgeIndex(path, embedder)
        try:
            assert reader.dense.from_snapshot
            mirrors.append(reader.dense._snap.mirror)
            before = _results(reader, Viewer.public(), "dense")
        finally:
            reader.close()
    assert mirrors[0] is mirrors[1]
    (wiki_copy / PAGE).write_text(BODY, encoding="utf-8")
    writer = KnowledgeIndex(path, embedder, repair=True)
    Indexer(writer).run(FolderSource(wiki_copy, name="handbook"))
    writer.close()
    reader = KnowledgeIndex(path, embedder)
    try:
        assert reader.dense.from_snapshot and reader.dense._snap.mirror is not mirrors[0]
        after = _results(reader, Viewer.public(), "dense")
    finally:
        reader.close()
    assert "Zanzibar" not in " ".join(text for _, text, *_ in before)
    assert "Zanzibar" in " ".join(text for _, text, *_ in after)


def test_a_reader_on_the_snapshot_holds_the_folder_lock_like_local_qdrant(tmp_path: Path, wiki_copy: Path,
                                                                          embedder) -> None:
    path = tmp_path / "index"
    writer = KnowledgeIndex(path, embedder, repair=True)
    Indexer(writer).run(FolderSource(wiki_copy, name="handbook"))
    writer.close()
    reader = KnowledgeIndex(path, embedder)
    try:
        assert reader.dense.from_snapshot
        with pytest.raises(IndexLockedError, match="open in another process"):
            KnowledgeIndex(path, embedder)
    finally:
        reader.close()
    KnowledgeIndex(path, embedder).close()  # released on close


def test_ask_loads_the_model_without_optimising_its_graph_and_its_vectors_are_the_optimised_models(
        data: Path) -> None:
    """A new question loads the model not optimised (about 0.3-0.7 s sooner; ``bench/ask_latency.py``): the vector
    the ``chatops ask`` process computed and cached is the one the optimised model (indexing, the server) gives."""
    import numpy as np

    from index.embeddings import OnnxMiniLMEmbedder

    question = "who signs off a laptop upgrade for a new joiner?"
    con = sqlite3.connect(data / "cache" / "embeddings.sqlite")
    with con:
        con.execute("DELETE FROM embeddings WHERE text_hash = ?", (content_hash(question),))
    con.close()
    _, modules = _ask(data, question)
    assert "onnxruntime" in _tops(modules)
    con = sqlite3.connect(data / "cache" / "embeddings.sqlite")
    (blob,) = con.execute("SELECT vector FROM embeddings WHERE text_hash = ?", (content_hash(question),)).fetchone()
    con.close()
    cached = np.frombuffer(blob, dtype=np.float32)
    optimised = OnnxMiniLMEmbedder().embed([question])[0]
    assert float(cached @ optimised) > 0.99999 and not np.array_equal(cached, np.zeros_like(cached))
