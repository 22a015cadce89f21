"""Teams the way its users expect it (issue 14): the AI label, the native feedback loop, proactive answers.

Through the real wiring (:func:`bot.teams.adapter.build_teams_adapter` from :class:`app.settings.Settings`),
the real Bot Framework ``CloudAdapter`` behind the real aiohttp server, the real agent, index and state
store; the Bot Connector is the stand-in (:mod:`tests.standins.teams`). Activities are POSTed as Teams sends
them: a ``message/submitAction`` invoke is what Teams posts when someone clicks thumbs up / down under
an answer and submits the dialog.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx
import pytest

from agent.models import Reply, Turn
from app.settings import Settings
from app.wiring import build_agent
from bot.server import ServerThread, create_app
from bot.teams.adapter import build_teams_adapter
from tests.helpers import wait_for
from state import StateStore
from tests.standins.teams import ConnectorStandIn
from tests.test_teams import BOT, USER, message

AI_LABEL = {"type": "https://schema.org/Message", "@type": "Message", "@context": "https://schema.org", "@id": "",
            "additionalType": ["AIGeneratedContent"]}


class Agent:
    """The real agent, keeping its replies; optionally slowed down (``sleep`` seconds, then ``gate``)
    or failing after the wait."""

    def __init__(self, agent, sleep: float = 0.0, gate: threading.Event | None = None, fail: bool = False) -> None:
        self.agent, self.sleep, self.gate, self.fail = agent, sleep, gate, fail
        self.replies: list[Reply] = []

    def answer(self, turn: Turn) -> Reply:
        time.sleep(self.sleep)
        if self.gate is not None:
            assert self.gate.wait(120), "the test never opened the gate"
        if self.fail:
            raise RuntimeError("the model service is down")
        reply = self.agent.answer(turn)
        self.replies.append(reply)
        return reply


@pytest.fixture
def make_teams(tmp_path: Path, wiki_index):
    """``make_teams(**agent_options, **settings)``: a running server with Teams wired from the settings."""
    started: list = []

    def make(*, sleep: float = 0.0, gate: threading.Event | None = None, fail: bool = False, **settings):
        base = Settings(chatops_data_dir=tmp_path / "data", teams_allow_unauthenticated=True, **settings)
        rt = build_agent(base, index=wiki_index)
        agent = Agent(rt.agent, sleep, gate, fail)
        store = StateStore(f"sqlite:///{tmp_path / 'state.sqlite'}")
        server = ServerThread(lambda: create_app([build_teams_adapter(base, agent, store)]))
        connector = ConnectorStandIn().__enter__()
        server.start()
        http = httpx.Client(base_url=server.url, timeout=60)
        started.append((http, server, connector, store))
        return type("T", (), {"http": http, "connector": connector, "store": store, "agent": agent})

    yield make
    for http, server, connector, store in started:
        http.close()
        server.stop()
        connector.__exit__(None, None, None)
        store.close()


def without_stream_info(call) -> list[dict]:
    """A message's entities but the streaming protocol's (personal chats stream their answers)."""
    return [e for e in call.body.get("entities") or [] if e["type"] != "streaminfo"]


def feedback(url: str, message_id: str, reaction: str, text: str | None, *, activity_id: str, user: str = USER) -> dict:
    """The invoke Teams posts when the feedback dialog under ``message_id`` is submitted."""
    act = message(url, "", activity_id=activity_id, user=user, reply_to=message_id)
    act.pop("text")
    value: dict = {"actionName": "feedback", "actionValue": {"reaction": reaction}}
    if text is not None:
        value["actionValue"]["feedback"] = json.dumps({"feedbackText": text})
    act.update({"type": "invoke", "name": "message/submitAction", "value": value})
    return act


def test_every_message_the_bot_sends_is_labelled_ai_generated(make_teams) -> None:
    """The greeting, an admin command's answer and a refusal carry the bare label; a cited answer carries it
    on its citation entity (one entity, not two); typing indicators carry none."""
    t = make_teams()
    url = t.connector.url
    greet = message(url, "", activity_id="hello-1")
    greet.update({"type": "conversationUpdate", "membersAdded": [BOT]})
    t.http.post("/api/messages", json=greet)
    t.http.post("/api/messages", json=message(url, "status", activity_id="status-1"))
    t.http.post("/api/messages", json=message(url, "is there a sabbatical after 5 years?", activity_id="refusal-1"))
    t.http.post("/api/messages", json=message(url, "how do I declare an incident?", activity_id="answer-1"))
    greeting, status, refusal, answer = t.connector.messages()
    assert "knowledge base" in greeting.body["text"] and "No sources" in status.body["text"]
    for plain in (greeting, status, refusal):
        assert without_stream_info(plain) == [AI_LABEL]
    [cited] = without_stream_info(answer)
    assert cited["additionalType"] == ["AIGeneratedContent"] and cited["citation"]
    assert t.connector.typing() and all(not without_stream_info(c) for c in t.connector.typing())


def test_thumbs_down_with_a_comment_is_stored_with_the_answers_trace_id(make_teams) -> None:
    t = make_teams()
    url = t.connector.url
    r = t.http.post("/api/messages", json=message(url, "how do I declare an incident?", activity_id="q-1"))
    assert r.status_code in (200, 201)
    [answer] = t.connector.messages()
    assert answer.body["channelData"] == {"feedbackLoopEnabled": True}
    [reply] = t.agent.replies
    trace = reply.trace.trace_id
    votes0 = {v: _votes(v) for v in ("helpful", "not_helpful")}
    r = t.http.post("/api/messages", json=feedback(url, answer.response_id, "dislike",
                                                    "The SEV levels changed last month", activity_id="fb-1"))
    assert r.status_code == 200
    assert [(x["user_id"], x["platform"], x["value"], x["comment"]) for x in t.store.feedback_for(trace)] == [
        (USER, "teams", "not_helpful", "The SEV levels changed last month")]
    # the same person changes their mind: one row, the latest
    r = t.http.post("/api/messages", json=feedback(url, answer.response_id, "like", None, activity_id="fb-2"))
    assert r.status_code == 200
    assert [(x["value"], x["comment"]) for x in t.store.feedback_for(trace)] == [("helpful", "")]
    assert t.connector.messages() == [answer], "Teams confirms the feedback itself; the bot posts nothing"
    # both clicks counted in chatops_feedback_total (app.feedback.record_feedback)
    assert {v: _votes(v) - votes0[v] for v in votes0} == {"helpful": 1, "not_helpful": 1}


def _votes(value: str) -> float:
    from telemetry.metrics import REGISTRY

    return REGISTRY.get_sample_value("chatops_feedback_total", {"platform": "teams", "value": value}) or 0.0


def test_feedback_on_a_message_that_is_no_known_answer_is_not_stored(make_teams) -> None:
    t = make_teams()
    url = t.connector.url
    r = t.http.post("/api/messages", json=feedback(url, "someone-elses-message", "like", "great",
                                                    activity_id="fb-x"))
    assert r.status_code == 200
    bogus = feedback(url, "someone-elses-message", "love", "?", activity_id="fb-y")
    assert t.http.post("/api/messages", json=bogus).status_code == 200
    with t.store.engine.connect() as conn:
        assert conn.execute(t.store.feedback.select()).fetchall() == []


def test_a_turn_longer_than_the_inline_limit_is_acknowledged_then_answered_proactively(make_teams) -> None:
    """Past TEAMS_INLINE_REPLY_SECONDS (1 s here; the default is below Teams' 15 s limit) the request ends while
    the turn runs (held open by the test, as long as it likes); typing indicators keep coming, and the answer
    arrives later in the same reply chain, sent from the stored conversation reference, with feedback that still
    finds its trace."""
    assert Settings().teams_inline_reply_seconds < 15
    gate = threading.Event()
    t = make_teams(gate=gate, teams_inline_reply_seconds=1.0)
    url = t.connector.url
    r = t.http.post("/api/messages", json=message(url, "how do I declare an incident?", activity_id="slow-1"))
    assert r.status_code in (200, 201)
    assert t.connector.messages() == [] and t.agent.replies == [], "the request ended before the answer"
    wait_for(lambda: len(t.connector.typing()) >= 2, 60, "a typing indicator sent after the request ended")
    gate.set()
    [answer] = wait_for(lambda: t.connector.messages(), 90, "the proactive answer")
    assert answer.conversation_id == f"a:personal-{USER}" and answer.body["replyToId"] == "slow-1"
    assert all(c.body["replyToId"] == "slow-1" for c in t.connector.typing())
    assert "/declare-incident" in answer.shown() and answer.body["channelData"]["feedbackLoopEnabled"]
    assert answer.body["entities"][0]["additionalType"] == ["AIGeneratedContent"]
    assert t.store.get_history(f"teams:a:personal-{USER}") == ["how do I declare an incident?"]
    [reply] = t.agent.replies
    assert t.http.post("/api/messages", json=feedback(url, answer.response_id, "like", "quick enough",
                                                      activity_id="fb-slow")).status_code == 200
    assert [x["comment"] for x in t.store.feedback_for(reply.trace.trace_id)] == ["quick enough"]


def test_a_slow_turn_that_fails_is_reported_proactively(make_teams) -> None:
    gate = threading.Event()
    t = make_teams(gate=gate, fail=True, teams_inline_reply_seconds=0.5)
    url = t.connector.url
    r = t.http.post("/api/messages", json=message(url, "how do I declare an incident?", activity_id="fail-1"))
    assert r.status_code in (200, 201) and t.connector.messages() == []
    gate.set()
    [error] = wait_for(lambda: t.connector.messages(), 60, "the proactive error message")
    assert "something went wrong" in error.body["text"] and error.body["replyToId"] == "fail-1"
    assert without_stream_info(error) == [AI_LABEL]
    assert t.store.get_history(f"teams:a:personal-{USER}") == []


@pytest.mark.parametrize("seconds", [0, 15, 20])
def test_the_inline_reply_limit_must_stay_below_teams_15_s(seconds) -> None:
    with pytest.raises(ValueError, match="less than 15|greater than 0"):
        Settings(teams_inline_reply_seconds=seconds)


def test_answers_still_being_prepared_are_sent_before_the_server_stops(tmp_path, wiki_index, caplog) -> None:
    """A deploy or restart (``chatops serve`` stopping) waits for proactive answers instead of dropping them."""
    import logging

    caplog.set_level(logging.INFO, logger="bot.teams.adapter")
    gate = threading.Event()
    settings = Settings(chatops_data_dir=tmp_path / "data", teams_allow_unauthenticated=True,
                        teams_inline_reply_seconds=0.5)
    agent = Agent(build_agent(settings, index=wiki_index).agent, gate=gate)
    store = StateStore(f"sqlite:///{tmp_path / 'state.sqlite'}")
    server = ServerThread(lambda: create_app([build_teams_adapter(settings, agent, store)]))
    with ConnectorStandIn() as connector:
        server.start()
        try:
            r = httpx.post(f"{server.url}/api/messages", timeout=60,
                           json=message(connector.url, "how do I declare an incident?", activity_id="drain-1"))
            assert r.status_code in (200, 201) and connector.messages() == []
            stopping = threading.Thread(target=server.stop, kwargs={"timeout": 60})
            stopping.start()
            wait_for(lambda: "still being prepared" in caplog.text, 30, "the adapter waiting at shutdown")
            gate.set()
            stopping.join(60)
            assert not stopping.is_alive()
            [answer] = connector.messages()
            assert answer.body["replyToId"] == "drain-1" and "/declare-incident" in answer.shown()
        finally:
            gate.set()
            store.close()
