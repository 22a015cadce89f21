"""Microsoft 365 meetings from Slack end to end: signed events and clicks into the real Bolt app behind
``bot.server.create_app`` (``tests/standins/slack/``), the real agent with the action tools registered from
settings (``CALENDAR_BACKEND=microsoft``, the ``GRAPH_*`` settings pointing at ``tests/standins/graph.py`` over
HTTPS), the real SQLite state store and the action service wired as ``chatops serve`` wires it.

A meeting request on Teams gets the preview with Confirm / Cancel and nothing is booked before Confirm;
Confirm books ONE event in the requester's own Outlook calendar (their Slack e-mail is the mailbox), with the
attendee invited and the Teams join link shown in the thread; clicking Confirm again books nothing new. A
requester outside the application access policy is told so in the thread, and nothing is claimed.

Free/busy before booking (getSchedule): a request at a time when an attendee is busy shows who is busy and the
next free slots as buttons; the picked one is booked, once. "find 30 minutes with carol@example.com next week"
proposes the first common free slot with the next ones as buttons; a picked slot is booked once.
"""

from __future__ import annotations

import itertools
import json
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo
from pathlib import Path
from typing import Any

import pytest

from app.actions import build_action_service
from app.jobs import IndexJobs
from app.settings import Settings
from app.wiring import build_agent
from bot.slack import render
from bot.slack.actions import register_builtin_actions
from bot.slack.pending import slack_handlers
from connectors.folder import FolderSource
from tests.standins.graph import CLIENT_ID, CLIENT_SECRET, TENANT, GraphStandIn
from tests.standins.slack import BOT_USER_ID, TEAM_ID, Call, SlackHarness
from state import StateStore
from state.store import sqlite_url

ALICE, BOB, MALLORY = "UALICE01", "UBOB0002", "UMALLORY"
_ids = itertools.count(1)
BERLIN = ZoneInfo("Europe/Berlin")


@pytest.fixture(scope="module")
def graph():
    with GraphStandIn({"ualice01@example.com", "ubob0002@example.com", "umallory@example.com", "carol@example.com",
                       "dave@example.com"},
                      allowed={"ualice01@example.com", "ubob0002@example.com"}) as g:
        yield g


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory, graph: GraphStandIn, wiki_index, session_wiki: Path):
    settings = Settings(chatops_data_dir=tmp_path_factory.mktemp("ms-slack-data"), calendar_backend="microsoft",
                        graph_tenant_id=TENANT, graph_client_id=CLIENT_ID, graph_client_secret=CLIENT_SECRET,
                        graph_api_endpoint=graph.graph, graph_authority_host=graph.url, graph_ca_bundle=graph.ca_file)
    store = StateStore(sqlite_url(tmp_path_factory.mktemp("ms-slack-state") / "state.sqlite"))
    runtime = build_agent(settings, index=wiki_index)
    h = SlackHarness(runtime, store, IndexJobs(runtime, store, [FolderSource(session_wiki)]))
    for user in (ALICE, BOB, MALLORY):
        h.standin.add_user(user, tz="Europe/Berlin")
    service = build_action_service(settings, runtime.tools, store)
    h.bot.use_pending_actions(*slack_handlers(service, default_timezone="Europe/Berlin"))
    h.service = service  # type: ignore[attr-defined]
    yield h
    register_builtin_actions(h.bot.actions)
    h.close()
    runtime.tools.get("calendar.create").close()
    store.close()


def ask(h: SlackHarness, text: str, user: str = ALICE) -> tuple[str, dict[str, Any]]:
    ch = f"CM{next(_ids):08d}"
    h.standin.add_conversation(ch, "channel", True)
    root = h.standin.user_message(ch, user, f"<@{BOT_USER_ID}> {text}", None)
    resp, _ = h.sender.event({"type": "app_mention", "user": user, "text": root["text"], "ts": root["ts"],
                              "channel": ch, "event_ts": root["ts"], "team": TEAM_ID})
    assert resp.status_code == 200
    return ch, root


def reply(h: SlackHarness, channel: str, thread_ts: str) -> Call:
    return h.standin.wait_for(lambda s: a[0] if (a := s.answers(channel, thread_ts)) else None)


def confirm_button(blocks: list[dict]) -> dict | None:
    return next((e for b in blocks if b["type"] == "actions" for e in b["elements"]
                 if e["action_id"].startswith(render.PENDING_CONFIRM)), None)


def click(h: SlackHarness, who: str, button: dict, channel: str, post: Call, rkey: str) -> Call:
    message = {"type": "message", "ts": post.result["ts"], "text": post.params["text"], "blocks": post.params["blocks"]}
    resp = h.sender.click(who, button, h.standin.response_url(rkey), channel_id=channel, message=message)
    assert resp.status_code == 200
    return h.standin.wait_for(lambda s: next((c for c in s.calls_to("response_url") if c.key == rkey), None))


def test_a_teams_meeting_is_booked_once_in_outlook_from_slack(harness: SlackHarness, graph: GraphStandIn) -> None:
    h = harness
    ch, root = ask(h, "book a 30 min release sync with bob@example.com tomorrow at 3pm on teams")
    post = reply(h, ch, root["ts"])
    shown = json.dumps(post.params["blocks"], ensure_ascii=False)
    assert "bob@example.com" in shown and "15:00" in shown
    button = confirm_button(post.params["blocks"])
    assert button is not None, post.params["text"]
    assert not graph.events and not graph.calls("POST", "/events")  # nothing before Confirm

    done = click(h, ALICE, button, ch, post, "ms-1")
    [event] = graph.events["ualice01@example.com"]
    assert graph.invitations == [("bob@example.com", event["id"])]
    assert event["isOnlineMeeting"] and event["transactionId"] == button["value"]
    text = json.dumps(done.params, ensure_ascii=False)
    join = event["onlineMeeting"]["joinUrl"]
    assert "Booked" in text and join in text and "Join the Teams meeting" in text and "Open in Outlook" in text
    assert graph.calls("POST", "/events")[0].headers["prefer"] == 'outlook.timezone="Europe/Berlin"'

    again = click(h, ALICE, button, ch, post, "ms-2")
    assert "already" in again.params["text"]
    assert len(graph.events["ualice01@example.com"]) == 1 and len(graph.calls("POST", "/events")) == 1


def test_a_requester_outside_the_access_policy_is_told_and_nothing_is_claimed(harness: SlackHarness,
                                                                              graph: GraphStandIn) -> None:
    h = harness
    ch, root = ask(h, "book a 30 min sync with bob@example.com tomorrow at 4pm", user=MALLORY)
    post = reply(h, ch, root["ts"])
    button = confirm_button(post.params["blocks"])
    assert button is not None, post.params["text"]
    done = click(h, MALLORY, button, ch, post, "ms-denied")
    text = json.dumps(done.params, ensure_ascii=False)
    assert "may not book in umallory@example.com's Microsoft 365 calendar" in text
    assert "Booked" not in text and "Nothing was booked" in text
    assert "umallory@example.com" not in graph.events and not any(e == "umallory" for e, _ in graph.invitations)


def choice_buttons(blocks: list[dict]) -> list[dict]:
    return [e for b in blocks if b["type"] == "actions" for e in b["elements"] if "#" in e["action_id"]]


def _wall(event: dict) -> datetime:
    return datetime.fromisoformat(event["start"]["dateTime"]).replace(tzinfo=ZoneInfo(event["start"]["timeZone"]))


def test_a_busy_attendee_is_named_and_a_picked_free_slot_is_booked_once(harness: SlackHarness,
                                                                          graph: GraphStandIn) -> None:
    h = harness
    tomorrow = (datetime.now(BERLIN) + timedelta(days=1)).replace(hour=11, minute=0, second=0, microsecond=0)
    graph.add_busy("carol@example.com", tomorrow - timedelta(minutes=30), tomorrow + timedelta(hours=1))
    ch, root = ask(h, "book a 30 min sync with carol@example.com tomorrow at 11am")
    post = reply(h, ch, root["ts"])
    shown = json.dumps(post.params["blocks"], ensure_ascii=False)
    assert "*Busy then:* carol@example.com" in shown and "*Next free:*" in shown
    [schedule] = graph.calls("POST", "/calendar/getSchedule")[-1:]
    assert sorted(schedule.body["schedules"]) == ["carol@example.com", "ualice01@example.com"]
    picks = choice_buttons(post.params["blocks"])
    assert picks and all(p["text"]["text"].startswith("Book ") for p in picks)
    key = confirm_button(post.params["blocks"])["value"]
    offered = [datetime.fromisoformat(s) for s in h.service.get(key).args["free_slots"]]
    assert offered[0] >= tomorrow + timedelta(hours=1) and len(offered) == len(picks)
    before = len(graph.events.get("ualice01@example.com", []))

    done = click(h, ALICE, picks[0], ch, post, "fb-pick")
    events = graph.events["ualice01@example.com"]
    assert len(events) == before + 1 and _wall(events[-1]) == offered[0]
    assert "Booked" in json.dumps(done.params, ensure_ascii=False)
    again = click(h, ALICE, confirm_button(post.params["blocks"]), ch, post, "fb-again")
    other = click(h, ALICE, picks[-1], ch, post, "fb-other")
    assert "already" in again.params["text"] and "already" in other.params["text"]
    assert len(graph.events["ualice01@example.com"]) == before + 1


def test_find_30_minutes_next_week_books_the_picked_slot_once(harness: SlackHarness, graph: GraphStandIn) -> None:
    h = harness
    now = datetime.now(BERLIN)
    monday = (now + timedelta(days=7 - now.weekday())).replace(hour=0, minute=0, second=0, microsecond=0)
    graph.add_busy("dave@example.com", monday, monday + timedelta(hours=10))  # Monday until 10:00 Berlin
    ch, root = ask(h, "find 30 minutes with dave@example.com next week")
    post = reply(h, ch, root["ts"])
    key = confirm_button(post.params["blocks"])["value"]
    args = h.service.get(key).args
    first = datetime.fromisoformat(args["start"])
    assert first == monday + timedelta(hours=10)  # both at work 08:00-17:00 UTC; Dave is free from 10:00
    slots = [datetime.fromisoformat(s) for s in args["free_slots"]]
    assert slots == [first + timedelta(minutes=30 * i) for i in (1, 2, 3)]
    picks = choice_buttons(post.params["blocks"])
    assert [p["text"]["text"] for p in picks] == [f"Book {s.astimezone(BERLIN):%a %d %b %H:%M}" for s in slots]
    assert "dave@example.com" in json.dumps(post.params["blocks"]) and not graph.events.get("dave@example.com")
    before = len(graph.events.get("ualice01@example.com", []))

    done = click(h, ALICE, picks[1], ch, post, "find-pick")
    events = graph.events["ualice01@example.com"]
    assert len(events) == before + 1 and _wall(events[-1]) == slots[1]
    assert f"{slots[1].astimezone(BERLIN):%H:%M}" in done.params["text"]
    assert graph.invitations[-1][0] == "dave@example.com"
    click(h, ALICE, picks[0], ch, post, "find-again")
    assert len(graph.events["ualice01@example.com"]) == before + 1
