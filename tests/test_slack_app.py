"""The Slack bot end to end: the real Bolt ``AsyncApp`` behind ``bot.server.create_app``, served by aiohttp on
127.0.0.1, answering from the session's real index (``wiki_index``) with a real SQLite state store.

Only Slack is replaced, by ``tests/standins/slack/``: a Web API on 127.0.0.1 that answers in Slack's wire
format, enforces the scopes granted by ``manifest.yml``, keeps threads, and records every call. Requests
reach the bot exactly as Slack sends them: signed JSON events, form-encoded slash commands, ``payload=``
interactions. The assertions are on what reaches the stand-in: the thread, the blocks, the source links,
ephemeral versus public, the refusals, one answer per event, the stored feedback, the audit log, the
status codes; and, over an index of a folder planted with a link to a secret outside it, that a mention
asking for the secret gets no reply quoting it.

One module over 600 lines on purpose: its tests share one module-scoped harness (the app, the stand-in and
the index, started once), and the last test checks every Web API call the others made against the manifest's
scopes; split, each part would start its own harness and the scope check would see only its part.
"""

from __future__ import annotations

import itertools
import json
import logging
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from app.jobs import IndexJobs, parse_sources
from app.settings import Settings
from bot.slack.client import describe_api_error
from app.progress import LOADING_MESSAGES
from bot.slack.conversation import PROGRESS_REACTION, STATUS_TEXT
from bot.slack import render
from app.welcome import index_catalog
from app.wiring import build_agent
from app.config import parse_config
from connectors.folder import FolderSource
from state import StateStore
from state.store import sqlite_url

from tests.helpers import PLANTED_SECRET, WIKI, WIKI_PAGES, plant_folder
from tests.standins.slack import (APP_TOKEN, BOT_ID, BOT_TOKEN, BOT_USER_ID, SIGNING_SECRET, TEAM_ID, Call, SlackHarness,
                           feedback_action, sign)

ALICE, BOB, ADMIN, MALLORY = "UALICE01", "UBOB0002", "UADMIN01", "UMALLORY"
TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
_ids = itertools.count(1)


# -- fixtures and helpers -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory):
    s = StateStore(sqlite_url(tmp_path_factory.mktemp("slack-state") / "state.sqlite"))
    yield s
    s.close()


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory, wiki_index, session_wiki: Path, store: StateStore):
    """The bot over the shared session index (read-only here: no re-index runs against it)."""
    settings = Settings(chatops_data_dir=tmp_path_factory.mktemp("slack-data"))
    runtime = build_agent(settings, index=wiki_index)  # not closed: the index belongs to the session
    jobs = IndexJobs(runtime, store, [FolderSource(session_wiki)])
    h = SlackHarness(runtime, store, jobs, admin_ids=(ADMIN,))
    for user in (ALICE, BOB, ADMIN):
        h.standin.add_user(user)
    yield h
    h.close()


def new_channel(h: SlackHarness, kind: str = "channel", member: bool = True) -> str:
    """A fresh conversation id (tests never share one)."""
    prefix = {"channel": "C", "group": "G", "im": "D", "mpim": "G"}[kind]
    cid = f"{prefix}T{next(_ids):07d}"
    h.standin.add_conversation(cid, kind, member)
    return cid


def acked(resp) -> None:
    """Slack's contract: HTTP 200 within 3 seconds."""
    assert resp.status_code == 200, (resp.status_code, resp.text)
    assert resp.elapsed.total_seconds() < 3, resp.elapsed


def mention(h: SlackHarness, channel: str, text: str, user: str = ALICE, thread_ts: str | None = None,
            event_id: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """A person mentions the bot: the message is stored in Slack, then ``app_mention`` is delivered."""
    msg = h.standin.user_message(channel, user, f"<@{BOT_USER_ID}> {text}", thread_ts)
    event = {"type": "app_mention", "user": user, "text": msg["text"], "ts": msg["ts"], "channel": channel,
             "event_ts": msg["ts"], "team": TEAM_ID}
    if thread_ts:
        event["thread_ts"] = thread_ts
    resp, env = h.sender.event(event, event_id)
    acked(resp)
    return msg, env


def message(h: SlackHarness, channel: str, text: str, channel_type: str, user: str = ALICE,
            thread_ts: str | None = None, **extra: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """A person writes a message (``message.channels`` / ``message.groups`` / ``message.im`` event)."""
    msg = h.standin.user_message(channel, user, text, thread_ts)
    event = {"type": "message", "user": user, "text": text, "ts": msg["ts"], "channel": channel,
             "event_ts": msg["ts"], "channel_type": channel_type, **extra}
    if thread_ts:
        event["thread_ts"] = thread_ts
    resp, env = h.sender.event(event)
    acked(resp)
    return msg, env


def posts(h: SlackHarness, channel: str, thread_ts: str | None = None) -> list[Call]:
    """What the bot showed in ``channel`` (in the thread ``thread_ts`` when given): posted messages and
    finished streams (:meth:`SlackStandin.answers`)."""
    return h.standin.answers(channel, thread_ts)


def wait_posts(h: SlackHarness, channel: str, thread_ts: str | None, n: int = 1) -> list[Call]:
    return h.standin.wait_for(lambda s: p if len(p := posts(h, channel, thread_ts)) >= n else None)


def block(blocks: list[dict], kind: str) -> list[dict]:
    return [b for b in blocks if b["type"] == kind]


def section_text(blocks: list[dict]) -> str:
    """The text of the message's sections and markdown blocks (an answer is a markdown block)."""
    return "\n".join(b["text"] if b["type"] == "markdown" else b["text"]["text"]
                     for b in blocks if b["type"] in {"section", "markdown"} and b.get("text"))


def source_lines(blocks: list[dict]) -> list[str]:
    return [e["text"] for b in block(blocks, "context") for e in b["elements"]]


def buttons(blocks: list[dict]) -> dict[str, dict]:
    return {e["action_id"]: e for b in block(blocks, "actions") for e in b["elements"]}


def responses(h: SlackHarness, key: str) -> list[Call]:
    return [c for c in h.standin.calls_to("response_url") if c.key == key]


# -- conversations ------------------------------------------------------------------------------------------
def test_mention_is_answered_in_its_thread_with_sources_feedback_and_progress(harness: SlackHarness) -> None:
    h = harness
    ch = new_channel(h)
    msg, _ = mention(h, ch, "how do I declare an incident?")
    [post] = wait_posts(h, ch, msg["ts"])
    blocks = post.params["blocks"]
    text = section_text(blocks)
    assert "/declare-incident" in text and "[1]" in text
    lines = source_lines(blocks)
    # the wiki is indexed without url_base: its file:// links are server paths, so the title stands alone
    assert lines and lines[0].startswith("*[1]* Incident response and on-call")
    assert "file://" not in json.dumps(post.params) and "<" not in lines[0]
    # the answer is standard Markdown in a markdown block, with a plain-text fallback; native feedback last
    assert [b["type"] for b in blocks] == ["markdown", "context", "context_actions"]
    assert "/declare-incident" in post.params["text"] and "```" not in post.params["text"]
    assert buttons(blocks) == {}  # no custom Helpful / Not helpful buttons any more
    up, down = feedback_action(blocks, True), feedback_action(blocks, False)
    assert up["action_id"] == down["action_id"] == render.FEEDBACK
    assert up["value"].startswith("helpful:") and down["value"].startswith("not_helpful:")
    assert TRACE_ID.match(up["value"].split(":", 1)[1])
    h.idle()
    # on the wire: the answer streamed into the thread, for its asker, the blocks attached at the stop
    [start] = h.standin.calls_to("chat.startStream", channel=ch)
    appends = h.standin.calls_to("chat.appendStream", channel=ch)
    [stop] = h.standin.calls_to("chat.stopStream", channel=ch)
    assert start.ok and stop.ok and all(c.ok for c in appends)
    assert start.params["thread_ts"] == msg["ts"]
    assert (start.params["recipient_user_id"], start.params["recipient_team_id"]) == (ALICE, TEAM_ID)
    assert {c.params["ts"] for c in [*appends, stop]} == {start.result["ts"]} == {post.result["ts"]}
    streamed = [start.params["markdown_text"], *(c.params["markdown_text"] for c in appends)]
    assert "".join(streamed) == blocks[0]["text"] and "markdown_text" not in stop.params
    assert stop.params["blocks"] == blocks[1:]  # sources, then feedback: only once the text is complete
    assert h.standin.calls_to("chat.postMessage", channel=ch) == []
    # progress: a reaction on the question while working, removed after the answer
    added = h.standin.calls_to("reactions.add", channel=ch)
    removed = h.standin.calls_to("reactions.remove", channel=ch)
    assert [c.params["name"] for c in added] == [PROGRESS_REACTION] and added[0].params["timestamp"] == msg["ts"]
    assert len(removed) == 1 and removed[0].at >= stop.at
    assert added[0].at <= start.at <= min([c.at for c in appends], default=stop.at) <= stop.at
    assert h.standin.calls_to("users.info", user=ALICE)


def test_a_thread_reply_after_an_answer_continues_without_a_mention(harness: SlackHarness,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    h = harness
    caplog.set_level(logging.INFO, logger="agent.agent")
    ch = new_channel(h)
    first, _ = mention(h, ch, "when do minor releases go out?")
    wait_posts(h, ch, first["ts"], 1)
    follow, _ = message(h, ch, "and when's the branch cut for those?", "channel", thread_ts=first["ts"])
    answers = wait_posts(h, ch, first["ts"], 2)
    second = answers[1].params["blocks"]
    assert "Thursday before the minor release" in section_text(second)
    assert any(line.endswith("Branch cut") for line in source_lines(second)), source_lines(second)
    # the thread history reached the agent: the reply was routed as a follow-up of the first question
    # (alone, with no history, the same words are an ordinary knowledge question)
    routes = [r.args[2] for r in caplog.records if r.name == "agent.agent" and r.msg.startswith("turn %s")]
    assert routes[-2:] == ["knowledge", "followup"], routes
    replies = h.standin.calls_to("conversations.replies", channel=ch)
    assert replies and all(c.params["ts"] == first["ts"] and c.ok for c in replies)
    assert int(replies[0].params["limit"]) <= 1000


def test_messages_outside_the_bots_threads_are_not_answered(harness: SlackHarness) -> None:
    h = harness
    ch = new_channel(h)
    top, _ = message(h, ch, "how do I declare an incident?", "channel")                 # no mention, no thread
    other, _ = message(h, ch, "anyone?", "channel", user=BOB)
    reply, _ = message(h, ch, "what's the expense deadline?", "channel", thread_ts=other["ts"])  # thread w/o bot
    message(h, ch, "still nobody?", "channel", user=BOB, thread_ts=other["ts"])  # remembered: no second read
    mentioned, _ = message(h, ch, f"<@{BOT_USER_ID}> hi", "channel")  # the app_mention answers this one
    h.idle()
    assert posts(h, ch) == []
    # it looked at the one thread to see whether it belongs there, and only at that one
    assert [c.params["ts"] for c in h.standin.calls_to("conversations.replies", channel=ch)] == [other["ts"]]


def test_direct_messages_are_answered_like_mentions(harness: SlackHarness) -> None:
    h = harness
    dm = new_channel(h, "im")
    msg, _ = message(h, dm, "How much is the home office budget for new joiners?", "im")
    [post] = wait_posts(h, dm, msg["ts"])
    assert "[1]" in section_text(post.params["blocks"]) and source_lines(post.params["blocks"])
    # a follow-up in the DM thread is answered with the thread as history
    msg2, _ = message(h, dm, "and who approves it?", "im", thread_ts=msg["ts"])
    wait_posts(h, dm, msg["ts"], 2)
    assert h.standin.calls_to("conversations.replies", channel=dm)


def test_group_dms_are_answered_like_dms_for_everyone_in_them(harness: SlackHarness) -> None:
    h = harness
    mpim = new_channel(h, "mpim")
    msg, _ = message(h, mpim, "how do I declare an incident?", "mpim")
    [post] = wait_posts(h, mpim, msg["ts"])
    assert "/declare-incident" in section_text(post.params["blocks"]) and source_lines(post.params["blocks"])
    message(h, mpim, "and who is the incident commander?", "mpim", user=BOB, thread_ts=msg["ts"])
    wait_posts(h, mpim, msg["ts"], 2)
    assert all(c.ok for c in h.standin.calls_to("conversations.replies", channel=mpim))  # mpim:history granted


def test_a_private_channel_thread_continues_too(harness: SlackHarness) -> None:
    h = harness
    grp = new_channel(h, "group")
    first, _ = mention(h, grp, "how do I report phishing?")
    wait_posts(h, grp, first["ts"], 1)
    message(h, grp, "and what if I already clicked the link?", "group", thread_ts=first["ts"])
    wait_posts(h, grp, first["ts"], 2)


def test_a_refusal_says_so_and_what_was_searched(harness: SlackHarness) -> None:
    h = harness
    ch = new_channel(h)
    msg, _ = mention(h, ch, "what is the office wifi password?")
    [post] = wait_posts(h, ch, msg["ts"])
    text = section_text(post.params["blocks"])
    # in a channel a refusal names nothing (issue 11): not what was found for others, not the query
    assert "couldn't find anything you can see about that here" in text and "Ask me in a DM" in text
    assert "wifi password" not in text
    assert source_lines(post.params["blocks"]) == []
    assert [b["type"] for b in post.params["blocks"]] == ["markdown", "context_actions"]


def test_a_redelivered_event_is_answered_once(harness: SlackHarness, store: StateStore) -> None:
    h = harness
    ch = new_channel(h)
    msg, env = mention(h, ch, "what's the deadline for submitting expenses?")
    body = json.dumps(env).encode()
    for n in (1, 2):  # Slack's retries: same event_id, X-Slack-Retry-Num
        acked(h.sender.post(body, "application/json", {"X-Slack-Retry-Num": str(n),
                                                        "X-Slack-Retry-Reason": "http_timeout"}))
    h.idle()
    acked(h.sender.post(body, "application/json", {"X-Slack-Retry-Num": "3", "X-Slack-Retry-Reason": "http_timeout"}))
    h.idle()
    assert len(posts(h, ch, msg["ts"])) == 1
    assert len(h.standin.calls_to("reactions.add", channel=ch)) == 1
    assert store.claim_event(env["event_id"], "slack") is False  # recorded in the state store


def test_messages_from_bots_and_from_itself_are_ignored(harness: SlackHarness) -> None:
    h = harness
    ch, dm = new_channel(h), new_channel(h, "im")
    ts = h.standin.next_ts()
    for event in (
        {"type": "message", "subtype": "bot_message", "bot_id": "B0OTHER", "text": "how do I declare an incident?",
         "ts": ts, "channel": dm, "channel_type": "im"},
        {"type": "message", "user": BOT_USER_ID, "bot_id": BOT_ID, "text": "my own answer", "ts": ts, "channel": dm,
         "channel_type": "im"},
        {"type": "app_mention", "user": "U0OTHERBOT", "bot_id": "B0OTHER", "text": f"<@{BOT_USER_ID}> loop?",
         "ts": ts, "channel": ch},
        {"type": "message", "subtype": "message_changed", "channel": dm, "channel_type": "im", "ts": ts,
         "message": {"type": "message", "user": ALICE, "text": "edited", "ts": ts}},
    ):
        resp, _ = h.sender.event(event)
        acked(resp)
    h.idle()
    assert posts(h, ch) == [] and posts(h, dm) == []
    assert h.standin.calls_to("reactions.add", channel=dm) == []


# -- the assistant surface ----------------------------------------------------------------------------------------
def test_assistant_threads_get_prompts_a_status_and_answers(harness: SlackHarness) -> None:
    h = harness
    dm = new_channel(h, "im")
    thread_ts = h.standin.next_ts()
    h.standin.conversations[dm].messages.append({"type": "message", "user": ALICE, "text": "", "ts": thread_ts})
    started = {"type": "assistant_thread_started", "event_ts": thread_ts,
               "assistant_thread": {"user_id": ALICE, "context": {"channel_id": "C0CONTEXT", "team_id": TEAM_ID},
                                    "channel_id": dm, "thread_ts": thread_ts}}
    resp, _ = h.sender.event(started)
    acked(resp)
    [greeting] = wait_posts(h, dm, thread_ts)
    # no chatops.yml greeting: built from the indexed source, never the handbook's hard-coded examples
    assert [b["type"] for b in greeting.params["blocks"]] == ["markdown"]
    assert "I answer from *wiki*" in section_text(greeting.params["blocks"])
    [prompts] = h.standin.calls_to("assistant.threads.setSuggestedPrompts", channel_id=dm)
    titles = index_catalog(h.bot.runtime.index)["wiki"]
    assert prompts.ok and [p["title"] for p in prompts.params["prompts"]] == titles and titles
    assert "time off" not in json.dumps(prompts.params["prompts"]).lower()
    msg, _ = message(h, dm, "How do I ask for time off?", "im", thread_ts=thread_ts)
    answers = wait_posts(h, dm, thread_ts, 2)
    # the first question titles the thread, before the answer
    [title] = h.standin.calls_to("assistant.threads.setTitle", channel_id=dm)
    assert title.ok and title.params["title"] == "How do I ask for time off?" and title.at <= answers[1].at
    # the status follows the rule-based planner's steps, with loading messages, all before the streamed answer
    statuses = h.standin.calls_to("assistant.threads.setStatus", channel_id=dm)
    assert all(c.ok and c.params["thread_ts"] == thread_ts for c in statuses)
    said = [c.params["status"] for c in statuses]
    assert said[0] == STATUS_TEXT and statuses[0].params["loading_messages"] == list(LOADING_MESSAGES)
    assert any(re.fullmatch(r"Checking \d+ sources?…", s) for s in said), said
    assert said[-2:] == ["Writing the answer…", "Verifying the citations…"], said
    assert len(said) == len(set(said))  # each step once
    [start] = h.standin.calls_to("chat.startStream", channel=dm)
    assert statuses[-1].at <= start.at and answers[1].method == "chat.stream"
    assert "recipient_user_id" in start.params  # harmless in a DM, required in channels
    assert "[1]" in section_text(answers[1].params["blocks"])
    assert h.standin.calls_to("reactions.add", channel=dm) == []  # the status is the progress here
    # a context change is acknowledged and needs nothing else
    changed = {"type": "assistant_thread_context_changed", "event_ts": h.standin.next_ts(),
               "assistant_thread": {"user_id": ALICE, "context": {"channel_id": "C0OTHER"}, "channel_id": dm,
                                    "thread_ts": thread_ts}}
    acked(h.sender.event(changed)[0])
    h.idle()
    assert len(posts(h, dm, thread_ts)) == 2 and h.standin.calls_to("chat.update") == []
    # a follow-up keeps the title
    message(h, dm, "and how many days do I get?", "im", thread_ts=thread_ts)
    wait_posts(h, dm, thread_ts, 3)
    assert len(h.standin.calls_to("assistant.threads.setTitle", channel_id=dm)) == 1


def test_the_greeting_and_prompts_come_from_chatops_yml_when_set(harness: SlackHarness) -> None:
    h = harness
    dm = new_channel(h, "im")
    thread_ts = h.standin.next_ts()
    h.standin.conversations[dm].messages.append({"type": "message", "user": ALICE, "text": "", "ts": thread_ts})
    saved = h.bot.jobs.config
    h.bot.jobs.config = parse_config({"greeting": "Hi from **Acme IT**! Ping <!channel> never.",
                                      "suggested_prompts": [{"title": "VPN", "message": "How do I reset my VPN?"}]})
    try:
        acked(h.sender.event({"type": "assistant_thread_started", "event_ts": thread_ts,
                              "assistant_thread": {"user_id": ALICE, "channel_id": dm, "thread_ts": thread_ts}})[0])
        [greeting] = wait_posts(h, dm, thread_ts)
    finally:
        h.bot.jobs.config = saved
    assert section_text(greeting.params["blocks"]) == "Hi from **Acme IT**! Ping &lt;!channel&gt; never."
    [prompts] = h.standin.calls_to("assistant.threads.setSuggestedPrompts", channel_id=dm)
    assert prompts.params["prompts"] == [{"title": "VPN", "message": "How do I reset my VPN?"}]


# -- the Home tab -------------------------------------------------------------------------------------------------
def test_the_home_tab_shows_capabilities_sources_and_the_users_pending_actions(harness: SlackHarness,
                                                                                store: StateStore) -> None:
    h = harness
    ch = new_channel(h)
    store.create_pending(f"home-{ch}", "calendar.create", {"title": "Design review"}, BOB, "slack", channel_id=ch,
                         summary="Book *Design review* on Tuesday 10:00-10:30")
    acked(h.sender.home_opened(BOB)[0])
    acked(h.sender.home_opened(ADMIN)[0])
    acked(h.sender.event({"type": "app_home_opened", "user": ALICE, "channel": "DALICE", "tab": "messages",
                          "event_ts": "1.0"})[0])
    h.idle()
    published = {c.params["user_id"]: c for c in h.standin.calls_to("views.publish")}
    assert set(published) == {BOB, ADMIN}  # the messages tab publishes nothing
    assert all(c.ok for c in published.values()), [c.result for c in published.values()]
    bob = published[BOB].params["view"]
    assert bob["type"] == "home"
    headers = [b["text"]["text"] for b in bob["blocks"] if b["type"] == "header"]
    assert headers == ["What I can do", "Sources", "Waiting for your confirmation"]
    text = section_text(bob["blocks"])
    assert "/kb QUESTION" in text and "assistant pane" in text
    assert f"*wiki*: {WIKI_PAGES} pages, last synced never" in text
    assert f"Book *Design review* on Tuesday 10:00-10:30 in <#{ch}>; waiting for your confirmation until <!date^" in text
    admin = published[ADMIN].params["view"]
    assert "Design review" not in json.dumps(admin)  # only one's own actions
    assert "Nothing is waiting for you." in json.dumps(admin)


# -- /kb --------------------------------------------------------------------------------------------------------
def test_kb_question_is_ephemeral_and_can_be_shared(harness: SlackHarness) -> None:
    h = harness
    ch = new_channel(h)
    url = h.standin.response_url("kbq")
    resp = h.sender.command("how do I declare an incident?", ALICE, ch, url)
    acked(resp)
    ack = resp.json()
    assert ack["response_type"] == "ephemeral" and "Searching the knowledge base" in ack["text"]
    [answer] = h.standin.wait_for(lambda s: responses(h, "kbq") or None)
    p = answer.params
    assert p["response_type"] == "ephemeral" and p["replace_original"] is True
    assert "/declare-incident" in section_text(p["blocks"]) and source_lines(p["blocks"])
    share = buttons(p["blocks"])[render.SHARE]
    trace_id, question = render.parse_share_value(share["value"])
    assert TRACE_ID.match(trace_id) and question == "how do I declare an incident?"
    h.idle()
    assert posts(h, ch) == []  # nothing public yet
    url2 = h.standin.response_url("kbshare")
    acked(h.sender.click(ALICE, {"action_id": render.SHARE, "type": "button", "value": share["value"],
                                 "block_id": f"feedback:{trace_id}"}, url2, channel_id=ch, ephemeral=True))
    shared, deleted = h.standin.wait_for(lambda s: r if len(r := responses(h, "kbshare")) >= 2 else None)
    assert shared.params["response_type"] == "in_channel" and shared.params["replace_original"] is False
    assert f"<@{ALICE}> asked" in source_lines(shared.params["blocks"])[0]
    assert section_text(shared.params["blocks"]) == section_text(p["blocks"])  # the very answer she saw
    assert render.SHARE not in buttons(shared.params["blocks"])
    assert feedback_action(shared.params["blocks"], True)["value"] == f"helpful:{trace_id}"
    assert deleted.params["delete_original"] is True and "blocks" not in deleted.params


def test_kb_help_sources_and_status(harness: SlackHarness) -> None:
    h = harness
    ch = new_channel(h)
    for text in ("", "help"):
        resp = h.sender.command(text, BOB, ch, h.standin.response_url())
        acked(resp)
        assert "/kb reindex [SOURCE] [--full]" in section_text(resp.json()["blocks"])
    acked(h.sender.command("sources", BOB, ch, h.standin.response_url("src")))
    [src] = h.standin.wait_for(lambda s: responses(h, "src") or None)
    assert f"*wiki*: {WIKI_PAGES} pages" in section_text(src.params["blocks"])
    acked(h.sender.command("status", BOB, ch, h.standin.response_url("st")))
    [st] = h.standin.wait_for(lambda s: responses(h, "st") or None)
    fields = [f["text"] for b in st.params["blocks"] if b.get("fields") for f in b["fields"]]
    assert fields[0] == "*Source*\nwiki" and fields[1].startswith(f"*Pages / chunks*\n{WIKI_PAGES} / ")
    assert fields[2] == "*Last sync*\nnever" and fields[3] == "*Next sync*\nnot scheduled"
    assert fields[4] == "*Last error*\nnone"
    assert st.params["response_type"] == "ephemeral"


def test_kb_reindex_is_refused_politely_to_non_admins_and_audited(harness: SlackHarness, store: StateStore) -> None:
    h = harness
    ch = new_channel(h)
    resp = h.sender.command("reindex --full", BOB, ch, h.standin.response_url("deny"))
    acked(resp)
    body = resp.json()
    assert body["response_type"] == "ephemeral" and "re-indexing is for the knowledge base's admins" in body["text"]
    h.idle()
    [entry] = [e for e in store.audit_entries(action="admin.reindex") if e.actor == BOB]
    assert entry.outcome == "denied" and entry.platform == "slack" and entry.target == "*"
    assert entry.detail["full"] is True
    assert store.last_runs("wiki") == []  # nothing ran
    assert responses(h, "deny") == []
    # an admin naming an unknown source is told which exist, and that is audited too
    resp = h.sender.command("reindex nosuch", ADMIN, ch, h.standin.response_url())
    acked(resp)
    assert "no source named `nosuch`" in resp.json()["text"] and "`wiki`" in resp.json()["text"]
    assert store.audit_entries(action="admin.reindex")[0].outcome == "invalid"


def test_kb_usage_errors_and_unknown_commands_get_an_answer(harness: SlackHarness) -> None:
    h = harness
    ch = new_channel(h)
    resp = h.sender.command("reindex a b", ADMIN, ch, h.standin.response_url())
    acked(resp)
    assert "usage: `/kb reindex [SOURCE] [--full]`" in resp.json()["text"]
    resp = h.sender.command("x", ALICE, ch, h.standin.response_url(), command="/other")
    acked(resp)
    assert "I only know /kb" in resp.text


# -- buttons ------------------------------------------------------------------------------------------------------
def test_feedback_is_stored_with_the_trace_id(harness: SlackHarness, store: StateStore) -> None:
    h = harness
    ch = new_channel(h)
    msg, _ = mention(h, ch, "what laptop do I get?")
    [post] = wait_posts(h, ch, msg["ts"])
    answer = {"type": "message", "ts": post.result["ts"], "thread_ts": msg["ts"], "text": post.params["text"],
              "blocks": post.params["blocks"], "user": BOT_USER_ID, "bot_id": BOT_ID}
    up = feedback_action(post.params["blocks"], True)
    trace_id = up["value"].split(":", 1)[1]
    resp = h.sender.click(BOB, up, h.standin.response_url("fb1"), channel_id=ch, message=answer)
    acked(resp)
    [thanks] = h.standin.wait_for(lambda s: responses(h, "fb1") or None)
    assert thanks.params["response_type"] == "ephemeral" and thanks.params["replace_original"] is False
    h.idle()
    assert h.standin.calls_to("views.open") == []  # "helpful" asks nothing more
    rows = store.feedback_for(trace_id)
    assert [(r["user_id"], r["value"], r["platform"], r["comment"]) for r in rows] == [(BOB, "helpful", "slack", "")]


def test_not_helpful_opens_the_reason_modal_and_stores_the_reason_with_the_trace(harness: SlackHarness,
                                                                                 store: StateStore) -> None:
    h = harness
    ch = new_channel(h)
    msg, _ = mention(h, ch, "how do I ask for time off?")
    [post] = wait_posts(h, ch, msg["ts"])
    answer = {"type": "message", "ts": post.result["ts"], "thread_ts": msg["ts"], "text": post.params["text"],
              "blocks": post.params["blocks"], "user": BOT_USER_ID, "bot_id": BOT_ID}
    down = feedback_action(post.params["blocks"], False)
    trace_id = down["value"].split(":", 1)[1]
    acked(h.sender.click(ALICE, down, h.standin.response_url("fbno"), channel_id=ch, message=answer))
    [opened] = h.standin.wait_for(lambda s: s.calls_to("views.open") or None)
    assert opened.ok, opened.result  # the stand-in checked the trigger_id of this very click and the view
    view = opened.result["view"]
    assert view["callback_id"] == render.FEEDBACK_MODAL and view["private_metadata"] == trace_id
    reason = next(b for b in view["blocks"] if b["block_id"] == "reason")
    assert [o["value"] for o in reason["element"]["options"]] == ["wrong", "outdated", "incomplete", "other"]
    h.idle()
    assert responses(h, "fbno") == []  # the modal is the answer to the click
    # the vote counts at once, even if the modal is dismissed
    assert [(r["value"], r["comment"]) for r in store.feedback_for(trace_id)] == [("not_helpful", "")]
    values = {"reason": {"value": {"type": "radio_buttons", "selected_option": {
                  "text": {"type": "plain_text", "text": "It's outdated"}, "value": "outdated"}}},
              "detail": {"value": {"type": "plain_text_input", "value": "  The form moved to Workday in May. "}}}
    resp = h.sender.submit_view(ALICE, view, values)
    acked(resp)
    assert resp.content == b""  # an empty 200 closes the modal
    h.idle()
    rows = store.feedback_for(trace_id)
    assert [(r["user_id"], r["value"], r["platform"], r["comment"]) for r in rows] == [
        (ALICE, "not_helpful", "slack", "outdated: The form moved to Workday in May.")]


def test_a_dead_trigger_still_stores_the_vote_and_thanks(harness: SlackHarness, store: StateStore) -> None:
    h = harness
    ch = new_channel(h)
    msg, _ = mention(h, ch, "what laptop do I get?")
    [post] = wait_posts(h, ch, msg["ts"])
    down = feedback_action(post.params["blocks"], False)
    h.standin.fail_next("views.open", "expired_trigger_id")
    acked(h.sender.click(BOB, down, h.standin.response_url("fbdead"), channel_id=ch))
    [thanks] = h.standin.wait_for(lambda s: responses(h, "fbdead") or None)
    assert "feedback is recorded" in section_text(thanks.params["blocks"])
    h.idle()
    assert [r["value"] for r in store.feedback_for(down["value"].split(":", 1)[1])] == ["not_helpful"]


def test_unknown_and_pending_buttons_tell_the_user(harness: SlackHarness) -> None:
    h = harness
    ch = new_channel(h)
    acked(h.sender.click(ALICE, {"action_id": "legacy:thing", "type": "button", "value": "x"},
                         h.standin.response_url("unknown"), channel_id=ch))
    acked(h.sender.click(ALICE, {"action_id": render.PENDING_CONFIRM + "idem-1", "type": "button",
                                 "value": "idem-1"}, h.standin.response_url("pending"), channel_id=ch))
    [u] = h.standin.wait_for(lambda s: responses(h, "unknown") or None)
    [p] = h.standin.wait_for(lambda s: responses(h, "pending") or None)
    assert "doesn't do anything any more" in u.params["text"]
    assert "Actions aren't enabled" in p.params["text"]


def test_the_pending_action_hook_routes_confirm_and_cancel(harness: SlackHarness) -> None:
    """How the calendar actions plug in: one call, no change to the adapter."""
    from bot.slack.actions import register_builtin_actions

    h = harness
    ch = new_channel(h)
    clicks: list[tuple[str, str, str]] = []

    async def propose(action, turn):  # stores the proposal, returns its preview blocks
        return render.pending_action_blocks(action)

    async def on_click(ctx) -> None:
        clicks.append((ctx.action_id, ctx.value, ctx.user_id))
        await ctx.respond(replace_original=True, text="Booked.")

    h.bot.use_pending_actions(propose, on_click)
    try:
        for action_id in (render.PENDING_CONFIRM + "k1", render.PENDING_CANCEL + "k2"):
            acked(h.sender.click(BOB, {"action_id": action_id, "type": "button", "value": action_id[-2:]},
                                 h.standin.response_url(action_id[-2:]), channel_id=ch))
        done = h.standin.wait_for(lambda s: r if len(r := [c for c in s.calls_to("response_url")
                                                          if c.key in {"k1", "k2"}]) == 2 else None)
        assert {c.params["text"] for c in done} == {"Booked."}
        assert sorted(clicks) == [("action_cancel:k2", "k2", BOB), ("action_confirm:k1", "k1", BOB)]
        assert h.bot.conversations.propose is propose and h.bot.kb.propose is propose
    finally:
        register_builtin_actions(h.bot.actions)
        h.bot.conversations.propose = h.bot.kb.propose = None


def test_a_calendar_request_is_previewed_and_booked_once_by_its_requester(harness: SlackHarness, store: StateStore,
                                                                         tmp_path: Path) -> None:
    """The action service wired the way ``chatops serve`` wires it: the preview is posted in the thread, only
    the requester can confirm, Confirm books once and replaces the preview with the outcome."""
    from app.actions import build_action_service
    from bot.slack.pending import slack_handlers
    from bot.slack.actions import register_builtin_actions

    h = harness
    service = build_action_service(Settings(chatops_data_dir=tmp_path), h.bot.runtime.tools, store)
    h.bot.use_pending_actions(*slack_handlers(service))
    try:
        ch = new_channel(h)
        msg, _ = mention(h, ch, "book a meeting called Design review tomorrow at 3pm for 30 minutes")
        [post] = wait_posts(h, ch, msg["ts"])
        blocks = post.params["blocks"]
        confirm = next(b for aid, b in buttons(blocks).items() if aid.startswith(render.PENDING_CONFIRM))
        assert "Design review" in json.dumps(blocks) and not block(blocks, "context_actions")
        key = confirm["value"]
        assert service.get(key).status == "pending" and service.get(key).requester == ALICE
        answer = {"type": "message", "ts": post.result["ts"], "text": post.params["text"], "blocks": blocks}
        for who, rkey in ((BOB, "cal-bob"), (ALICE, "cal-1"), (ALICE, "cal-2")):
            acked(h.sender.click(who, confirm, h.standin.response_url(rkey), channel_id=ch, message=answer))
            h.standin.wait_for(lambda s: responses(h, rkey) or None)
        [bob], [first], [second] = (responses(h, k) for k in ("cal-bob", "cal-1", "cal-2"))
        assert bob.params["response_type"] == "ephemeral" and bob.params.get("replace_original") is False
        assert first.params["replace_original"] is True and render.PENDING_CONFIRM not in json.dumps(first.params)
        assert render.PENDING_CONFIRM not in json.dumps(second.params)  # a second click books nothing new
        assert service.get(key).status == "done"
        booked = [e for e in store.audit_entries(limit=20) if e.actor == ALICE and key in json.dumps(e.detail)]
        assert len([e for e in booked if e.outcome in {"ok", "done"}]) == 1, booked
    finally:
        register_builtin_actions(h.bot.actions)
        h.bot.conversations.propose = h.bot.kb.propose = None


def test_another_persons_thread_message_never_completes_the_requesters_meeting(harness: SlackHarness,
                                                                               store: StateStore,
                                                                               tmp_path: Path) -> None:
    """Alice asks for a meeting without a time; Mallory posts her own request in the thread; Alice gives the
    time: the preview posted to Slack is Alice's meeting with her time, nothing of Mallory's."""
    from app.actions import build_action_service
    from bot.slack.pending import slack_handlers
    from bot.slack.actions import register_builtin_actions

    h = harness
    h.standin.add_user(MALLORY)
    service = build_action_service(Settings(chatops_data_dir=tmp_path), h.bot.runtime.tools, store)
    h.bot.use_pending_actions(*slack_handlers(service))
    try:
        ch = new_channel(h)
        msg, _ = mention(h, ch, "book a meeting called Sprint planning with bob@example.com")
        [asked] = wait_posts(h, ch, msg["ts"])
        assert "day and a time" in asked.params["text"]
        assert not [a for a in buttons(asked.params["blocks"]) if a.startswith(render.PENDING_CONFIRM)]
        message(h, ch, "book a meeting called Budget review with attacker@evil.com", "channel", user=MALLORY,
                thread_ts=msg["ts"])
        wait_posts(h, ch, msg["ts"], 2)  # the bot answers Mallory too (her own request, it asks her for a time)
        message(h, ch, "tomorrow at 3pm", "channel", user=ALICE, thread_ts=msg["ts"])
        preview = wait_posts(h, ch, msg["ts"], 3)[2]
        shown = json.dumps([preview.params["text"], preview.params["blocks"]])
        assert "Sprint planning" in shown and "bob@example.com" in shown
        assert "attacker@evil.com" not in shown and "Budget review" not in shown
        confirm = next(b for aid, b in buttons(preview.params["blocks"]).items()
                       if aid.startswith(render.PENDING_CONFIRM))
        record = service.get(confirm["value"])
        assert record.requester == ALICE and record.status == "pending"
        assert record.args["title"] == "Sprint planning" and record.args["attendees"] == ["bob@example.com"]
        assert "T15:00:00" in record.args["start"]
    finally:
        register_builtin_actions(h.bot.actions)
        h.bot.conversations.propose = h.bot.kb.propose = None


# -- Web API errors -------------------------------------------------------------------------------------------------
def test_not_in_channel_is_logged_and_the_user_is_told_by_dm(harness: SlackHarness,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    h = harness
    caplog.set_level(logging.WARNING)
    for error_channel, code in ((new_channel(h, member=False), "not_in_channel"),
                                ("C0GONE0001", "channel_not_found")):
        msg = {"ts": h.standin.next_ts()}
        resp, _ = h.sender.event({"type": "app_mention", "user": ALICE, "ts": msg["ts"], "channel": error_channel,
                                  "text": f"<@{BOT_USER_ID}> how do I declare an incident?"})
        acked(resp)
        h.idle()
        failed = [c for c in h.standin.calls_to("chat.postMessage", channel=error_channel)]
        assert failed and not any(c.ok for c in failed) and failed[0].result["error"] == code
        dm = [c for c in h.standin.calls_to("chat.postMessage", channel=ALICE)
              if f"<#{error_channel}>" in c.params.get("text", "")]
        assert len(dm) == 1 and dm[0].ok
        assert describe_api_error(code) in dm[0].params["text"]
        assert any(code in r.getMessage() and error_channel in r.getMessage() for r in caplog.records
                   if r.levelno >= logging.WARNING)
    assert "Invite me with `/invite @chatops`" in describe_api_error("not_in_channel")


def test_rate_limits_are_retried_after_retry_after(harness: SlackHarness) -> None:
    h = harness
    ch = new_channel(h)
    h.standin.rate_limit_next("chat.startStream", retry_after=1)
    msg, _ = mention(h, ch, "how many days of PTO do we get?")
    [post] = wait_posts(h, ch, msg["ts"])
    limited = [c for c in h.standin.calls_to("chat.startStream", channel=ch) if c.status == 429]
    [started] = [c for c in h.standin.calls_to("chat.startStream", channel=ch) if c.ok]
    assert len(limited) == 1 and started.at - limited[0].at >= 1.0
    h.idle()
    assert len(posts(h, ch, msg["ts"])) == 1


def test_a_stream_slack_refuses_is_posted_instead_and_a_refused_format_falls_back_to_plain_text(
        harness: SlackHarness) -> None:
    h = harness
    ch = new_channel(h)
    h.standin.fail_next("chat.startStream", "not_allowed_token_type")  # nothing shown: post it
    h.standin.fail_next("chat.postMessage", "invalid_blocks")
    msg, _ = mention(h, ch, "how do I declare an incident?")
    [post] = wait_posts(h, ch, msg["ts"])
    assert post.method == "chat.postMessage"
    assert "blocks" not in post.params and "/declare-incident" in post.params["text"]
    assert post.params["unfurl_links"] in (False, "0", "false")


def test_a_stream_failing_midway_is_deleted_and_the_answer_posted_whole(harness: SlackHarness) -> None:
    h = harness
    ch = new_channel(h)
    h.standin.fail_next("chat.stopStream", "internal_error")
    msg, _ = mention(h, ch, "how do I declare an incident?")
    [post] = wait_posts(h, ch, msg["ts"])
    h.idle()
    [start] = h.standin.calls_to("chat.startStream", channel=ch)
    [deleted] = h.standin.calls_to("chat.delete", channel=ch)
    assert deleted.ok and deleted.params["ts"] == start.result["ts"] and deleted.at <= post.at
    assert post.method == "chat.postMessage" and "/declare-incident" in section_text(post.params["blocks"])
    # the thread holds the posted answer only: the half-streamed one is gone
    thread = h.standin.conversations[ch].messages
    assert [m["ts"] for m in thread if m.get("bot_id")] == [post.result["ts"]]


def test_answers_are_posted_whole_when_streaming_is_off(harness: SlackHarness) -> None:
    h = harness
    ch = new_channel(h)
    h.bot.conversations.stream_answers = False  # SLACK_STREAM_ANSWERS=false
    try:
        msg, _ = mention(h, ch, "how do I declare an incident?")
        [post] = wait_posts(h, ch, msg["ts"])
    finally:
        h.bot.conversations.stream_answers = True
    assert post.method == "chat.postMessage" and h.standin.calls_to("chat.startStream", channel=ch) == []
    assert [b["type"] for b in post.params["blocks"]] == ["markdown", "context", "context_actions"]


def test_a_failed_history_read_still_answers(harness: SlackHarness) -> None:
    h = harness
    ch = new_channel(h)
    first, _ = mention(h, ch, "how do I declare an incident?")
    wait_posts(h, ch, first["ts"])
    h.standin.fail_next("conversations.replies", "internal_error")
    second, _ = mention(h, ch, "and who can do it?", thread_ts=first["ts"])
    wait_posts(h, ch, first["ts"], 2)


# -- security and bad input ---------------------------------------------------------------------------------------
def test_forged_stale_and_unsigned_requests_get_401_and_are_never_processed(harness: SlackHarness,
                                                                           store: StateStore) -> None:
    h = harness
    ch = new_channel(h)
    env = h.sender.envelope({"type": "app_mention", "user": ALICE, "ts": h.standin.next_ts(), "channel": ch,
                             "text": f"<@{BOT_USER_ID}> how do I declare an incident?"})
    body = json.dumps(env).encode()
    forged = sign("not-the-secret", body)
    stale = sign(SIGNING_SECRET, body, timestamp=int(time.time()) - 6 * 60)
    tampered = sign(SIGNING_SECRET, body)
    cases = [
        h.sender.post(body, "application/json", signed=False),
        h.sender.post(body, "application/json", forged, signed=False),
        h.sender.post(body, "application/json", stale, signed=False),
        h.sender.post(body.replace(b"declare", b"DECLARE"), "application/json", tampered, signed=False),
        h.sender.post(body, "application/json", {"X-Slack-Request-Timestamp": "soon",
                                                 "X-Slack-Signature": tampered["X-Slack-Signature"]}, signed=False),
        h.sender.post(b"garbage", "application/json", signed=False),
    ]
    assert [r.status_code for r in cases] == [401] * len(cases)
    assert all(r.json()["error"] == "invalid signature" for r in cases)
    h.idle()
    assert h.standin.calls_to("chat.postMessage", channel=ch) == []
    assert store.claim_event(env["event_id"], "slack") is True  # never claimed, so never processed


@pytest.mark.parametrize("body, content_type", [
    (b"{not json", "application/json"),
    (b"[1, 2, 3]", "application/json"),
    (b'{"type": "event_callback"}', "application/json"),
    (b'{"type": "event_callback", "event": "x"}', "application/json"),
    (b'{"no": "type"}', "application/json"),
    (b"\xff\xfe\x00garbage", "application/json"),
    (b"a=1&b", "application/x-www-form-urlencoded"),
    (b"payload=not-json", "application/x-www-form-urlencoded"),
    (b"payload=%7B%22type%22%3A%22block_actions%22%7D", "application/x-www-form-urlencoded"),
    (b"command=%2Fkb&text=help", "application/x-www-form-urlencoded"),
    (b"hello=world", "application/x-www-form-urlencoded"),
    (b"<xml/>", "text/xml"),
])
def test_malformed_signed_bodies_get_400_not_500(harness: SlackHarness, body: bytes, content_type: str) -> None:
    resp = harness.sender.post(body, content_type)
    assert resp.status_code == 400, resp.text
    assert resp.json()["ok"] is False and "malformed request" in resp.json()["error"]
    assert "Traceback" not in resp.text


def test_url_verification_answers_the_challenge(harness: SlackHarness) -> None:
    body = json.dumps({"token": "legacy", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
                       "type": "url_verification"}).encode()
    resp = harness.sender.post(body, "application/json")
    assert resp.status_code == 200
    assert "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" in resp.text


def test_tokens_and_secrets_never_reach_the_logs(harness: SlackHarness, caplog: pytest.LogCaptureFixture) -> None:
    h = harness
    caplog.set_level(logging.DEBUG)
    ch = new_channel(h)
    msg, _ = mention(h, ch, "how do I declare an incident?")
    wait_posts(h, ch, msg["ts"])
    acked(h.sender.command("how do I report phishing?", ALICE, ch, h.standin.response_url("logs")))
    h.standin.wait_for(lambda s: responses(h, "logs") or None)
    h.sender.post(b"{}", "application/json", sign("wrong", b"{}"), signed=False)
    h.idle()
    logged = caplog.text + "".join(str(r.args) for r in caplog.records)
    assert "chat.postMessage" in logged or "chat_postMessage" in logged or "Sending a request" in logged
    for secret in (BOT_TOKEN, APP_TOKEN, SIGNING_SECRET, BOT_TOKEN.split("-", 1)[1]):
        assert secret not in logged


def test_health_and_readiness(harness: SlackHarness) -> None:
    http = harness.sender.http
    health = http.get(harness.server.url + "/healthz")
    assert health.status_code == 200 and health.json() == {"status": "ok"}
    ready = http.get(harness.server.url + "/readyz")
    assert ready.status_code == 200, ready.text
    body = ready.json()
    assert body["status"] == "ready" and body["checks"]["slack"]["ok"] and body["checks"]["state"]["ok"]
    assert "@chatops" in body["checks"]["slack"]["detail"]
    assert http.post(harness.server.url + "/healthz").status_code == 405
    assert http.get(harness.server.url + "/slack/events").status_code == 405


def test_every_call_was_within_the_manifests_scopes(harness: SlackHarness) -> None:
    """The stand-in enforces manifest.yml's scopes: no call in this module was refused for a missing scope."""
    calls = harness.standin.calls
    assert calls
    refused = [(c.method, c.result) for c in calls if c.result and c.result.get("error") == "missing_scope"]
    assert refused == []


# -- admin re-index (its own index: the shared one stays read-only) ----------------------------------------------
@pytest.fixture
def reindex_harness(tmp_path: Path, embedder, store: StateStore):
    from index.knowledge import KnowledgeIndex

    wiki = tmp_path / "wiki"
    shutil.copytree(WIKI, wiki)
    index = KnowledgeIndex(tmp_path / "index", embedder)
    settings = Settings(chatops_data_dir=tmp_path / "data", chatops_sources=f"folder:{wiki}?name=handbook")
    runtime = build_agent(settings, index=index)
    jobs = IndexJobs(runtime, store, parse_sources(settings.chatops_sources))
    [first] = jobs.run()
    assert first.status == "ok" and first.summary.added == WIKI_PAGES
    h = SlackHarness(runtime, store, jobs, admin_ids=(ADMIN,))
    h.standin.add_user(ADMIN)
    h.wiki = wiki  # type: ignore[attr-defined]
    yield h
    h.close()
    index.close()


def test_admin_reindex_acks_at_once_runs_the_job_and_posts_a_summary(reindex_harness: SlackHarness,
                                                                     store: StateStore) -> None:
    h = reindex_harness
    (h.wiki / "facilities").mkdir()  # type: ignore[attr-defined]
    (h.wiki / "facilities" / "bike-storage.md").write_text(  # type: ignore[attr-defined]
        "# Bike storage\n\nThe bike storage room is on level minus one of the Lisbon office, next to the showers. "
        "Bike storage is open from 07:00 to 21:00 and needs your badge.\n\n## Bike storage rules\n\n"
        "Label your bike with your name. Bikes left in the bike storage for more than 30 days are donated.\n")
    ch = new_channel(h)
    resp = h.sender.command("reindex handbook", ADMIN, ch, h.standin.response_url("ri"))
    acked(resp)
    assert "Started an incremental re-index of *handbook*" in resp.json()["text"]
    [summary] = h.standin.wait_for(lambda s: responses(h, "ri") or None, timeout=60)
    text = section_text(summary.params["blocks"])
    assert summary.params["response_type"] == "ephemeral"
    assert "*Re-index finished*" in text and "*handbook*: 1 added, 0 updated, 0 deleted, 13 unchanged" in text
    outcomes = [e.outcome for e in store.audit_entries(action="admin.reindex") if e.actor == ADMIN][:2]
    assert outcomes == ["ok", "started"]
    assert store.last_runs("handbook")[0].summary["added"] == 1
    # the new page answers questions at once
    msg, _ = mention(h, ch, "when is the bike storage open?", user=ADMIN)
    [post] = wait_posts(h, ch, msg["ts"])
    assert "07:00 to 21:00" in section_text(post.params["blocks"])
    assert any(line.startswith("*[1]* Bike storage") for line in source_lines(post.params["blocks"]))
    # --full rebuilds; /kb status shows the last sync
    acked(h.sender.command("reindex --full", ADMIN, ch, h.standin.response_url("full")))
    [full] = h.standin.wait_for(lambda s: responses(h, "full") or None, timeout=60)
    assert "*handbook*: 14 added" in section_text(full.params["blocks"])
    acked(h.sender.command("status", ADMIN, ch, h.standin.response_url("st2")))
    [st] = h.standin.wait_for(lambda s: responses(h, "st2") or None)
    fields = [f["text"] for b in st.params["blocks"] if b.get("fields") for f in b["fields"]]
    assert fields[1].startswith("*Pages / chunks*\n14 / ") and "(ok)" in fields[2] and "<!date^" in fields[2]


# -- a folder planted with a link out of it (its own index) ------------------------------------------------------
@pytest.mark.timeout(120)  # the planted folder holds a FIFO too: reading it would hang the index job
def test_a_mention_asking_for_a_secret_linked_into_the_wiki_gets_no_reply_quoting_it(
        tmp_path: Path, embedder, store: StateStore) -> None:
    from index.knowledge import KnowledgeIndex

    wiki = plant_folder(tmp_path)
    index = KnowledgeIndex(tmp_path / "index", embedder)
    settings = Settings(chatops_data_dir=tmp_path / "data", chatops_sources=f"folder:{wiki}?name=planted")
    runtime = build_agent(settings, index=index)
    jobs = IndexJobs(runtime, store, parse_sources(settings.chatops_sources))
    [run] = jobs.run()
    assert run.status == "ok" and (run.summary.added, run.summary.skipped) == (2, 4), run.summary
    h = SlackHarness(runtime, store, jobs)
    try:
        h.standin.add_user(ALICE)
        ch = new_channel(h)
        msg, _ = mention(h, ch, "what is the launch word written in the red binder of the vault room?")
        [post] = wait_posts(h, ch, msg["ts"])
        h.idle()
        every_post = [json.dumps(c.params) for c in h.standin.calls if c.params.get("channel") == ch]
        assert every_post and not any(PLANTED_SECRET in p for p in every_post), every_post
        assert "red-binder.md" not in json.dumps(post.params)
    finally:
        h.close()
        index.close()
