"""The agent's progress as status lines (:mod:`app.progress`), observed on a real rule-based turn over the
session's index: each step reaches the listener as it is recorded, the status lines say what happens,
and a listener that fails never breaks the turn."""

from __future__ import annotations

import re

import pytest

from agent.models import Turn
from app.progress import FIRST_STATUS, status_for
from app.settings import Settings
from app.wiring import build_agent
from tests.helpers import public_viewer


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory, wiki_index):
    return build_agent(Settings(chatops_data_dir=tmp_path_factory.mktemp("progress")), index=wiki_index).agent


def turn(text: str) -> Turn:
    return Turn(text=text, platform="slack", viewer=public_viewer())


def test_a_knowledge_turn_reports_search_check_write_and_verify_in_order(agent) -> None:
    seen: list[tuple[str, dict]] = []
    reply = agent.answer(turn("how do I declare an incident?"), lambda name, data: seen.append((name, data)))
    assert not reply.refused
    assert [name for name, _ in seen] == [s["step"] for s in reply.trace.steps]  # every step, as recorded
    lines = [line for name, data in seen if (line := status_for(name, data))]
    assert lines[0] == FIRST_STATUS
    checking = [line for line in lines if line.startswith("Checking")]
    assert checking and re.fullmatch(r"Checking \d+ sources?…", checking[0])
    assert lines[-2:] == ["Writing the answer…", "Verifying the citations…"]


def test_a_failing_listener_never_breaks_the_turn(agent) -> None:
    def boom(name: str, data: dict) -> None:
        raise RuntimeError("the status line is down")

    quiet = agent.answer(turn("how do I declare an incident?"))
    loud = agent.answer(turn("how do I declare an incident?"), boom)
    assert loud.text == quiet.text and [c.doc_id for c in loud.citations] == [c.doc_id for c in quiet.citations]


@pytest.mark.parametrize("step, data, line", [
    ("route", {"route": "knowledge"}, FIRST_STATUS),
    ("route", {"route": "chitchat"}, None),
    ("route", {"route": "action"}, "Reading your request…"),
    ("rewrite_followup", {}, "Reading the thread…"),
    ("gate", {"attempt": 0, "support": ["a"]}, "Checking 1 source…"),
    ("gate", {"attempt": 0, "support": []}, "Checking what I found…"),
    ("gate", {"attempt": 1, "support": ["a", "b"]}, "Searching again with other words…"),
    ("screen", {}, None),
])
def test_status_lines(step: str, data: dict, line: str | None) -> None:
    assert status_for(step, data) == line
