"""The Teams web adapter: ``POST /api/messages`` through the Bot Framework ``CloudAdapter``.

Authentication: with ``MicrosoftAppId`` set, every request must carry a valid Bot Framework JWT
(``Authorization: Bearer ...``), checked by ``ConfigurationBotFrameworkAuthentication``; a missing,
malformed or invalid token gets 401 and nothing is processed (the SDK raises on a malformed token
and would answer 500: it is mapped to 401 here). Without an app id the endpoint answers 401,
unless ``TEAMS_ALLOW_UNAUTHENTICATED=true`` is set explicitly for the Bot Framework Emulator or
tests, which logs a warning at start-up. A body that is not a JSON activity gets 400.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from aiohttp import web
from botbuilder.integration.aiohttp import CloudAdapter, ConfigurationBotFrameworkAuthentication

from .bot import TeamsBot

__all__ = ["TeamsWebAdapter", "TeamsAuthConfig", "build_teams_adapter"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TeamsAuthConfig:
    """What ``ConfigurationBotFrameworkAuthentication`` reads (attribute names are the SDK's)."""

    APP_ID: str = ""
    APP_PASSWORD: str = ""
    APP_TYPE: str = "MultiTenant"
    APP_TENANTID: str = ""


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"code": str(status), "message": message}}, status=status)


class TeamsWebAdapter:
    """Serves Teams on the shared web server (see :mod:`bot.server`'s ``WebAdapter`` protocol).

    Args:
        bot: the activity handler.
        auth: app registration (empty ``APP_ID`` means no Bot Framework authentication).
        allow_unauthenticated: required to serve without an app id.
    """

    name = "teams"

    def __init__(self, bot: TeamsBot, auth: TeamsAuthConfig, allow_unauthenticated: bool = False) -> None:
        self.bot = bot
        self.auth = auth
        self.allow_unauthenticated = allow_unauthenticated
        self.adapter = CloudAdapter(ConfigurationBotFrameworkAuthentication(auth))
        self.adapter.on_turn_error = self._on_turn_error

    def routes(self) -> Sequence[web.RouteDef]:
        """``POST /api/messages``."""
        return [web.post("/api/messages", self.handle)]

    async def start(self) -> None:
        """Log how the endpoint is protected."""
        if not self.auth.APP_ID:
            if self.allow_unauthenticated:
                log.warning("Teams: TEAMS_ALLOW_UNAUTHENTICATED=true and no MicrosoftAppId: /api/messages accepts "
                            "unauthenticated requests. Use this only with the Bot Framework Emulator or in tests.")
            else:
                log.warning("Teams: no MicrosoftAppId set; /api/messages answers 401 until the bot is registered")

    async def stop(self) -> None:
        """Nothing to release."""

    async def ready(self) -> tuple[bool, str]:
        """Ready when registered, or explicitly unauthenticated."""
        if self.auth.APP_ID:
            return True, f"app {self.auth.APP_ID[:8]}…"
        return (True, "unauthenticated (local use)") if self.allow_unauthenticated else (False, "MicrosoftAppId not set")

    async def handle(self, request: web.Request) -> web.Response:
        """Validate, authenticate and process one activity."""
        if not self.auth.APP_ID and not self.allow_unauthenticated:
            return _error(401, "this bot is not registered: set MicrosoftAppId and MicrosoftAppPassword, or "
                               "TEAMS_ALLOW_UNAUTHENTICATED=true for local testing")
        if self.auth.APP_ID and not request.headers.get("Authorization", "").startswith("Bearer "):
            return _error(401, "missing Bot Framework token")
        if "application/json" not in request.headers.get("Content-Type", ""):
            return _error(415, "activities must be sent as application/json")
        try:
            body = json.loads(await request.read() or b"null")
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error(400, "the body is not valid JSON")
        if not isinstance(body, dict) or not isinstance(body.get("type"), str) or not body.get("type"):
            return _error(400, "the body is not a Bot Framework activity (no type)")
        if body["type"] in ("message", "invoke", "conversationUpdate") and not isinstance(body.get("conversation"), dict):
            return _error(400, "the activity has no conversation")
        try:
            response = await self.adapter.process(request, self.bot)
        except web.HTTPUnauthorized:
            return _error(401, "invalid Bot Framework token")
        except web.HTTPException as exc:
            return _error(exc.status, exc.reason or "bad request")
        except PermissionError:
            return _error(401, "invalid Bot Framework token")
        except Exception as exc:  # noqa: BLE001 - the SDK raises assorted errors on bad tokens
            # Errors inside the bot's turn never get here (the adapter reports them through
            # on_turn_error); what does is authentication (a malformed or unverifiable token) or an
            # activity the SDK cannot read.
            if self.auth.APP_ID:
                log.info("Teams: rejected a request whose token could not be verified (%s: %s)", type(exc).__name__, exc)
                return _error(401, "invalid Bot Framework token")
            log.info("Teams: rejected an unreadable activity (%s: %s)", type(exc).__name__, exc)
            return _error(400, "the activity could not be read")
        return response or web.Response(status=201)

    async def _on_turn_error(self, turn_context, error: Exception) -> None:
        log.exception("Teams: error in a turn: %s", error)
        try:
            await turn_context.send_activity("Sorry, something went wrong on my side. Please try again.")
        except Exception:  # noqa: BLE001 - nothing more to do
            log.exception("Teams: could not report the error to the user")



def build_teams_adapter(settings, agent, store, actions=None, jobs=None) -> TeamsWebAdapter:
    """The Teams adapter configured from :class:`bot.settings.Settings`."""
    password = settings.microsoft_app_password.get_secret_value() if settings.microsoft_app_password else ""
    auth = TeamsAuthConfig(APP_ID=settings.microsoft_app_id, APP_PASSWORD=password,
                           APP_TYPE=settings.microsoft_app_type, APP_TENANTID=settings.microsoft_app_tenant_id)
    admins = frozenset(x.strip() for x in settings.teams_admin_ids.split(",") if x.strip())
    bot = TeamsBot(agent, store, actions=actions, jobs=jobs, admin_ids=admins,
                   default_timezone=getattr(settings, "default_timezone", "UTC"))
    return TeamsWebAdapter(bot, auth, allow_unauthenticated=settings.teams_allow_unauthenticated)
