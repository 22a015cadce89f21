"""Incremental, crash-consistent indexing (:mod:`index.indexer`, :mod:`index.knowledge`).

Real Whoosh and local-mode Qdrant indexes in ``tmp_path``, the real ONNX embedder behind the
session's embedding cache. Covers the counts of first runs, no-change re-runs, edits, additions
and deletions (chunks leave both stores); empty and undecodable pages; a page over the per-page
chunk cap (skipped with its reason, the rest written); a missing source folder;
and interrupted runs: a source failing mid-scan, a crash between the two store writes
(journal recovery on the next open), and a real ``chatops index`` process killed with SIGKILL.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from index.chunker import MAX_CHUNKS_PER_PAGE, Chunker
from connectors.errors import SourceUnavailableError
from connectors.folder import FolderSource
from index.knowledge import KnowledgeIndex
from index.indexer import Indexer, IndexReport
from core.access import Access
from core.models import Document
from tools.knowledge_search import KnowledgeSearch, KnowledgeSearchArgs

from tests.helpers import WIKI, WIKI_PAGES, chatops_command, cli_environment, public_ctx

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast


def _run(index: KnowledgeIndex, wiki: Path, **kw) -> IndexReport:
    return Indexer(index, **kw).run(FolderSource(wiki))


def _page_chunk_ids(index: KnowledgeIndex, doc_id: str, source: str = "wiki") -> tuple[str, ...]:
    return index.manifest.pages_of(source)[doc_id].chunk_ids


def _assert_consistent(index: KnowledgeIndex) -> None:
    report = index.consistency()
    assert report.ok, (f"keyword-only {sorted(report.keyword - report.manifest)[:5]}, "
                       f"dense-only {sorted(report.dense - report.manifest)[:5]}, "
                       f"manifest-only {sorted(report.manifest - report.keyword - report.dense)[:5]}")


@pytest.fixture
def indexed(wiki_copy: Path, index_factory) -> tuple[KnowledgeIndex, Path, IndexReport]:
    """A wiki copy indexed once into a fresh index: ``(index, wiki, first report)``."""
    index = index_factory()
    report = _run(index, wiki_copy)
    return index, wiki_copy, report


# -- counts -----------------------------------------------------------------------------------------

def test_first_run_adds_every_page(indexed) -> None:
    index, _, rep = indexed
    assert (rep.added, rep.updated, rep.deleted, rep.unchanged, rep.skipped) == (WIKI_PAGES, 0, 0, 0, 0)
    assert rep.errors == []
    stats = index.stats()
    assert stats["pages"] == WIKI_PAGES
    assert rep.chunks_written == stats["chunks"] > WIKI_PAGES
    assert rep.embedded + rep.embeddings_cached == rep.chunks_written
    assert len(index.keyword.chunk_ids()) == len(index.dense.chunk_ids()) == stats["chunks"]
    _assert_consistent(index)
    assert index.version >= 1


def test_rerun_without_changes_touches_nothing(indexed, embedder) -> None:
    index, wiki, _ = indexed
    version = index.version
    computed = embedder.computed
    rep = _run(index, wiki)
    assert (rep.added, rep.updated, rep.deleted, rep.unchanged, rep.skipped) == (0, 0, 0, WIKI_PAGES, 0)
    assert rep.chunks_written == 0 and rep.chunks_deleted == 0
    assert rep.embedded == 0 and rep.embeddings_cached == 0
    assert embedder.computed == computed
    assert index.version == version
    _assert_consistent(index)


def test_editing_one_page_updates_only_that_page(indexed, embedder) -> None:
    index, wiki, _ = indexed
    doc_id = "finance/travel-and-expenses.md"
    old_ids = set(_page_chunk_ids(index, doc_id))
    other_ids = set(index.keyword.chunk_ids()) - old_ids
    page = wiki / doc_id
    marker = f"Receipts are kept for seven years (audit note {uuid.uuid4().hex})."
    text = page.read_text(encoding="utf-8")
    anchor = "## Company cards\n\n"
    assert anchor in text
    page.write_text(text.replace(anchor, anchor + marker + " "), encoding="utf-8")

    computed = embedder.computed
    rep = _run(index, wiki)

    assert (rep.added, rep.updated, rep.deleted, rep.unchanged) == (0, 1, 0, WIKI_PAGES - 1)
    new_ids = set(_page_chunk_ids(index, doc_id))
    changed = new_ids - old_ids
    assert changed, "the edited section must get a new chunk id"
    assert new_ids & old_ids, "the page's other sections keep their chunk ids"
    # Only the new chunks of that page were embedded; everything else came from the cache or was untouched.
    assert rep.embedded == embedder.computed - computed == len(changed)
    assert rep.chunks_written == len(new_ids)
    assert rep.chunks_deleted == len(old_ids)
    whoosh_ids, qdrant_ids = index.keyword.chunk_ids(), index.dense.chunk_ids()
    assert other_ids <= whoosh_ids and other_ids <= qdrant_ids
    assert not (old_ids - new_ids) & (whoosh_ids | qdrant_ids), "stale chunks of the old version remain"
    assert any(marker in index.dense.get(cid).text for cid in changed)
    _assert_consistent(index)


def test_adding_a_page_adds_one(indexed) -> None:
    index, wiki, _ = indexed
    (wiki / "people" / "wellness.md").write_text(
        "---\ntitle: Wellness budget\n---\n\n# Wellness budget\n\n"
        f"Everyone gets $60 a month for gym, yoga or therapy apps (ref {uuid.uuid4().hex}).\n", encoding="utf-8")
    rep = _run(index, wiki)
    assert (rep.added, rep.updated, rep.deleted, rep.unchanged) == (1, 0, 0, WIKI_PAGES)
    ids = set(_page_chunk_ids(index, "people/wellness.md"))
    assert ids and ids <= index.keyword.chunk_ids() and ids <= index.dense.chunk_ids()
    assert index.stats()["pages"] == WIKI_PAGES + 1
    _assert_consistent(index)


def test_deleting_a_page_removes_its_chunks_from_both_stores(indexed) -> None:
    index, wiki, _ = indexed
    doc_id = "people/parental-leave.md"
    ids = set(_page_chunk_ids(index, doc_id))
    assert ids <= index.keyword.chunk_ids() and ids <= index.dense.chunk_ids()
    (wiki / doc_id).unlink()

    rep = _run(index, wiki)

    assert (rep.added, rep.updated, rep.deleted, rep.unchanged) == (0, 0, 1, WIKI_PAGES - 1)
    assert rep.chunks_deleted == len(ids)
    assert doc_id not in index.manifest.pages_of("wiki")
    assert ids.isdisjoint(index.keyword.chunk_ids())
    assert ids.isdisjoint(index.dense.chunk_ids())
    _assert_consistent(index)
    # Search no longer shows the page.
    result = KnowledgeSearch(index).run(KnowledgeSearchArgs(query="how many weeks of parental leave", k=10), public_ctx())
    assert result.evidence and all(e.chunk.doc_id != doc_id for e in result.evidence)


def test_empty_markdown_file_yields_no_chunks(indexed) -> None:
    index, wiki, _ = indexed
    (wiki / "company" / "empty.md").write_bytes(b"")
    (wiki / "company" / "only-front-matter.md").write_text("---\ntitle: Placeholder\n---\n", encoding="utf-8")
    rep = _run(index, wiki)
    assert rep.added == 2 and rep.skipped == 0 and rep.errors == []
    assert rep.chunks_written == 0
    assert _page_chunk_ids(index, "company/empty.md") == ()
    assert _page_chunk_ids(index, "company/only-front-matter.md") == ()
    _assert_consistent(index)
    again = _run(index, wiki)
    assert again.unchanged == WIKI_PAGES + 2 and again.added == 0


def test_undecodable_page_is_skipped_and_its_chunks_are_kept(indexed) -> None:
    index, wiki, _ = indexed
    doc_id = "it/security.md"
    ids = set(_page_chunk_ids(index, doc_id))
    (wiki / doc_id).write_bytes((wiki / doc_id).read_bytes() + b"\n\nBroken export: \xff\xfe\xfa\n")

    rep = _run(index, wiki)

    assert rep.skipped == 1
    assert rep.deleted == 0 and rep.updated == 0 and rep.unchanged == WIKI_PAGES - 1
    assert len(rep.errors) == 1 and rep.errors[0].startswith(doc_id) and "UnicodeDecodeError" in rep.errors[0]
    assert set(_page_chunk_ids(index, doc_id)) == ids
    assert ids <= index.keyword.chunk_ids() and ids <= index.dense.chunk_ids()
    _assert_consistent(index)


def test_a_page_over_the_chunk_cap_is_skipped_with_its_reason_and_the_rest_is_written(indexed) -> None:
    index, wiki, _ = indexed
    # 2,500 areas, each one chunk with its room, no run of siblings to pack: over MAX_CHUNKS_PER_PAGE
    (wiki / "huge.md").write_text("".join(f"# Area {i}\n\nx\n\n## Room {i}\n\ny\n\n" for i in range(2500)),
                                  encoding="utf-8")
    (wiki / "desks.md").write_text("# Desks\n\nHot desks are booked in the office app.\n", encoding="utf-8")

    rep = _run(index, wiki)

    assert (rep.added, rep.skipped, rep.unchanged) == (1, 1, WIKI_PAGES)
    assert rep.errors == ["huge.md: ChunkLimitError: the page would make 2500 chunks, over the limit of "
                          f"{MAX_CHUNKS_PER_PAGE} per page; split it into smaller pages"], rep.errors
    assert rep.failed_pages == ["huge.md"]
    assert "huge.md" not in index.manifest.pages_of("wiki") and "desks.md" in index.manifest.pages_of("wiki")
    _assert_consistent(index)


def test_missing_source_folder_raises_and_deletes_nothing(indexed) -> None:
    index, wiki, _ = indexed
    before = index.consistency()
    with pytest.raises(SourceUnavailableError):
        _run(index, wiki.parent / "moved-away")
    assert index.stats()["pages"] == WIKI_PAGES
    assert index.consistency() == before


# -- interrupted runs -------------------------------------------------------------------------------

class FailingSource:
    """A source whose listing dies half-way, like an HTTP API returning 500 mid-sync."""

    complete_listing = True

    def __init__(self, name: str, docs: list[Document]) -> None:
        self.name = name
        self.docs = docs
        self.yielded = 0

    def scan(self) -> Iterator[Document]:
        for doc in self.docs:
            self.yielded += 1
            yield doc
        raise RuntimeError("HTTP 500 mid-sync")


def _new_doc(wiki_root: Path, n: int) -> Document:
    return Document(source="wiki", doc_id=f"synced/page-{n}.md", title=f"Synced page {n}",
                    url=(wiki_root / f"synced/page-{n}.md").as_uri(),
                    text=f"# Synced page {n}\n\nThis page arrived from the remote wiki, item {n} of the sync.",
                    access=Access.everyone())


def test_source_failing_mid_scan_keeps_index_consistent_and_prunes_nothing(indexed) -> None:
    index, wiki, _ = indexed
    before_pages = set(index.manifest.pages_of("wiki"))
    before_ids = index.consistency().manifest
    docs = [_new_doc(wiki, n) for n in range(5)]
    source = FailingSource("wiki", docs)

    with pytest.raises(RuntimeError, match="HTTP 500 mid-sync"):
        Indexer(index, batch_pages=2).run(source)

    assert source.yielded == len(docs)
    _assert_consistent(index)
    pages = set(index.manifest.pages_of("wiki"))
    # complete_listing=True, but the scan never finished: none of the wiki pages was pruned.
    assert before_pages <= pages
    assert before_ids <= index.consistency().manifest
    # Pages written in full batches before the failure are in both stores.
    written = pages - before_pages
    assert written <= {d.doc_id for d in docs}
    assert len(written) >= 2
    for doc_id in written:
        ids = set(_page_chunk_ids(index, doc_id))
        assert ids and ids <= index.keyword.chunk_ids() and ids <= index.dense.chunk_ids()


def test_crash_between_the_two_store_writes_is_recovered_on_open(indexed, index_factory, embedder) -> None:
    index, wiki, _ = indexed
    page = wiki / "engineering" / "code-review.md"
    page.write_text("---\ntitle: Code review\n---\n\n# Code review\n\nEvery pull request needs one approving "
                    "review from a code owner before it is merged. Reviewers answer within one business day.\n",
                    encoding="utf-8")
    doc = next(d for d in FolderSource(wiki).scan() if d.doc_id == "engineering/code-review.md")
    chunks = Chunker().chunk(doc)
    key = f"wiki:{doc.doc_id}"
    assert chunks

    # What Indexer._write does, stopped after the Whoosh commit and before Qdrant.
    index.manifest.begin([key])
    index.keyword.replace([key], chunks)
    half_written = {c.chunk_id for c in chunks}
    assert half_written <= index.keyword.chunk_ids()
    assert half_written.isdisjoint(index.dense.chunk_ids())
    index.close()

    reopened = index_factory(index.path)  # runs journal recovery
    assert reopened.manifest.pending() == []
    _assert_consistent(reopened)
    assert half_written.isdisjoint(reopened.keyword.chunk_ids())
    assert reopened.stats()["pages"] == WIKI_PAGES

    rep = Indexer(reopened).run(FolderSource(wiki))
    assert rep.added == 1 and rep.unchanged == WIKI_PAGES
    ids = set(_page_chunk_ids(reopened, doc.doc_id))
    assert ids == half_written
    assert ids <= reopened.keyword.chunk_ids() and ids <= reopened.dense.chunk_ids()
    _assert_consistent(reopened)


# -- a real process killed mid-run ------------------------------------------------------------------

COPIES = 8  # 8 x 13 = 104 pages


def _make_big_wiki(dest: Path) -> int:
    """~100 distinct short pages: every example page, truncated, under ``copy0/`` .. ``copy7/``."""
    originals = [d for d in FolderSource(WIKI).scan() if isinstance(d, Document)]
    n = 0
    for i in range(COPIES):
        for doc in originals:
            paras, body = doc.text.split("\n\n"), []
            for p in paras:
                if sum(len(b) for b in body) > 350:
                    break
                body.append(p)
            stem = doc.doc_id.rsplit(".", 1)[0]
            page = dest / f"copy{i}" / f"{stem}.md"
            page.parent.mkdir(parents=True, exist_ok=True)
            page.write_text(f"---\ntitle: {json.dumps(f'{doc.title} (copy {i})')}\n---\n\n" + "\n\n".join(body)
                            + f"\n\nThis is copy {i} of {doc.doc_id}, kept for the interruption test.\n",
                            encoding="utf-8")
            n += 1
    return n


def _manifest_rows(path: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=0.5)
    except sqlite3.OperationalError:
        return 0
    try:
        return con.execute("SELECT count(*) FROM pages").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet, or locked by the writer
        return 0
    finally:
        con.close()


def test_killed_indexing_process_leaves_a_consistent_index(tmp_path: Path, embedder) -> None:
    big = tmp_path / "big-wiki"
    total = _make_big_wiki(big)
    assert total >= 100
    data = tmp_path / "data"  # fresh: no embedding cache, so the process really computes vectors
    manifest = data / "index" / "manifest.sqlite"
    proc = subprocess.Popen([*chatops_command(), "index", f"folder:{big}"], cwd=tmp_path,
                            env=cli_environment(data), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        rows = 0
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            if manifest.exists():
                rows = _manifest_rows(manifest)
                if rows:
                    break
            time.sleep(0.02)
        assert proc.poll() is None, f"indexing ended before it could be killed: {proc.communicate()}"
        assert rows >= 1, "no page was committed within 60 s"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL

    index = KnowledgeIndex(data / "index", embedder)
    try:
        _assert_consistent(index)
        pages_after_kill = index.stats()["pages"]
        assert 1 <= pages_after_kill < total, "the kill must have interrupted the run"

        rep = Indexer(index).run(FolderSource(big))
        assert rep.added == total - pages_after_kill
        assert rep.unchanged == pages_after_kill
        assert rep.deleted == 0 and rep.skipped == 0
        assert index.stats()["pages"] == total
        _assert_consistent(index)
        docs = {p.relative_to(big).as_posix() for p in big.rglob("*.md")}
        assert set(index.manifest.pages_of("big-wiki")) == docs
    finally:
        index.close()
