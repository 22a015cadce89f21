"""The members of each source's groups (table ``group_members``): who belongs to the groups that
pages' read access names (issue 11).
"""

from __future__ import annotations

from collections.abc import Iterable

import sqlalchemy as sa

from . import schema
from ._db import Concern, now as _now, principal_part as _principal_part

__all__ = ["GroupMembers"]


class GroupMembers(Concern):
    """Replace and read the members of sources' groups."""

    group_members = schema.group_members

    def set_group_members(self, source: str, group: str, emails: Iterable[str]) -> None:
        """Replace the members of ``source``'s group ``group`` with ``emails`` (one transaction).

        Source and group names and e-mails are trimmed and lower-cased, as principals are compared
        (``group:<source>/<group>``, ``user:<e-mail>``); empty e-mails are dropped. An empty
        ``emails`` leaves the group without members.

        Raises:
            ValueError: for an empty source or group name.
        """
        src, name = _principal_part(source), _principal_part(group)
        if not src or not name:
            raise ValueError("a group needs a source and a name")
        members = sorted({e for e in (_principal_part(x) for x in emails) if e})
        t = self.group_members
        now = _now()
        with self.engine.begin() as conn:
            conn.execute(t.delete().where(t.c.source == src, t.c.group_name == name))
            if members:
                conn.execute(t.insert(), [{"source": src, "group_name": name, "email": e, "updated_at": now}
                                          for e in members])

    def groups_of(self, email: str) -> frozenset[str]:
        """The group principals (``group:<source>/<group>``, lower case) whose members include ``email``.

        Spelled exactly as :func:`core.access.group` spells them (this package imports nothing of
        ours, so the spelling is repeated here and a test keeps the two equal). An empty e-mail has none.
        """
        e = _principal_part(email)
        if not e:
            return frozenset()
        t = self.group_members
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(t.c.source, t.c.group_name).where(t.c.email == e))
            return frozenset(f"group:{src}/{name}" for src, name in rows)

    def group_members_of(self, source: str, group: str) -> frozenset[str]:
        """The e-mails stored for ``source``'s group ``group`` (lower case; empty when unknown)."""
        t = self.group_members
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(t.c.email).where(t.c.source == _principal_part(source),
                                                          t.c.group_name == _principal_part(group)))
            return frozenset(r[0] for r in rows)
