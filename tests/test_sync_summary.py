"""``SyncSummary``: the run summary's JSON keys (what ``chatops sync --json`` and ``status --json`` show)
stay those of the dicts it replaced, and rows written before (missing keys, an old ``chatops index``
row's IndexReport keys, odd values) read back with defaults instead of failing."""

from __future__ import annotations

import json
from pathlib import Path

from app.jobs import JobResult, RunLog, format_result
from index.indexer import IndexReport
from index.summary import SyncSummary
from state import StateStore
from state.store import sqlite_url

#: The keys of the summary dict the sync engine recorded before SyncSummary, in order.
KEYS = ["mode", "added", "updated", "deleted", "unchanged", "skipped", "errors", "seconds", "calls", "retries",
        "fetched", "listed", "pages", "chunks_written", "chunks_deleted", "embedded", "repaired"]


def test_as_dict_has_the_summary_keys_and_round_trips() -> None:
    s = SyncSummary(mode="incremental", added=2, updated=1, deleted=3, unchanged=7, skipped=1,
                    errors=["page/9: boom"], seconds=1.25, calls=14, retries=2, fetched=3, listed=10, pages=10,
                    chunks_written=12, chunks_deleted=4, embedded=5, repaired="repaired 1 chunks in bm25, 0 in dense")
    d = s.as_dict()
    assert list(d) == KEYS
    assert SyncSummary.from_dict(json.loads(json.dumps(d))) == s
    d["errors"].append("not shared")
    assert s.errors == ["page/9: boom"]


def test_from_dict_is_tolerant_of_old_and_odd_rows() -> None:
    assert SyncSummary.from_dict({}) == SyncSummary() == SyncSummary.from_dict(None)
    old_index_row = {"source": "handbook", "added": 13, "updated": 0, "deleted": 0, "unchanged": 0, "skipped": 1,
                     "chunks_written": 107, "embeddings_cached": 90, "seconds": 2.5, "errors": ["a.md: bad"],
                     "failed_pages": [], "repair": {"bm25_added": 0}, "mode": "index"}
    s = SyncSummary.from_dict(old_index_row)
    assert (s.mode, s.added, s.skipped, s.chunks_written, s.seconds, s.errors) == ("index", 13, 1, 107, 2.5, ["a.md: bad"])
    assert SyncSummary.from_dict({"added": "x", "errors": 3, "listed": None, "seconds": "1.5"}) == \
        SyncSummary(seconds=1.5)


def test_the_cli_line_reads_the_summary() -> None:
    s = SyncSummary(mode="full", added=3, unchanged=120, errors=["p: x"], seconds=2.314, calls=14)
    line = format_result(JobResult("eng", "ok", s))
    assert line == ("eng: ok, 3 added, 0 updated, 0 deleted, 120 unchanged, 0 skipped, 1 errors in 2.31 s "
                    "(14 calls)\n  - p: x")
    assert format_result(JobResult("eng", "busy", None, "held")) == "eng: busy: held"
    assert JobResult("eng", "unknown", None, "no").as_dict()["summary"] == {}


def test_an_index_run_is_recorded_as_a_summary_of_mode_index(tmp_path: Path) -> None:
    store = StateStore(sqlite_url(tmp_path / "state.sqlite"))
    try:
        with RunLog(store, "i1").run("handbook") as record:
            record(IndexReport(source="handbook", added=12, unchanged=1, skipped=1, seconds=0.5,
                               errors=["a.md: bad"]), pages=13)
        [run] = store.last_runs("handbook")
        assert run.status == "ok" and run.error == "a.md: bad" and list(run.summary) == KEYS
        s = SyncSummary.from_dict(run.summary)
        assert (s.mode, s.added, s.unchanged, s.skipped, s.pages, s.fetched) == ("index", 12, 1, 1, 13, 13)
    finally:
        store.close()
