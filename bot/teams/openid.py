"""The Bot Framework's token signing keys, fetched off the event loop with a time limit.

The SDK (``botframework.connector.auth.jwt_token_extractor``) keeps one ``_OpenIdMetadata`` per
metadata URL in ``JwtTokenExtractor.metadataCache`` and refreshes it with a blocking ``requests.get``
that has no timeout, on the event loop: one token that makes it fetch, with slow egress, freezes
every route of the server. :class:`OpenIdKeys` takes that place in the cache (:meth:`OpenIdKeys.install`;
the SDK only ever calls ``await get(key_id)``) and

- fetches the metadata document and its ``jwks_uri`` in a worker thread, each request with a
  ``timeout``; at most one fetch runs at a time, and every request that needs keys waits for that
  one, at most ``timeout`` seconds (then :class:`KeysUnavailable`: the adapter answers 503);
- after a failed fetch, tries again no sooner than ``retry_after`` seconds; meanwhile requests that
  need keys it does not have fail at once;
- keeps serving the keys it has while a refresh (keys older than a day) runs in the background, and
  refreshes for an unknown key id at most once an hour (the SDK's own schedule).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import requests
from botframework.connector.auth.jwt_token_extractor import JwtTokenExtractor
from jwt import InvalidKeyError
from jwt.algorithms import RSAAlgorithm

__all__ = ["OpenIdKeys", "SigningKey", "KeysUnavailable"]

log = logging.getLogger(__name__)

MAX_AGE = 24 * 3600.0  # seconds: keys older than this are refreshed (in the background while they serve)
UNKNOWN_KID_REFRESH = 3600.0  # seconds: an unknown key id refreshes the keys at most this often


class KeysUnavailable(Exception):
    """No signing keys could be fetched in time; the token can be neither accepted nor refused now."""


@dataclass(frozen=True)
class SigningKey:
    """What the SDK reads of a key: the RSA public key and the channels it is endorsed for."""

    public_key: Any
    endorsements: list[str] = field(default_factory=list)


def _parse_keys(jwks: Any) -> dict[str, SigningKey]:
    if not isinstance(jwks, dict) or not isinstance(jwks.get("keys"), list):
        raise ValueError("the key set has no keys list")
    keys: dict[str, SigningKey] = {}
    for jwk in jwks["keys"]:
        if not isinstance(jwk, dict) or not isinstance(jwk.get("kid"), str):
            continue
        try:
            public_key = RSAAlgorithm.from_jwk(json.dumps(jwk))
        except (InvalidKeyError, ValueError, TypeError, KeyError):
            log.warning("Teams: skipped an unreadable signing key %r", jwk.get("kid"))
            continue
        endorsements = jwk.get("endorsements")
        keys[jwk["kid"]] = SigningKey(public_key, [e for e in endorsements if isinstance(e, str)]
                                      if isinstance(endorsements, list) else [])
    return keys


class OpenIdKeys:
    """Signing keys from an OpenID metadata document (``{"jwks_uri": ...}``), fetched with bounds.

    Args:
        metadata_url: where the metadata document is fetched.
        timeout: seconds allowed for each HTTP request of a fetch, and for a token check to wait for one.
        retry_after: seconds to wait after a failed fetch before trying again.
    """

    def __init__(self, metadata_url: str, timeout: float = 5.0, retry_after: float = 15.0) -> None:
        self.metadata_url = metadata_url
        self.timeout = timeout
        self.retry_after = retry_after
        self._lock = threading.Lock()
        self._keys: dict[str, SigningKey] = {}
        self._fetched_at: float | None = None  # time.monotonic() of the last successful fetch
        self._failed_at: float | None = None
        self._inflight: concurrent.futures.Future[None] | None = None

    def install(self, sdk_url: str) -> None:
        """Serve the SDK's token checks for metadata URL ``sdk_url`` (process-wide: the SDK's cache is a
        class attribute; the latest install for a URL wins)."""
        JwtTokenExtractor.metadataCache[sdk_url] = self

    async def get(self, key_id: str | None) -> SigningKey | None:
        """The key ``key_id`` (None when the key set has no such key).

        Raises:
            KeysUnavailable: when keys are needed and none could be fetched within ``timeout`` seconds.
        """
        age = self._age()
        if age is None:
            await self._wait(self._start())
        elif age > MAX_AGE:
            self._start()  # refresh in the background; the keys we have serve meanwhile
        key = self._keys.get(key_id or "")
        if key is None and (self._age() or 0.0) > UNKNOWN_KID_REFRESH:
            await self._wait(self._start())
            key = self._keys.get(key_id or "")
        return key

    def _age(self) -> float | None:
        with self._lock:
            return None if self._fetched_at is None else time.monotonic() - self._fetched_at

    def _start(self) -> concurrent.futures.Future[None] | None:
        """The running fetch, or a new one; None while backing off after a failure."""
        with self._lock:
            if self._inflight is not None and not self._inflight.done():
                return self._inflight
            if self._failed_at is not None and time.monotonic() - self._failed_at < self.retry_after:
                return None
            future: concurrent.futures.Future[None] = concurrent.futures.Future()
            self._inflight = future
        threading.Thread(target=self._run, args=(future,), name="teams-openid-fetch", daemon=True).start()
        return future

    async def _wait(self, future: concurrent.futures.Future[None] | None) -> None:
        if future is None:
            raise KeysUnavailable(f"fetching the signing keys failed less than {self.retry_after:.0f} s ago")
        try:
            await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), self.timeout)
        except asyncio.TimeoutError:
            raise KeysUnavailable(f"the signing keys did not arrive within {self.timeout:g} s") from None

    def _run(self, future: concurrent.futures.Future[None]) -> None:
        try:
            keys = self._fetch()
        except Exception as exc:  # noqa: BLE001 - network, HTTP status, bad JSON: all mean "no keys now"
            with self._lock:
                self._failed_at = time.monotonic()
            log.warning("Teams: could not fetch the Bot Framework signing keys from %s (%s: %s)",
                        self.metadata_url, type(exc).__name__, str(exc)[:200])
            future.set_exception(KeysUnavailable(f"fetching the signing keys failed ({type(exc).__name__})"))
            return
        with self._lock:
            self._keys = keys
            self._fetched_at = time.monotonic()
            self._failed_at = None
        log.info("Teams: fetched %d Bot Framework signing keys", len(keys))
        future.set_result(None)

    def _fetch(self) -> dict[str, SigningKey]:
        with requests.Session() as session:
            meta = session.get(self.metadata_url, timeout=self.timeout)
            meta.raise_for_status()
            document = meta.json()
            if not isinstance(document, dict) or not isinstance(document.get("jwks_uri"), str):
                raise ValueError("the metadata document has no jwks_uri")
            jwks = session.get(document["jwks_uri"], timeout=self.timeout)
            jwks.raise_for_status()
            return _parse_keys(jwks.json())
