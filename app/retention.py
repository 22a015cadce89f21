"""Retention and forgetting: the daily purge (``chatops serve``'s scheduler, ``chatops purge``) and
``chatops forget --user ID``.

The purge deletes what is older than the settings say (``RETENTION_DAYS_CONVERSATIONS``, ``_AUDIT``,
``_FEEDBACK``; :func:`state.retention.purge`) plus the local calendar's events that ended that long
ago, and records a run like the syncs' (source :data:`RUN_SOURCE`, mode ``retention``, the counts per
table in its summary), which ``chatops status`` shows.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from state import NO_INDEX, StateStore
from state.retention import Cutoffs, ForgetReport, forget_user, purge

from .settings import Settings

__all__ = ["RetentionPolicy", "Retention", "RetentionReport", "RUN_SOURCE", "status_line", "cli_purge",
           "cli_forget"]

log = logging.getLogger(__name__)

#: The run table's "source" of retention runs (a colon: no source can be named so).
RUN_SOURCE = "chatops:retention"


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """How many days each kind of row is kept (each 1 or more; the settings validate them)."""

    conversations_days: int = 30
    audit_days: int = 365
    feedback_days: int = 365

    @classmethod
    def from_settings(cls, settings: Settings) -> RetentionPolicy:
        """The policy of ``RETENTION_DAYS_CONVERSATIONS``, ``RETENTION_DAYS_AUDIT``, ``RETENTION_DAYS_FEEDBACK``."""
        return cls(settings.retention_days_conversations, settings.retention_days_audit,
                   settings.retention_days_feedback)

    def cutoffs(self, now: datetime) -> Cutoffs:
        """The times before which rows go, counted back from ``now`` (aware)."""
        return Cutoffs(conversations=now - timedelta(days=self.conversations_days),
                       audit=now - timedelta(days=self.audit_days),
                       feedback=now - timedelta(days=self.feedback_days))


@dataclass(slots=True)
class RetentionReport:
    """One purge: ``status`` ``ok`` or ``failed`` (``error`` says why), rows deleted per table
    (``calendar_events`` when the local calendar was purged), and the run record's id."""

    status: str
    purged: dict[str, int] = field(default_factory=dict)
    error: str = ""
    run_id: int | None = None

    @property
    def total(self) -> int:
        """Rows deleted in all."""
        return sum(self.purged.values())


class Retention:
    """The purge job.

    Args:
        store: the state store.
        policy: the days to keep.
        purge_calendar: called with the audit cutoff, deletes the local calendar's events that ended
            before it and returns how many (``None``: no local calendar).
    """

    def __init__(self, store: StateStore, policy: RetentionPolicy,
                 purge_calendar: Callable[[datetime], int | None] | None = None) -> None:
        self.store = store
        self.policy = policy
        self.purge_calendar = purge_calendar

    @classmethod
    def from_settings(cls, store: StateStore, settings: Settings) -> Retention:
        """The job of the settings' policy, with the local calendar when ``CALENDAR_BACKEND=local``."""
        from .wiring import purge_calendar

        return cls(store, RetentionPolicy.from_settings(settings), lambda before: purge_calendar(settings, before))

    def run(self, now: datetime | None = None) -> RetentionReport:
        """Purge once and record the run; never raises for a failure of the purge (it is recorded and logged).

        Args:
            now: the time to count back from (aware; default now, UTC).
        """
        now = now or datetime.now(timezone.utc)
        started = time.monotonic()
        cut = self.policy.cutoffs(now)
        run_id = self.store.start_run(RUN_SOURCE, index_id=NO_INDEX)  # the purge belongs to no index
        try:
            counts = purge(self.store, cut)
            if self.purge_calendar is not None:
                n = self.purge_calendar(cut.audit)
                if n is not None:
                    counts["calendar_events"] = n
        except Exception as exc:  # noqa: BLE001 - recorded as a failed run; the next day tries again
            error = f"{type(exc).__name__}: {exc}"
            log.warning("retention purge failed: %s", error)
            self.store.finish_run(run_id, "failed", {"mode": "retention"}, error=error)
            return RetentionReport("failed", error=error, run_id=run_id)
        report = RetentionReport("ok", counts, run_id=run_id)
        self.store.finish_run(run_id, "ok", {"mode": "retention", "deleted": report.total, "purged": counts,
                                             "seconds": round(time.monotonic() - started, 3)})
        log.info("retention purge: %s", _counts(counts))
        return report


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {name}" for name, n in counts.items()) or "nothing"


def status_line(store: StateStore) -> str:
    """The last purge, one line for ``chatops status`` (``"retention: no purge yet ..."`` before the first)."""
    runs = store.last_runs(RUN_SOURCE, limit=1)
    if not runs:
        return "retention: no purge yet (chatops serve purges at start-up and daily; chatops purge runs it once)"
    r = runs[0]
    when = (r.finished_at or r.started_at).isoformat()
    if r.status != "ok":
        return f"retention: last run {when} {r.status}: {r.error}"
    return f"retention: last run {when} ok: deleted {_counts(r.summary.get('purged') or {})}"


def cli_purge(settings: Settings, as_json: bool = False) -> int:
    """``chatops purge [--json]``: the daily purge, once; prints the rows deleted per table.

    Returns:
        0 when it ran, 1 when it failed (the run record says why).
    """
    import json

    store = StateStore(settings.state_url)
    try:
        report = Retention.from_settings(store, settings).run()
    finally:
        store.close()
    if as_json:
        print(json.dumps({"status": report.status, "purged": report.purged, "error": report.error}))
    elif report.status == "ok":
        p = RetentionPolicy.from_settings(settings)
        print(f"purged (conversations older than {p.conversations_days} days, audit {p.audit_days}, feedback "
              f"{p.feedback_days}):")
        for name, n in report.purged.items():
            print(f"  {name}: {n}")
    else:
        print(f"chatops: the purge failed: {report.error}")
    return 0 if report.status == "ok" else 1


def cli_forget(settings: Settings, user_id: str, yes: bool = False, as_json: bool = False) -> int:
    """``chatops forget --user ID --yes [--json]``: delete what one person wrote or asked for
    (:func:`state.retention.forget_user`), audit it under a pseudonym, print the counts.

    Returns:
        0 when done, 2 without ``--yes`` or for a blank id (nothing changes then).
    """
    import json
    import sys

    uid = (user_id or "").strip()
    if not uid:
        print("chatops: name the person: chatops forget --user U0123ABCD --yes (a Slack or Teams user id)",
              file=sys.stderr)
        return 2
    if not yes:
        print(f"chatops: this deletes {uid}'s messages in stored conversations, turn log, feedback, pending actions, "
              "scheduled messages and the Teams conversation reference, and replaces the id in the audit log by a pseudonym; run again with --yes "
              "to do it", file=sys.stderr)
        return 2
    store = StateStore(settings.state_url)
    try:
        report: ForgetReport = forget_user(store, uid)
        store.audit("cli", "cli", "forget_user", target=report.pseudonym, outcome="ok",
                    detail={"deleted": report.deleted, "audit_pseudonymised": report.pseudonymised})
    finally:
        store.close()
    if as_json:
        print(json.dumps({"pseudonym": report.pseudonym, "deleted": report.deleted,
                          "audit_pseudonymised": report.pseudonymised}))
        return 0
    print(f"forgot {uid}:")
    for name, n in report.deleted.items():
        print(f"  {name}: {n} deleted")
    print(f"  audit_log: {report.pseudonymised} entries now name {report.pseudonym} instead")
    return 0
