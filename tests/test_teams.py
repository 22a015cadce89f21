"""Microsoft Teams: the real Bot Framework ``CloudAdapter`` behind the real aiohttp server.

Activities are POSTed to ``/api/messages`` exactly as Teams sends them (a channel message with a
mention entity, a personal chat, a card submit, an ``adaptiveCard/action`` invoke, a
``conversationUpdate``), with ``serviceUrl`` pointing at a stand-in Bot Connector on 127.0.0.1 that
records the replies. The agent, index, state store and action service are the real ones. Covers:
the answer card with sources and citation entities in the same reply chain, the typing indicator,
follow-ups from the stored history (kept with each message's author: another person's message in a
channel, or an old row without an author, never completes the requester's meeting), feedback,
confirm-once and someone else's click, admin commands and their refusal, a redelivered activity
answered once, a 429 retried, 401 without a token when an app id is set, 401 when unregistered,
and 400 for garbage.
"""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import pytest

from agent.models import PendingAction, Turn
from app.actions import build_action_service
from app.jobs import IndexJobs
from bot.server import ServerThread, create_app
from app.settings import Settings
from bot.teams.adapter import TeamsAuthConfig, TeamsWebAdapter
from bot.teams.bot import TeamsBot
from app.wiring import build_agent
from connectors.folder import FolderSource
from tests.helpers import WIKI, wait_for as _wait, public_viewer
from state import StateStore
from tests.standins.teams import ConnectorStandIn

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

BOT = {"id": "28:bot-app-id", "name": "chatops"}
ADMIN = "aad-admin-1"
USER = "aad-user-1"
MALLORY = "aad-mallory-1"


def message(service_url: str, text: str, *, activity_id: str, conversation: dict | None = None,
            user: str = USER, mention: bool = False, value: dict | None = None, reply_to: str | None = None) -> dict:
    """A message activity as Teams sends it."""
    act = {
        "type": "message", "id": activity_id, "timestamp": "2026-11-21T10:00:00.000Z",
        "serviceUrl": service_url, "channelId": "msteams",
        "from": {"id": f"29:{user}", "name": "Ada Lovelace", "aadObjectId": user},
        "conversation": conversation or {"conversationType": "personal", "tenantId": "t1", "id": f"a:personal-{user}"},
        "recipient": BOT, "text": text, "textFormat": "plain", "locale": "en-US", "localTimezone": "Europe/Berlin",
        "channelData": {"tenant": {"id": "t1"}},
    }
    if mention:
        act["entities"] = [{"type": "mention", "mentioned": BOT, "text": "<at>chatops</at>"}]
    if value is not None:
        act["value"] = value
    if reply_to:
        act["replyToId"] = reply_to
    return act


CHANNEL = {"isGroup": True, "conversationType": "channel", "tenantId": "t1",
           "id": "19:general@thread.tacv2;messageid=1700000000000"}


@pytest.fixture
def teams(tmp_path: Path, wiki_index):
    """A running server with the Teams adapter (unauthenticated mode) and a stand-in connector."""
    wiki = tmp_path / "wiki"
    shutil.copytree(WIKI, wiki)
    settings = Settings(chatops_data_dir=tmp_path / "data")
    rt = build_agent(settings, index=wiki_index)
    store = StateStore(f"sqlite:///{tmp_path / 'state.sqlite'}")
    actions = build_action_service(settings, rt.tools, store)
    jobs = IndexJobs(rt, store, [FolderSource(wiki, name="wiki")])
    bot = TeamsBot(rt.agent, store, actions=actions, jobs=jobs, admin_ids=frozenset({ADMIN}))
    server = ServerThread(lambda: create_app([TeamsWebAdapter(bot, TeamsAuthConfig(), allow_unauthenticated=True)]))
    with ConnectorStandIn() as connector:
        server.start()
        with httpx.Client(base_url=server.url, timeout=30) as http:
            yield type("T", (), {"http": http, "connector": connector, "store": store, "actions": actions, "rt": rt})
        server.stop()
    store.close()


def post(t, activity: dict) -> httpx.Response:
    return t.http.post("/api/messages", json=activity)


def test_channel_mention_gets_a_cited_card_in_the_reply_chain(teams) -> None:
    act = message(teams.connector.url, "<at>chatops</at> how do I declare an incident?", activity_id="1700000000001",
                  conversation=CHANNEL, mention=True)
    r = post(teams, act)
    assert r.status_code in (200, 201)
    assert teams.connector.typing(), "a typing indicator comes first"
    [reply] = teams.connector.messages()
    assert reply.conversation_id == CHANNEL["id"] and reply.activity_id == "1700000000001"
    assert reply.body["replyToId"] == "1700000000001"
    card = reply.body["attachments"][0]
    assert card["contentType"] == "application/vnd.microsoft.card.adaptive"
    urls = [a["url"] for a in card["content"].get("actions", []) if a["type"] == "Action.OpenUrl"]
    assert any("incident-response.md" in u for u in urls) or any("incident" in b["text"].lower()
                                                                   for b in card["content"]["body"])
    assert "<at>" not in reply.card_text() and "/declare-incident" in reply.card_text()
    # one rendering: the card alone; the answer's first words are the notification's summary
    assert not reply.body.get("text") and len(reply.body["attachments"]) == 1
    assert "/declare-incident" in reply.body["summary"] and "[1]" not in reply.body["summary"]
    # Teams' own feedback loop instead of card buttons
    assert reply.body["channelData"]["feedbackLoopEnabled"] is True
    assert not [a for a in card["content"].get("actions", []) if a["type"] == "Action.Submit"]
    # one entity: the citations, marked AI-generated
    [citation] = reply.body["entities"]
    assert citation["@type"] == "Message" and citation["citation"][0]["@type"] == "Claim"
    assert citation["additionalType"] == ["AIGeneratedContent"]


def test_personal_chat_follow_up_uses_the_stored_history(teams) -> None:
    post(teams, message(teams.connector.url, "when do minor releases go out?", activity_id="m1"))
    post(teams, message(teams.connector.url, "and when's the branch cut for those?", activity_id="m2"))
    assert teams.store.get_history(f"teams:a:personal-{USER}") == ["when do minor releases go out?",
                                                                    "and when's the branch cut for those?"]
    replies = teams.connector.messages()
    assert len(replies) == 2 and "cut" in replies[1].shown().lower()


def test_another_persons_message_in_a_channel_never_completes_the_requesters_meeting(teams) -> None:
    """The channel's stored history keeps each message's author: Mallory's request in between does not
    become part of the user's meeting when the user gives the time."""
    url = teams.connector.url
    post(teams, message(url, "<at>chatops</at> book a meeting called Sprint planning with bob@example.com",
                        activity_id="t1", conversation=CHANNEL, mention=True))
    post(teams, message(url, "<at>chatops</at> book a meeting called Budget review with attacker@evil.com",
                        activity_id="t2", conversation=CHANNEL, mention=True, user=MALLORY))
    post(teams, message(url, "<at>chatops</at> tomorrow at 3pm", activity_id="t3", conversation=CHANNEL,
                        mention=True))
    asked_alice, asked_mallory, preview = teams.connector.messages()
    assert "day and a time" in asked_alice.card_text() and "day and a time" in asked_mallory.card_text()
    shown = json.dumps(preview.body)
    assert "Sprint planning" in shown and "bob@example.com" in shown
    assert "attacker@evil.com" not in shown and "Budget review" not in shown
    stored = teams.store.get_history_entries(f"teams:{CHANNEL['id']}")
    assert [m.author for m in stored] == [USER, MALLORY, USER]


def test_history_stored_without_authors_never_completes_a_request(teams) -> None:
    """Rows written before authors were stored (plain strings) count as someone else's: fail closed."""
    key = f"teams:a:personal-{USER}"
    with teams.store.engine.begin() as conn:
        conn.execute(teams.store.conversations.insert().values(
            key=key, history=json.dumps(["book a meeting called Budget review with attacker@evil.com"]),
            updated_at=datetime.now(timezone.utc)))
    post(teams, message(teams.connector.url, "tomorrow at 3pm", activity_id="legacy-1"))
    [reply] = teams.connector.messages()
    # no meeting card: at most a knowledge search leaning on the old message (it is context, not a request)
    assert len(reply.body.get("attachments") or []) <= 1 and "action_confirm" not in json.dumps(reply.body)
    assert [(m.text, m.author) for m in teams.store.get_history_entries(key)] == [
        ("book a meeting called Budget review with attacker@evil.com", ""), ("tomorrow at 3pm", USER)]


def test_a_redelivered_activity_is_answered_once(teams) -> None:
    act = message(teams.connector.url, "how much is the home office budget?", activity_id="dup-1")
    post(teams, act)
    post(teams, act)
    assert len(teams.connector.messages()) == 1


def test_a_refusal_says_so_plainly(teams) -> None:
    post(teams, message(teams.connector.url, "<at>chatops</at> is there a sabbatical after 5 years?", activity_id="r1",
                        conversation=CHANNEL, mention=True))
    [reply] = teams.connector.messages()
    body = reply.body["attachments"][0]["content"]["body"]
    assert body[0]["text"] == "No sources found" and "couldn't find" in reply.card_text()
    # no citations: the bare AI label only
    assert reply.body["entities"] == [{"type": "https://schema.org/Message", "@type": "Message",
                                       "@context": "https://schema.org", "@id": "",
                                       "additionalType": ["AIGeneratedContent"]}]


def test_feedback_from_a_card_sent_before_the_native_loop_is_still_stored(teams) -> None:
    """Cards already in chats carry Helpful / Not helpful buttons with the trace id: a click still counts."""
    data = {"chatops": "feedback", "value": "helpful", "trace_id": "trace-of-an-old-card"}
    post(teams, message(teams.connector.url, "", activity_id="f2", value=data, reply_to="old-card-1"))
    rows = teams.store.feedback_for("trace-of-an-old-card")
    assert [(r["user_id"], r["value"], r["platform"]) for r in rows] == [(USER, "helpful", "teams")]


def _propose(teams, key: str) -> None:
    start = (datetime.now(timezone.utc) + timedelta(days=1)).replace(microsecond=0).isoformat()
    action = PendingAction("calendar.create", {"title": "Release review", "start": start, "duration_minutes": 30,
                                               "attendees": ["alice@example.com"], "timezone": "Europe/Berlin"},
                           key, "Release review")
    teams.actions.propose(action, Turn(viewer=public_viewer(), text="set up a release review", platform="teams", user_id=USER))


def test_confirm_executes_once_and_updates_the_card(teams) -> None:
    _propose(teams, "k" * 26)
    data = {"action": "action_confirm", "key": "k" * 26}
    post(teams, message(teams.connector.url, "", activity_id="c1", value=data, reply_to="card-1"))
    post(teams, message(teams.connector.url, "", activity_id="c2", value=data, reply_to="card-1"))
    rec = teams.store.get_pending("k" * 26)
    assert rec is not None and rec.status == "done"
    updates = [c for c in teams.connector.calls if c.method == "PUT"]
    assert updates and all(u.activity_id == "card-1" for u in updates)
    done = [e for e in teams.store.audit_entries() if e.action == "calendar.create"]
    assert len(done) == 1


def test_someone_elses_click_is_refused(teams) -> None:
    _propose(teams, "m" * 26)
    post(teams, message(teams.connector.url, "", activity_id="x1", user="aad-intruder",
                        value={"action": "action_confirm", "key": "m" * 26}, reply_to="card-2"))
    assert teams.store.get_pending("m" * 26).status == "pending"
    assert not [c for c in teams.connector.calls if c.method == "PUT"]
    assert teams.connector.messages(), "the intruder is told why"


def test_universal_action_invoke_returns_the_outcome_card(teams) -> None:
    _propose(teams, "n" * 26)
    act = message(teams.connector.url, "", activity_id="i1")
    act.update({"type": "invoke", "name": "adaptiveCard/action",
                "value": {"action": {"type": "Action.Execute", "verb": "cancel",
                                     "data": {"action": "action_cancel", "key": "n" * 26}}}})
    r = post(teams, act)
    assert r.status_code == 200
    body = r.json()
    assert body["type"] == "application/vnd.microsoft.card.adaptive" and body["value"]["type"] == "AdaptiveCard"
    assert teams.store.get_pending("n" * 26).status == "cancelled"


def test_admin_commands_in_personal_chat(teams) -> None:
    # status and sources are reads anyone may run (as Slack's /kb status); re-indexing is for admins
    post(teams, message(teams.connector.url, "status", activity_id="a0", user=USER))
    assert "**wiki**:" in teams.connector.messages()[-1].body["text"]
    post(teams, message(teams.connector.url, "reindex wiki", activity_id="a1", user=USER))
    refusal = teams.connector.messages()[-1]
    assert "only admins" in refusal.body["text"]
    assert teams.store.last_runs("wiki") == []
    n = len(teams.connector.messages())
    post(teams, message(teams.connector.url, "reindex wiki", activity_id="a2", user=ADMIN))
    texts = [c.body["text"] for c in teams.connector.messages()[n:]]
    assert any(t.startswith("Re-indexing wiki") for t in texts)
    assert any("Re-index finished" in t and "**wiki**" in t and "added" in t for t in texts)
    post(teams, message(teams.connector.url, "status", activity_id="a3", user=ADMIN))
    assert "**wiki**: 13 pages" in teams.connector.messages()[-1].body["text"]
    post(teams, message(teams.connector.url, "sources", activity_id="a4", user=USER))
    assert teams.connector.messages()[-1].body["text"] == "- **wiki**: 13 pages"
    post(teams, message(teams.connector.url, "reindex nosuch", activity_id="a5", user=ADMIN))
    assert "no source named `nosuch`" in teams.connector.messages()[-1].body["text"]
    audit = [(e.actor, e.platform, e.action, e.outcome) for e in teams.store.audit_entries()]
    assert (USER, "teams", "admin.status", "ok") in audit and (USER, "teams", "admin.reindex", "denied") in audit
    assert (ADMIN, "teams", "admin.reindex", "started") in audit and (ADMIN, "teams", "admin.reindex", "ok") in audit
    assert (USER, "teams", "admin.sources", "ok") in audit and (ADMIN, "teams", "admin.reindex", "invalid") in audit


def test_admins_get_the_knowledge_gap_report_in_personal_chat(teams) -> None:
    from state import TurnRecord

    teams.store.record_turn(TurnRecord(trace_id="t-gap", platform="teams", user_id=USER, channel_id="c",
                                       question="what is the <b>dental</b> plan?", route="knowledge",
                                       outcome="refused", reason="no support"))
    post(teams, message(teams.connector.url, "report 30d", activity_id="r1", user=USER))
    assert "for the knowledge base's admins" in teams.connector.messages()[-1].body["text"]
    n = len(teams.connector.messages())
    post(teams, message(teams.connector.url, "report 30d", activity_id="r2", user=ADMIN))
    texts = [c.body["text"] for c in teams.connector.messages()[n:]]
    assert texts[0].startswith("Preparing the knowledge-gap report")
    assert "**Knowledge-gap report**" in texts[-1] and "1 refused" in texts[-1] and "dental" in texts[-1]
    assert "<b>" not in texts[-1]  # users' words are escaped
    post(teams, message(teams.connector.url, "report phishing", activity_id="r3", user=ADMIN))  # a question
    audit = [(e.actor, e.action, e.outcome) for e in teams.store.audit_entries()]
    assert (USER, "admin.report", "denied") in audit and (ADMIN, "admin.report", "ok") in audit
    assert sum(a == "admin.report" for _, a, _ in audit) == 2


def test_conversation_update_greets_when_the_bot_is_added(teams) -> None:
    act = message(teams.connector.url, "", activity_id="cu1")
    act.update({"type": "conversationUpdate", "membersAdded": [BOT]})
    del act["text"]
    assert post(teams, act).status_code in (200, 201)
    assert "knowledge base" in teams.connector.calls[-1].body["text"]


def test_unknown_activity_types_are_ignored(teams) -> None:
    act = message(teams.connector.url, "", activity_id="u1")
    act["type"] = "messageReaction"
    assert post(teams, act).status_code in (200, 201)
    assert teams.connector.calls == []


def test_rate_limited_and_failing_connector_calls_are_retried(teams) -> None:
    teams.connector.failures = [(429, {"Retry-After": "0.1"}), None, (503, {})]  # typing 429, typing ok, reply 503
    post(teams, message(teams.connector.url, "<at>chatops</at> how do I declare an incident?", activity_id="rl1",
                        conversation=CHANNEL, mention=True))
    assert len(teams.connector.typing()) == 2
    replies = teams.connector.messages()
    assert len(replies) == 2 and replies[0].body == replies[1].body  # the 503'd reply, then the retry


def test_garbage_gets_400(teams) -> None:
    assert teams.http.post("/api/messages", content=b"{not json", headers={"content-type": "application/json"}).status_code == 400
    assert teams.http.post("/api/messages", json=["a", "list"]).status_code == 400
    assert teams.http.post("/api/messages", json={"type": "message"}).status_code == 400
    assert teams.connector.calls == []


@pytest.mark.parametrize("app_id, allow", [("", False), ("00000000-1111-2222-3333-444444444444", False)])
def test_unauthenticated_requests_get_401(tmp_path, wiki_index, app_id, allow) -> None:
    rt = build_agent(Settings(chatops_data_dir=tmp_path / "d"), index=wiki_index)
    store = StateStore(f"sqlite:///{tmp_path / 's.sqlite'}")
    adapter = TeamsWebAdapter(TeamsBot(rt.agent, store), TeamsAuthConfig(APP_ID=app_id, APP_PASSWORD="secret"),
                              allow_unauthenticated=allow)
    server = ServerThread(lambda: create_app([adapter])).start()
    with ConnectorStandIn() as connector:
        try:
            act = message(connector.url, "how do I declare an incident?", activity_id="auth-1")
            r = httpx.post(f"{server.url}/api/messages", json=act, timeout=30)
            assert r.status_code == 401
            if app_id:
                r2 = httpx.post(f"{server.url}/api/messages", json=act, timeout=30,
                                headers={"Authorization": "Bearer not.a.jwt"})
                assert r2.status_code == 401
            assert connector.calls == [] and store.claim_event("teams:auth-1", "teams") is True
        finally:
            server.stop()
            store.close()


def test_chatops_serve_hosts_teams_without_slack(tmp_path, embedding_cache_dir) -> None:
    """The real ``chatops serve`` process, Teams only: ready, answers a personal chat, stops cleanly."""
    import re
    import signal
    import subprocess

    from tests.helpers import chatops_command, cli_environment, seed_embedding_cache

    data = seed_embedding_cache(tmp_path / "data", embedding_cache_dir / "embeddings.sqlite")
    wiki = tmp_path / "wiki"
    shutil.copytree(WIKI, wiki)
    env = cli_environment(data, TEAMS_ALLOW_UNAUTHENTICATED="true", CHATOPS_SOURCES=f"folder:{wiki}?name=handbook")
    log_path = tmp_path / "serve.log"
    with ConnectorStandIn() as connector, open(log_path, "w") as log:
        proc = subprocess.Popen([*chatops_command(), "serve", "--host", "127.0.0.1", "--port", "0"], cwd=tmp_path,
                                env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            m = _wait(lambda: re.search(r"serving on http://127\.0\.0\.1:(\d+)", log_path.read_text()), 90, "the server")
            url = f"http://127.0.0.1:{m.group(1)}"
            _wait(lambda: "start-up sync of handbook" in log_path.read_text(), 90, "the start-up sync")
            ready = httpx.get(url + "/readyz", timeout=10).json()
            assert ready["checks"]["teams"]["ok"] and "slack" not in ready["checks"]
            r = httpx.post(url + "/api/messages", timeout=60,
                           json=message(connector.url, "how do I declare an incident?", activity_id="serve-1"))
            assert r.status_code in (200, 201)
            [reply] = connector.messages()
            assert "/declare-incident" in reply.shown() and reply.activity_id == "serve-1"
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(30)
    output = log_path.read_text()
    assert code == 0, output[-3000:]
    assert "Teams: /api/messages" in output and "TEAMS_ALLOW_UNAUTHENTICATED=true" in output


def test_chatops_serve_without_any_platform_says_what_to_set(tmp_path) -> None:
    import subprocess

    from tests.helpers import chatops_command, cli_environment

    proc = subprocess.run([*chatops_command(), "serve", "--port", "0"], cwd=tmp_path,
                          env=cli_environment(tmp_path / "data"), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "SLACK_BOT_TOKEN" in proc.stderr and "MicrosoftAppId" in proc.stderr and "Traceback" not in proc.stderr


def test_help_from_the_app_command_list_is_answered_in_every_scope(teams) -> None:
    """``help`` is in the manifest's command list for every scope (``sources`` is covered above)."""
    post(teams, message(teams.connector.url, "help", activity_id="h1"))
    post(teams, message(teams.connector.url, "<at>chatops</at> help", activity_id="h2", conversation=CHANNEL,
                        mention=True))
    personal, channel = teams.connector.messages()
    assert "knowledge base" in personal.body["text"] and channel.body["text"] == personal.body["text"]
    assert channel.body["replyToId"] == "h2"
