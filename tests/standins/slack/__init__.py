"""A stand-in for Slack on 127.0.0.1: its Web API, ``response_url``\\ s and Socket Mode, plus a client that
sends requests to the bot exactly as Slack does (signed JSON events, form-encoded slash commands,
``payload=`` interactions).

The Web API answers in Slack's wire format: HTTP 200 with ``{"ok": true, ...}`` or
``{"ok": false, "error": "..."}``, and rate limits as HTTP 429 with ``Retry-After``. It checks the bearer
token (``not_authed`` / ``invalid_auth``), the scopes granted by ``manifest.yml`` (``missing_scope``,
per method and, for ``conversations.replies``, per conversation type), channel membership
(``not_in_channel``, ``channel_not_found``), Block Kit limits (``invalid_blocks``), and keeps the
messages posted so ``conversations.replies`` returns real threads. Every call is recorded.

Used by tests/test_slack_*.py and bench/slack_load.py.
"""

from tests.standins.slack.api import SlackStandin
from tests.standins.slack.client import (SlackHarness, SlackSender, feedback_action, manifest_home_tab, manifest_scopes,
                                         sign)
from tests.standins.slack.model import (APP_ID, APP_TOKEN, BOT_ID, BOT_TOKEN, BOT_USER_ID, HISTORY_SCOPES, MEMBERS_SCOPES,
                                        METHOD_SCOPES, SIGNING_SECRET, TEAM_ID, Call)

__all__ = ["SlackStandin", "SlackSender", "SlackHarness", "Call", "METHOD_SCOPES", "HISTORY_SCOPES", "MEMBERS_SCOPES",
           "TEAM_ID", "BOT_USER_ID", "APP_ID",
           "BOT_TOKEN", "APP_TOKEN", "SIGNING_SECRET", "manifest_scopes", "manifest_home_tab",
           "BOT_ID", "sign", "feedback_action"]
