"""The issue's targets on the real handbook (``../shared``), through the real ``chatops eval``.

Indexes the whole Sourcegraph handbook once per run (embeddings come from the persistent cache
when ``CHATOPS_TEST_CACHE`` is set), then runs ``chatops eval --json`` with each retriever and
checks the answer, citation and refusal targets and that hybrid retrieval beats both single
retrievers. Latency is printed, not asserted (speed is measured by ``bench/``). Skipped, with the
reason, when ``../shared`` is absent (a user's clone).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
CORPUS = SHARED / "corpus" / "sourcegraph-handbook"
DEV = SHARED / "eval" / "dev.jsonl"

pytestmark = [
    pytest.mark.server,  # starts processes or servers: not in make test-fast
    pytest.mark.corpus,
    # The module's first test indexes the 10,000-chunk handbook (three evals in all): 15 min was too short
    # for a cold embedding cache on a loaded 2-core machine; later runs read the cache.
    pytest.mark.timeout(2700),
    pytest.mark.skipif(not (CORPUS.is_dir() and DEV.is_file()),
                       reason="../shared (handbook corpus and eval set) is not present beside this clone"),
]


@pytest.fixture(scope="module")
def eval_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Environment for the CLI: a module data dir and the shared embedding cache."""
    env = dict(os.environ)
    env["CHATOPS_DATA_DIR"] = str(tmp_path_factory.mktemp("handbook-data"))
    cache = os.environ.get("CHATOPS_TEST_CACHE")
    env["CHATOPS_CACHE_DIR"] = cache if cache else str(tmp_path_factory.mktemp("handbook-cache"))
    env.pop("OPENAI_API_KEY", None)
    env.pop("OPENAI_BASE_URL", None)
    return env


def _eval(env: dict[str, str], retriever: str) -> dict:
    cmd = [sys.executable, "-m", "bot.cli", "eval", "--questions", str(DEV),
           "--source", f"folder:{CORPUS}?url_base=https://handbook.sourcegraph.com/",
           "--retriever", retriever, "--json"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=3000)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, f"--json must print exactly one line, got {len(lines)}"
    return json.loads(lines[0])


@pytest.fixture(scope="module")
def results(eval_env: dict[str, str]) -> dict[str, dict]:
    """One eval per retriever; the first call indexes the corpus, the others reuse the index."""
    out = {r: _eval(eval_env, r) for r in ("hybrid", "bm25", "dense")}
    print("\nretriever  R@5    R@10   MRR@10 nDCG@10 contains valid  refuse falseref p50ms p95ms")
    for r, res in out.items():
        rr, a, lat = res["retrieval"], res["answers"], res["latency_ms"]
        print(f"{r:<9} {rr['recall@5']:.3f}  {rr['recall@10']:.3f}  {rr['mrr@10']:.3f}  {rr['ndcg@10']:.3f}   "
              f"{a['answer_contains']:.3f}    {a['citation_validity']:.3f}  {a['refusal_unanswerable']:.3f}  "
              f"{a['false_refusal']:.3f}    {lat['p50']:.0f}   {lat['p95']:.0f}")
    return out


def test_eval_json_has_the_documented_shape(results: dict[str, dict]) -> None:
    res = results["hybrid"]
    assert res["questions"] == sum(1 for line in DEV.read_text().splitlines() if line.strip())
    for key in ("recall@5", "recall@10", "mrr@10", "ndcg@10"):
        assert 0.0 <= res["retrieval"][key] <= 1.0
    for key in ("answer_contains", "citation_validity", "refusal_unanswerable", "false_refusal"):
        assert 0.0 <= res["answers"][key] <= 1.0
    assert set(res["by_kind"]) >= {"single", "multi", "paraphrase", "exact_term", "unanswerable", "followup"}
    assert res["latency_ms"]["p50"] > 0 and res["latency_ms"]["p95"] >= res["latency_ms"]["p50"]


def test_hybrid_recall_meets_target_and_beats_single_retrievers(results: dict[str, dict]) -> None:
    hybrid = results["hybrid"]["retrieval"]["recall@5"]
    assert hybrid >= 0.85
    assert hybrid > results["bm25"]["retrieval"]["recall@5"]
    assert hybrid > results["dense"]["retrieval"]["recall@5"]


def test_every_citation_validates(results: dict[str, dict]) -> None:
    for retriever, res in results.items():
        assert res["answers"]["citation_validity"] == 1.0, retriever


def test_refuses_unanswerable_without_refusing_answerable(results: dict[str, dict]) -> None:
    answers = results["hybrid"]["answers"]
    assert answers["refusal_unanswerable"] >= 0.80
    assert answers["false_refusal"] <= 0.10


def test_answers_contain_the_expected_facts(results: dict[str, dict]) -> None:
    # 0.656 with the composer reading every passage and quoting short paragraphs whole (0.531 before)
    assert results["hybrid"]["answers"]["answer_contains"] >= 0.6


def test_answers_cite_the_pages_that_answer(results: dict[str, dict]) -> None:
    # one page that answers rather than sentences pasted from four (0.44 before the composer of issue 22)
    assert results["hybrid"]["answers"]["citation_precision"] >= 0.6
