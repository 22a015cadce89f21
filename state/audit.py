"""The audit log (table ``audit_log``): who did what, on what, with which outcome, when.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from . import schema
from ._db import Concern, aware as _aware, now as _now

__all__ = ["AuditTrail", "AuditEntry"]


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One audited action."""

    id: int
    at: datetime
    actor: str
    platform: str
    action: str
    target: str
    outcome: str
    detail: dict[str, Any]


class AuditTrail(Concern):
    """Appends and reads of the audit log."""

    audit_log = schema.audit_log

    def audit(self, actor: str, platform: str, action: str, target: str = "", outcome: str = "ok",
              detail: dict[str, Any] | None = None) -> None:
        """Append to the audit log (who, what, on what, with which outcome, when)."""
        with self.engine.begin() as conn:
            conn.execute(self.audit_log.insert().values(
                at=_now(), actor=actor, platform=platform, action=action, target=target, outcome=outcome,
                detail=json.dumps(detail or {}, default=str)))

    def audit_entries(self, limit: int = 100, action: str | None = None) -> list[AuditEntry]:
        """The latest audit entries, newest first."""
        t = self.audit_log
        q = sa.select(t).order_by(t.c.id.desc()).limit(limit)
        if action:
            q = q.where(t.c.action == action)
        with self.engine.connect() as conn:
            return [AuditEntry(r["id"], _aware(r["at"]), r["actor"], r["platform"], r["action"], r["target"],
                               r["outcome"], json.loads(r["detail"])) for r in conn.execute(q).mappings()]
