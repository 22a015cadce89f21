"""Who is calling: the ``--as`` person over stdio, the bearer token's person over HTTP.

Decision (issue 28): tokens an admin issues per person (:mod:`app.assistant_tokens`), checked by the SDK's own
resource-server machinery (its ``TokenVerifier`` protocol, ``BearerAuthBackend`` and ``RequireAuthMiddleware``:
no token, an unknown one or a revoked one get ``401`` with ``WWW-Authenticate: Bearer error="invalid_token"``
and no content). Not OAuth: the SDK supports OAuth well as a *resource server* (verifying tokens that some
authorization server issued), but being the authorization server would mean building login pages, client
registration and consent on top of the company's identity provider, which this bot does not talk to; and the
assistants people use (Claude Desktop, VS Code) all accept a static ``Authorization`` header. When the company
runs an OAuth server, a verifier that introspects its tokens replaces :class:`StoreTokenVerifier` and nothing
else changes: the tools read the caller from the verified token.

Each HTTP request is checked again (a revoked token stops working at once, and the SDK binds a session to the
token that opened it).
"""

from __future__ import annotations

from typing import Any

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken

from app.assistant_tokens import verify
from app.assistants import Caller, CallerError
from state import StateStore

__all__ = ["StoreTokenVerifier", "http_caller", "stdio_caller", "SCOPE"]

SCOPE = "chatops.read"
"""The one scope a token carries: read the knowledge base."""


class StoreTokenVerifier:
    """The SDK's ``TokenVerifier`` over the state store's tokens (:func:`app.assistant_tokens.verify`).

    Args:
        store: the state store holding the tokens' digests.
    """

    def __init__(self, store: StateStore) -> None:
        self.store = store

    async def verify_token(self, token: str) -> AccessToken | None:
        """The access of ``token``: its person's e-mail as ``subject`` and its id as ``client_id``; None (the
        SDK answers 401) for an unknown, malformed or revoked token, or when the database fails."""
        record = await anyio.to_thread.run_sync(verify, self.store, token)
        if record is None:
            return None
        return AccessToken(token=record.token_id, client_id=record.token_id, scopes=[SCOPE], subject=record.email)


def http_caller(ctx: Any) -> Caller | None:
    """The caller of one HTTP request: the person of the token the SDK's bearer middleware verified for *this*
    request (its ``scope["user"]``), else None."""
    request = getattr(ctx, "request", None)
    scope = getattr(request, "scope", None) or {}
    user = scope.get("user")
    if not isinstance(user, AuthenticatedUser) or not user.access_token.subject:
        return None
    try:
        return Caller(user.access_token.subject, "http", user.access_token.client_id)
    except CallerError:
        return None


def stdio_caller(email: str):
    """The caller function of a stdio server run as ``email`` (validated now).

    Raises:
        CallerError: ``email`` is not an e-mail address.
    """
    caller = Caller(email, "stdio")
    return lambda _ctx: caller
