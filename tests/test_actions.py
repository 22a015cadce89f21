"""The confirmation flow a Slack Confirm / Cancel button drives, through :class:`app.actions.ActionService`
and the pure renderers of each platform (:mod:`bot.slack.action_blocks` and the others), on the real state store (SQLite) and the local
calendar: the preview (Block Kit with ``action_confirm:`` / ``action_cancel:`` buttons carrying the
key), confirm once, a double click and a burst of concurrent clicks creating exactly one event, cancel,
someone else's click refused, a retried (redelivered) proposal returning the stored action, an
expired preview, a start that passed before the click, and the audit log (who, what, when, event
id). The Teams Adaptive Card and the terminal rendering of the same action are checked too.
"""

from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from agent.models import PendingAction, Turn, idempotency_key
from app.actions import ActionService, build_action_service
from app.actions import parse_action_id
from bot.console_actions import terminal_outcome, terminal_preview
from bot.slack.action_blocks import preview_text, slack_blocks_for_record, slack_outcome_blocks, slack_preview_blocks
from bot.teams.action_cards import adaptive_card, adaptive_card_outcome
from app.settings import Settings
from state import StateStore
from tools.base import ToolContext, ToolRegistry
from tools.calendar import CalendarCreate, CalendarCreateArgs
from tools.calendar.local import LocalCalendar
from tests.helpers import public_viewer

REQUESTER = "U0REQUEST"
OTHER = "U0SOMEONE"


@pytest.fixture
def env(tmp_path: Path):
    store = StateStore(f"sqlite:///{tmp_path / 'state.sqlite'}")
    calendar = LocalCalendar(store.url, tmp_path / "calendar")
    tools = ToolRegistry()
    tools.register(CalendarCreate(calendar))
    yield store, calendar, tools
    calendar.close()
    store.close()


def _turn(message_id: str = "1710259200.000100") -> Turn:
    return Turn(viewer=public_viewer(), text="set up a 30 min release review with alice@example.com tomorrow at 3pm", platform="slack",
                user_id=REQUESTER, channel_id="C0CHAN", thread_id="1710259200.000100", message_id=message_id,
                timezone="Europe/Berlin")


def _action(name: str = "a", start: datetime | None = None, **kw) -> PendingAction:
    start = start or (datetime.now(timezone.utc) + timedelta(days=1)).replace(hour=14, minute=0, second=0,
                                                                             microsecond=0)
    raw = {"title": "Release review", "start": start, "duration_minutes": 30, "attendees": ["alice@example.com"],
           "timezone": "Europe/Berlin", "description": "Requested in chat: \u201cset up a 30 min release review\u201d "
           + "<b>&" + " context" * 80}
    raw.update(kw)
    args = CalendarCreateArgs.model_validate(raw)
    return PendingAction("calendar.create", args.model_dump(mode="json"), idempotency_key("test", name),
                         "Release review")


def _buttons(blocks: list[dict]) -> list[dict]:
    return [e for b in blocks if b["type"] == "actions" for e in b["elements"]]


def test_preview_blocks_carry_the_key_and_show_the_requesters_time(env) -> None:
    store, _, tools = env
    service = ActionService(store, tools)
    action = _action(start=datetime(2030, 7, 1, 13, 0, tzinfo=timezone.utc))
    rec = service.propose(action, _turn())
    assert rec.status == "pending" and rec.requester == REQUESTER and rec.platform == "slack"
    assert rec.channel_id == "C0CHAN" and rec.thread_id == "1710259200.000100"
    assert timedelta(minutes=59) < rec.expires_at - rec.created_at <= timedelta(hours=1)

    blocks = slack_preview_blocks(rec, service.tool(rec.tool), viewer_tz="America/New_York")
    json.dumps(blocks)  # plain JSON, ready for chat.postMessage
    confirm, cancel = _buttons(blocks)
    key = action.idempotency_key
    assert confirm["action_id"] == f"action_confirm:{key}" and confirm["value"] == key and confirm["style"] == "primary"
    assert cancel["action_id"] == f"action_cancel:{key}" and cancel["value"] == key and cancel["style"] == "danger"
    assert parse_action_id(confirm["action_id"]) == ("confirm", key)
    text = json.dumps(blocks)
    assert "Release review" in text and "alice@example.com" in text and "30 min" in text
    assert "09:00\\u201309:30 (America/New_York)" in text  # 13:00 UTC in the viewer's zone
    assert "15:00 Europe/Berlin" in text  # and the event's own zone
    assert f"<@{REQUESTER}>" in text
    assert "&lt;b&gt;&amp;" in text and "<b>" not in text  # user text escaped for mrkdwn
    for b in blocks:
        if b["type"] == "section":
            assert len(b["text"]["text"]) <= 3000
        if b["type"] == "context":
            assert all(len(e["text"]) <= 3000 for e in b["elements"])
    assert "Confirm or cancel: Release review" in preview_text(rec, service.tool(rec.tool), "America/New_York")


def test_confirm_once_then_a_second_click_creates_nothing(env) -> None:
    store, calendar, tools = env
    service = ActionService(store, tools)
    action = _action()
    service.propose(action, _turn())
    key = action.idempotency_key

    out = service.handle_button(f"action_confirm:{key}", key, REQUESTER, user_email="req@example.com")
    assert out.status == "done" and out.final and not out.private
    assert out.result["event_id"] == key and out.result["backend"] == "local"
    assert calendar.get(key) is not None and calendar.get(key)["organizer_email"] == "req@example.com"
    assert service.get(key).status == "done"
    blocks = slack_outcome_blocks(out, viewer_tz="Europe/Berlin")
    assert _buttons(blocks) == [] and "Booked" in json.dumps(blocks)
    # the local calendar's link is the server's file:// path of the .ics: never posted to chat
    assert out.result["link"].startswith("file://") and "file://" not in json.dumps(blocks)

    again = service.handle_button(f"action_confirm:{key}", key, REQUESTER)
    assert again.status == "already_done" and again.final and again.result["link"] == out.result["link"]
    assert len(calendar.events()) == 1
    (entry,) = store.audit_entries(action="calendar.create")
    assert (entry.actor, entry.platform, entry.target, entry.outcome) == (REQUESTER, "slack", key, "ok")
    assert entry.detail["args"]["title"] == "Release review" and entry.detail["link"] == out.result["link"]
    assert abs(entry.at - datetime.now(timezone.utc)) < timedelta(minutes=1)


def test_concurrent_clicks_execute_exactly_once(env) -> None:
    store, calendar, tools = env
    service = ActionService(store, tools)
    action = _action("burst")
    service.propose(action, _turn())
    barrier = threading.Barrier(10)
    statuses: list[str] = []

    def click() -> None:
        barrier.wait()
        statuses.append(service.confirm(action.idempotency_key, REQUESTER).status)

    threads = [threading.Thread(target=click) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses.count("done") == 1
    assert set(statuses) <= {"done", "already_done", "in_progress"}
    assert len(calendar.events()) == 1
    assert len([a for a in store.audit_entries(action="calendar.create") if a.outcome == "ok"]) == 1


def test_someone_elses_click_is_refused(env) -> None:
    store, calendar, tools = env
    service = ActionService(store, tools)
    action = _action("other")
    service.propose(action, _turn())
    key = action.idempotency_key
    for op in ("confirm", "cancel"):
        out = service.handle_button(f"action_{op}:{key}", key, OTHER)
        assert out.status == "forbidden" and out.private and not out.final
        assert "Only the person who asked" in out.message
    assert service.get(key).status == "pending" and calendar.events() == []
    denied = store.audit_entries(action="calendar.create")
    assert [(a.actor, a.outcome) for a in denied] == [(OTHER, "denied"), (OTHER, "denied")]
    assert service.confirm(key, REQUESTER).status == "done"  # the requester still can


def test_cancel_then_confirm_books_nothing(env) -> None:
    store, calendar, tools = env
    service = ActionService(store, tools)
    action = _action("cancel")
    service.propose(action, _turn())
    key = action.idempotency_key
    out = service.handle_button(f"action_cancel:{key}", key, REQUESTER)
    assert out.status == "cancelled" and out.final
    assert _buttons(slack_outcome_blocks(out)) == [] and "Cancelled" in json.dumps(slack_outcome_blocks(out))
    assert service.cancel(key, REQUESTER).status == "already_cancelled"
    assert service.confirm(key, REQUESTER).status == "already_cancelled"
    assert calendar.events() == []
    assert [a.outcome for a in store.audit_entries(action="calendar.create")] == ["cancelled"]


def test_cancel_after_booking_keeps_the_event(env) -> None:
    store, calendar, tools = env
    service = ActionService(store, tools)
    action = _action("late-cancel")
    service.propose(action, _turn())
    service.confirm(action.idempotency_key, REQUESTER)
    out = service.cancel(action.idempotency_key, REQUESTER)
    assert out.status == "already_done" and "delete the event" in out.message
    assert len(calendar.events()) == 1 and service.get(action.idempotency_key).status == "done"


def test_a_redelivered_proposal_returns_the_stored_action(env) -> None:
    store, calendar, tools = env
    service = ActionService(store, tools)
    action = _action("redelivered")
    first = service.propose(action, _turn())
    service.confirm(action.idempotency_key, REQUESTER)
    second = service.propose(action, _turn())
    assert second.key == first.key and second.status == "done"
    cal = tools.get("calendar.create")
    blocks = slack_blocks_for_record(second, cal, viewer_tz="Europe/Berlin")
    assert _buttons(blocks) == [] and "Booked" in json.dumps(blocks)  # no fresh buttons for a booked action
    pending = service.propose(_action("fresh"), _turn("1710259300.000200"))
    assert len(_buttons(slack_blocks_for_record(pending, cal))) == 2
    assert len(calendar.events()) == 1


def test_an_expired_preview_says_so(env) -> None:
    store, calendar, tools = env
    action = _action("expired")
    ActionService(store, tools, ttl=timedelta(minutes=5)).propose(action, _turn())
    later = ActionService(store, tools, clock=lambda: datetime.now(timezone.utc) + timedelta(minutes=6))
    out = later.handle_button(f"action_confirm:{action.idempotency_key}", action.idempotency_key, REQUESTER)
    assert out.status == "expired" and out.final and "expired" in out.message and "Ask me again" in out.message
    assert later.get(action.idempotency_key).status == "expired"
    assert later.confirm(action.idempotency_key, REQUESTER).status == "expired"
    assert calendar.events() == []
    assert "expired" in json.dumps(slack_outcome_blocks(out)).lower()
    rec = later.get(action.idempotency_key)
    assert _buttons(slack_blocks_for_record(rec, tools.get("calendar.create"), now=datetime.now(timezone.utc))) == []


def test_a_start_that_passed_before_the_click_is_not_booked(env) -> None:
    store, calendar, tools = env
    service = ActionService(store, tools)
    soon = datetime.now(timezone.utc) + timedelta(seconds=1)
    raw = _action("passed").args | {"start": (soon - timedelta(minutes=2)).isoformat(),
                                    "end": (soon + timedelta(minutes=28)).isoformat()}
    action = PendingAction("calendar.create", raw, idempotency_key("test", "passed"), "Release review")
    service.propose(action, _turn())
    out = service.confirm(action.idempotency_key, REQUESTER)
    assert out.status == "failed" and "start time has passed" in out.message
    assert service.get(action.idempotency_key).status == "failed" and calendar.events() == []
    assert [a.outcome for a in store.audit_entries(action="calendar.create")] == ["failed"]
    assert service.confirm(action.idempotency_key, REQUESTER).status == "failed"


def test_unknown_buttons_and_keys(env) -> None:
    store, _, tools = env
    service = ActionService(store, tools)
    assert service.handle_button("feedback:helpful", "x", REQUESTER).status == "not_found"
    assert service.handle_button("action_confirm:abc", "different", REQUESTER).status == "not_found"
    assert service.confirm("nosuchkey", REQUESTER).status == "not_found"
    assert service.cancel("nosuchkey", REQUESTER).status == "not_found"
    with pytest.raises(ValueError, match="no side effects"):
        class Lookup:  # a tool without side effects never needs a preview
            name = "demo.lookup"
            description = "read only"
            Args = CalendarCreateArgs
            side_effect = False
            permission = "everyone"

            def run(self, args, ctx):
                return None

        tools.register(Lookup())
        service.propose(PendingAction("demo.lookup", {}, idempotency_key("x"), ""), _turn())


def test_interrupted_execution_is_resumed_without_a_second_event(env) -> None:
    store, calendar, tools = env
    action = _action("stuck")
    service = ActionService(store, tools)
    service.propose(action, _turn())
    key = action.idempotency_key
    # A replica took the click and died after booking, before recording it:
    assert store.transition_pending(key, "pending", "executing")
    assert tools.get("calendar.create").execute(CalendarCreateArgs.model_validate(action.args), key,
                                                ToolContext(user_id=REQUESTER)).ok
    assert service.confirm(key, REQUESTER).status == "in_progress"  # too recent to be called stuck
    later = ActionService(store, tools, clock=lambda: datetime.now(timezone.utc) + timedelta(minutes=10))
    out = later.confirm(key, REQUESTER)
    assert out.status == "done" and out.result["created"] is False
    assert len(calendar.events()) == 1


def test_terminal_and_teams_rendering(env) -> None:
    store, _, tools = env
    service = ActionService(store, tools)
    action = _action("render", start=datetime(2030, 7, 1, 13, 0, tzinfo=timezone.utc), video_conference=True,
                     location="Room 4B")
    rec = service.propose(action, _turn())
    cal = service.tool(rec.tool)
    text = terminal_preview(rec, cal, "Europe/Berlin")
    assert "Release review" in text and "15:00\u201315:30 (Europe/Berlin)" in text and action.idempotency_key in text
    assert "video      yes" in text and "Room 4B" in text

    card = adaptive_card(rec, cal, viewer_tz="Europe/Berlin")
    assert card["type"] == "AdaptiveCard" and card["version"] == "1.4"
    facts = {f["title"]: f["value"] for b in card["body"] if b["type"] == "FactSet" for f in b["facts"]}
    assert facts["Attendees"] == "alice@example.com" and facts["Length"] == "30 min" and facts["Where"] == "Room 4B"
    assert [(a["title"], a["data"]) for a in card["actions"]] == [
        ("Confirm", {"action": "action_confirm", "key": action.idempotency_key}),
        ("Cancel", {"action": "action_cancel", "key": action.idempotency_key})]
    data = card["actions"][0]["data"]
    out = service.handle_button(f"{data['action']}:{data['key']}", data["key"], REQUESTER)
    assert out.status == "done"
    assert "Booked" in terminal_outcome(out) and out.result["link"] in terminal_outcome(out)
    done_card = adaptive_card_outcome(out, viewer_tz="Europe/Berlin")
    assert "actions" not in done_card  # a file:// link is not offered to Teams
    assert done_card["body"][0]["text"] == "Booked"


def test_service_from_settings_uses_the_state_database(tmp_path: Path) -> None:
    settings = Settings(chatops_data_dir=tmp_path, action_ttl_minutes=10)
    from app.wiring import register_action_tools

    tools = register_action_tools(ToolRegistry(), settings)
    service = build_action_service(settings, tools)
    rec = service.propose(_action("settings"), _turn())
    assert rec.expires_at - rec.created_at == timedelta(minutes=10)
    out = service.confirm(rec.key, REQUESTER)
    assert out.status == "done" and Path(settings.ics_dir, f"{rec.key}.ics").exists()
    assert (tmp_path / "state.sqlite").exists()
    for tool in tools.actions():
        tool.close()
    service.store.close()
    assert ZoneInfo(settings.default_timezone)


def test_a_series_is_previewed_in_words_everywhere_and_booked_with_its_rule(env) -> None:
    store, calendar, tools = env
    service = ActionService(store, tools)
    monday = datetime(2030, 7, 1, 9, 0, tzinfo=ZoneInfo("Europe/Berlin"))
    action = _action("series", start=monday, duration_minutes=25, recurrence="FREQ=WEEKLY;BYDAY=MO")
    rec = service.propose(action, _turn())
    when = "every Monday, 09:00\u201309:25, starting Mon 01 Jul 2030 (Europe/Berlin)"
    cal = service.tool(rec.tool)
    assert when in terminal_preview(rec, cal, "Europe/Berlin")
    assert when in json.dumps(slack_preview_blocks(rec, cal, viewer_tz="Europe/Berlin"), ensure_ascii=False)
    assert when in preview_text(rec, cal, "Europe/Berlin")
    facts = {f["title"]: f["value"] for b in adaptive_card(rec, cal, viewer_tz="Europe/Berlin")["body"]
             if b["type"] == "FactSet" for f in b["facts"]}
    assert facts["When"] == when
    # A viewer elsewhere also sees the first start in their own zone.
    assert f"{when}; first Mon 01 Jul 03:00 America/New_York" in terminal_preview(rec, cal, "America/New_York")
    out = service.confirm(action.idempotency_key, REQUESTER)
    assert out.status == "done"
    (event,) = calendar.events()
    assert event["recurrence"] == "FREQ=WEEKLY;BYDAY=MO" and event["start"] == monday
    assert "RRULE:FREQ=WEEKLY;BYDAY=MO" in calendar.ics_path(action.idempotency_key).read_text()
