"""The Slack hooks of the action service (:func:`bot.slack.pending.slack_handlers`) against the Slack stand-in.

``propose`` stores a pending action and returns its preview blocks; the stand-in's ``chat.postMessage``
accepts them (it checks Block Kit limits like Slack). ``on_click`` gets a click the way the Slack
adapter's ``ActionContext`` carries it (``action``, ``user_id``, ``client``, ``respond``): it looks the
clicker up with ``users.info`` (time zone) through the real ``slack_sdk`` client, refuses someone
else's click with an ephemeral answer, books once and replaces the preview with the outcome, and
answers a second click without booking again. The Slack adapter wires these two hooks with
``SlackBot.use_pending_actions(*slack_handlers(service))``.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from agent.models import PendingAction, Turn, idempotency_key
from app.actions import ActionService
from bot.slack.pending import slack_handlers
from bot.slack.action_blocks import preview_text
from tests.standins.slack import BOT_TOKEN, SlackStandin
from state import StateStore
from tools.base import ToolRegistry
from tools.calendar import CalendarCreate, CalendarCreateArgs
from tools.calendar.local import LocalCalendar
from tests.helpers import public_viewer

REQUESTER, OTHER, CHANNEL = "U0REQUEST", "U0SOMEONE", "C0CHAN"


@dataclass
class Click:
    """What the Slack adapter's ActionContext gives a handler (the fields the hook reads)."""

    action: dict[str, Any]
    user_id: str
    client: AsyncWebClient
    responses: list[dict[str, Any]] = field(default_factory=list)

    async def respond(self, **kwargs: Any) -> None:
        self.responses.append(kwargs)


@pytest.fixture
def slack():
    standin = SlackStandin(BOT_TOKEN).start()
    standin.add_conversation(CHANNEL)
    standin.add_user(REQUESTER, tz="America/New_York")
    standin.add_user(OTHER, tz="Asia/Tokyo")
    yield standin
    standin.stop()


@pytest.fixture
def service(tmp_path: Path):
    store = StateStore(f"sqlite:///{tmp_path / 'state.sqlite'}")
    calendar = LocalCalendar(store.url, tmp_path / "calendar")
    tools = ToolRegistry()
    tools.register(CalendarCreate(calendar))
    yield ActionService(store, tools)
    calendar.close()
    store.close()


def test_slack_preview_confirm_once_and_refuse_others(slack: SlackStandin, service: ActionService) -> None:
    client = AsyncWebClient(token=BOT_TOKEN, base_url=slack.api_url)
    propose, on_click = slack_handlers(service, default_timezone="UTC")
    start = datetime(2030, 7, 1, 19, 0, tzinfo=timezone.utc)
    args = CalendarCreateArgs(title="Release review", start=start, duration_minutes=30,
                              attendees=["alice@example.com"], timezone="Europe/Berlin")
    action = PendingAction("calendar.create", args.model_dump(mode="json"), idempotency_key("slack", "1"),
                           "Release review")
    turn = Turn(viewer=public_viewer(), text="set up a release review", platform="slack", user_id=REQUESTER, channel_id=CHANNEL,
                message_id="1900000000.000100", timezone="America/New_York")
    key = action.idempotency_key

    blocks = asyncio.run(propose(action, turn))
    posted = asyncio.run(client.chat_postMessage(channel=CHANNEL, text=preview_text(action, service.tool(action.tool)),
                                                 blocks=blocks))
    assert posted["ok"]  # the stand-in checks Block Kit limits like Slack
    assert "15:00\u201315:30 (America/New_York)" in json.dumps(blocks, ensure_ascii=False)
    buttons = [e for b in blocks if b["type"] == "actions" for e in b["elements"]]
    confirm = {"action_id": buttons[0]["action_id"], "value": buttons[0]["value"]}
    assert confirm == {"action_id": f"action_confirm:{key}", "value": key}

    stranger = Click(confirm, OTHER, client)
    assert asyncio.run(on_click(stranger)).status == "forbidden"
    assert stranger.responses == [{"replace_original": False, "response_type": "ephemeral",
                                   "text": "Only the person who asked for this can confirm or cancel it."}]
    assert service.get(key).status == "pending"

    mine = Click(confirm, REQUESTER, client)
    assert asyncio.run(on_click(mine)).status == "done"
    (update,) = mine.responses
    assert update["replace_original"] is True and "Booked" in update["text"]
    shown = json.dumps(update["blocks"], ensure_ascii=False)
    assert "Booked" in shown and "15:00\u201315:30 (America/New_York)" in shown and "action_confirm" not in shown
    assert asyncio.run(client.chat_update(channel=CHANNEL, ts=posted["ts"], text=update["text"],
                                          blocks=update["blocks"]))["ok"]
    assert [c.params.get("user") for c in slack.calls_to("users.info")] == [OTHER, REQUESTER]

    again = Click(confirm, REQUESTER, client)
    assert asyncio.run(on_click(again)).status == "already_done"
    assert again.responses[0]["replace_original"] is True
    assert len(service.store.audit_entries(action="calendar.create")) == 2  # one denied click, one booking
    assert service.get(key).status == "done"

    # The same message redelivered: the stored, booked action comes back without buttons.
    redelivered = asyncio.run(propose(action, turn))
    assert not [b for b in redelivered if b["type"] == "actions"]


def test_slack_cancel(slack: SlackStandin, service: ActionService) -> None:
    client = AsyncWebClient(token=BOT_TOKEN, base_url=slack.api_url)
    propose, on_click = slack_handlers(service)
    args = CalendarCreateArgs(title="Incident retro", start=datetime.now(timezone.utc) + timedelta(days=1),
                              duration_minutes=60, attendees=["bob@example.com"])
    action = PendingAction("calendar.create", args.model_dump(mode="json"), idempotency_key("slack", "2"), "retro")
    blocks = asyncio.run(propose(action, Turn(viewer=public_viewer(), text="x", platform="slack", user_id=REQUESTER, channel_id=CHANNEL)))
    cancel = next(e for b in blocks if b["type"] == "actions" for e in b["elements"] if e["style"] == "danger")
    click = Click({"action_id": cancel["action_id"], "value": cancel["value"]}, REQUESTER, client)
    assert asyncio.run(on_click(click)).status == "cancelled"
    assert click.responses[0]["replace_original"] is True and "Cancelled" in json.dumps(click.responses[0]["blocks"])
    confirm_late = Click({"action_id": f"action_confirm:{action.idempotency_key}", "value": action.idempotency_key},
                         REQUESTER, client)
    assert asyncio.run(on_click(confirm_late)).status == "already_cancelled"
    assert service.get(action.idempotency_key).status == "cancelled"
