"""The Slack part of the settings, validated once at start-up.

Tokens stay :class:`pydantic.SecretStr` in :class:`app.settings.Settings`; here they are plain strings
on a dataclass whose ``repr`` hides them, so neither a traceback nor a log line shows them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from app.settings import Settings

__all__ = ["SlackConfig", "SlackConfigError", "parse_admin_ids", "COMMAND"]

#: The slash command (keep in step with manifest.yml).
COMMAND = "/kb"

_USER_ID = re.compile(r"^[UW][A-Z0-9]{2,}$")


class SlackConfigError(ValueError):
    """A missing or malformed Slack setting; the message names the variable and what to set."""


def parse_admin_ids(value: str) -> frozenset[str]:
    """``ADMIN_USER_IDS`` (Slack user ids separated by commas, semicolons or spaces) as a set.

    Raises:
        SlackConfigError: when an entry does not look like a Slack user id (``U...`` or ``W...``).
    """
    ids = [v.strip() for v in re.split(r"[,;\s]+", value or "") if v.strip()]
    bad = [v for v in ids if not _USER_ID.match(v)]
    if bad:
        raise SlackConfigError(f"ADMIN_USER_IDS has entries that are not Slack user ids: {', '.join(bad)} "
                               "(expected ids such as U012ABCDEF, separated by commas)")
    return frozenset(ids)


@dataclass(frozen=True)
class SlackConfig:
    """What the Slack adapter needs.

    Attributes:
        bot_token: ``xoxb-...`` (hidden from ``repr``).
        signing_secret: verifies HTTP requests; empty in Socket Mode (hidden from ``repr``).
        app_token: ``xapp-...`` for Socket Mode; empty in HTTP mode (hidden from ``repr``).
        api_url: the Web API base URL, ending with ``/``.
        admin_ids: user ids allowed to run ``/kb reindex``.
        socket_mode: whether Slack reaches the app over Socket Mode instead of HTTP.
        agent_concurrency: answers computed at once (each in a worker thread).
        history_limit: thread messages fetched per ``conversations.replies`` page.
        history_pages: at most this many pages are read for one thread (bounded history).
        stream_answers: stream answers into their thread (``SLACK_STREAM_ANSWERS``) instead of posting them whole.
        workspace_url: the workspace's address for thread links (``SLACK_WORKSPACE_URL``); "" : ``auth.test``'s.
    """

    bot_token: str = field(repr=False)
    signing_secret: str = field(default="", repr=False)
    app_token: str = field(default="", repr=False)
    api_url: str = "https://slack.com/api/"
    admin_ids: frozenset[str] = frozenset()
    socket_mode: bool = False
    agent_concurrency: int = 2
    history_limit: int = 100
    history_pages: int = 3
    stream_answers: bool = True
    workspace_url: str = ""

    @property
    def secrets(self) -> tuple[str, ...]:
        """The configured secrets (for the log redaction filter)."""
        return tuple(s for s in (self.bot_token, self.signing_secret, self.app_token) if s)

    @classmethod
    def from_settings(cls, settings: Settings, socket_mode: bool = False) -> "SlackConfig":
        """Validate the Slack settings for HTTP mode (signing secret needed) or Socket Mode (app token needed).

        Raises:
            SlackConfigError: naming the missing or malformed variable.
        """
        def secret(v) -> str:
            return v.get_secret_value().strip() if v is not None else ""

        bot = secret(settings.slack_bot_token)
        signing = secret(settings.slack_signing_secret)
        app = secret(settings.slack_app_token)
        if not bot:
            raise SlackConfigError("SLACK_BOT_TOKEN is not set: copy the Bot User OAuth Token (xoxb-...) from the "
                                   "Slack app's OAuth & Permissions page")
        if not bot.startswith("xoxb-"):
            raise SlackConfigError("SLACK_BOT_TOKEN must be a bot token starting with xoxb-")
        if socket_mode:
            if not app:
                raise SlackConfigError("--socket-mode needs SLACK_APP_TOKEN: create an app-level token (xapp-...) "
                                       "with the connections:write scope under Basic Information")
            if not app.startswith("xapp-"):
                raise SlackConfigError("SLACK_APP_TOKEN must be an app-level token starting with xapp-")
        elif not signing:
            raise SlackConfigError("SLACK_SIGNING_SECRET is not set: copy the Signing Secret from the Slack app's "
                                   "Basic Information page (or run chatops serve --socket-mode with SLACK_APP_TOKEN)")
        url = (settings.slack_api_url or "").strip()
        if not re.match(r"^https?://", url):
            raise SlackConfigError(f"SLACK_API_URL must be an http(s) URL, got {url!r}")
        return cls(bot_token=bot, signing_secret=signing, app_token=app, api_url=url.rstrip("/") + "/",
                   admin_ids=parse_admin_ids(settings.admin_user_ids), socket_mode=socket_mode,
                   stream_answers=settings.slack_stream_answers,
                   workspace_url=(settings.slack_workspace_url or "").strip())
