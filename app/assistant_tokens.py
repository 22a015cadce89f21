"""Bearer tokens for AI assistants over HTTP (``chatops mcp token create|list|revoke``, issue 28).

An admin issues a token for one person; the assistant sends it as ``Authorization: Bearer <token>`` and the
MCP server answers with that person's access. A token is ``chatops_`` plus 32 random bytes (URL-safe
base64, :func:`secrets.token_urlsafe`); the state store keeps only its SHA-256 digest (a random 256-bit
secret needs no slow hash: nothing can be guessed from the digest), so it is shown once, at creation. Its
id (the digest's first 12 hex characters) names it in lists, the audit log and ``revoke``. In the audit log the
person is ``mcp:<email>``, their id on platform ``mcp``: ``chatops forget --user mcp:EMAIL`` pseudonymises it
and deletes their tokens (:func:`state.retention.forget_user`).

:func:`verify` fails closed: an unknown, malformed or revoked token, or a database error, is no caller.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from dataclasses import dataclass

from state import McpToken, StateStore

__all__ = ["IssuedToken", "issue", "verify", "revoke", "digest", "PREFIX", "MAX_TOKEN_CHARS"]

log = logging.getLogger(__name__)

PREFIX = "chatops_"
"""Every token starts with this (secret scanners and people can tell what it is)."""

MAX_TOKEN_CHARS = 200
"""Longer bearer values are refused without a database look-up."""


@dataclass(frozen=True, slots=True)
class IssuedToken:
    """A token just issued: ``token`` is the secret (shown once, never stored), ``record`` what is stored."""

    token: str
    record: McpToken


def digest(token: str) -> str:
    """The SHA-256 hex digest of ``token`` (what the state store keeps)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def issue(store: StateStore, email: str, label: str = "", created_by: str = "") -> IssuedToken:
    """Issue a new token for the person with ``email`` and store its digest; audited as ``mcp.token.create``.

    Raises:
        ValueError: ``email`` is not an e-mail address (the message says so).
    """
    e = (email or "").strip().lower()
    if "@" not in e or any(c.isspace() for c in e) or e.startswith("@") or e.endswith("@"):
        raise ValueError(f"--user needs the person's e-mail address, got {email!r}")
    token = PREFIX + secrets.token_urlsafe(32)
    d = digest(token)
    record = store.add_mcp_token(d, d[:12], e, label=label, created_by=created_by)
    store.audit(created_by or "cli", "cli", "mcp.token.create", target=record.token_id, outcome="ok",
                detail={"user": f"mcp:{e}"})
    return IssuedToken(token, record)


def revoke(store: StateStore, token_id: str, revoked_by: str = "") -> McpToken:
    """Revoke the token ``token_id``; audited as ``mcp.token.revoke``.

    Raises:
        ValueError: no token has that id (the message says how to list them).
    """
    record = store.revoke_mcp_token((token_id or "").strip().lower())
    if record is None:
        raise ValueError(f"no MCP token has the id {token_id!r}; `chatops mcp token list` shows the ids")
    store.audit(revoked_by or "cli", "cli", "mcp.token.revoke", target=record.token_id, outcome="ok",
                detail={"user": f"mcp:{record.email}"})
    return record


def verify(store: StateStore, token: str) -> McpToken | None:
    """The active token ``token`` is, or None (unknown, malformed, revoked, or the database failed: fail
    closed). A refused token that the store knows (revoked) is audited as ``mcp.auth`` ``denied``."""
    if not token or len(token) > MAX_TOKEN_CHARS or not token.startswith(PREFIX):
        return None
    try:
        record = store.mcp_token_for(digest(token))
    except Exception:  # noqa: BLE001 - a database error refuses the request, it never lets it through
        log.warning("MCP token check failed: the state store did not answer", exc_info=True)
        return None
    if record is None:
        return None
    if not record.active:
        try:
            store.audit(f"mcp:{record.email}", "mcp", "mcp.auth", target=record.token_id, outcome="denied",
                        detail={"reason": "revoked"})
        except Exception:  # noqa: BLE001
            log.exception("could not write the audit log entry mcp.auth denied")
        return None
    return record
