"""``manifest.yml`` against the code: every event the code listens to is subscribed (and nothing else),
every Web API method the code calls has a scope, and no scope is unused.

The code is read, not trusted: the Web API methods are found by parsing ``bot/slack/*.py`` (and the
calendar actions' Slack hooks that ``chatops serve`` wires in) for calls of ``AsyncWebClient`` methods (mapped to their API names through slack_sdk's own source), the events by
parsing the Bolt listener registrations. The scope each method or event needs is Slack's documented one
(``METHOD_SCOPES`` in the stand-in, which enforces it in every end-to-end test; ``EVENT_SCOPES`` here).
"""

from __future__ import annotations

import ast
import inspect
import re
from functools import cache
from pathlib import Path

import yaml
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.config import COMMAND
from bot.slack.conversation import MESSAGE_CHANNEL_TYPES
from bot.slack.http import EVENTS_PATH

from tests.helpers import ROOT
from tests.standins.slack import HISTORY_SCOPES, MEMBERS_SCOPES, METHOD_SCOPES

SLACK_CODE = ROOT / "bot" / "slack"
#: Code that ``chatops serve`` wires into the Slack bot from outside bot/slack/ (the calendar actions' hooks).
WIRED_CODE = [ROOT / "bot" / "actions.py"]

#: Bot scopes each Events API subscription needs (Slack's event reference).
EVENT_SCOPES: dict[str, str | None] = {
    "app_home_opened": None,  # no scope (the Home tab must be enabled under features.app_home)
    "app_mention": "app_mentions:read",
    "message.channels": "channels:history",
    "message.groups": "groups:history",
    "message.im": "im:history",
    "message.mpim": "mpim:history",
    "assistant_thread_started": "assistant:write",
    "assistant_thread_context_changed": "assistant:write",
}
#: Methods Bolt calls by itself with the bot token (single-workspace authorisation).
BOLT_METHODS = {"auth.test"}
#: Methods called with the app-level token (its scope, connections:write, is not a bot scope).
APP_TOKEN_METHODS = {"apps.connections.open"}


@cache
def manifest() -> dict:
    return yaml.safe_load((ROOT / "manifest.yml").read_text())


def _trees() -> list[ast.Module]:
    paths = sorted(SLACK_CODE.glob("*.py")) + [p for p in WIRED_CODE if p.exists()]
    return [ast.parse(p.read_text(), str(p)) for p in paths]


def reads_user_email() -> bool:
    """True when a module that calls ``users.info`` reads the profile's ``email`` (needs users:read.email)."""
    for tree in _trees():
        calls = any(isinstance(n, ast.Attribute) and n.attr == "users_info" for n in ast.walk(tree))
        email = any(isinstance(n, ast.Constant) and n.value == "email" for n in ast.walk(tree))
        if calls and email:
            return True
    return False


@cache
def api_names() -> dict[str, str]:
    """``AsyncWebClient`` method name -> Web API method, from slack_sdk's source."""
    out = {}
    for name, fn in inspect.getmembers(AsyncWebClient, inspect.iscoroutinefunction):
        if name.startswith("_"):
            continue
        m = re.search(r'api_call\(\s*"([^"]+)"', inspect.getsource(fn))
        if m:
            out[name] = m.group(1)
    return out


@cache
def composite_names() -> dict[str, frozenset[str]]:
    """``AsyncWebClient`` helpers made of several Web API calls (``files_upload_v2``: ``files.getUploadURLExternal``
    then ``files.completeUploadExternal``) -> those methods, from slack_sdk's source."""
    names = api_names()
    out = {}
    for name, fn in inspect.getmembers(AsyncWebClient, inspect.iscoroutinefunction):
        if name.startswith("_") or name in names:
            continue
        inner = {names[m] for m in re.findall(r"await self\.(\w+)\(", inspect.getsource(fn)) if m in names}
        if inner:
            out[name] = frozenset(inner)
    return out


def methods_called() -> set[str]:
    """Web API methods the Slack adapter calls (attribute calls named like AsyncWebClient methods, a composite
    helper's methods included)."""
    names, composite = api_names(), composite_names()
    found = set()
    for tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr in names:
                    found.add(names[node.func.attr])
                found |= composite.get(node.func.attr, frozenset())
    return found


def events_listened() -> set[str]:
    """Events API subscriptions the code needs, from its Bolt registrations."""
    events: set[str] = set()
    for tree in _trees():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            if node.func.attr == "event" and node.args and isinstance(node.args[0], ast.Constant):
                name = node.args[0].value
                if name == "message":
                    events |= {f"{v}" for v in MESSAGE_CHANNEL_TYPES.values()}
                else:
                    events.add(name)
        for node in ast.walk(tree):
            # @assistant.thread_started / .thread_context_changed / .user_message
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "assistant":
                if node.attr == "thread_started":
                    events.add("assistant_thread_started")
                elif node.attr == "thread_context_changed":
                    events.add("assistant_thread_context_changed")
                elif node.attr == "user_message":
                    events.add("message.im")
    return events


def test_the_scan_finds_the_code_paths() -> None:
    """Guard the scanner itself: it must see the calls and listeners we know are there."""
    called = methods_called()
    assert {"chat.postMessage", "conversations.replies", "reactions.add", "users.info",
            "assistant.threads.setStatus"} <= called
    assert {"app_mention", "message.im", "assistant_thread_started"} <= events_listened()


def test_every_event_listened_to_is_subscribed_and_no_other() -> None:
    subscribed = set(manifest()["settings"]["event_subscriptions"]["bot_events"])
    assert subscribed == events_listened()


def test_every_method_has_its_scope_and_no_scope_is_unused() -> None:
    granted = set(manifest()["oauth_config"]["scopes"]["bot"])
    called = methods_called() | BOLT_METHODS
    unknown = called - set(METHOD_SCOPES) - APP_TOKEN_METHODS
    assert not unknown, f"add the scopes of {unknown} to METHOD_SCOPES (tests/standins/slack/)"
    needed: set[str] = set()
    for method in sorted(called - APP_TOKEN_METHODS):
        options = set(METHOD_SCOPES[method])
        if method in {"conversations.replies", "conversations.history"}:
            # read in every conversation type the bot answers in
            for kind in MESSAGE_CHANNEL_TYPES:
                assert HISTORY_SCOPES[kind] in granted, (method, kind)
                needed.add(HISTORY_SCOPES[kind])
            continue
        if method == "conversations.members":
            # CHANNEL_ACCESS=members lists the people of channels, private channels and group DMs
            for kind in ("channel", "group", "mpim"):
                assert MEMBERS_SCOPES[kind] in granted, (method, kind)
                needed.add(MEMBERS_SCOPES[kind])
            continue
        if options:
            assert options & granted, f"{method} needs one of {sorted(options)}"
            needed.add(min(options & granted))
    subscribed = manifest()["settings"]["event_subscriptions"]["bot_events"]
    for event in subscribed:
        scope = EVENT_SCOPES[event]
        if scope is not None:
            assert scope in granted, event
            needed.add(scope)
    if manifest()["features"].get("slash_commands"):
        needed.add("commands")
    if reads_user_email():
        needed.add("users:read.email")
    assert granted == needed, f"unused: {sorted(granted - needed)}, missing: {sorted(needed - granted)}"


def test_the_rest_of_the_manifest_matches_the_app() -> None:
    m = manifest()
    assert m["features"]["bot_user"]["display_name"]
    [command] = m["features"]["slash_commands"]
    assert command["command"] == COMMAND and command["url"].endswith(EVENTS_PATH)
    assert m["settings"]["event_subscriptions"]["request_url"].endswith(EVENTS_PATH)
    assert m["settings"]["interactivity"] == {"is_enabled": True,
                                              "request_url": m["settings"]["event_subscriptions"]["request_url"]}
    assert m["features"]["app_home"]["messages_tab_enabled"] is True  # DMs reach the bot
    # the code publishes a Home tab exactly when the manifest enables it
    assert m["features"]["app_home"]["home_tab_enabled"] is ("views.publish" in methods_called())
    assert ("app_home_opened" in m["settings"]["event_subscriptions"]["bot_events"]) is ("views.publish" in methods_called())
    assert "assistant_view" in m["features"]  # the AI-app surface
    for key in ("display_information", "features", "oauth_config", "settings"):
        assert key in m
    assert len(m["display_information"]["name"]) <= 35 and len(m["display_information"]["description"]) <= 140
    assert Path(ROOT / "manifest.yml").read_text().count("https://chatops.example.com/slack/events") == 3
