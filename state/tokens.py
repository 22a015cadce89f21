"""The MCP server's bearer tokens (table ``mcp_tokens``, revision 0008): SHA-256 digests only, per
person (issue 28).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from . import schema
from ._db import Concern, aware as _aware, now as _now

__all__ = ["McpTokens", "McpToken"]


@dataclass(frozen=True)
class McpToken:
    """A bearer token of the MCP server over HTTP, as stored (table ``mcp_tokens``; never the token itself).

    Attributes:
        token_id: the short id it is listed and revoked by.
        email: the person it acts for (lower case).
        label: what the admin noted (e.g. "Claude Desktop on Hana's laptop").
        created_by: who issued it (the operator's login, for the audit).
        created_at, last_used_at, revoked_at: when it was issued, last accepted, revoked (None: never).
    """

    token_id: str
    email: str
    label: str
    created_by: str
    created_at: datetime
    last_used_at: datetime | None = None
    revoked_at: datetime | None = None

    @property
    def active(self) -> bool:
        """Whether the token is still accepted."""
        return self.revoked_at is None


class McpTokens(Concern):
    """Issue, look up, list and revoke MCP bearer tokens (by digest; the token itself is never stored)."""

    mcp_tokens = schema.mcp_tokens

    def add_mcp_token(self, digest: str, token_id: str, email: str, label: str = "", created_by: str = "") -> McpToken:
        """Store a new token's SHA-256 ``digest`` (64 hex characters) for ``email`` under ``token_id``.

        Raises:
            ValueError: a malformed digest or id, or an id already in use (draw another token).
        """
        if len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
            raise ValueError("an MCP token digest is 64 lower-case hex characters (SHA-256)")
        if not token_id or len(token_id) > 16:
            raise ValueError("an MCP token id is 1 to 16 characters")
        row = {"digest": digest, "token_id": token_id, "email": email.strip().lower(), "label": label[:200],
               "created_by": created_by[:200], "created_at": _now(), "last_used_at": None, "revoked_at": None}
        try:
            with self.engine.begin() as conn:
                conn.execute(self.mcp_tokens.insert().values(**row))
        except IntegrityError as exc:
            raise ValueError(f"an MCP token with the id {token_id} already exists") from exc
        return self._mcp_token(row)

    def mcp_token_for(self, digest: str, touch: bool = True) -> McpToken | None:
        """The token whose digest is ``digest``, revoked or not (None when unknown); ``touch`` records the use
        (``last_used_at``) of a token that is not revoked."""
        t = self.mcp_tokens
        with self.engine.begin() as conn:
            found = conn.execute(sa.select(t).where(t.c.digest == digest)).mappings().first()
            if found is None:
                return None
            row = dict(found)
            if touch and row["revoked_at"] is None:
                row["last_used_at"] = _now()
                conn.execute(t.update().where(t.c.digest == digest).values(last_used_at=row["last_used_at"]))
        return self._mcp_token(row)

    def mcp_tokens_list(self, email: str | None = None) -> list[McpToken]:
        """Every token (or ``email``'s), newest first, revoked ones included."""
        t = self.mcp_tokens
        q = sa.select(t).order_by(t.c.created_at.desc(), t.c.token_id)
        if email:
            q = q.where(t.c.email == email.strip().lower())
        with self.engine.connect() as conn:
            return [self._mcp_token(r) for r in conn.execute(q).mappings()]

    def revoke_mcp_token(self, token_id: str) -> McpToken | None:
        """Revoke the token ``token_id`` (from then on it is refused); returns it, None when no token has that
        id. Revoking a revoked token keeps its first revocation time."""
        t = self.mcp_tokens
        with self.engine.begin() as conn:
            conn.execute(t.update().where(t.c.token_id == token_id, t.c.revoked_at.is_(None)).values(revoked_at=_now()))
            row = conn.execute(sa.select(t).where(t.c.token_id == token_id)).mappings().first()
        return self._mcp_token(row) if row is not None else None

    @staticmethod
    def _mcp_token(r: Any) -> McpToken:
        return McpToken(r["token_id"], r["email"], r["label"], r["created_by"], _aware(r["created_at"]),
                        _aware(r["last_used_at"]), _aware(r["revoked_at"]))
