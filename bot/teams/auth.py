"""What stands between an unauthenticated ``POST /api/messages`` and the Bot Framework SDK.

- :func:`check_token` looks at the bearer token *without* verifying it (PyJWT, no key needed) and
  refuses, before the SDK sees it, anything that could not pass the SDK's check anyway: not a JWT,
  not RS256 or without a key id, an issuer that is not the Bot Framework's (``iss`` must be
  ``https://api.botframework.com``, or one of the SDK's emulator issuers when those are allowed), a
  channel token addressed to another bot (``aud``), or a token expired beyond the SDK's 5-minute
  tolerance. Only a token that passes can make the SDK fetch signing keys (:mod:`bot.teams.openid`).
- :class:`GuardedAuthentication` is the SDK's ``ConfigurationBotFrameworkAuthentication`` with a cap on
  requests being authenticated at once: past ``max_pending`` it raises :class:`AuthenticationBusy`
  at once (the adapter answers 503) instead of queueing without bound.
"""

from __future__ import annotations

import time
from typing import Any

import jwt
from botbuilder.integration.aiohttp import ConfigurationBotFrameworkAuthentication
from botframework.connector.auth import AuthenticationConstants, EmulatorValidation

__all__ = ["check_token", "TokenRejected", "GuardedAuthentication", "AuthenticationBusy", "CHANNEL_ISSUER",
           "EMULATOR_ISSUERS", "MAX_TOKEN_LENGTH"]

#: The issuer of every token the Bot Framework channel service (Teams) sends.
CHANNEL_ISSUER = AuthenticationConstants.TO_BOT_FROM_CHANNEL_TOKEN_ISSUER
#: The issuers of tokens the Bot Framework Emulator obtains for a registered bot (the SDK's own list).
EMULATOR_ISSUERS = frozenset(EmulatorValidation.TO_BOT_FROM_EMULATOR_TOKEN_VALIDATION_PARAMETERS.issuer)
#: Longer bearer tokens are refused unread (Bot Framework tokens are 1-2 KB).
MAX_TOKEN_LENGTH = 8192
CLOCK_TOLERANCE = 5 * 60  # seconds, as the SDK allows


class TokenRejected(Exception):
    """The bearer token cannot be a valid Bot Framework token; the message says why (for the log)."""


class AuthenticationBusy(Exception):
    """Too many requests are being authenticated at once; try again shortly."""


def check_token(authorization: str, app_id: str, allow_emulator: bool = False, now: float | None = None) -> None:
    """Refuse an ``Authorization`` header that cannot carry a valid Bot Framework token for ``app_id``.

    Nothing is verified cryptographically here (the SDK does that next); this only refuses early, with no
    network, what the SDK would refuse after fetching keys.

    Args:
        authorization: the header's value (``Bearer <JWT>``).
        app_id: the bot's Microsoft app id (a channel token's ``aud``).
        allow_emulator: also accept the Bot Framework Emulator's issuers.
        now: the current Unix time (default: now).

    Raises:
        TokenRejected: for a missing, malformed, foreign, misaddressed or expired token.
    """
    scheme, _, token = authorization.partition(" ")
    if scheme != "Bearer" or not token or " " in token:
        raise TokenRejected("no bearer token")
    if len(token) > MAX_TOKEN_LENGTH:
        raise TokenRejected(f"a bearer token of {len(token)} characters")
    try:
        header = jwt.get_unverified_header(token)
        claims: dict[str, Any] = jwt.decode(token, options={"verify_signature": False})
    except (jwt.PyJWTError, ValueError, TypeError, RecursionError) as exc:
        raise TokenRejected(f"not a JWT ({type(exc).__name__})") from None
    if header.get("alg") != "RS256" or not isinstance(header.get("kid"), str) or not header["kid"]:
        raise TokenRejected("not an RS256 token with a key id")
    issuer = claims.get("iss")
    allowed = issuer == CHANNEL_ISSUER or (allow_emulator and issuer in EMULATOR_ISSUERS)
    if not allowed:
        raise TokenRejected(f"issuer {str(issuer)[:100]!r} is not a Bot Framework issuer")
    if issuer == CHANNEL_ISSUER and claims.get("aud") != app_id:
        raise TokenRejected("the token is for another bot (aud)")
    expires = claims.get("exp")
    if not isinstance(expires, (int, float)) or expires < (time.time() if now is None else now) - CLOCK_TOLERANCE:
        raise TokenRejected("the token has expired")


class GuardedAuthentication(ConfigurationBotFrameworkAuthentication):
    """The SDK's configuration-based authentication, at most ``max_pending`` requests at once.

    Args:
        configuration: what ``ConfigurationBotFrameworkAuthentication`` reads (``APP_ID``...).
        max_pending: requests allowed in ``authenticate_request`` at once; one more raises
            :class:`AuthenticationBusy`.
    """

    def __init__(self, configuration: Any, max_pending: int = 32) -> None:
        super().__init__(configuration)
        self.max_pending = max_pending
        self.pending = 0

    async def authenticate_request(self, activity, auth_header: str):
        """The SDK's check, counted (runs on the event loop, so the counter needs no lock).

        Raises:
            AuthenticationBusy: when ``max_pending`` requests are already being authenticated.
        """
        if self.pending >= self.max_pending:
            raise AuthenticationBusy(f"{self.pending} requests are already being authenticated")
        self.pending += 1
        try:
            return await super().authenticate_request(activity, auth_header)
        finally:
            self.pending -= 1
