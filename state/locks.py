"""Cross-process locks (table ``locks``): named, held by an owner until released or expired.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from . import schema
from ._db import Concern, now as _now

__all__ = ["Locks"]

log = logging.getLogger(__name__)


class Locks(Concern):
    """Take, take over, read and release named locks; works across processes and machines sharing the database."""

    locks = schema.locks

    def acquire_lock(self, name: str, owner: str, ttl: timedelta = timedelta(minutes=30)) -> bool:
        """Take the lock ``name`` for ``owner`` unless someone else holds an unexpired one.

        A lock expires after ``ttl`` so a crashed holder cannot block forever; the holder renews it by
        acquiring again. Works across processes and machines sharing the database.
        """
        now = _now()
        t = self.locks
        with self.engine.begin() as conn:
            n = conn.execute(t.update().where(t.c.name == name, sa.or_(t.c.owner == owner, t.c.expires_at < now))
                             .values(owner=owner, expires_at=now + ttl)).rowcount
            if n == 1:
                return True
        try:
            with self.engine.begin() as conn:
                conn.execute(t.insert().values(name=name, owner=owner, expires_at=now + ttl))
            return True
        except IntegrityError:
            return False

    def take_over_lock(self, name: str, owner: str, is_dead: Callable[[str], bool],
                       ttl: timedelta = timedelta(minutes=30)) -> bool:
        """Take the lock ``name`` for ``owner`` from a holder that ``is_dead(holder)`` says is gone.

        For a holder killed before it could release (SIGKILL, OOM), which would otherwise block the
        lock until it expires. The caller decides what "gone" means (the store knows nothing of
        processes); the swap is one conditional ``UPDATE ... WHERE owner = :holder``, so of several
        takers exactly one wins, and a lock that changed hands after the holder was read is left alone.
        An unheld lock is acquired as by :meth:`acquire_lock`.

        Returns:
            True when ``owner`` now holds the lock.
        """
        t = self.locks
        with self.engine.connect() as conn:
            holder = conn.execute(sa.select(t.c.owner).where(t.c.name == name)).scalar()
        if not holder:
            return self.acquire_lock(name, owner, ttl=ttl)
        if not is_dead(str(holder)):
            return False
        log.warning("lock %s was held by %s, which is gone; taking it over for %s", name, holder, owner)
        with self.engine.begin() as conn:
            n = conn.execute(t.update().where(t.c.name == name, t.c.owner == holder)
                             .values(owner=owner, expires_at=_now() + ttl)).rowcount
        return n == 1

    def lock_holder(self, name: str) -> str | None:
        """Who holds the lock ``name`` (expired or not), or ``None``."""
        t = self.locks
        with self.engine.connect() as conn:
            return conn.execute(sa.select(t.c.owner).where(t.c.name == name)).scalar()

    def release_lock(self, name: str, owner: str) -> None:
        """Release ``name`` if ``owner`` holds it."""
        t = self.locks
        with self.engine.begin() as conn:
            conn.execute(t.delete().where(t.c.name == name, t.c.owner == owner))
