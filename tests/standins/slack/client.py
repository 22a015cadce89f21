"""Slack's side towards the bot: requests signed and shaped as Slack sends them (:class:`SlackSender`), and the
real bot served against the stand-in (:class:`SlackHarness`)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import time
import uuid
from typing import Any
from urllib.parse import urlencode

import httpx
from aiohttp import web

from bot.server import ServerThread
from tests.standins.slack.api import SlackStandin
from tests.standins.slack.model import APP_ID, APP_TOKEN, BOT_TOKEN, BOT_USER_ID, SIGNING_SECRET, TEAM_ID


def sign(secret: str, body: bytes, timestamp: int | None = None) -> dict[str, str]:
    """Slack's request signing headers for ``body`` (``v0=`` HMAC-SHA256 of ``v0:TIMESTAMP:BODY``)."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    base = b"v0:" + ts.encode() + b":" + body
    sig = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": sig}


def feedback_action(blocks: list[dict[str, Any]], positive: bool) -> dict[str, Any]:
    """The action Slack sends when the thumbs up (``positive``) or down of the message's ``feedback_buttons``
    is clicked: the element's ``action_id``, the block's ``block_id`` and the clicked button's ``value``.

    Raises:
        AssertionError: when the blocks hold no feedback buttons.
    """
    found = [(b, e) for b in blocks if b.get("type") == "context_actions" for e in b.get("elements", [])
             if e.get("type") == "feedback_buttons"]
    assert found, f"no feedback buttons in {[b.get('type') for b in blocks]}"
    block, element = found[0]
    button = element["positive_button" if positive else "negative_button"]
    return {"type": "feedback_buttons", "action_id": element["action_id"], "block_id": block.get("block_id", ""),
            "value": button["value"]}


class SlackSender:
    """Sends requests to the bot's ``/slack/events`` exactly as Slack does.

    Args:
        url: the bot's base URL (``http://127.0.0.1:PORT``).
        signing_secret: the app's signing secret.
        standin: the stand-in told about every ``trigger_id`` handed out (so ``views.open`` accepts only those).
    """

    def __init__(self, url: str, signing_secret: str, path: str = "/slack/events",
                 standin: SlackStandin | None = None) -> None:
        self.url = url.rstrip("/") + path
        self.secret = signing_secret
        self.standin = standin
        self.http = httpx.Client(timeout=30)
        self._ids = itertools.count(1)

    def close(self) -> None:
        """Close the HTTP client."""
        self.http.close()

    def post(self, body: bytes, content_type: str, headers: dict[str, str] | None = None,
             signed: bool = True, timestamp: int | None = None) -> httpx.Response:
        """POST ``body``, signed (``timestamp`` overrides now) unless ``signed`` is False."""
        h = {"Content-Type": content_type}
        if signed:
            h.update(sign(self.secret, body, timestamp))
        h.update(headers or {})
        return self.http.post(self.url, content=body, headers=h)

    def envelope(self, event: dict[str, Any], event_id: str | None = None) -> dict[str, Any]:
        """The Events API envelope Slack wraps ``event`` in."""
        return {"token": "legacy-verification-token", "team_id": TEAM_ID, "api_app_id": APP_ID, "event": event,
                "type": "event_callback", "event_id": event_id or f"Ev{uuid.uuid4().hex[:10].upper()}",
                "event_time": int(time.time()), "event_context": uuid.uuid4().hex,
                "authorizations": [{"enterprise_id": None, "team_id": TEAM_ID, "user_id": BOT_USER_ID,
                                    "is_bot": True, "is_enterprise_install": False}],
                "is_ext_shared_channel": False}

    def event(self, event: dict[str, Any], event_id: str | None = None, retry_num: int | None = None
              ) -> tuple[httpx.Response, dict[str, Any]]:
        """Deliver an Events API event (``retry_num`` adds Slack's redelivery headers); returns the
        response and the envelope sent."""
        env = self.envelope(event, event_id)
        headers = {}
        if retry_num is not None:
            headers = {"X-Slack-Retry-Num": str(retry_num), "X-Slack-Retry-Reason": "http_timeout"}
        return self.post(json.dumps(env).encode(), "application/json", headers), env

    def command(self, text: str, user_id: str, channel_id: str, response_url: str, command: str = "/kb",
                channel_name: str = "general") -> httpx.Response:
        """Invoke a slash command (form-encoded, as Slack sends it)."""
        form = {"token": "legacy-verification-token", "team_id": TEAM_ID, "team_domain": "standin",
                "channel_id": channel_id, "channel_name": channel_name, "user_id": user_id,
                "user_name": user_id.lower(), "command": command, "text": text, "api_app_id": APP_ID,
                "is_enterprise_install": "false", "response_url": response_url,
                "trigger_id": self._trigger()}
        return self.post(urlencode(form).encode(), "application/x-www-form-urlencoded")

    def _trigger(self) -> str:
        trigger = f"{next(self._ids)}.{uuid.uuid4().hex[:10]}"
        if self.standin is not None:
            with self.standin.lock:
                self.standin.triggers.add(trigger)
        return trigger

    def click(self, user_id: str, action: dict[str, Any], response_url: str, channel_id: str = "",
              message: dict[str, Any] | None = None, ephemeral: bool = False) -> httpx.Response:
        """Click a button (a ``block_actions`` interaction, ``payload=`` form-encoded)."""
        container: dict[str, Any] = {"type": "message", "is_ephemeral": ephemeral}
        if channel_id:
            container["channel_id"] = channel_id
        if message and not ephemeral:
            container["message_ts"] = message.get("ts", "")
        payload = {"type": "block_actions", "team": {"id": TEAM_ID, "domain": "standin"},
                   "user": {"id": user_id, "username": user_id.lower(), "team_id": TEAM_ID},
                   "api_app_id": APP_ID, "token": "legacy-verification-token", "container": container,
                   "trigger_id": self._trigger(),
                   "channel": {"id": channel_id, "name": "general"} if channel_id else None,
                   "message": message, "response_url": response_url,
                   "actions": [{"block_id": action.get("block_id", "b"), "action_ts": f"{time.time():.6f}",
                                **{k: v for k, v in action.items() if k != "block_id"}}]}
        return self.post(urlencode({"payload": json.dumps(payload)}).encode(), "application/x-www-form-urlencoded")

    def submit_view(self, user_id: str, view: dict[str, Any], values: dict[str, dict[str, Any]]) -> httpx.Response:
        """Submit an opened modal (a ``view_submission`` interaction); ``values``: ``{block_id: {action_id:
        value object}}`` as Slack puts them in ``view.state.values``."""
        payload = {"type": "view_submission", "team": {"id": TEAM_ID, "domain": "standin"},
                   "user": {"id": user_id, "username": user_id.lower(), "team_id": TEAM_ID},
                   "api_app_id": APP_ID, "token": "legacy-verification-token", "trigger_id": self._trigger(),
                   "view": {**view, "state": {"values": values}}, "response_urls": [],
                   "is_enterprise_install": False}
        return self.post(urlencode({"payload": json.dumps(payload)}).encode(), "application/x-www-form-urlencoded")

    def home_opened(self, user_id: str) -> tuple[httpx.Response, dict[str, Any]]:
        """The user opened the app's Home tab (``app_home_opened``, tab ``home``)."""
        return self.event({"type": "app_home_opened", "user": user_id, "channel": "D" + user_id[1:], "tab": "home",
                           "event_ts": f"{time.time():.6f}"})


def _manifest(path: str | None = None) -> dict[str, Any]:
    import yaml
    from pathlib import Path

    manifest = Path(path) if path else Path(__file__).resolve().parents[3] / "manifest.yml"
    return yaml.safe_load(manifest.read_text())


def manifest_scopes(path: str | None = None) -> set[str]:
    """The bot scopes ``manifest.yml`` grants."""
    return set(_manifest(path)["oauth_config"]["scopes"]["bot"])


def manifest_home_tab(path: str | None = None) -> bool:
    """Whether ``manifest.yml`` enables the Home tab."""
    return bool(((_manifest(path).get("features") or {}).get("app_home") or {}).get("home_tab_enabled"))


class SlackHarness:
    """The real bot (Bolt ``AsyncApp`` behind :func:`bot.server.create_app`, served by aiohttp on 127.0.0.1)
    wired to a :class:`SlackStandin`, and a :class:`SlackSender` to talk to it.

    Args:
        runtime: the index, tools and agent (``app.wiring.build_agent``).
        store: the state store.
        jobs: the index jobs (``/kb status``, ``/kb reindex``).
        admin_ids: ``ADMIN_USER_IDS``.
        socket_mode: serve over Socket Mode instead of ``POST /slack/events``.
        scopes: the stand-in's granted scopes (default: manifest.yml's).
        agent_concurrency: answers computed at once.
    """

    def __init__(self, runtime: Any, store: Any, jobs: Any, admin_ids: tuple[str, ...] = (),
                 socket_mode: bool = False, scopes: set[str] | None = None, agent_concurrency: int = 2) -> None:
        import dataclasses

        from bot.server import create_app
        from app.settings import Settings
        from bot.slack import SlackBot, SlackConfig
        from bot.slack.http import SlackHttpAdapter
        from bot.slack.socket_mode import SlackSocketModeAdapter

        self.standin = SlackStandin(BOT_TOKEN, APP_TOKEN, manifest_scopes() if scopes is None else scopes,
                                    home_tab=manifest_home_tab()).start()
        settings = Settings(slack_bot_token=BOT_TOKEN, slack_signing_secret=SIGNING_SECRET, slack_app_token=APP_TOKEN,
                            slack_api_url=self.standin.api_url, admin_user_ids=",".join(admin_ids))
        config = dataclasses.replace(SlackConfig.from_settings(settings, socket_mode=socket_mode),
                                     agent_concurrency=agent_concurrency)
        self.store = store

        def build() -> web.Application:
            self.bot = SlackBot(config, runtime, store, jobs)
            adapter = (SlackSocketModeAdapter(self.bot, ping_interval=30) if socket_mode
                       else SlackHttpAdapter(self.bot))

            async def state_ready() -> tuple[bool, str]:
                return store.ping(), "state"

            return create_app([adapter], checks={"state": state_ready})

        self.server = ServerThread(build).start()
        self.sender = SlackSender(self.server.url, SIGNING_SECRET, standin=self.standin)

    def idle(self, timeout: float = 20) -> None:
        """Wait until the bot has no background work left.

        Raises:
            AssertionError: when work is still running after ``timeout`` seconds.
        """
        assert self.server.call(self.bot.wait_idle(timeout), timeout + 5), "the bot is still busy"

    def close(self) -> None:
        """Stop the bot's server, then the stand-in."""
        self.sender.close()
        self.server.stop()
        self.standin.stop()


def run_forever_for_debugging() -> None:  # pragma: no cover - manual use
    """Start a stand-in and print its URL (``python -m tests.standins.slack``)."""
    standin = SlackStandin("xoxb-standin").start()
    print(standin.api_url)
    try:
        asyncio.run(asyncio.sleep(3600))
    finally:
        standin.stop()
