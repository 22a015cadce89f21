"""Prometheus metrics (issue 13): ``GET /metrics`` of the real ``chatops serve``, scraped and parsed with
``prometheus_client.parser`` after real signed Slack events, and the pieces that feed it.

- ``chatops serve`` in a subprocess (the Slack stand-in, a copy of the example wiki as its source, a SQLite
  state store holding one pending action): after its start-up sync, an answered DM (its first post answered
  429 by the stand-in), a refused DM (its Block Kit post refused as ``invalid_blocks``) and a "not helpful"
  click on the native feedback row with its reason form move the turn, latency, citation, refusal,
  feedback (the vote once, its reason once), Web API error and 429 counters by exactly what
  happened, with the right labels; the sync counter, pages and chunks per source, the last sync's age and
  the pending actions by state are there too.
- The sync engine counts content runs that succeed, fail and find the source busy, and permission runs.
- The refusal reasons map to a bounded set, one rule per test case.
- Teams over the real adapter and the Bot Connector stand-in: a 429 on the typing indicator, a reply refused
  for good (HTTP 400), a thumbs-up (Teams' feedback loop) and the turns are counted.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent import messages
from agent.models import Reply, Trace
from app.metrics import refusal_reason
from state import StateStore
from state.store import sqlite_url
from telemetry.metrics import REFUSAL_REASONS, REGISTRY

from tests.helpers import WIKI, WIKI_PAGES, chatops_command, cli_environment, seed_embedding_cache, wait_for
from tests.standins.slack import BOT_TOKEN, SIGNING_SECRET, SlackSender, SlackStandin, manifest_scopes

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

ALICE = "UALICE01"
SLACK_VARS = ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN", "SLACK_API_URL", "ADMIN_USER_IDS",
              "CHATOPS_SOURCES", "DATABASE_URL")


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    """``{(sample name, labels): value}`` of a Prometheus text exposition."""
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(scrape: dict, name: str, **labels: str) -> float:
    """One sample's value (0 when absent: a counter not yet incremented)."""
    return scrape.get((name, frozenset(labels.items())), 0.0)


def total(scrape: dict, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, ls), v in scrape.items() if n == name and want <= set(ls))


@pytest.fixture
def standin():
    s = SlackStandin(BOT_TOKEN, "", manifest_scopes()).start()
    s.add_user(ALICE)
    yield s
    s.stop()


def test_chatops_serve_exposes_metrics_that_move_with_real_turns(tmp_path: Path, wiki_index, embedding_cache_dir: Path,
                                                                 standin: SlackStandin) -> None:
    data = seed_embedding_cache(tmp_path / "data", embedding_cache_dir / "embeddings.sqlite")
    wiki = tmp_path / "wiki"
    shutil.copytree(WIKI, wiki)
    store = StateStore(sqlite_url(data / "state.sqlite"))
    store.create_pending("metrics-pending-1", "calendar.create_event", {"title": "Retro"}, ALICE, "slack",
                         ttl=timedelta(hours=1))
    store.close()
    env = {k: v for k, v in cli_environment(data).items() if k not in SLACK_VARS}
    # Answers posted whole (SLACK_STREAM_ANSWERS=false), so the stand-in's faults on chat.postMessage reach them;
    # the streamed path is tested in tests/test_slack_app.py.
    env.update(SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SIGNING_SECRET, SLACK_API_URL=standin.api_url,
               CHATOPS_SOURCES=f"folder:{wiki}?name=handbook&url_base=https://wiki.example.com/",
               SLACK_STREAM_ANSWERS="false")
    log_path = tmp_path / "serve.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen([*chatops_command(), "serve", "--host", "127.0.0.1", "--port", "0"], cwd=tmp_path,
                                env=env, stdout=log, stderr=subprocess.STDOUT)
    sender = None
    try:
        m = wait_for(lambda: re.search(r"serving on http://127\.0\.0\.1:(\d+)", log_path.read_text()), 90,
                     "the server to listen")
        url = f"http://127.0.0.1:{m.group(1)}"
        wait_for(lambda: f"start-up sync of handbook: {WIKI_PAGES} added" in log_path.read_text(), 90,
                 "the start-up sync")
        resp = httpx.get(url + "/metrics")
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/plain; version=0.0.4")
        before = samples(resp.text)
        # the start-up sync: one ok content run, the pages and chunks of the source, a fresh last success
        assert value(before, "chatops_sync_runs_total", source="handbook", kind="content", outcome="ok") == 1
        assert value(before, "chatops_index_pages", source="handbook") == WIKI_PAGES
        assert value(before, "chatops_index_chunks", source="handbook") >= WIKI_PAGES
        assert 0 <= value(before, "chatops_sync_last_success_age_seconds", source="handbook") < 600
        assert value(before, "chatops_sync_last_success_timestamp_seconds", source="handbook") > 1.7e9
        assert value(before, "chatops_pending_actions", state="pending") == 1
        assert value(before, "chatops_pending_actions", state="done") == 0
        assert total(before, "chatops_turns_total") == 0
        assert value(before, "process_resident_memory_bytes") > 0  # the process collector is there too

        sender = SlackSender(url, SIGNING_SECRET, standin=standin)
        dm = "D0METRIC1"
        standin.add_conversation(dm, "im")

        def ask(text: str) -> dict:
            msg = standin.user_message(dm, ALICE, text)
            resp, _ = sender.event({"type": "message", "user": ALICE, "text": text, "ts": msg["ts"], "channel": dm,
                                    "event_ts": msg["ts"], "channel_type": "im"})
            assert resp.status_code == 200
            [post] = standin.wait_for(lambda s: [c for c in s.calls_to("chat.postMessage", channel=dm)
                                                 if c.ok and c.params.get("thread_ts") == msg["ts"]], timeout=60)
            return post

        # an answered question; Slack answers its first post 429 (retried after Retry-After)
        standin.rate_limit_next("chat.postMessage", retry_after=1)
        answer = ask("how do I declare an incident?")
        # a refused question; Slack refuses its Block Kit post (the bot falls back to plain text)
        standin.fail_next("chat.postMessage", "invalid_blocks")
        refusal = ask("what is the office wifi password?")
        assert "blocks" not in refusal.params and "wifi" in refusal.params["text"]
        # a "not helpful" click on the answer's native feedback row, then the reason form
        [buttons] = [e for b in answer.params["blocks"] if b["type"] == "context_actions" for e in b["elements"]
                     if e["type"] == "feedback_buttons"]
        down = buttons["negative_button"]["value"]
        trace_id = down.split(":", 1)[1]
        click = sender.click(ALICE, {"action_id": buttons["action_id"], "value": down, "type": "feedback_buttons"},
                             standin.response_url(), channel_id=dm, message={"ts": answer.result["ts"]})
        assert click.status_code == 200
        [opened] = standin.wait_for(lambda s: s.calls_to("views.open") or None, timeout=30)
        reason = {"reason": {"value": {"type": "radio_buttons", "selected_option": {
                      "text": {"type": "plain_text", "text": "It's outdated"}, "value": "outdated"}}}}
        assert sender.submit_view(ALICE, opened.result["view"], reason).status_code == 200

        after = wait_for(lambda: (lambda m: m if value(m, "chatops_feedback_reasons_total", platform="slack",
                                                      reason="outdated") else None)(
            samples(httpx.get(url + "/metrics").text)), 30, "the feedback reason to be counted")

        def moved(name: str, **labels: str) -> float:
            return value(after, name, **labels) - value(before, name, **labels)

        assert moved("chatops_turns_total", platform="slack", route="knowledge", outcome="answered") == 1
        assert moved("chatops_turns_total", platform="slack", route="knowledge", outcome="refused") == 1
        assert total(after, "chatops_turns_total") == 2
        assert moved("chatops_turn_duration_seconds_count", platform="slack") == 2
        assert moved("chatops_turn_duration_seconds_sum", platform="slack") > 0
        assert moved("chatops_answer_citations_count", platform="slack") == 1
        assert moved("chatops_answer_citations_sum", platform="slack") >= 2  # MIN_CITATIONS distinct passages
        # "what is the office wifi password?": no passage of the handbook comes close (the gate's first rule)
        assert moved("chatops_refusals_total", platform="slack", reason="no_close_passage") == 1
        assert total(after, "chatops_refusals_total") == 1
        assert moved("chatops_feedback_total", platform="slack", value="not_helpful") == 1
        assert total(after, "chatops_feedback_total", value="helpful") == 0
        assert moved("chatops_feedback_reasons_total", platform="slack", reason="outdated") == 1  # the vote once
        assert moved("chatops_chat_api_rate_limited_total", platform="slack", method="chat.postMessage") == 1
        assert moved("chatops_chat_api_errors_total", platform="slack", method="chat.postMessage",
                     code="invalid_blocks") == 1
        assert total(after, "chatops_chat_api_errors_total") == 1  # the retried 429 did not fail the call
        # bounded labels: no trace id, user id or question text anywhere in the exposition
        text = httpx.get(url + "/metrics").text
        for secret in (trace_id, ALICE, "wifi", "incident"):
            assert secret not in text
        # OpenMetrics for scrapers that ask for it
        om = httpx.get(url + "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
        assert om.headers["content-type"].startswith("application/openmetrics-text") and om.text.endswith("# EOF\n")
    finally:
        if sender is not None:
            sender.close()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(30)
    output = log_path.read_text()
    assert code == 0, output[-3000:]
    assert "Traceback" not in output


# -- the sync engine's counter ------------------------------------------------------------------------------------
def test_sync_runs_are_counted_by_source_kind_and_outcome(tmp_path: Path, index_factory) -> None:
    from connectors.folder import FolderSource
    from index.sync import SyncEngine

    def runs(outcome: str, kind: str = "content") -> float:
        return REGISTRY.get_sample_value("chatops_sync_runs_total",
                                         {"source": "metrics-folder", "kind": kind, "outcome": outcome}) or 0.0

    store = StateStore(sqlite_url(tmp_path / "state.sqlite"))
    engine = SyncEngine(index_factory(), store)
    folder = tmp_path / "pages"
    folder.mkdir()
    (folder / "laptops.md").write_text("# Laptops\n\nEvery employee gets a company laptop, refreshed every three "
                                       "years by IT.\n", encoding="utf-8")
    ok0, busy0, failed0 = runs("ok"), runs("busy"), runs("failed")
    assert engine.run(FolderSource(folder, name="metrics-folder")).status == "ok"
    assert runs("ok") == ok0 + 1
    assert store.acquire_lock(engine.lock_name("metrics-folder"), "someone-else:1:x")
    assert engine.run(FolderSource(folder, name="metrics-folder")).status == "busy"
    assert runs("busy") == busy0 + 1
    store.release_lock(engine.lock_name("metrics-folder"), "someone-else:1:x")
    shutil.rmtree(folder)
    assert engine.run(FolderSource(folder, name="metrics-folder")).status == "failed"
    assert runs("failed") == failed0 + 1
    # a permission sync of a source without per-page permissions fails, counted as kind permissions
    perm0 = runs("failed", "permissions")
    assert engine.run_permissions(FolderSource(tmp_path, name="metrics-folder")).status == "failed"
    assert runs("failed", "permissions") == perm0 + 1 and runs("failed") == failed0 + 1
    # the store's aggregate: the last successful run of the source
    assert set(store.last_successful_runs()) == {"metrics-folder"}
    store.close()


# -- refusal reasons: a bounded set ---------------------------------------------------------------------------------
def _refused(gate: dict | None = None, steps: list[dict] | None = None, text: str = "no") -> Reply:
    trace = Trace()
    trace.gate = gate or {}
    trace.steps = steps or []
    return Reply(text, refused=True, route="knowledge", trace=trace)


@pytest.mark.parametrize("reply, reason", [
    (_refused({"sufficient": False, "reason": "no passage was close enough to the question; not found: wifi"}),
     "no_close_passage"),
    (_refused({"sufficient": False, "reason": "no supporting passage states the amount asked for"}),
     "answer_type_missing"),
    (_refused({"sufficient": False, "reason": "no supporting passage mentions 'hsa', the question's most "
                                              "specific term; not found: hsa"}), "specific_term_missing"),
    (_refused({"sufficient": False, "reason": "only 1 supporting passage, 2 needed"}), "too_few_passages"),
    (_refused({"sufficient": False, "reason": "something new"}), "other"),
    (_refused({"sufficient": True}, [{"step": "refuse", "reason": "only 1 verifiable source(s), 2 needed"}]),
     "unverified_citations"),
    (_refused({"sufficient": True}, [{"step": "refuse", "reason": "only 0 verifiable source(s), 2 needed; the rest "
                                      "was left out as credentials, personal data or planted instructions"}]),
     "withheld"),
    (_refused({"sufficient": False, "reason": "only 1 supporting passage, 2 needed"},
              [{"step": "access_refusal", "audience": "channel"}]), "no_access"),
    (_refused({"sufficient": True}, text=messages.COMPLIANCE_REFUSAL), "compliance"),
    (_refused({"sufficient": True}), "llm_unsupported"),
    (_refused(), "other"),
])
def test_refusal_reasons_are_a_bounded_set(reply: Reply, reason: str) -> None:
    assert refusal_reason(reply) == reason
    assert reason in REFUSAL_REASONS


# -- Teams: the Bot Connector send path and feedback ----------------------------------------------------------------
def test_teams_connector_errors_429s_feedback_and_turns_are_counted(tmp_path: Path, wiki_index) -> None:
    from app.metrics import TurnMetrics
    from app.settings import Settings
    from app.wiring import build_agent
    from bot.server import ServerThread, create_app
    from bot.teams.adapter import TeamsAuthConfig, TeamsWebAdapter
    from bot.teams.bot import TeamsBot
    from tests.standins.teams import ConnectorStandIn

    rt = build_agent(Settings(chatops_data_dir=tmp_path / "data"), index=wiki_index)
    rt.agent.observe(TurnMetrics())
    store = StateStore(sqlite_url(tmp_path / "state.sqlite"))
    bot = TeamsBot(rt.agent, store, streaming=False)  # one typing indicator, then the reply: calls in a known order
    server = ServerThread(lambda: create_app([TeamsWebAdapter(bot, TeamsAuthConfig(), allow_unauthenticated=True)]))
    user = "aad-metrics-1"

    def activity(activity_id: str, text: str = "", reply_to: str = "", value: dict | None = None) -> dict:
        act = {"type": "message", "id": activity_id, "timestamp": "2026-11-21T10:00:00.000Z",
               "serviceUrl": connector.url, "channelId": "msteams",
               "from": {"id": f"29:{user}", "name": "Ada", "aadObjectId": user},
               "conversation": {"conversationType": "personal", "tenantId": "t1", "id": f"a:personal-{user}"},
               "recipient": {"id": "28:bot-app-id", "name": "chatops"}, "text": text, "textFormat": "plain",
               "locale": "en-US", "channelData": {"tenant": {"id": "t1"}}}
        if value is not None:  # the invoke Teams posts when the thumbs up / down dialog is submitted
            act.update({"type": "invoke", "name": "message/submitAction", "value": value, "replyToId": reply_to})
            act.pop("text")
        return act

    with ConnectorStandIn() as connector:
        server.start()
        try:
            with httpx.Client(base_url=server.url, timeout=60) as http:
                before = samples(http.get("/metrics").text)
                # the typing indicator is answered 429 once (retried), the answer goes through
                connector.failures = [(429, {"Retry-After": "0.1"}), None, None]
                assert http.post("/api/messages", json=activity("m1", "how do I declare an incident?")).status_code < 300
                [answer] = connector.messages()
                like = {"actionName": "feedback", "actionValue": {"reaction": "like"}}
                assert http.post("/api/messages", json=activity("m2", reply_to=answer.response_id, value=like)
                                 ).status_code < 300
                # the next answer is refused by the connector for good (HTTP 400 is not retried)
                connector.failures = [None, (400, {})]
                assert http.post("/api/messages", json=activity("m3", "is there a sabbatical after 5 years?")
                                 ).status_code < 300
                after = samples(http.get("/metrics").text)
        finally:
            server.stop()
            store.close()

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("chatops_chat_api_rate_limited_total", platform="teams", method="typing_indicator") == 1
    assert moved("chatops_chat_api_errors_total", platform="teams", method="reply", code="400") == 1
    assert moved("chatops_feedback_total", platform="teams", value="helpful") == 1
    assert moved("chatops_turns_total", platform="teams", route="knowledge", outcome="answered") == 1
    # the second question continues the personal chat (route followup)
    assert moved("chatops_turns_total", platform="teams", route="followup", outcome="refused") == 1
    assert total(after, "chatops_turns_total", platform="teams") - total(before, "chatops_turns_total",
                                                                          platform="teams") == 2
    store = StateStore(sqlite_url(tmp_path / "state.sqlite"))
    with store.engine.connect() as conn:
        rows = [(r.user_id, r.value) for r in conn.execute(store.feedback.select())]
    store.close()
    assert rows == [(user, "helpful")]  # stored and counted by the one function
