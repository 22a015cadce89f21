"""The gate's calibration on the user's own corpus (:mod:`agent.calibration`), on real indexes of examples/wiki.

Probes come from the index itself; near-miss probes swap in nouns the index's vocabulary lacks. ``chatops
index`` fits and stores the calibration with the index, ``chatops status`` shows it, ``chatops calibrate``
refits it, and the agent's gate loads it (defaults when absent or unreadable).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agent.calibration import (CALIBRATION_FILE, absent_nouns, calibrate, gate_config, load_calibration,
                               make_probes, save_calibration)
from agent.gate import GateConfig
from app.settings import Settings
from app.wiring import build_agent
from connectors.folder import FolderSource
from index.indexer import Indexer
from tools.knowledge_search import KnowledgeSearch

from tests.helpers import WIKI, run_chatops, seed_embedding_cache

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast


def test_near_miss_probes_swap_in_terms_the_vocabulary_lacks(wiki_index) -> None:
    search = KnowledgeSearch(wiki_index)
    nouns = absent_nouns(search)
    assert nouns
    assert all(search.index.keyword.doc_frequency(t) == 0 for n in nouns for t in search.analyze(n))
    probes = make_probes(search, n=10)
    near = [p for p in probes if p.kind == "near_miss"]
    answerable = {p.chunk_id: p.question for p in probes if p.kind == "answerable"}
    assert len(answerable) == 10 and len(near) == 10
    for p in near:
        assert p.question != answerable[p.chunk_id] and any(n in p.question for n in nouns)


def test_calibration_is_fitted_stored_and_loaded_by_the_gate(index_factory, wiki_copy) -> None:
    index = index_factory()
    Indexer(index).run(FolderSource(wiki_copy))
    record = calibrate(KnowledgeSearch(index), n=30)
    assert record["probes"]["answerable"] >= 10 and record["probes"]["near_miss"] >= 10
    assert 0.25 <= record["relevance_floor"] <= GateConfig().relevance_floor
    assert 0 <= record["paraphrase_margin"] <= GateConfig().paraphrase_margin
    path = save_calibration(index.path, record)
    assert path.name == CALIBRATION_FILE and load_calibration(index.path) == record
    cfg = gate_config(GateConfig(), record)
    assert cfg.calibrated == record["created"] and cfg.paraphrase_margin == record["paraphrase_margin"]
    rt = build_agent(Settings(chatops_data_dir=index.path.parent), index=index)
    assert rt.agent.planner.gate.config.calibrated == record["created"]


def test_a_damaged_calibration_file_falls_back_to_the_defaults(tmp_path: Path) -> None:
    (tmp_path / CALIBRATION_FILE).write_text("{not json", encoding="utf-8")
    assert load_calibration(tmp_path) is None
    assert gate_config(GateConfig(), load_calibration(tmp_path)) == GateConfig()


def test_index_calibrates_status_shows_it_and_calibrate_refits(tmp_path: Path, embedding_cache_dir: Path,
                                                               wiki_index) -> None:
    data = seed_embedding_cache(tmp_path / "data", embedding_cache_dir / "embeddings.sqlite")
    wiki = tmp_path / "wiki"
    shutil.copytree(WIKI, wiki)
    before = run_chatops(["status"], data, cwd=tmp_path, CHATOPS_SOURCES=f"folder:{wiki}?name=wiki")
    assert before.returncode == 0, before.stderr
    assert "gate calibration: none" in before.stdout
    idx = run_chatops(["index", f"folder:{wiki}?name=wiki"], data, cwd=tmp_path)
    assert idx.returncode == 0, idx.stderr
    assert "gate calibration:" in idx.stdout
    stored = json.loads((data / "index" / CALIBRATION_FILE).read_text(encoding="utf-8"))
    status = run_chatops(["status"], data, cwd=tmp_path, CHATOPS_SOURCES=f"folder:{wiki}?name=wiki")
    assert status.returncode == 0, status.stderr
    assert f"gate calibration: {stored['created']}" in status.stdout
    assert f"relevance floor {stored['relevance_floor']:.3f}" in status.stdout
    again = run_chatops(["calibrate", "--json"], data, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    refit = json.loads(again.stdout)
    assert refit["probes"] == stored["probes"] and refit["relevance_floor"] == stored["relevance_floor"]
    assert json.loads((data / "index" / CALIBRATION_FILE).read_text(encoding="utf-8"))["created"] == refit["created"]


def test_calibrate_on_an_empty_index_says_what_to_do(tmp_path: Path) -> None:
    proc = run_chatops(["calibrate"], tmp_path / "data", cwd=tmp_path)
    assert proc.returncode == 2 and "chatops index" in proc.stderr and "Traceback" not in proc.stderr
