"""Users' words never reach the server log at INFO or above (issue 24 item 2).

Personal data sent the way Slack and Teams send it (a signed DM event, a signed ``/kb`` question and a
signed click through the real Bolt app; a personal-chat activity and a malformed one through the real Bot
Framework adapter) is looked for in every log line, written by the handler ``configure_logging`` installs
(:func:`bot.logs.log_handler`) in both formats, text and JSON, at INFO. The turns themselves are still
logged (ids, outcomes, timings), and the question and the gate's reason stay in the trace / turn log.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest

from app.jobs import IndexJobs
from app.settings import Settings
from app.wiring import build_agent
from bot.logs import log_handler
from connectors.folder import FolderSource
from state import StateStore
from state.store import sqlite_url

from tests.standins.slack import APP_ID, TEAM_ID, SlackHarness

SSN = "536-22-8714"
QUESTION = f"my ssn is {SSN}, where is the parking garage"
ALICE = "UALICE01"


class Logs:
    """Two handlers on the root logger at INFO, as ``configure_logging`` builds them: text and JSON."""

    def __init__(self) -> None:
        self.text, self.json = io.StringIO(), io.StringIO()
        self.handlers = [log_handler("text", stream=self.text), log_handler("json", stream=self.json)]

    def lines(self) -> list[str]:
        return self.text.getvalue().splitlines() + self.json.getvalue().splitlines()


@pytest.fixture
def logs() -> Iterator[Logs]:
    root = logging.getLogger()
    captured, level = Logs(), root.level
    for h in captured.handlers:
        h.setLevel(logging.INFO)
        root.addHandler(h)
    root.setLevel(logging.INFO)
    yield captured
    for h in captured.handlers:
        root.removeHandler(h)
    root.setLevel(level)


def assert_no_personal_data(logs: Logs) -> None:
    lines = logs.lines()
    assert lines, "the turns are logged"
    leaked = [line for line in lines if SSN in line or "8714" in line or "parking" in line]
    assert leaked == []
    for line in logs.json.getvalue().splitlines():
        json.loads(line)  # every JSON line stays one object


# -- Slack ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def slack(tmp_path_factory: pytest.TempPathFactory, wiki_index, session_wiki: Path):
    store = StateStore(sqlite_url(tmp_path_factory.mktemp("privacy-state") / "state.sqlite"))
    runtime = build_agent(Settings(chatops_data_dir=tmp_path_factory.mktemp("privacy-data")), index=wiki_index)
    h = SlackHarness(runtime, store, IndexJobs(runtime, store, [FolderSource(session_wiki)]))
    h.standin.add_user(ALICE)
    yield h
    h.close()
    store.close()


def test_a_dm_slash_command_and_click_with_personal_data_leave_no_trace_in_the_log(slack: SlackHarness,
                                                                                    logs: Logs) -> None:
    h = slack
    h.standin.add_conversation("DPRIV0001", "im")
    msg = h.standin.user_message("DPRIV0001", ALICE, QUESTION)
    resp, _ = h.sender.event({"type": "message", "user": ALICE, "text": QUESTION, "ts": msg["ts"],
                              "channel": "DPRIV0001", "event_ts": msg["ts"], "channel_type": "im"})
    assert resp.status_code == 200
    h.standin.add_conversation("CPRIV0001")
    assert h.sender.command(QUESTION, ALICE, "CPRIV0001", h.standin.response_url("priv")).status_code == 200
    h.standin.wait_for(lambda s: [c for c in s.calls_to("response_url") if c.key == "priv"] or None)
    # a signed click whose value is not one of ours, carrying the personal data
    payload = {"type": "block_actions", "user": {"id": ALICE}, "team": {"id": TEAM_ID}, "api_app_id": APP_ID,
               "response_url": h.standin.response_url("priv-click"),
               "actions": [{"action_id": "feedback_helpful", "block_id": "b", "type": "button", "value": QUESTION}]}
    h.sender.post(urlencode({"payload": json.dumps(payload)}).encode(), "application/x-www-form-urlencoded")
    h.idle()
    assert any("outcome=refused" in line or "outcome=answered" in line for line in logs.lines())
    assert_no_personal_data(logs)


# -- Teams ---------------------------------------------------------------------------------------------------
def test_a_teams_personal_chat_with_personal_data_leaves_no_trace_in_the_log(tmp_path: Path, wiki_index,
                                                                               logs: Logs) -> None:
    import httpx

    from bot.server import ServerThread, create_app
    from bot.teams.adapter import TeamsAuthConfig, TeamsWebAdapter
    from bot.teams.bot import TeamsBot
    from tests.standins.teams import ConnectorStandIn
    from tests.test_teams import message

    rt = build_agent(Settings(chatops_data_dir=tmp_path / "data"), index=wiki_index)
    store = StateStore(sqlite_url(tmp_path / "state.sqlite"))
    bot = TeamsBot(rt.agent, store)
    server = ServerThread(lambda: create_app([TeamsWebAdapter(bot, TeamsAuthConfig(), allow_unauthenticated=True)]))
    try:
        with ConnectorStandIn() as connector:
            server.start()
            with httpx.Client(base_url=server.url, timeout=30) as http:
                ok = http.post("/api/messages", json=message(connector.url, QUESTION, activity_id="priv-1"))
                assert ok.status_code in (200, 201)
                [reply] = connector.messages()
                assert reply.body["replyToId"] == "priv-1"
                wrong = message(connector.url, QUESTION, activity_id="priv-2")
                wrong["from"] = QUESTION  # a field of the wrong type, holding the personal data
                wrong["timestamp"] = QUESTION
                assert http.post("/api/messages", json=wrong).status_code == 400
    finally:
        server.stop()
        store.close()
    assert any("platform=teams" in line for line in logs.lines())
    assert_no_personal_data(logs)


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_tracebacks_and_extra_fields_are_redacted_in_both_formats(fmt: str) -> None:
    """The handler every process installs: a validation error's quoted input, in the message and in the
    traceback (python-json-logger formats tracebacks afresh, not from the filter's redacted text), a
    configured secret in a traceback, and a string ``extra`` field."""
    from pydantic import BaseModel, ValidationError

    class Inbound(BaseModel):
        count: int

    stream = io.StringIO()
    logger = logging.getLogger(f"test.private.{fmt}")
    logger.addHandler(handler := log_handler(fmt, secrets=("sekrit-value-1",), stream=stream))
    logger.propagate = False
    try:
        try:
            Inbound(count=f"{QUESTION} sekrit-value-1")
        except ValidationError as exc:
            logger.warning("rejected: %s", exc, extra={"detail": f"input_value={QUESTION!r}, input_type=str"})
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
    out = stream.getvalue()
    assert "input_value=[redacted]" in out and "Traceback" in out
    assert SSN not in out and "sekrit-value-1" not in out
    if fmt == "json":
        first, second = map(json.loads, out.splitlines())
        assert "input_value=[redacted]" in first["detail"] and "ValidationError" in second["exc_info"]
