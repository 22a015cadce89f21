"""``ticket.create`` on Slack end to end: signed events and clicks into the real Bolt app behind
``bot.server.create_app`` (``tests/standins/slack/``), the real agent over the session index with the
action tools registered from settings (``JIRA_URL`` pointing at ``tests/standins/jira.py``, Jira Cloud),
the real SQLite state store and the action service wired as ``chatops serve`` wires it.

A mention in a thread asking for a ticket gets the preview (summary, project, type) with Confirm /
Cancel; Confirm files one ticket whose description links the Slack thread (the adapter's link, built from
the workspace address ``auth.test`` gives and carried to the tool by the request), with the requester as
reporter, and replaces the preview in the thread with the ticket's key and link; clicking Confirm again
files nothing new; an unknown project or issue type is answered in the thread before any preview, and
nothing is filed.
"""

from __future__ import annotations

import itertools
import json
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
from tests.standins.jira import CLOUD_EMAIL, CLOUD_TOKEN, JiraStandIn
from tests.standins.slack import BOT_USER_ID, TEAM_ID, Call, SlackHarness
from state import StateStore
from state.store import sqlite_url
from tools.jira import label_for
from tools.jira.adf import adf_text

ALICE, BOB = "UALICE01", "UBOB0002"
WORKSPACE = "https://standin.slack.com"  # the stand-in's auth.test url
_ids = itertools.count(1)


@pytest.fixture(scope="module")
def jira():
    s = JiraStandIn("cloud").start()
    s.add_project("OPS", "Operations")
    s.add_project("IT", "IT Helpdesk", [("1", "Service request", False), ("2", "Incident", False)])
    s.add_user("ualice01@example.com", "alice")  # the e-mail users.info gives for ALICE
    yield s
    s.stop()


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory, jira: JiraStandIn) -> Settings:
    return Settings(chatops_data_dir=tmp_path_factory.mktemp("jira-slack-data"), jira_url=jira.url,
                    jira_deployment="cloud", jira_email=CLOUD_EMAIL, jira_api_token=CLOUD_TOKEN,
                    jira_default_project="OPS")  # no SLACK_WORKSPACE_URL: the thread link uses auth.test's url


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory):
    s = StateStore(sqlite_url(tmp_path_factory.mktemp("jira-slack-state") / "state.sqlite"))
    yield s
    s.close()


@pytest.fixture(scope="module")
def harness(settings: Settings, wiki_index, session_wiki: Path, store: StateStore):
    runtime = build_agent(settings, index=wiki_index)  # ticket.create registered from the settings
    h = SlackHarness(runtime, store, IndexJobs(runtime, store, [FolderSource(session_wiki)]))
    for user in (ALICE, BOB):
        h.standin.add_user(user, tz="Europe/Berlin")
    service = build_action_service(settings, runtime.tools, store)
    h.bot.use_pending_actions(*slack_handlers(service, default_timezone="Europe/Berlin"))
    h.service = service  # type: ignore[attr-defined]
    yield h
    register_builtin_actions(h.bot.actions)
    h.close()
    runtime.tools.get("ticket.create").close()


def thread_root(h: SlackHarness, text: str, user: str = ALICE) -> tuple[str, dict[str, Any]]:
    """A fresh channel with a person's message in it (the thread's first message)."""
    ch = f"CJ{next(_ids):08d}"
    h.standin.add_conversation(ch, "channel", True)
    return ch, h.standin.user_message(ch, user, text, None)


def mention(h: SlackHarness, channel: str, text: str, thread_ts: str, user: str = ALICE) -> dict[str, Any]:
    msg = h.standin.user_message(channel, user, f"<@{BOT_USER_ID}> {text}", thread_ts)
    resp, _ = h.sender.event({"type": "app_mention", "user": user, "text": msg["text"], "ts": msg["ts"],
                              "channel": channel, "event_ts": msg["ts"], "thread_ts": thread_ts, "team": TEAM_ID})
    assert resp.status_code == 200
    return msg


def reply(h: SlackHarness, channel: str, thread_ts: str, n: int = 1) -> Call:
    """The bot's ``n``-th answer in the thread."""
    return h.standin.wait_for(lambda s: a[n - 1] if len(a := s.answers(channel, thread_ts)) >= n else None)


def confirm_button(blocks: list[dict]) -> dict | None:
    return next((e for b in blocks if b["type"] == "actions" for e in b["elements"]
                 if e["action_id"].startswith(render.PENDING_CONFIRM)), None)


def click(h: SlackHarness, who: str, button: dict, channel: str, post: Call, rkey: str) -> Call:
    message = {"type": "message", "ts": post.result["ts"], "text": post.params["text"], "blocks": post.params["blocks"]}
    resp = h.sender.click(who, button, h.standin.response_url(rkey), channel_id=channel, message=message)
    assert resp.status_code == 200 and resp.elapsed.total_seconds() < 3
    return h.standin.wait_for(lambda s: next((c for c in s.calls_to("response_url") if c.key == rkey), None))


def test_a_ticket_is_filed_once_from_a_slack_thread_with_its_link(harness: SlackHarness, jira: JiraStandIn) -> None:
    h = harness
    ch, root = thread_root(h, "VPN drops every hour since this morning's update")
    mention(h, ch, "file a jira bug in OPS: VPN drops every hour", root["ts"])
    post = reply(h, ch, root["ts"])
    shown = json.dumps(post.params["blocks"], ensure_ascii=False)
    assert "I can file this ticket in Jira:" in shown and "VPN drops every hour" in shown
    assert "OPS \u2013 Operations" in shown and "Bug" in shown
    button = confirm_button(post.params["blocks"])
    assert button is not None
    key = button["value"]
    assert h.service.get(key).tool == "ticket.create" and not jira.issues_in("OPS")  # nothing before Confirm

    assert click(h, BOB, button, ch, post, "jira-bob").params["response_type"] == "ephemeral"
    assert not jira.issues_in("OPS")
    first = click(h, ALICE, button, ch, post, "jira-1")
    [issue] = jira.issues_in("OPS")
    link = f"{jira.url}/browse/{issue['key']}"
    assert first.params["replace_original"] is True and render.PENDING_CONFIRM not in json.dumps(first.params)
    done = json.dumps(first.params["blocks"], ensure_ascii=False)
    assert "Filed in Jira" in done and f"<{link}|Open {issue['key']} in Jira>" in done
    assert issue["key"] in first.params["text"] and link in first.params["text"]

    fields = issue["fields"]
    permalink = f"{WORKSPACE}/archives/{ch}/p{root['ts'].replace('.', '')}"
    assert f"Chat thread: {permalink}" in adf_text(fields["description"])
    assert "file a jira bug in OPS: VPN drops every hour" in adf_text(fields["description"])
    assert fields["summary"] == "VPN drops every hour" and fields["issuetype"]["name"] == "Bug"
    assert fields["labels"] == [label_for(key)]
    assert fields["reporter"] == {"accountId": jira.users[0]["accountId"]}

    again = click(h, ALICE, button, ch, post, "jira-2")
    retried = click(h, ALICE, button, ch, post, "jira-3")
    assert "already filed" in again.params["text"] and "already filed" in retried.params["text"]
    assert len(jira.issues_in("OPS")) == 1 and len(jira.calls("POST", "/rest/api/3/issue")) == 1
    audit = [e for e in h.service.store.audit_entries(action="ticket.create") if e.target == key]
    assert sorted(e.outcome for e in audit) == ["denied", "ok"]


def test_open_a_ticket_for_this_takes_the_requesters_message_in_the_thread(harness: SlackHarness,
                                                                           jira: JiraStandIn) -> None:
    h = harness
    ch, root = thread_root(h, "The badge reader at the north entrance rejects every card")
    mention(h, ch, "open a ticket for this", root["ts"])
    post = reply(h, ch, root["ts"])
    button = confirm_button(post.params["blocks"])
    assert button is not None, post.params["text"]
    assert "The badge reader at the north entrance rejects every card" in json.dumps(post.params["blocks"])
    before = len(jira.issues_in("OPS"))
    click(h, ALICE, button, ch, post, "jira-this")
    assert len(jira.issues_in("OPS")) == before + 1
    assert jira.issues_in("OPS")[-1]["fields"]["issuetype"]["name"] == "Task"  # JIRA_ISSUE_TYPE's default


@pytest.mark.parametrize(("text", "expected"), [
    ("file a ticket in OPX: printer on floor 3 jams", "no project OPX"),
    ("log a bug in IT: printer jams", "no issue type \u201cBug\u201d (it has: Service request, Incident)"),
])
def test_an_unknown_project_or_type_is_said_in_the_thread_and_nothing_is_filed(harness: SlackHarness,
                                                                               jira: JiraStandIn, text: str,
                                                                               expected: str) -> None:
    h = harness
    posts_before = len(jira.calls("POST"))
    ch, root = thread_root(h, "printer trouble again")
    mention(h, ch, text, root["ts"])
    post = reply(h, ch, root["ts"])
    shown = post.params["text"] + json.dumps(post.params.get("blocks") or [], ensure_ascii=False)
    assert expected in shown and "nothing has been filed" in shown
    assert confirm_button(post.params.get("blocks") or []) is None
    assert len(jira.calls("POST")) == posts_before


def test_a_question_about_tickets_is_answered_from_the_wiki_not_filed(harness: SlackHarness,
                                                                      jira: JiraStandIn) -> None:
    h = harness
    ch, root = thread_root(h, "hello")
    mention(h, ch, "how do I open a ticket for a broken laptop?", root["ts"])
    post = reply(h, ch, root["ts"])
    assert confirm_button(post.params.get("blocks") or []) is None
    assert "I can file this ticket" not in json.dumps(post.params, ensure_ascii=False)
