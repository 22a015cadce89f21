"""Signed requests to ``POST /slack/events`` that must not do harm: replays, and hostile headers and bodies.

The real Bolt app behind ``bot.server.create_app`` on 127.0.0.1 (``SlackHarness``), with its own index
(``/kb reindex`` runs here) and a real SQLite state store; Slack is ``tests/standins/slack/``.

- A signed request sent again with the very same headers and body (a replay within the 5 minutes its
  timestamp is fresh) gets 200 with an empty body and does nothing: a ``/kb`` question is answered
  once, a feedback click cannot undo a later vote, an admin ``/kb reindex`` runs once, an event is
  answered once. When the state store cannot record the signature the request gets 503.
- Headers and bodies that used to crash the handler (a timestamp of Unicode digits or of 5,000 digits,
  a non-ASCII signature, JSON nested 400,000 deep, a 5,000-digit number) get 401/400, and the log has
  no traceback.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest

from app.jobs import IndexJobs, parse_sources
from app.settings import Settings
from app.wiring import build_agent
from index.knowledge import KnowledgeIndex
from state import StateStore
from state.store import sqlite_url

from tests.helpers import WIKI, WIKI_PAGES
from tests.standins.slack import APP_ID, BOT_USER_ID, SIGNING_SECRET, TEAM_ID, SlackHarness, feedback_action, sign

ALICE, ADMIN = "UALICE01", "UADMIN01"
FORM = "application/x-www-form-urlencoded"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory):
    s = StateStore(sqlite_url(tmp_path_factory.mktemp("replay-state") / "state.sqlite"))
    yield s
    s.close()


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory, embedder, store: StateStore):
    """The bot over its own index of a wiki copy (``/kb reindex`` writes to it)."""
    root = tmp_path_factory.mktemp("replay")
    wiki = root / "wiki"
    shutil.copytree(WIKI, wiki)
    index = KnowledgeIndex(root / "index", embedder)
    settings = Settings(chatops_data_dir=root / "data", chatops_sources=f"folder:{wiki}?name=handbook")
    runtime = build_agent(settings, index=index)
    jobs = IndexJobs(runtime, store, parse_sources(settings.chatops_sources))
    [first] = jobs.run()
    assert first.status == "ok" and first.summary.added == WIKI_PAGES
    h = SlackHarness(runtime, store, jobs, admin_ids=(ADMIN,))
    for user in (ALICE, ADMIN):
        h.standin.add_user(user)
    yield h
    h.close()
    index.close()


def send_twice(h: SlackHarness, body: bytes, content_type: str):
    """The same signed request (identical headers and body) sent twice: a replay."""
    headers = sign(SIGNING_SECRET, body)
    return [h.sender.post(body, content_type, headers, signed=False) for _ in range(2)]


def command_body(h: SlackHarness, text: str, user: str, channel: str, key: str) -> bytes:
    return urlencode({"token": "legacy", "team_id": TEAM_ID, "team_domain": "standin", "channel_id": channel,
                      "channel_name": "general", "user_id": user, "user_name": user.lower(), "command": "/kb",
                      "text": text, "api_app_id": APP_ID, "is_enterprise_install": "false",
                      "response_url": h.standin.response_url(key), "trigger_id": f"1.{key}"}).encode()


def responses(h: SlackHarness, key: str):
    return [c for c in h.standin.calls_to("response_url") if c.key == key]


def assert_replay_ignored(first, replay) -> None:
    assert first.status_code == 200 and first.content
    assert replay.status_code == 200 and replay.content == b""


def no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    assert "Traceback" not in caplog.text
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []


# -- replays ------------------------------------------------------------------------------------------------
def test_a_replayed_kb_question_is_answered_once(harness: SlackHarness, caplog: pytest.LogCaptureFixture) -> None:
    h = harness
    h.standin.add_conversation("C0REPLAY1")
    first, replay = send_twice(h, command_body(h, "how do I declare an incident?", ALICE, "C0REPLAY1", "q"), FORM)
    assert_replay_ignored(first, replay)
    assert "Searching the knowledge base" in first.json()["text"]
    h.standin.wait_for(lambda s: responses(h, "q") or None)
    h.idle()
    [answer] = responses(h, "q")
    assert "/declare-incident" in json.dumps(answer.params["blocks"])
    assert "ignored a replayed request" in caplog.text


def test_a_replayed_click_cannot_undo_a_later_vote(harness: SlackHarness, store: StateStore) -> None:
    h = harness
    h.standin.add_conversation("C0REPLAY2")
    first = h.sender.command("what laptop do I get?", ALICE, "C0REPLAY2", h.standin.response_url("laptop"))
    assert first.status_code == 200
    [answer] = h.standin.wait_for(lambda s: responses(h, "laptop") or None)
    down, up = (feedback_action(answer.params["blocks"], positive) for positive in (False, True))
    trace_id = down["value"].split(":", 1)[1]

    def click_body(action: dict, key: str) -> bytes:
        payload = {"type": "block_actions", "team": {"id": TEAM_ID, "domain": "standin"},
                   "user": {"id": ALICE, "username": "alice", "team_id": TEAM_ID}, "api_app_id": APP_ID,
                   "token": "legacy", "container": {"type": "message", "is_ephemeral": True, "channel_id": "C0REPLAY2"},
                   "trigger_id": f"2.{key}", "channel": {"id": "C0REPLAY2", "name": "general"},
                   "response_url": h.standin.response_url(key),
                   "actions": [{**action, "action_ts": "1.0"}]}
        return urlencode({"payload": json.dumps(payload)}).encode()

    not_helpful = click_body(down, "fb-no")  # its trigger_id was never handed out: no modal, thanks instead
    headers = sign(SIGNING_SECRET, not_helpful)
    assert h.sender.post(not_helpful, FORM, headers, signed=False).status_code == 200
    h.standin.wait_for(lambda s: responses(h, "fb-no") or None)
    assert h.sender.click(ALICE, up,
                          h.standin.response_url("fb-yes"), channel_id="C0REPLAY2", ephemeral=True).status_code == 200
    h.standin.wait_for(lambda s: responses(h, "fb-yes") or None)
    replay = h.sender.post(not_helpful, FORM, headers, signed=False)
    assert replay.status_code == 200 and replay.content == b""
    h.idle()
    assert [r["value"] for r in store.feedback_for(trace_id)] == ["helpful"]
    assert len(responses(h, "fb-no")) == 1


def test_a_replayed_admin_reindex_runs_once(harness: SlackHarness, store: StateStore) -> None:
    h = harness
    h.standin.add_conversation("C0REPLAY3")
    runs_before = len(store.last_runs("handbook"))
    first, replay = send_twice(h, command_body(h, "reindex handbook", ADMIN, "C0REPLAY3", "ri"), FORM)
    assert_replay_ignored(first, replay)
    assert "Started an incremental re-index of *handbook*" in first.json()["text"]
    h.standin.wait_for(lambda s: responses(h, "ri") or None, timeout=60)
    h.idle()
    assert [e.outcome for e in store.audit_entries(action="admin.reindex") if e.actor == ADMIN] == ["ok", "started"]
    assert len(store.last_runs("handbook")) == runs_before + 1
    assert len(responses(h, "ri")) == 1


def test_a_replayed_event_is_answered_once(harness: SlackHarness) -> None:
    h = harness
    h.standin.add_conversation("C0REPLAY4")
    msg = h.standin.user_message("C0REPLAY4", ALICE, f"<@{BOT_USER_ID}> how do I report phishing?")
    envelope = h.sender.envelope({"type": "app_mention", "user": ALICE, "text": msg["text"], "ts": msg["ts"],
                                  "channel": "C0REPLAY4", "event_ts": msg["ts"]})
    first, replay = send_twice(h, json.dumps(envelope).encode(), "application/json")
    assert first.status_code == 200 and replay.status_code == 200 and replay.content == b""
    h.standin.wait_for(lambda s: s.answers("C0REPLAY4") or None)
    h.idle()
    assert len(h.standin.answers("C0REPLAY4")) == 1


def test_when_the_store_cannot_record_a_signature_the_request_gets_503(tmp_path: Path, wiki_index,
                                                                      session_wiki: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    from connectors.folder import FolderSource

    store = StateStore(sqlite_url(tmp_path / "state.sqlite"))
    runtime = build_agent(Settings(chatops_data_dir=tmp_path / "data"), index=wiki_index)
    h = SlackHarness(runtime, store, IndexJobs(runtime, store, [FolderSource(session_wiki)]))
    try:
        store.drop_all()  # every write now fails
        resp = h.sender.command("help", ALICE, "C0DOWN001", h.standin.response_url("down"))
        assert resp.status_code == 503 and "state store" in resp.json()["error"]
        h.idle()
        assert responses(h, "down") == []
    finally:
        h.close()
        store.close()
    assert "could not record a Slack request signature" in caplog.text
    no_traceback(caplog)


# -- hostile headers and bodies -------------------------------------------------------------------------------
def test_hostile_signature_headers_get_401_without_a_traceback(harness: SlackHarness,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    h = harness
    body = b'{"type": "url_verification", "challenge": "c"}'
    good = sign(SIGNING_SECRET, body)
    ts, sig = good["X-Slack-Request-Timestamp"], good["X-Slack-Signature"]
    cases = [
        {"X-Slack-Request-Timestamp": "²³".encode(), "X-Slack-Signature": sig},  # isdigit() is True
        {"X-Slack-Request-Timestamp": "1" * 5000, "X-Slack-Signature": sig},  # too many digits for int()
        {"X-Slack-Request-Timestamp": "١٧٠٠٠٠٠٠٠٠".encode(), "X-Slack-Signature": sig},  # Arabic-Indic digits
        {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": ("v0=" + "é" * 64).encode()},  # compare_digest
        {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": "v0=" + "A" * 64},
        {"X-Slack-Request-Timestamp": f"+{ts}", "X-Slack-Signature": sig},
    ]
    codes = [h.sender.post(body, "application/json", headers, signed=False).status_code for headers in cases]
    assert codes == [401] * len(cases)
    no_traceback(caplog)


DEEP = b"[" * 400_000 + b"]" * 400_000


def _payload(**fields) -> bytes:
    action = {"action_id": "feedback_helpful", "block_id": "b", "type": "button", "value": "v"}
    payload = {"type": "block_actions", "user": {"id": ALICE}, "team": {"id": TEAM_ID}, "actions": [action],
               "response_url": "RESPONSE_URL", **fields}
    return urlencode({"payload": json.dumps(payload)}).encode()


def _event(**fields) -> bytes:
    event = {"type": "app_mention", "user": ALICE, "text": "hi", "ts": "1.2", "channel": "C1", "event_ts": "1.2"}
    event.update(fields)
    return json.dumps({"type": "event_callback", "event_id": "EvX", "team_id": TEAM_ID, "event": event}).encode()


@pytest.mark.parametrize("body, content_type", [
    (_payload(actions=[{"x": 1}]), FORM),
    (_payload(actions=[{"action_id": 5}]), FORM),
    (_payload(actions=[{"action_id": "a", "block_id": ["b"]}]), FORM),
    (_payload(channel="C1"), FORM),
    (_payload(container=5), FORM),
    (_payload(user={"id": 5}), FORM),
    (_payload(message={"ts": 1.5}), FORM),
    (_event(text=5), "application/json"),
    (_event(type="message", message="edited"), "application/json"),
    (_event(type="message", previous_message={"thread_ts": 2}), "application/json"),
    (_event(type="assistant_thread_started", assistant_thread={"channel_id": 5}), "application/json"),
    (json.dumps({"type": "event_callback", "event": {"type": "app_mention"}, "authorizations": "x"}).encode(),
     "application/json"),
])
def test_signed_bodies_with_fields_of_the_wrong_type_get_400_without_a_traceback(
        harness: SlackHarness, caplog: pytest.LogCaptureFixture, body: bytes, content_type: str) -> None:
    body = body.replace(b"RESPONSE_URL", quote(harness.standin.response_url("wrong-type"), safe="").encode())
    resp = harness.sender.post(body, content_type)
    harness.idle()
    assert resp.status_code == 400, resp.text
    assert "malformed request" in resp.json()["error"]
    no_traceback(caplog)


@pytest.mark.parametrize("body, content_type", [
    (DEEP, "application/json"),
    (b'{"type": "event_callback", "event": {"type": "message", "x": ' + b"[" * 100 + b"]" * 100 + b"}}",
     "application/json"),
    (b'{"type": "event_callback", "event_id": ' + b"9" * 5000 + b"}", "application/json"),
    (b"payload=" + b"%5B" * 100_000 + b"%5D" * 100_000, FORM),
    (b"payload=" + urlencode({"p": json.dumps({"type": "block_actions", "actions": [{"x": json.loads(
        "[" * 80 + "]" * 80)}]})}).encode()[2:], FORM),
], ids=["nested-400k", "nested-in-event", "huge-number", "payload-nested-100k", "payload-nested-80"])
def test_hostile_signed_bodies_get_400_without_a_traceback(harness: SlackHarness, caplog: pytest.LogCaptureFixture,
                                                           body: bytes, content_type: str) -> None:
    caplog.set_level(logging.INFO)
    t0 = time.monotonic()
    resp = harness.sender.post(body, content_type)
    assert resp.status_code == 400, resp.text
    assert "malformed request" in resp.json()["error"] and time.monotonic() - t0 < 5
    assert harness.sender.http.get(harness.server.url + "/healthz").status_code == 200
    no_traceback(caplog)


def _view_submission(view: dict) -> bytes:
    payload = {"type": "view_submission", "user": {"id": ALICE}, "team": {"id": TEAM_ID}, "api_app_id": APP_ID,
               "view": {"id": "V1", "callback_id": "feedback_reason", **view}}
    return urlencode({"payload": json.dumps(payload)}).encode()


def _command(**fields) -> bytes:
    form = {"team_id": TEAM_ID, "channel_id": "C1", "user_id": ALICE, "command": "/kb",
            "text": "how do I declare an incident?", "api_app_id": APP_ID, "response_url": "RESPONSE_URL",
            "trigger_id": "1.t", **fields}
    return urlencode({k: v for k, v in form.items() if v is not None}).encode()


@pytest.mark.parametrize("body, error", [
    (_payload(response_url=None), "block_actions on a message without a response_url"),
    (_payload(response_url="javascript:alert(1)"), "payload.response_url is not an http(s) address"),
    (_view_submission({"state": "values"}), "payload.view.state is not an object"),
    (_view_submission({"state": {"values": []}}), "payload.view.state.values is not an object of objects"),
    (_view_submission({"state": {"values": {"reason": "wrong"}}}), "view.state.values is not an object of objects"),
    (_view_submission({"state": {"values": {}}, "private_metadata": 5}), "payload.view.private_metadata is not"),
    (_command(response_url=None), "slash command without response_url"),
    (_command(response_url="not a url"), "response_url is not an http(s) address"),
    (b"command=%2Fkb&user_id=" + ALICE.encode(), "slash command without response_url"),
], ids=["click-no-response-url", "click-bad-response-url", "view-state-string", "view-values-list",
        "view-values-of-strings", "view-metadata-number", "command-no-response-url", "command-bad-response-url",
        "command-bare"])
def test_signed_but_malformed_clicks_and_commands_get_400_and_one_warning_line(
        harness: SlackHarness, caplog: pytest.LogCaptureFixture, body: bytes, error: str) -> None:
    """Shapes that used to reach the listeners and fail there (a full traceback in the log, or a 500 from
    Bolt's middleware): a click on a message with no (or no usable) response_url, a modal submission whose
    state is not objects, a slash command with no (or no usable) response_url."""
    caplog.set_level(logging.INFO)
    body = body.replace(b"RESPONSE_URL", quote(harness.standin.response_url("malformed"), safe="").encode())
    resp = harness.sender.post(body, FORM)
    harness.idle()
    assert resp.status_code == 400, resp.text
    assert error in resp.json()["error"]
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage().count("\n") for r in warnings] == [0] and "rejected a malformed request" in caplog.text
    no_traceback(caplog)
