"""The turn log (``app/turnlog.py``, ``StateStore.record_turn``/``turn_records``) and the agent's observers.

Real agent over the shared example-wiki index, turns built by :func:`app.turns.build_turn` from an
:class:`app.inbound.InboundMessage` as every adapter does, a real SQLite state store. ``chatops serve``'s
wiring of the journal is covered through signed Slack events in ``tests/test_slack_serve.py``.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from app.inbound import InboundMessage
from app.settings import Settings
from app.turnlog import TurnJournal
from app.turns import build_turn
from app.wiring import Runtime, build_agent
from index.knowledge import KnowledgeIndex
from state import StateStore, TurnRecord
from state.store import sqlite_url


@pytest.fixture
def runtime(wiki_index: KnowledgeIndex, tmp_path: Path) -> Runtime:
    return build_agent(Settings(chatops_data_dir=tmp_path / "data"), index=wiki_index)


@pytest.fixture
def store(tmp_path: Path):
    s = StateStore(sqlite_url(tmp_path / "state.sqlite"))
    yield s
    s.close()


def _ask(runtime: Runtime, text: str):
    msg = InboundMessage(platform="slack", text=text, user_id="U1", user_email="ann@example.com",
                         channel_id="D1", channel_kind="dm")
    return runtime.agent.answer(build_turn(msg, runtime.access))


def test_answered_and_refused_questions_are_recorded_with_their_cited_pages(runtime: Runtime, store) -> None:
    runtime.agent.observe(TurnJournal(store))
    answered = _ask(runtime, "how do I declare an incident?")
    refused = _ask(runtime, "what is the office wifi password?")
    assert answered.citations and refused.refused
    first, second = store.turn_records()
    assert (first.trace_id, first.outcome, first.platform, first.user_id, first.channel_id) == \
        (answered.trace.trace_id, "answered", "slack", "U1", "D1")
    assert first.question == "how do I declare an incident?" and first.route == "knowledge"
    assert {c["doc_id"] for c in first.citations} == {c.doc_id for c in answered.citations}
    assert all("quote" not in c for c in first.citations)  # page references, never the quoted text
    assert first.total_ms > 0 and first.reason == ""
    assert (second.outcome, second.question) == ("refused", "what is the office wifi password?")
    assert second.reason and not second.citations
    assert [r.trace_id for r in store.turn_records(outcome="refused")] == [refused.trace.trace_id]


def test_chit_chat_and_meeting_requests_are_not_recorded(runtime: Runtime, store) -> None:
    runtime.agent.observe(TurnJournal(store))
    assert _ask(runtime, "thanks!").route == "chitchat"
    assert _ask(runtime, "book a 30 min sync with bob@example.com tomorrow at 3pm").pending_action is not None
    assert store.turn_records() == []


def test_a_failing_observer_never_costs_the_user_the_reply(runtime: Runtime, store, caplog) -> None:
    def broken(turn, reply):
        raise RuntimeError("database is down")
    runtime.agent.observe(broken)
    runtime.agent.observe(TurnJournal(store))
    reply = _ask(runtime, "how do I declare an incident?")
    assert reply.citations and not reply.refused
    assert len(store.turn_records()) == 1  # the next observer still ran
    assert any("turn observer" in r.getMessage() and reply.trace.trace_id in r.getMessage() for r in caplog.records)


def test_turn_records_filter_by_time_and_refuse_naive_times(store) -> None:
    now = datetime.now(timezone.utc)
    for days, trace in ((10, "old"), (1, "new")):
        store.record_turn(TurnRecord(trace_id=trace, platform="teams", user_id="U", channel_id="C", question="q?",
                                     route="knowledge", outcome="refused", created_at=now - timedelta(days=days)))
    assert [r.trace_id for r in store.turn_records(since=now - timedelta(days=7))] == ["new"]
    assert [r.trace_id for r in store.turn_records(until=now - timedelta(days=7))] == ["old"]
    assert store.turn_records(since=now - timedelta(days=30))[0].created_at.tzinfo is not None
    with pytest.raises(ValueError, match="aware"):
        store.turn_records(since=datetime.now())
