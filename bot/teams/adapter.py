"""The Teams web adapter: ``POST /api/messages`` through the Bot Framework ``CloudAdapter``.

Authentication: with ``MicrosoftAppId`` set, every request must carry a valid Bot Framework JWT
(``Authorization: Bearer ...``), checked by the SDK's ``ConfigurationBotFrameworkAuthentication``. In
front of it (:mod:`bot.teams.auth`, :mod:`bot.teams.openid`):

- a token that cannot pass (not a JWT, a foreign issuer, another bot's, expired) gets **401** before
  the SDK sees it, so only plausible tokens can make it fetch signing keys;
- the signing keys are fetched off the event loop with a timeout (one fetch at a time); when none
  could be had in time the request gets **503**, and ``/healthz`` and Slack keep answering meanwhile;
- at most ``max_pending_auth`` requests are authenticated at once; more get **503** at once.

A missing, malformed or invalid token gets 401 and nothing is processed (the SDK raises on a
malformed token and would answer 500: it is mapped to 401 here). Without an app id the endpoint
answers 401, unless ``TEAMS_ALLOW_UNAUTHENTICATED=true`` is set explicitly for the Bot Framework
Emulator or tests, which logs a warning at start-up. A body that is not a UTF-8 JSON activity
(nested at most :data:`bot.jsonbody.MAX_DEPTH` levels) gets 400; one over the server's size limit 413.
None of these leaves a traceback in the log.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from aiohttp import web
from botbuilder.integration.aiohttp import CloudAdapter
from botframework.connector.auth import AuthenticationConstants

from ..jsonbody import JsonBodyError, parse_json
from .auth import AuthenticationBusy, GuardedAuthentication, TokenRejected, check_token
from .invites import TeamsCourier
from .bot import TeamsBot
from .entities import AiLabel
from .openid import KeysUnavailable, OpenIdKeys

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
        allow_emulator_tokens: with an app id, also accept tokens the Bot Framework Emulator obtains
            (off by default: Teams only sends ``https://api.botframework.com`` tokens).
        openid_metadata_url: where the Bot Framework's signing keys are found (default: the SDK's
            ``login.botframework.com`` metadata; tests point it at a stand-in).
        keys_timeout: seconds a key fetch's requests, and a request waiting for them, may take.
        max_pending_auth: requests authenticated at once; more get 503.
        drain_seconds: at shutdown, how long answers still being prepared (slow turns answered
            proactively) may take to be sent; what is left then is cancelled and logged.

    Installing the key fetcher is process-wide (the SDK's metadata cache is a class attribute): the
    latest adapter built wins.
    """

    name = "teams"

    def __init__(self, bot: TeamsBot, auth: TeamsAuthConfig, allow_unauthenticated: bool = False, *,
                 allow_emulator_tokens: bool = False, openid_metadata_url: str | None = None,
                 keys_timeout: float = 5.0, max_pending_auth: int = 32, drain_seconds: float = 25.0) -> None:
        self.bot = bot
        self.drain_seconds = drain_seconds
        self.auth = auth
        self.allow_unauthenticated = allow_unauthenticated
        self.allow_emulator_tokens = allow_emulator_tokens
        self.keys = OpenIdKeys(openid_metadata_url or AuthenticationConstants.TO_BOT_FROM_CHANNEL_OPENID_METADATA_URL,
                               timeout=keys_timeout)
        self.keys.install(AuthenticationConstants.TO_BOT_FROM_CHANNEL_OPENID_METADATA_URL)
        self.emulator_keys = OpenIdKeys(AuthenticationConstants.TO_BOT_FROM_EMULATOR_OPENID_METADATA_URL,
                                        timeout=keys_timeout)
        self.emulator_keys.install(AuthenticationConstants.TO_BOT_FROM_EMULATOR_OPENID_METADATA_URL)
        self.authentication = GuardedAuthentication(auth, max_pending=max_pending_auth)
        self.adapter = CloudAdapter(self.authentication)
        self.adapter.use(AiLabel())  # every message the bot sends, proactive ones included
        self.adapter.on_turn_error = self._on_turn_error
        if bot.actions is not None:  # the local calendar's invitations: a file card in each attendee's chat
            bot.courier = TeamsCourier(self.adapter, auth.APP_ID)
            bot.actions.use_courier(bot.courier)

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
        """Let the answers still being prepared be sent (at most ``drain_seconds``), then cancel the rest."""
        pending = set(self.bot.background)
        if not pending:
            return
        log.info("Teams: waiting up to %.0f s for %d answer(s) still being prepared", self.drain_seconds,
                 len(pending))
        _, left = await asyncio.wait(pending, timeout=self.drain_seconds)
        for task in left:
            task.cancel()
        if left:
            log.warning("Teams: %d answer(s) were still being prepared at shutdown and are lost", len(left))

    async def ready(self) -> tuple[bool, str]:
        """Ready when registered, or explicitly unauthenticated."""
        if self.auth.APP_ID:
            return True, f"app {self.auth.APP_ID[:8]}…"
        return (True, "unauthenticated (local use)") if self.allow_unauthenticated else (False, "MicrosoftAppId not set")

    async def handle(self, request: web.Request) -> web.Response:
        """Validate, authenticate and process one activity (see the module docstring for the answers)."""
        if not self.auth.APP_ID and not self.allow_unauthenticated:
            return _error(401, "this bot is not registered: set MicrosoftAppId and MicrosoftAppPassword, or "
                               "TEAMS_ALLOW_UNAUTHENTICATED=true for local testing")
        if self.auth.APP_ID:
            try:
                check_token(request.headers.get("Authorization", ""), self.auth.APP_ID, self.allow_emulator_tokens)
            except TokenRejected as exc:
                log.info("Teams: rejected a request before authentication: %s", exc)
                return _error(401, "missing or invalid Bot Framework token")
        if "application/json" not in request.headers.get("Content-Type", ""):
            return _error(415, "activities must be sent as application/json")
        try:
            body = parse_json(await request.read() or b"null")
        except JsonBodyError as exc:
            log.info("Teams: rejected a malformed body: %s", exc)
            return _error(400, f"the body is not a JSON activity: {exc}"[:200])
        if not isinstance(body, dict) or not isinstance(body.get("type"), str) or not body.get("type"):
            return _error(400, "the body is not a Bot Framework activity (no type)")
        if body["type"] in ("message", "invoke", "conversationUpdate") and not isinstance(body.get("conversation"), dict):
            return _error(400, "the activity has no conversation")
        try:
            response = await self.adapter.process(request, self.bot)
        except (AuthenticationBusy, KeysUnavailable) as exc:
            log.warning("Teams: could not authenticate a request now (%s); answered 503", exc)
            return web.json_response({"error": {"code": "503", "message": "cannot verify Bot Framework tokens "
                                                "right now; try again shortly"}},
                                     status=503, headers={"Retry-After": "5"})
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
            # The SDK's messages quote the values it could not read (a user's words, in a wrong-typed
            # field): the type at INFO, the message at DEBUG only.
            log.debug("Teams: the rejected request's error: %s", str(exc)[:200])
            if self.auth.APP_ID:
                log.info("Teams: rejected a request whose token could not be verified (%s)", type(exc).__name__)
                return _error(401, "invalid Bot Framework token")
            log.info("Teams: rejected an unreadable activity (%s)", type(exc).__name__)
            return _error(400, "the activity could not be read")
        return response or web.Response(status=201)

    async def _on_turn_error(self, turn_context, error: Exception) -> None:
        log.exception("Teams: error in a turn: %s", error)
        try:
            await turn_context.send_activity("Sorry, something went wrong on my side. Please try again.")
        except Exception:  # noqa: BLE001 - nothing more to do
            log.exception("Teams: could not report the error to the user")



def build_teams_adapter(settings, agent, store, actions=None, jobs=None, job_executor=None,
                        access=None) -> TeamsWebAdapter:
    """The Teams adapter configured from :class:`app.settings.Settings` (``job_executor``: where re-index
    jobs run; ``chatops serve`` passes the one it shares with Slack; ``access``: the runtime's
    :class:`app.access.AccessPolicy`)."""
    password = settings.microsoft_app_password.get_secret_value() if settings.microsoft_app_password else ""
    auth = TeamsAuthConfig(APP_ID=settings.microsoft_app_id, APP_PASSWORD=password,
                           APP_TYPE=settings.microsoft_app_type, APP_TENANTID=settings.microsoft_app_tenant_id)
    admins = frozenset(x.strip() for x in settings.teams_admin_ids.split(",") if x.strip())
    bot = TeamsBot(agent, store, actions=actions, jobs=jobs, admin_ids=admins,
                   default_timezone=getattr(settings, "default_timezone", "UTC"), job_executor=job_executor,
                   access=access, app_id=settings.microsoft_app_id,
                   inline_reply_seconds=settings.teams_inline_reply_seconds, streaming=settings.teams_streaming)
    return TeamsWebAdapter(bot, auth, allow_unauthenticated=settings.teams_allow_unauthenticated)
