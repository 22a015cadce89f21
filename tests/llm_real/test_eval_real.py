"""``chatops eval`` in LLM mode over a handful of the example questions (one of each kind the bot meets:
knowledge, multi-page, follow-up, unanswerable, general, action), against the real model.

For any model: every turn completes within its budget, citation_validity is 1.0, nothing unsupported is
posted, no permission leak; and the figures a weak model drives (answer_contains, refusals) are printed
for the log, not asserted.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import EVAL_FILE, run_chatops

from tests.llm_real.realmodel import TURN_BUDGET_S

IDS = ["ex-001", "ex-006", "ex-016", "ex-012", "ex-014", "ex-015"]


def test_an_eval_run_completes_with_valid_citations_and_nothing_unsupported(llm_env, wiki_data: Path, tmp_path) -> None:
    rows = [json.loads(line) for line in EVAL_FILE.read_text().splitlines() if line.strip()]
    picked = [r for r in rows if r["id"] in IDS]
    assert sorted(r["id"] for r in picked) == sorted(IDS)
    questions = tmp_path / "handful.jsonl"
    questions.write_text("".join(json.dumps(r) + "\n" for r in picked))
    done = run_chatops(["eval", "--questions", str(questions), "--json"], wiki_data, cwd=wiki_data.parent,
                       timeout=len(IDS) * (TURN_BUDGET_S + 15) + 300, **llm_env)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    answers = result["answers"]
    print(json.dumps({"answers": answers, "cost": result["cost"], "latency_ms": result["latency_ms"]}, indent=1))
    assert result["questions"] == len(IDS)
    assert answers["citation_validity"] == 1.0
    assert answers["unsupported_posted"] == 0, [r["unsupported_sentences"] for r in result["per_question"]]
    assert result["access"]["acl_leaks"] == 0
    uncited = [r["id"] for r in result["per_question"] if r["kind"] not in ("general", "action")
               and not r["refused"] and not r["citations"]]
    assert uncited == [], f"knowledge questions answered without the wiki: {uncited}"
    slowest = max(r["latency_ms"] for r in result["per_question"]) / 1000
    assert slowest < TURN_BUDGET_S + 5, f"a turn took {slowest:.1f} s"
    assert result["cost"]["llm_calls_mean"] > 0, "the model was never asked"
