"""``reminder.create``, the second action tool, through the same contract and the same real paths as the
calendar: nothing outside ``tools/reminder/`` knows it but its registration line.

- Reading phrasings ("remind me to send the report tomorrow at 9", "in 2 hours", "on friday at 3pm",
  "tomorrow morning", "the 1st") against a fixed message time in the requester's zone; what is
  missing, vague, past or repeating gets one question (one-off reminders only).
- The rule-based planner proposes it from the requester's words (its intent beats a meeting's for
  "remind me to book ..."), completes it from a short answer in the thread, and answers a question
  in the same message; the reply shows the generic preview; nothing is stored by proposing.
- The action service on the real SQLite state store with an in-memory outbox (the port of
  :mod:`tools.outbox`): the preview drawn by every renderer (title "Reminder", fields When / What),
  confirm once (the outbox holds one message under the key; a second confirm is a no-op with the same
  result), a burst of clicks, someone else's click refused, cancel, expiry, a time that passed before
  the click, and no outbox at all (a failure that says so, nothing scheduled).
- The CLI: ``chatops ask "remind me ..."`` then ``chatops actions confirm KEY`` (once; a second is
  ``already_done``; another user is refused), with the state store as the outbox; without
  ``DEFAULT_TIMEZONE`` the requester's zone is the machine's (``TZ``), with it that setting; "to send
  the weekly report" is one reminder, and "to go over the weekly report" one meeting, not a series.
"""

from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from agent.models import HistoryMessage, PendingAction, Reply, Turn, idempotency_key
from app.actions import ActionService
from app.settings import Settings
from app.wiring import Runtime, build_agent
from bot.console_actions import terminal_outcome, terminal_preview
from bot.slack.action_blocks import preview_text, slack_outcome_blocks, slack_preview_blocks
from bot.teams.action_cards import adaptive_card, adaptive_card_outcome
from connectors.folder import FolderSource
from tests.helpers import ROOT, run_chatops, seed_embedding_cache, public_viewer
from index.indexer import Indexer
from index.knowledge import KnowledgeIndex
from state import StateStore
from tests.memory_outbox import MemoryOutbox
from tools.actions import ActionRequest, ActionTool, Clarification, Proposal, recognise
from tools.base import ToolContext, ToolRegistry
from tools.outbox import Outbox
from tools.reminder import ReminderCreate, ReminderCreateArgs
from tools.reminder.tool import NO_OUTBOX

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

SENT = datetime(2030, 3, 13, 15, 0, tzinfo=timezone.utc)  # a Wednesday; 16:00 in Berlin
ZONE = "Europe/Berlin"
REQUESTER, OTHER = "U0REQUEST", "U0SOMEONE"


def propose(text: str, **kw: Any) -> Proposal | Clarification:
    return ReminderCreate().propose(ActionRequest(text=text, sent_at=kw.pop("sent_at", SENT), timezone=ZONE, **kw))


# -- reading -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, what, at", [
    ("remind me to send the report tomorrow at 9", "send the report", "2030-03-14T09:00:00+01:00"),
    ("remind me in 2 hours to call Bob", "call Bob", "2030-03-13T18:00:00+01:00"),
    ("please remind me at 5pm that the build needs checking", "the build needs checking", "2030-03-13T17:00:00+01:00"),
    ("remind me on friday at 3pm to call bob@example.com", "call bob@example.com", "2030-03-15T15:00:00+01:00"),
    ("remind me tomorrow morning to water the plants", "water the plants", "2030-03-14T09:00:00+01:00"),
    ("can you set a reminder for next tuesday at 10:30 to renew my badge", "renew my badge",
     "2030-03-19T10:30:00+01:00"),
    ("remind me in half an hour to stretch", "stretch", "2030-03-13T16:30:00+01:00"),
    ("remind me to pay rent on the 1st at 9am", "pay rent", "2030-04-01T09:00:00+02:00"),
    ("remind me at 3 to call mom", "call mom", "2030-03-14T15:00:00+01:00"),  # 15:00 has passed today
    ("remind me at noon on March 20 to submit expenses", "submit expenses", "2030-03-20T12:00:00+01:00"),
])
def test_phrasings_are_read_in_the_requesters_zone(text: str, what: str, at: str) -> None:
    p = propose(text)
    assert isinstance(p, Proposal), p
    assert isinstance(p.args, ReminderCreateArgs) and p.args.text == what and p.args.at.isoformat() == at
    assert p.args.timezone == ZONE and what in p.summary


@pytest.mark.parametrize("text, fragment", [
    ("remind me to send the report", "When should I remind you"),
    ("remind me tomorrow to call Bob", "At what time tomorrow"),
    ("remind me every Monday at 9 to file the report", "only set one-off reminders"),
    ("remind me daily at 9 to stretch", "only set one-off reminders"),
    ("remind me today at 9am to stretch", "has already passed"),
    ("remind me on feb 30 at 3pm to file taxes", "\u201cfeb 30\u201d"),
    ("remind me tomorrow at 9", "What should I remind you about"),
])
def test_missing_vague_past_or_repeating_asks_one_question(text: str, fragment: str) -> None:
    q = propose(text)
    assert isinstance(q, Clarification) and fragment in q.question
    assert q.question.count("?") == 1 and "Nothing has been scheduled" in q.question


def test_intent_and_recognition_among_the_registered_tools(tmp_path: Path) -> None:
    from app.wiring import register_action_tools

    tool = ReminderCreate()
    assert isinstance(tool, ActionTool)
    assert tool.intent("remind me to send the report tomorrow at 9") >= 0.5
    assert tool.intent("how do I set a reminder in outlook?") == 0.0
    assert tool.intent("book a sync with a@example.com tomorrow at 10") == 0.0
    tools = register_action_tools(ToolRegistry(), Settings(chatops_data_dir=tmp_path))
    assert [t.name for t in tools.actions()] == ["calendar.create", "reminder.create"]
    assert recognise(tools, "remind me to book a meeting with bob@example.com tomorrow at 3").name == "reminder.create"
    assert recognise(tools, "book a meeting with bob@example.com tomorrow at 3").name == "calendar.create"
    assert recognise(tools, "what is the travel budget?") is None


def test_registration_checks_the_contract() -> None:
    class Half:
        name = "half.create"
        description = "no preview, no execute"
        Args = ReminderCreateArgs
        side_effect = True
        permission = "everyone"

        def run(self, args, ctx):
            return None

    with pytest.raises(ValueError, match="tools.actions.ActionTool"):
        ToolRegistry().register(Half())
    ToolRegistry().register(ReminderCreate())


# -- through the agent (rule-based planner) -------------------------------------------------------------
@pytest.fixture(scope="module")
def runtime(wiki_index: KnowledgeIndex, tmp_path_factory: pytest.TempPathFactory) -> Runtime:
    # Not closed: the index belongs to the session fixture.
    data = tmp_path_factory.mktemp("reminder-agent")
    return build_agent(Settings(chatops_data_dir=data, default_timezone=ZONE), index=wiki_index)


def ask(rt: Runtime, text: str, history: tuple[str, ...] = (), **kw: Any) -> Reply:
    thread = tuple(HistoryMessage.own(h, "U0REQ") for h in history)
    return rt.agent.answer(Turn(viewer=public_viewer(), text=text, history=thread, platform="slack", user_id="U0REQ", channel_id="C0CHAN",
                                sent_at=SENT, **kw))


def test_the_rule_planner_proposes_a_reminder(runtime: Runtime) -> None:
    reply = ask(runtime, "remind me to send the report tomorrow at 9", message_id="1900000000.000100")
    pa = reply.pending_action
    assert reply.route == "action" and pa is not None and pa.tool == "reminder.create"
    assert pa.args == {"text": "send the report", "at": "2030-03-14T09:00:00+01:00", "timezone": ZONE}
    assert reply.trace.queries == [] and not reply.citations
    for line in ("I can remind you:", "Reminder", "When: Thu 14 Mar 2030, 09:00 (Europe/Berlin)",
                 "What: send the report", "Nothing is scheduled until you confirm"):
        assert line in reply.text
    again = ask(runtime, "remind me to send the report tomorrow at 9", message_id="1900000000.000100")
    assert again.pending_action is not None and again.pending_action.idempotency_key == pa.idempotency_key
    assert not (Path(runtime.settings.chatops_data_dir) / "state.sqlite").exists()  # proposing stores nothing


def test_a_short_answer_completes_the_reminder(runtime: Runtime) -> None:
    first = ask(runtime, "remind me to send the report")
    assert first.pending_action is None and first.route == "action" and "When should I remind you" in first.text
    second = ask(runtime, "tomorrow at 9", history=("remind me to send the report",))
    assert second.pending_action is not None and second.pending_action.tool == "reminder.create"
    assert second.pending_action.args["text"] == "send the report"
    assert second.pending_action.args["at"] == "2030-03-14T09:00:00+01:00"


def test_a_question_and_a_reminder_in_one_message_get_both(runtime: Runtime) -> None:
    reply = ask(runtime, "when do minor releases go out, and remind me to check the release notes on friday at 10")
    assert reply.citations and reply.pending_action is not None and reply.pending_action.tool == "reminder.create"
    assert reply.pending_action.args["text"] == "check the release notes"
    assert reply.pending_action.args["at"] == "2030-03-15T10:00:00+01:00"


def test_a_reminder_to_book_a_meeting_is_a_reminder(runtime: Runtime) -> None:
    reply = ask(runtime, "remind me to book a meeting with bob@example.com tomorrow at 3")
    assert reply.pending_action is not None and reply.pending_action.tool == "reminder.create"
    assert reply.pending_action.args["text"] == "book a meeting with bob@example.com"


# -- the action service (real SQLite state store, in-memory outbox) -------------------------------------
@pytest.fixture
def env(tmp_path: Path):
    store = StateStore(f"sqlite:///{tmp_path / 'state.sqlite'}")
    tools = ToolRegistry()
    tools.register(ReminderCreate())
    outbox = MemoryOutbox()
    yield store, tools, outbox
    store.close()


def _turn() -> Turn:
    return Turn(viewer=public_viewer(), text="remind me to send the report", platform="slack", user_id=REQUESTER, channel_id="C0CHAN",
                message_id="1900000000.000100", timezone=ZONE)


def _action(name: str, at: datetime | None = None) -> PendingAction:
    at = at or datetime(2030, 7, 1, 13, 0, tzinfo=timezone.utc)
    args = ReminderCreateArgs(text="send the <b>report</b> & more", at=at, timezone=ZONE)
    return PendingAction("reminder.create", args.model_dump(mode="json"), idempotency_key("reminder", name),
                         "Reminder: send the report")


def _buttons(blocks: list[dict]) -> list[dict]:
    return [e for b in blocks if b["type"] == "actions" for e in b["elements"]]


def test_the_preview_in_every_renderer(env) -> None:
    store, tools, outbox = env
    service = ActionService(store, tools, outbox=outbox)
    rec = service.propose(_action("preview"), _turn())
    tool = service.tool(rec.tool)
    blocks = slack_preview_blocks(rec, tool, viewer_tz=ZONE)
    text = json.dumps(blocks, ensure_ascii=False)
    assert "I can remind you:" in text and "*Reminder*" in text
    assert "*When:* Mon 01 Jul 2030, 15:00 (Europe/Berlin)" in text
    assert "*What:* send the &lt;b&gt;report&lt;/b&gt; &amp; more" in text and "<b>" not in text
    assert "Nothing is scheduled until you confirm." in text and f"<@{REQUESTER}>" in text
    assert [b["action_id"] for b in _buttons(blocks)] == [f"action_confirm:{rec.key}", f"action_cancel:{rec.key}"]
    assert "Mon 01 Jul 2030, 09:00 (America/New_York); Mon 15:00 Europe/Berlin" in preview_text(rec, tool,
                                                                                                "America/New_York")
    term = terminal_preview(rec, tool, ZONE)
    assert term.startswith("Pending: Reminder") and "  when       Mon 01 Jul 2030, 15:00 (Europe/Berlin)" in term
    assert "  what       send the <b>report</b> & more" in term and rec.key in term
    card = adaptive_card(rec, tool, viewer_tz=ZONE)
    facts = {f["title"]: f["value"] for b in card["body"] if b["type"] == "FactSet" for f in b["facts"]}
    assert facts == {"When": "Mon 01 Jul 2030, 15:00 (Europe/Berlin)", "What": "send the <b>report</b> & more"}
    assert outbox.messages == {}  # previewing schedules nothing


def test_confirm_once_then_a_second_confirm_is_a_no_op(env) -> None:
    store, tools, outbox = env
    service = ActionService(store, tools, outbox=outbox)
    action = _action("once")
    service.propose(action, _turn())
    key = action.idempotency_key
    out = service.handle_button(f"action_confirm:{key}", key, REQUESTER)
    assert out.status == "done" and out.final and out.message.startswith("Reminder set")
    assert outbox.messages[key] == {"platform": "slack", "user_id": REQUESTER, "channel_id": "C0CHAN",
                                    "at": datetime(2030, 7, 1, 13, 0, tzinfo=timezone.utc),
                                    "text": "Reminder: send the <b>report</b> & more", "status": "pending"}
    assert out.result["scheduled"] is True and out.result["at"] == "2030-07-01T13:00:00+00:00"
    blocks = slack_outcome_blocks(out, viewer_tz=ZONE)
    assert _buttons(blocks) == [] and "Reminder set" in json.dumps(blocks)
    assert adaptive_card_outcome(out)["body"][0]["text"] == "Reminder set"
    assert "[done] Reminder set" in terminal_outcome(out)

    again = service.handle_button(f"action_confirm:{key}", key, REQUESTER)
    assert again.status == "already_done" and again.result == out.result
    assert "already scheduled" in again.message and len(outbox.messages) == 1
    assert service.cancel(key, REQUESTER).status == "already_done"
    (entry,) = store.audit_entries(action="reminder.create")
    assert (entry.actor, entry.target, entry.outcome) == (REQUESTER, key, "ok")
    assert entry.detail["args"]["text"] == "send the <b>report</b> & more"


def test_a_burst_of_clicks_schedules_once(env) -> None:
    store, tools, outbox = env
    service = ActionService(store, tools, outbox=outbox)
    action = _action("burst")
    service.propose(action, _turn())
    barrier = threading.Barrier(8)
    statuses: list[str] = []

    def click() -> None:
        barrier.wait()
        statuses.append(service.confirm(action.idempotency_key, REQUESTER).status)

    threads = [threading.Thread(target=click) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses.count("done") == 1 and set(statuses) <= {"done", "already_done", "in_progress"}
    assert len(outbox.messages) == 1


def test_someone_elses_click_is_refused_and_cancel_schedules_nothing(env) -> None:
    store, tools, outbox = env
    service = ActionService(store, tools, outbox=outbox)
    action = _action("other")
    service.propose(action, _turn())
    key = action.idempotency_key
    for op in ("confirm", "cancel"):
        out = service.handle_button(f"action_{op}:{key}", key, OTHER)
        assert out.status == "forbidden" and out.private and "Only the person who asked" in out.message
    assert service.get(key).status == "pending" and outbox.messages == {}
    out = service.cancel(key, REQUESTER)
    assert out.status == "cancelled" and out.message == "Cancelled; nothing was scheduled."
    assert "Cancelled, nothing was scheduled" in json.dumps(slack_outcome_blocks(out))
    assert service.confirm(key, REQUESTER).status == "already_cancelled" and outbox.messages == {}


def test_an_expired_preview_schedules_nothing(env) -> None:
    store, tools, outbox = env
    action = _action("expired")
    ActionService(store, tools, ttl=timedelta(minutes=5), outbox=outbox).propose(action, _turn())
    later = ActionService(store, tools, outbox=outbox, clock=lambda: datetime.now(timezone.utc) + timedelta(minutes=6))
    out = later.confirm(action.idempotency_key, REQUESTER)
    assert out.status == "expired" and "nothing was scheduled" in out.message and "Ask me again" in out.message
    assert later.confirm(action.idempotency_key, REQUESTER).status == "expired" and outbox.messages == {}


def test_a_time_that_passed_before_the_click_is_not_scheduled(env) -> None:
    store, tools, outbox = env
    at = datetime.now(timezone.utc) + timedelta(minutes=10)
    service = ActionService(store, tools, outbox=outbox, clock=lambda: at + timedelta(minutes=1))
    action = _action("passed", at=at)
    service.propose(action, _turn())
    out = service.confirm(action.idempotency_key, REQUESTER)
    assert out.status == "failed" and out.message.startswith("The reminder time has passed")
    assert outbox.messages == {} and service.get(action.idempotency_key).status == "failed"


def test_without_an_outbox_nothing_is_scheduled_and_it_says_why(env) -> None:
    store, tools, _ = env
    tool = ReminderCreate()
    args = ReminderCreateArgs(text="x", at=datetime(2030, 7, 1, 13, 0, tzinfo=timezone.utc), timezone=ZONE)
    res = tool.execute(args, "k" * 32, ToolContext(user_id=REQUESTER, platform="slack"))
    assert not res.ok and not res.retryable and res.message == NO_OUTBOX
    service = ActionService(store, tools)
    # The state store is the outbox once it implements the port; this test takes it away either way.
    assert (service.outbox is store) == isinstance(store, Outbox)
    service.outbox = None
    action = _action("no-outbox")
    service.propose(action, _turn())
    out = service.confirm(action.idempotency_key, REQUESTER)
    assert out.status == "failed" and NO_OUTBOX in out.message and out.message.startswith("I couldn't set it.")
    assert service.get(action.idempotency_key).status == "failed"


# -- the CLI (the state store is the outbox) ------------------------------------------------------------
@pytest.mark.skipif(not hasattr(StateStore, "schedule_message"),
                    reason="the state store implements the outbox port (schedule_message) from the outbox branch on")
def test_cli_asks_then_confirms_once(tmp_path: Path, embedding_cache_dir: Path, session_wiki: Path,
                                     embedder) -> None:
    data = seed_embedding_cache(tmp_path / "data", embedding_cache_dir / "embeddings.sqlite")
    index = KnowledgeIndex(data / "index", embedder)
    Indexer(index).run(FolderSource(session_wiki))
    index.close()
    me = {"USER": "alice", "LOGNAME": "alice"}
    asked = run_chatops(["ask", "--json", "remind me to send the report tomorrow at 9"], data, cwd=ROOT,
                        DEFAULT_TIMEZONE=ZONE, **me)
    assert asked.returncode == 0, asked.stderr
    pa = json.loads(asked.stdout)["pending_action"]
    assert pa["tool"] == "reminder.create" and pa["args"]["text"] == "send the report"
    key = pa["idempotency_key"]
    stranger = run_chatops(["actions", "confirm", key], data, cwd=ROOT, USER="mallory", LOGNAME="mallory")
    assert stranger.returncode == 1 and "[forbidden]" in stranger.stdout
    done = run_chatops(["actions", "confirm", key, "--json"], data, cwd=ROOT, **me)
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["status"] == "done" and outcome["result"]["scheduled"] is True
    again = run_chatops(["actions", "confirm", key], data, cwd=ROOT, **me)
    assert again.returncode == 0 and "[already_done]" in again.stdout
    store = StateStore(f"sqlite:///{data / 'state.sqlite'}")
    try:
        msg = store.scheduled_message(key)  # type: ignore[attr-defined]
        assert msg is not None and msg.user_id == "alice" and msg.platform == "cli"
        assert msg.text == "Reminder: send the report" and msg.at == datetime.fromisoformat(pa["args"]["at"])
    finally:
        store.close()


def _tomorrow_at(zone: str, hour: int, runs) -> set[str]:
    """Tomorrow at ``hour`` in ``zone`` as ISO 8601, for each date a run may have started on (midnight)."""
    from zoneinfo import ZoneInfo

    tz = ZoneInfo(zone)
    out = set()
    for when in runs:
        day = when.astimezone(tz).date() + timedelta(days=1)
        out.add(datetime(day.year, day.month, day.day, hour, tzinfo=tz).isoformat())
    return out


@pytest.mark.parametrize("env, what, zone", [
    # DEFAULT_TIMEZONE unset: the machine's zone
    ({"TZ": "Pacific/Auckland"}, "send the weekly report", "Pacific/Auckland"),
    ({"TZ": "Pacific/Auckland"}, "send the report", "Pacific/Auckland"),
    # DEFAULT_TIMEZONE set: the setting wins over the machine's
    ({"TZ": "Pacific/Auckland", "DEFAULT_TIMEZONE": "America/New_York"}, "send the weekly report", "America/New_York"),
])
def test_cli_reads_the_weekly_report_reminder_as_one_reminder_in_the_requesters_zone(
        tmp_path: Path, env: dict[str, str], what: str, zone: str) -> None:
    before = datetime.now(timezone.utc)
    asked = run_chatops(["ask", "--json", f"remind me tomorrow at 9am to {what}"], tmp_path / "data",
                        cwd=ROOT, USER="alice", LOGNAME="alice", **env)
    after = datetime.now(timezone.utc)
    assert asked.returncode == 0, asked.stderr
    reply = json.loads(asked.stdout)
    pa = reply["pending_action"]
    assert pa is not None and pa["tool"] == "reminder.create", reply["text"]
    assert pa["args"]["text"] == what and pa["args"]["timezone"] == zone
    assert pa["args"]["at"] in _tomorrow_at(zone, 9, (before, after))
    assert f", 09:00 ({zone})" in reply["text"] and "one-off" not in reply["text"]


def test_cli_still_refuses_a_repeating_reminder_and_books_one_meeting_about_the_weekly_report(tmp_path: Path) -> None:
    data = tmp_path / "data"
    repeat = run_chatops(["ask", "--json", "remind me every monday to send the weekly report"], data, cwd=ROOT,
                         TZ="Pacific/Auckland")
    assert repeat.returncode == 0, repeat.stderr
    reply = json.loads(repeat.stdout)
    assert reply["pending_action"] is None and "only set one-off reminders" in reply["text"]
    assert "\u201cevery monday\u201d" in reply["text"]
    before = datetime.now(timezone.utc)
    meeting = run_chatops(["ask", "--json", "book a call with bob@example.com tomorrow at 3pm to go over the weekly "
                           "report"], data, cwd=ROOT, TZ="Pacific/Auckland")
    after = datetime.now(timezone.utc)
    assert meeting.returncode == 0, meeting.stderr
    pa = json.loads(meeting.stdout)["pending_action"]
    assert pa is not None and pa["tool"] == "calendar.create"
    assert not pa["args"].get("recurrence") and pa["args"]["start"] in _tomorrow_at("Pacific/Auckland", 15,
                                                                                    (before, after))
