"""Invitations of the local calendar on Slack, end to end: signed events and clicks into the real Bolt app
behind ``bot.server.create_app`` (``tests/standins/slack/``, which grants ``manifest.yml``'s scopes and
speaks ``users.lookupByEmail``, ``conversations.open`` and ``files.uploadV2``'s three steps:
``files.getUploadURLExternal``, the upload, ``files.completeUploadExternal``), the real agent over the
session index with the default calendar backend (``CALENDAR_BACKEND=local``), the real SQLite state store
and the action service wired as ``chatops serve`` wires it (:func:`bot.slack.pending.use_actions`).

The preview names who will get the invitation in a DM and who is not in the workspace; Confirm books
the event and sends each attendee in the workspace a DM with the event's ``.ics``; an outside address
gets nothing and is named; a failed upload is said in the thread and never claimed as sent.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import icalendar
import pytest

from app.actions import build_action_service
from app.jobs import IndexJobs
from app.settings import Settings
from app.wiring import build_agent
from bot.slack import render
from bot.slack.actions import register_builtin_actions
from bot.slack.pending import use_actions
from connectors.folder import FolderSource
from tests.standins.slack import BOT_USER_ID, TEAM_ID, Call, SlackHarness
from state import StateStore
from state.store import sqlite_url

ALICE, BOB, DANA = "UALICE01", "UBOB0002", "UDANA003"
_ids = itertools.count(1)


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory, wiki_index, session_wiki: Path):
    settings = Settings(chatops_data_dir=tmp_path_factory.mktemp("invites-slack-data"))
    assert settings.calendar_backend == "local"
    store = StateStore(sqlite_url(tmp_path_factory.mktemp("invites-slack-state") / "state.sqlite"))
    runtime = build_agent(settings, index=wiki_index)
    h = SlackHarness(runtime, store, IndexJobs(runtime, store, [FolderSource(session_wiki)]))
    h.standin.add_user(ALICE, tz="Europe/Berlin", email="alice@example.com")
    h.standin.add_user(BOB, tz="Europe/Berlin", email="bob@example.com", real_name="Bob Builder")
    h.standin.add_user(DANA, tz="Europe/Berlin", email="dana@example.com")
    service = build_action_service(settings, runtime.tools, store)
    use_actions(h.bot, service, default_timezone="Europe/Berlin")
    h.service = service  # type: ignore[attr-defined]
    yield h
    register_builtin_actions(h.bot.actions)
    h.close()
    runtime.tools.get("calendar.create").close()
    store.close()


def ask(h: SlackHarness, text: str) -> tuple[str, str, Call]:
    """A mention in a fresh channel's thread; returns the channel, the thread and the bot's answer."""
    ch = f"CI{next(_ids):08d}"
    h.standin.add_conversation(ch, "channel", True)
    root = h.standin.user_message(ch, ALICE, "planning", None)
    msg = h.standin.user_message(ch, ALICE, f"<@{BOT_USER_ID}> {text}", root["ts"])
    resp, _ = h.sender.event({"type": "app_mention", "user": ALICE, "text": msg["text"], "ts": msg["ts"],
                              "channel": ch, "event_ts": msg["ts"], "thread_ts": root["ts"], "team": TEAM_ID})
    assert resp.status_code == 200
    post = h.standin.wait_for(lambda s: (a := s.answers(ch, root["ts"])) and a[0])
    return ch, root["ts"], post


def confirm(h: SlackHarness, ch: str, post: Call, rkey: str) -> Call:
    button = next(e for b in post.params["blocks"] if b["type"] == "actions" for e in b["elements"]
                  if e["action_id"].startswith(render.PENDING_CONFIRM))
    message = {"type": "message", "ts": post.result["ts"], "text": post.params["text"], "blocks": post.params["blocks"]}
    resp = h.sender.click(ALICE, button, h.standin.response_url(rkey), channel_id=ch, message=message)
    assert resp.status_code == 200 and resp.elapsed.total_seconds() < 3
    return h.standin.wait_for(lambda s: next((c for c in s.calls_to("response_url") if c.key == rkey), None))


def shown(call: Call) -> str:
    return call.params.get("text", "") + json.dumps(call.params.get("blocks") or [], ensure_ascii=False)


def ics_attendees(data: bytes) -> set[str]:
    event = next(iter(icalendar.Calendar.from_ical(data).walk("VEVENT")))
    found = event.get("attendee")
    return {str(a).removeprefix("mailto:") for a in (found if isinstance(found, list) else [found])}


def test_the_attendees_in_the_workspace_get_the_ics_in_a_dm_and_outsiders_are_named(harness: SlackHarness) -> None:
    h = harness
    ch, _, post = ask(h, "set up a release review with bob@example.com and carol@outside.org tomorrow at 3pm")
    preview = shown(post)
    assert "Bob Builder will get the invitation in a DM" in preview, preview
    assert "carol@outside.org is not in the workspace and will not be invited" in preview
    assert not h.standin.files and not h.standin.calls_to("conversations.open")  # nothing before Confirm

    done = shown(confirm(h, ch, post, "inv-1"))
    assert "Booked" in done and "Bob Builder got the invitation in a DM." in done
    assert "Not invited (not in the workspace): carol@outside.org." in done
    [sent] = h.standin.files
    assert sent["channel"] == "D" + BOB[1:] and sent["name"] == "release-review.ics"
    assert ics_attendees(sent["content"]) == {"bob@example.com", "carol@outside.org"}
    [dm] = [m for m in h.standin.conversations[sent["channel"]].messages if m.get("files")]
    assert "alice@example.com invited you: Release review" in dm["text"]
    # files.uploadV2's real flow, in order, one file, to Bob only
    order = [c.method for c in h.standin.calls if c.method in {
        "conversations.open", "files.getUploadURLExternal", "upload", "files.completeUploadExternal"}]
    assert order == ["conversations.open", "files.getUploadURLExternal", "upload", "files.completeUploadExternal"]
    assert [c.params["users"] for c in h.standin.calls_to("conversations.open")] == [BOB]

    again = shown(confirm(h, ch, post, "inv-2"))  # a second click books nothing and sends nothing again
    assert "already" in again.lower() and len(h.standin.files) == 1


def test_a_failed_upload_is_said_in_the_thread_and_not_claimed(harness: SlackHarness) -> None:
    h = harness
    before = len(h.standin.files)
    ch, _, post = ask(h, "book a sync with dana@example.com and bob@example.com tomorrow at 4pm")
    assert "will get the invitation in a DM" in shown(post)
    h.standin.upload_status = 500  # the upload URL fails: files.completeUploadExternal must not be reached
    try:
        done = shown(confirm(h, ch, post, "inv-fail"))
    finally:
        h.standin.upload_status = 200
    assert "Booked" in done and "got the invitation" not in done
    assert "The invitation could not be sent to" in done and "Bob Builder" in done and "User UDANA003" in done
    assert len(h.standin.files) == before
    key = next(e["value"] for b in post.params["blocks"] if b["type"] == "actions" for e in b["elements"])
    result: dict[str, Any] = h.service.get(key).result
    assert result["invitations"]["sent"] == [] and len(result["invitations"]["failed"]) == 2
