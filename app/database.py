"""``chatops db upgrade`` and ``chatops db current``: the state store's schema from the shell.

Start-up runs the same upgrade (:func:`state.migrate.upgrade`); running it ahead, after a backup, lets an
operator see it succeed before the new version serves.
"""

from __future__ import annotations

import json

from state.migrate import SchemaStatus, status, upgrade

from .settings import Settings

__all__ = ["cli_db"]


def _describe(st: SchemaStatus) -> str:
    if st.is_head:
        return f"revision {st.current} (head)"
    if not st.known:
        return f"revision {st.current}, unknown to this chatops (head {st.head}): upgrade chatops"
    if st.unversioned:
        return f"no revision: made by chatops 414ee8a or older (head {st.head}; chatops db upgrade stamps and upgrades it)"
    if st.current is None:
        return f"empty (head {st.head}; chatops db upgrade creates the tables)"
    return f"revision {st.current}, behind the head {st.head} (run chatops db upgrade)"


def cli_db(settings: Settings, op: str, as_json: bool = False) -> int:
    """Run ``chatops db OP`` (``upgrade`` or ``current``) on the settings' state database.

    Returns:
        0; ``current`` returns 1 when the database is not at the head, so scripts can test it.

    Raises:
        state.SchemaTooNewError: ``upgrade`` of a database a newer chatops migrated (nothing changed).
        state.StateStoreError: the database cannot be reached, or a migration failed (rolled back).
        ValueError: for another ``op``.
    """
    url = settings.state_url
    if op == "current":
        st = status(url)
        if as_json:
            print(json.dumps({"current": st.current, "head": st.head, "is_head": st.is_head, "known": st.known,
                              "unversioned": st.unversioned}))
        else:
            print(f"state database: {_describe(st)}")
        return 0 if st.is_head else 1
    if op != "upgrade":
        raise ValueError(f"unknown db command {op!r}: use upgrade or current")
    before, after = upgrade(url)
    if as_json:
        print(json.dumps({"before": before.current, "after": after.current, "head": after.head}))
    elif before.current == after.current:
        print(f"state database: already at {_describe(after)}; nothing to do")
    else:
        print(f"state database: upgraded from {before.current or ('no revision' if before.unversioned else 'empty')} "
              f"to {_describe(after)}")
    return 0
