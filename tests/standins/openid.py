"""A stand-in for the Bot Framework's token signing keys on 127.0.0.1, and tokens signed with them.

It serves an OpenID metadata document (``/v1/.well-known/openidconfiguration``, with ``jwks_uri``) and
the key set (``/keys``: one RSA key, endorsed for ``msteams``) the way ``login.botframework.com`` does,
and records every fetch. ``hold()`` makes the metadata request hang (as with slow egress) until
``release()``; ``status`` makes it fail. :meth:`OpenIdStandIn.token` mints an RS256 token signed with
the stand-in's key (any claims), so a token can pass or fail the SDK's real signature check.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from tests.standins.base import Handler, StandIn

__all__ = ["OpenIdStandIn", "KID", "CHANNEL_ISSUER"]

KID = "standin-key-1"
CHANNEL_ISSUER = "https://api.botframework.com"
METADATA_PATH = "/v1/.well-known/openidconfiguration"


class _Handler(Handler):
    standin: OpenIdStandIn

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        stand_in = self.standin
        stand_in.record(stand_in.fetches, self.path)
        if self.path == METADATA_PATH:
            stand_in._go.wait(30)
            if stand_in.status != 200:
                return self._send(stand_in.status, {"error": "unavailable"})
            return self._send(200, {"issuer": CHANNEL_ISSUER, "jwks_uri": stand_in.url + "/keys",
                                    "id_token_signing_alg_values_supported": ["RS256"]})
        if self.path == "/keys":
            jwk = RSAAlgorithm.to_jwk(stand_in.private_key.public_key(), as_dict=True)
            return self._send(200, {"keys": [{**jwk, "kid": KID, "use": "sig", "endorsements": ["msteams"]}]})
        return self._send(404, {"error": "not found"})

    def _send(self, status: int, body: dict) -> None:
        try:
            self.reply_json(status, body, content_type="application/json")
        except OSError:  # the client gave up waiting
            pass


class OpenIdStandIn(StandIn):
    """``with OpenIdStandIn() as keys:``; ``keys.metadata_url`` is the adapter's ``openid_metadata_url``."""

    handler = _Handler

    def __init__(self) -> None:
        super().__init__()
        self.private_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.fetches: list[str] = []
        self.status = 200
        self._go = threading.Event()
        self._go.set()
        self.bind()
        self.url = self.origin
        self.metadata_url = self.url + METADATA_PATH

    def __exit__(self, *exc: object) -> None:
        self.release()
        self.stop()

    def hold(self) -> None:
        """Make metadata requests hang until :meth:`release` (at most 30 s)."""
        self._go.clear()

    def release(self) -> None:
        """Let held and later metadata requests through."""
        self._go.set()

    def metadata_fetches(self) -> int:
        """How many times the metadata document was requested."""
        return sum(1 for p in self.fetches if p == METADATA_PATH)

    def token(self, app_id: str, service_url: str, *, issuer: str = CHANNEL_ISSUER, audience: str | None = None,
              expires_in: float = 3600, kid: str = KID, **claims: Any) -> str:
        """An RS256 token signed with the stand-in's key, shaped like the Bot Framework's channel tokens."""
        now = int(time.time())
        payload = {"iss": issuer, "aud": app_id if audience is None else audience, "serviceurl": service_url,
                   "nbf": now - 60, "iat": now - 60, "exp": int(now + expires_in), **claims}
        return jwt.encode(payload, self.private_key, algorithm="RS256", headers={"kid": kid})
