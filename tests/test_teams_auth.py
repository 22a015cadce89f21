"""Teams with ``MicrosoftAppId`` set: what an unauthenticated request can and cannot do to the server.

The real server app (``bot.server.create_app``) serves Slack (``SlackHttpAdapter``, signed requests
from ``SlackSender``) and Teams (``TeamsWebAdapter`` with an app id) side by side, as ``chatops serve``
does. The Bot Framework's signing keys come from ``tests/standins/openid.py`` on 127.0.0.1, which counts
fetches and can hold them (slow egress). Covers:

- while a key fetch hangs, ``/healthz`` answers and a signed Slack event is acknowledged within a
  second; the Teams request gets 503 after the key timeout;
- a token signed with the fetched keys passes the SDK's real check; a forged signature or another
  service URL does not; one fetch serves them all;
- tokens that cannot be the Bot Framework's (foreign issuer, another bot's, expired, HS256, no key
  id, not a JWT, oversized) get 401 with no key fetch at all;
- a failed fetch is not retried at once: the next request gets 503 without a new fetch;
- past ``max_pending_auth`` requests being authenticated, one more gets 503 at once;
- bodies that are not JSON activities (nested 400,000 deep, nested past the limit, not UTF-8, over
  the size limit) get 400/413 with no traceback in the log, with or without an app id.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import jwt
import pytest

from app.jobs import IndexJobs
from bot.server import ServerThread, create_app
from app.settings import Settings
from bot.slack import SlackBot, SlackConfig
from bot.slack.http import SlackHttpAdapter
from bot.teams.adapter import TeamsAuthConfig, TeamsWebAdapter
from bot.teams.bot import TeamsBot
from app.wiring import build_agent
from connectors.folder import FolderSource
from state import StateStore
from state.store import sqlite_url

from tests.standins.openid import OpenIdStandIn
from tests.standins.slack import APP_TOKEN, BOT_TOKEN, SIGNING_SECRET, SlackSender, SlackStandin, manifest_scopes
from tests.standins.teams import ConnectorStandIn

APP_ID = "00000000-1111-2222-3333-444444444444"
KEYS_TIMEOUT = 3.0


def activity(service_url: str, kind: str = "messageReaction", activity_id: str = "a-1") -> dict:
    """An activity the bot acknowledges without calling the connector (nothing to reply to)."""
    return {"type": kind, "id": activity_id, "timestamp": "2026-11-21T10:00:00.000Z", "serviceUrl": service_url,
            "channelId": "msteams", "from": {"id": "29:u", "aadObjectId": "aad-user-1"},
            "conversation": {"conversationType": "personal", "tenantId": "t1", "id": "a:personal"},
            "recipient": {"id": "28:bot", "name": "chatops"}, "reactionsAdded": [{"type": "like"}]}


class Server:
    """Slack and Teams on one server, the stand-ins they talk to, and clients."""

    def __init__(self, tmp_path: Path, wiki_index, session_wiki: Path, max_pending_auth: int = 32,
                 app_id: str = APP_ID) -> None:
        self.openid = OpenIdStandIn().__enter__()
        self.connector = ConnectorStandIn().__enter__()
        self.slack = SlackStandin(BOT_TOKEN, APP_TOKEN, manifest_scopes()).start()
        self.store = StateStore(sqlite_url(tmp_path / "state.sqlite"))
        runtime = build_agent(Settings(chatops_data_dir=tmp_path / "data"), index=wiki_index)
        jobs = IndexJobs(runtime, self.store, [FolderSource(session_wiki)])
        settings = Settings(slack_bot_token=BOT_TOKEN, slack_signing_secret=SIGNING_SECRET,
                            slack_api_url=self.slack.api_url)
        config = dataclasses.replace(SlackConfig.from_settings(settings), agent_concurrency=1)

        def build():
            self.teams = TeamsWebAdapter(TeamsBot(runtime.agent, self.store),
                                         TeamsAuthConfig(APP_ID=app_id, APP_PASSWORD="secret"),
                                         allow_unauthenticated=not app_id, openid_metadata_url=self.openid.metadata_url,
                                         keys_timeout=KEYS_TIMEOUT, max_pending_auth=max_pending_auth)
            return create_app([SlackHttpAdapter(SlackBot(config, runtime, self.store, jobs)), self.teams])

        self.server = ServerThread(build).start()
        self.http = httpx.Client(base_url=self.server.url, timeout=30)
        self.sender = SlackSender(self.server.url, SIGNING_SECRET)

    def teams_post(self, token: str | None, body: dict | bytes, **headers: str) -> httpx.Response:
        h = {"Content-Type": "application/json", **headers}
        if token is not None:
            h["Authorization"] = f"Bearer {token}"
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        return httpx.post(self.server.url + "/api/messages", content=content, headers=h, timeout=30)

    def close(self) -> None:
        self.openid.release()
        self.sender.close()
        self.http.close()
        self.server.stop()
        self.slack.stop()
        self.connector.__exit__(None, None, None)
        self.openid.__exit__(None, None, None)
        self.store.close()


@pytest.fixture
def server(tmp_path: Path, wiki_index, session_wiki: Path):
    s = Server(tmp_path, wiki_index, session_wiki)
    yield s
    s.close()


def no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    assert "Traceback" not in caplog.text
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []


def test_a_hanging_key_fetch_freezes_nothing_and_real_tokens_pass_once_keys_arrive(
        server: Server, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    s = server
    s.openid.hold()
    token = s.openid.token(APP_ID, s.connector.url)
    with ThreadPoolExecutor(1) as pool:
        started = time.monotonic()
        pending = pool.submit(s.teams_post, token, activity(s.connector.url))
        deadline = time.monotonic() + 10
        while s.openid.metadata_fetches() == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert s.openid.metadata_fetches() == 1, "the token made the SDK fetch keys"
        t0 = time.monotonic()
        health = s.http.get("/healthz", timeout=5)
        assert health.status_code == 200 and time.monotonic() - t0 < 1.0
        t0 = time.monotonic()
        ack, _ = s.sender.event({"type": "reaction_added", "user": "UALICE01", "reaction": "eyes",
                                 "item": {"type": "message", "channel": "C1", "ts": "1.2"}, "event_ts": "1.3"})
        assert ack.status_code == 200 and time.monotonic() - t0 < 1.0
        refused = pending.result(15)
        waited = time.monotonic() - started
    assert refused.status_code == 503 and refused.headers["Retry-After"]
    assert KEYS_TIMEOUT - 0.2 < waited < KEYS_TIMEOUT + 3
    assert s.connector.calls == []

    assert "could not authenticate a request now" in caplog.text  # the key wait or the fetch timed out
    no_traceback(caplog)


def test_tokens_signed_with_the_fetched_keys_pass_the_sdks_check(server: Server,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    s = server
    token = s.openid.token(APP_ID, s.connector.url)
    ok = s.teams_post(token, activity(s.connector.url))
    assert ok.status_code in (200, 201), ok.text
    forged = jwt.encode(jwt.decode(token, options={"verify_signature": False}),
                        OpenIdStandIn().private_key, algorithm="RS256", headers={"kid": "standin-key-1"})
    assert s.teams_post(forged, activity(s.connector.url, activity_id="a-2")).status_code == 401
    other_url = s.openid.token(APP_ID, "https://elsewhere.example.com/")  # serviceurl claim must match
    assert s.teams_post(other_url, activity(s.connector.url, activity_id="a-3")).status_code == 401
    assert s.openid.metadata_fetches() == 1, "one fetch served them all"
    assert s.openid.fetches == ["/v1/.well-known/openidconfiguration", "/keys"]
    no_traceback(caplog)


def test_tokens_that_cannot_be_the_bot_frameworks_get_401_without_a_key_fetch(
        server: Server, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    s = server
    o, url = s.openid, s.connector.url
    hs256 = jwt.encode({"iss": "https://api.botframework.com", "aud": APP_ID, "exp": time.time() + 600}, "k" * 32,
                       algorithm="HS256", headers={"kid": "x"})
    no_kid = jwt.encode({"iss": "https://api.botframework.com", "aud": APP_ID, "exp": time.time() + 600},
                        o.private_key, algorithm="RS256")
    tokens = [
        o.token(APP_ID, url, issuer="https://evil.example.com/"),
        o.token(APP_ID, url, issuer="https://sts.windows.net/d6d49420-f39b-4df7-a1dc-d59a935871db/"),  # emulator
        o.token(APP_ID, url, audience="someone-elses-bot"),
        o.token(APP_ID, url, expires_in=-3600),
        hs256, no_kid, "not.a.jwt", "x" * 8000, f"{o.token(APP_ID, url)} extra",
    ]
    codes = [s.teams_post(t, activity(url, activity_id=f"f-{i}")).status_code for i, t in enumerate(tokens)]
    codes.append(s.teams_post(None, activity(url, activity_id="f-none")).status_code)
    basic = s.teams_post(None, activity(url, activity_id="f-basic"), Authorization="Basic dXNlcjpwYXNz")
    codes.append(basic.status_code)
    assert codes == [401] * (len(tokens) + 2)
    # a header line past aiohttp's 8 KB limit never reaches the adapter: 400, and one log line, no trace
    assert s.teams_post("x" * 9000, activity(url, activity_id="f-long")).status_code == 400
    assert s.openid.fetches == [] and s.connector.calls == []
    assert "evil.example.com" in caplog.text and "not a Bot Framework issuer" in caplog.text
    no_traceback(caplog)


def test_a_failed_key_fetch_is_not_retried_at_once(server: Server, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    s = server
    s.openid.status = 500
    token = s.openid.token(APP_ID, s.connector.url)
    assert s.teams_post(token, activity(s.connector.url)).status_code == 503
    t0 = time.monotonic()
    assert s.teams_post(token, activity(s.connector.url, activity_id="a-2")).status_code == 503
    assert time.monotonic() - t0 < 1.0 and s.openid.metadata_fetches() == 1
    assert "could not fetch the Bot Framework signing keys" in caplog.text
    no_traceback(caplog)


def test_too_many_requests_being_authenticated_get_503_at_once(tmp_path: Path, wiki_index, session_wiki: Path) -> None:
    s = Server(tmp_path, wiki_index, session_wiki, max_pending_auth=2)
    try:
        s.openid.hold()
        token = s.openid.token(APP_ID, s.connector.url)
        with ThreadPoolExecutor(2) as pool:
            waiting = [pool.submit(s.teams_post, token, activity(s.connector.url, activity_id=f"p-{i}"))
                       for i in range(2)]
            deadline = time.monotonic() + 10
            while s.teams.authentication.pending < 2 and time.monotonic() < deadline:
                time.sleep(0.02)
            t0 = time.monotonic()
            busy = s.teams_post(token, activity(s.connector.url, activity_id="p-3"))
            assert busy.status_code == 503 and time.monotonic() - t0 < 1.0
            assert [f.result(15).status_code for f in waiting] == [503, 503]
    finally:
        s.close()


DEEP = b"[" * 400_000 + b"]" * 400_000


@pytest.mark.parametrize("app_id", ["", APP_ID])
def test_bodies_that_are_not_json_activities_get_4xx_without_a_traceback(
        tmp_path: Path, wiki_index, session_wiki: Path, caplog: pytest.LogCaptureFixture, app_id: str) -> None:
    caplog.set_level(logging.DEBUG)
    s = Server(tmp_path, wiki_index, session_wiki, app_id=app_id)
    try:
        token = s.openid.token(APP_ID, s.connector.url) if app_id else None
        nested = activity(s.connector.url, "message")
        nested["value"] = json.loads("[" * 100 + "]" * 100)
        deep_inside = json.dumps(nested).encode()
        cases = {
            DEEP: 400,
            b'{"type": "message", "value": ' + b"{\"a\": " * 100_000 + b"1" + b"}" * 100_000 + b"}": 400,
            deep_inside: 400,
            b'{"type": "message", "text": "caf\xe9"}': 400,
            b"\xff\xfe{\x00}\x00": 400,
            b'{"type": "message", "n": ' + b"1" * 5000 + b"}": 400,
            b"[" * 2 * 1024 * 1024: 413,
        }
        got = {body[:40]: s.teams_post(token, body).status_code for body in cases}
        assert got == {body[:40]: code for body, code in cases.items()}
        assert s.connector.calls == [] and s.openid.fetches == []
        assert s.http.get("/healthz").status_code == 200
    finally:
        s.close()
    no_traceback(caplog)
