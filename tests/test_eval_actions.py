"""``chatops eval`` scores action questions for every registered action tool, through the real CLI.

The example set's action questions (``examples/eval.jsonl``: meetings, reminders, Microsoft 365, free/busy
and Jira phrasings) are asked with ``JIRA_URL`` pointing at the Jira stand-in (``tests/standins/jira.py``,
Cloud, with the projects the questions name), so ``ticket.create`` is registered and its questions are
scored on the tool, the project, the issue type and the summary; without ``JIRA_URL`` they are counted as
skipped, never as failures. ``action_start`` checks the proposed start against ``expected_start`` counted
from when each question was asked (:func:`bot.evaluate.start_matches`, unit-tested here as well).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from bot.evaluate import start_matches
from tests.helpers import EVAL_FILE, ROOT, run_chatops, seed_embedding_cache
from tests.standins.jira import CLOUD_EMAIL, CLOUD_TOKEN, JiraStandIn

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

ACTIONS = [json.loads(line) for line in EVAL_FILE.read_text(encoding="utf-8").splitlines()
           if line.strip() and json.loads(line)["kind"] == "action"]


@pytest.fixture(scope="module")
def jira():
    s = JiraStandIn("cloud").start()
    task, bug, story = ("1", "Task", False), ("2", "Bug", False), ("3", "Story", False)
    for key, name in (("OPS", "Operations"), ("IT", "IT Helpdesk"), ("WEB", "Website")):
        s.add_project(key, name, [task, bug, story])
    yield s
    s.stop()


def _eval(tmp: Path, cache: Path, **env: str) -> dict:
    questions = tmp / "actions.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in ACTIONS), encoding="utf-8")
    data = seed_embedding_cache(tmp / "data", cache)
    proc = run_chatops(["eval", "--questions", str(questions), "--source", "folder:examples/wiki", "--json"],
                       data, cwd=ROOT, timeout=600, DEFAULT_TIMEZONE="Europe/Berlin", **env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def with_jira(tmp_path_factory: pytest.TempPathFactory, jira: JiraStandIn, embedding_cache_dir: Path,
              wiki_index) -> dict:
    return _eval(tmp_path_factory.mktemp("eval-actions-jira"), embedding_cache_dir / "embeddings.sqlite",
                 JIRA_URL=jira.url, JIRA_DEPLOYMENT="cloud", JIRA_EMAIL=CLOUD_EMAIL, JIRA_API_TOKEN=CLOUD_TOKEN)


def test_every_action_tool_is_scored_on_its_tool_and_arguments(with_jira: dict, jira: JiraStandIn) -> None:
    answers = with_jira["answers"]
    by_tool = answers["action_by_tool"]
    expected = {q.get("expected_tool") or "calendar.create" for q in ACTIONS}
    assert set(by_tool) == expected == {"calendar.create", "reminder.create", "ticket.create"}
    assert answers["action_skipped"] == 0
    rows = {r["id"]: r for r in with_jira["per_question"]}
    tickets = [q["id"] for q in ACTIONS if q.get("expected_tool") == "ticket.create"]
    assert len(tickets) == by_tool["ticket.create"]["questions"] == 4
    for qid in tickets:  # project, issue type and summary, as Jira was asked about them before the preview
        assert rows[qid]["action_tool"] and rows[qid]["action_args"], rows[qid]["action_proposed"]
    assert rows["ex-059"]["action_proposed"]["issue_type"] == "Bug"
    assert by_tool["ticket.create"]["action_tool"] == by_tool["ticket.create"]["action_args"] == 1.0
    assert not jira.issues  # the eval proposes; it never files


def test_the_start_time_is_scored_where_one_is_expected(with_jira: dict) -> None:
    rows = {r["id"]: r for r in with_jira["per_question"]}
    timed = [q["id"] for q in ACTIONS if q.get("expected_start")]
    assert all(rows[i]["action_start"] in {True, False} for i in timed)
    assert all(rows[q["id"]]["action_start"] is None for q in ACTIONS if not q.get("expected_start"))
    assert rows["ex-015"]["action_start"] and rows["ex-045"]["action_start"]  # tomorrow 14:00; tomorrow 09:00
    figures = with_jira["answers"]
    assert figures["action_start"] == round(sum(bool(rows[i]["action_start"]) for i in timed) / len(timed), 4)


def test_without_jira_its_questions_are_skipped_not_failed(tmp_path: Path, embedding_cache_dir: Path,
                                                           wiki_index) -> None:
    result = _eval(tmp_path, embedding_cache_dir / "embeddings.sqlite")
    assert result["answers"]["action_skipped"] == 4
    assert "ticket.create" not in result["answers"]["action_by_tool"]
    skipped = [r["id"] for r in result["per_question"] if r.get("action_skipped")]
    assert skipped == [q["id"] for q in ACTIONS if q.get("expected_tool") == "ticket.create"]


ASKED = datetime(2026, 11, 26, 10, 0, tzinfo=timezone.utc)  # a Thursday, 11:00 in Berlin


@pytest.mark.parametrize(("expected", "proposed", "ok"), [
    ("tomorrow 14:00", "2026-11-27T14:00:00+01:00", True),
    ("tomorrow 14:00", "2026-11-28T14:00:00+01:00", False),
    ("tomorrow 14:00", "2026-11-27T14:30:00+01:00", False),
    ("thu 15:00", "2026-11-26T15:00:00+01:00", True),  # today, still ahead
    ("thu 10:00", "2026-12-03T10:00:00+01:00", True),  # today's has passed: next week's
    ("thu 10:00", "2026-11-26T10:00:00+01:00", False),
    ("fri 09:00 America/Los_Angeles", "2026-11-27T18:00:00+01:00", True),
    ("14th 10:00", "2026-12-14T10:00:00+01:00", True),
    ("+14 10:00", "2026-12-10T10:00:00+01:00", True),
    ("16:00", "2026-11-26T16:00:00+01:00", True),
    ("16:00", "", False),
])
def test_start_matches(expected: str, proposed: str, ok: bool) -> None:
    assert start_matches(expected, proposed, "Europe/Berlin", ASKED) is ok


def test_a_malformed_expected_start_names_the_format() -> None:
    with pytest.raises(ValueError, match="HH:MM"):
        start_matches("next week", "2026-11-27T14:00:00+01:00", "UTC", ASKED)
