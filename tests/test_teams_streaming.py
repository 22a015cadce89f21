"""Streamed answers in Teams personal chats (the Teams streaming protocol), through the real adapter.

The stand-in Bot Connector (:mod:`tests.standins.teams`) checks every stream activity as the service does
(personal chats only, the sequence, cumulative text, informative before text, the final message) and
refuses what breaks the protocol, so a stream that reaches ``connector.streams`` whole was accepted.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from bot.teams.bot import SEARCHING, STILL_WORKING
from bot.teams.streaming import TeamsStream
from tests.helpers import wait_for
from tests.test_teams import CHANNEL, USER, message
import tests.test_teams_native as native
from tests.test_teams_native import feedback

make_teams = native.make_teams  # the fixture: a server with Teams wired from the settings


def only_stream(t) -> list[dict]:
    [stream] = t.connector.streams.values()
    return stream


def test_a_personal_chat_answer_is_streamed_then_finished_with_its_sources(make_teams) -> None:
    t = make_teams()
    url = t.connector.url
    t.http.post("/api/messages", json=message(url, "how do I declare an incident?", activity_id="s-1"))
    stream = only_stream(t)
    assert [(s["streamType"], s.get("streamSequence")) for s in stream] == [
        ("informative", 1), ("streaming", 2), ("final", None)]
    informative, streaming, final = stream
    [reply] = t.agent.replies
    assert informative["text"] == SEARCHING
    assert "/declare-incident" in streaming["text"] and final["text"] == streaming["text"]
    # the final message: the streamed text once, the sources card under it (no second copy of the answer)
    [answer] = t.connector.messages()
    assert answer.body["text"] == streaming["text"] and answer.body["replyToId"] == "s-1"
    assert answer.card_text().startswith("Sources") and "/declare-incident" not in answer.card_text()
    assert answer.body["channelData"] == {"feedbackLoopEnabled": True}
    kinds = [e["type"] for e in answer.body["entities"]]
    assert kinds == ["https://schema.org/Message", "streaminfo"]
    assert answer.body["entities"][0]["additionalType"] == ["AIGeneratedContent"]
    assert not [c for c in t.connector.typing() if "streaminfo" not in str(c.body.get("entities"))], \
        "the informative update stands in for the typing indicator"
    # the thumbs under the streamed message find the turn
    assert t.http.post("/api/messages", json=feedback(url, answer.response_id, "like", "",
                                                      activity_id="fb-s")).status_code == 200
    assert [r["value"] for r in t.store.feedback_for(reply.trace.trace_id)] == ["helpful"]


def test_a_refusal_is_streamed_as_text_without_a_card(make_teams) -> None:
    t = make_teams()
    t.http.post("/api/messages", json=message(t.connector.url, "is there a sabbatical after 5 years?",
                                              activity_id="s-2"))
    [answer] = t.connector.messages()
    assert "couldn't find" in answer.body["text"] and not answer.body.get("attachments")
    assert [s["streamType"] for s in only_stream(t)] == ["informative", "streaming", "final"]


def test_channels_are_never_streamed(make_teams) -> None:
    t = make_teams()
    t.http.post("/api/messages", json=message(t.connector.url, "<at>chatops</at> how do I declare an incident?",
                                              activity_id="s-3", conversation=CHANNEL, mention=True))
    [answer] = t.connector.messages()
    assert t.connector.streams == {} and not answer.body.get("text") and "/declare-incident" in answer.card_text()


def test_when_the_stream_cannot_start_the_answer_comes_the_ordinary_way(make_teams) -> None:
    t = make_teams()
    t.connector.failures = [(400, {})]  # the first informative update is refused
    t.http.post("/api/messages", json=message(t.connector.url, "how do I declare an incident?", activity_id="s-4"))
    [answer] = t.connector.messages()
    assert t.connector.streams == {} and len(t.connector.typing()) == 2  # the refused update, then typing
    assert not answer.body.get("text") and "/declare-incident" in answer.card_text()


def test_streaming_can_be_turned_off(make_teams) -> None:
    t = make_teams(teams_streaming=False)
    t.http.post("/api/messages", json=message(t.connector.url, "how do I declare an incident?", activity_id="s-5"))
    [answer] = t.connector.messages()
    assert t.connector.streams == {} and not answer.body.get("text") and "/declare-incident" in answer.card_text()


def test_a_slow_streamed_turn_keeps_informing_then_finishes_proactively(make_teams) -> None:
    """The stream begun inside the request goes on in proactive turns: informative updates while the
    turn runs, then the text and the final message."""
    gate = threading.Event()
    t = make_teams(gate=gate, teams_inline_reply_seconds=0.5)
    r = t.http.post("/api/messages", json=message(t.connector.url, "how do I declare an incident?",
                                                  activity_id="s-6"))
    assert r.status_code in (200, 201) and t.connector.messages() == []
    wait_for(lambda: len(only_stream(t)) >= 2, 60, "an informative update sent after the request ended")
    gate.set()
    [answer] = wait_for(lambda: t.connector.messages(), 60, "the proactive final message")
    stream = only_stream(t)
    kinds = [s["streamType"] for s in stream]
    assert kinds[0] == "informative" and kinds[-2:] == ["streaming", "final"] and kinds.count("informative") >= 2
    assert [s["text"] for s in stream[1:-2]] == [STILL_WORKING] * (len(stream) - 3)
    assert answer.body["replyToId"] == "s-6" and "/declare-incident" in answer.body["text"]
    assert t.store.get_history(f"teams:a:personal-{USER}") == ["how do I declare an incident?"]


def test_updates_are_spaced_by_the_minimum_interval(monkeypatch) -> None:
    """Teams takes about one stream update a second: the stream waits out the rest of the interval."""
    now = [100.0]
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(round(seconds, 3))
        now[0] += seconds

    class Sent:
        id = "stream-1"

    async def send(op, what):
        return Sent()

    class Ctx:
        async def send_activity(self, activity):
            return Sent()

    monkeypatch.setattr(asyncio, "sleep", fake_sleep)
    stream = TeamsStream(send, min_interval=1.0, clock=lambda: now[0])

    async def run() -> None:
        assert await stream.inform(Ctx(), "Searching")
        now[0] += 0.25
        assert await stream.append(Ctx(), "The answer")
        now[0] += 3.0
        assert await stream.append(Ctx(), " goes on.")
        assert not await stream.inform(Ctx(), "too late: text was streamed")

    asyncio.run(run())
    assert slept == [pytest.approx(0.75)]
    assert (stream.stream_id, stream.sequence, stream.text) == ("stream-1", 3, "The answer goes on.")
