"""Admin commands, once for every platform: status, sources, re-index and the knowledge-gap report, with one
audit vocabulary.

Slack's ``/kb status|sources|reindex`` and Teams' ``status|sources|reindex`` (personal chat) both call
:class:`AdminService`; each platform only renders the :class:`AdminResult` its own way.

Permissions are decided here, from the requester's :attr:`app.inbound.InboundMessage.is_admin` (which the
adapter sets from ``ADMIN_USER_IDS`` / ``TEAMS_ADMIN_IDS``):

- ``status`` and ``sources`` are reads: everyone may run them (as ``/kb status`` always allowed);
- ``reindex`` and ``report`` are for admins; anyone else is denied (the report quotes users' questions).

Every command is audited (``StateStore.audit``) with the actor's platform id and platform:

=================  ==========================================================================
action             outcomes
=================  ==========================================================================
``admin.status``   ``ok``, ``failed`` (the status could not be read)
``admin.sources``  ``ok``, ``failed``
``admin.reindex``  ``denied`` (not an admin), ``invalid`` (no such source / none configured),
                   ``started`` (accepted; the job follows), then ``ok`` or ``failed``
``admin.report``   ``denied`` (not an admin), ``invalid`` (a period that is not like ``7d``, or no
                   index), then ``ok`` or ``failed`` (the report could not be read)
=================  ==========================================================================

Re-index jobs run on the service's executor (``chatops serve`` passes its one-worker job executor, so
a ``/kb reindex``, a Teams ``reindex`` and the start-up sync never run at once in one process).
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import Executor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal

from state import StateStore

from .inbound import InboundMessage
from .jobs import IndexJobs, JobResult
from .report import DEFAULT_SINCE, GapReport, gap_report, parse_since
from .report_render import summary_markdown

__all__ = ["AdminService", "AdminResult", "AUDIT_STATUS", "AUDIT_SOURCES", "AUDIT_REINDEX", "AUDIT_REPORT",
           "status_text", "sources_text", "reindex_text"]

log = logging.getLogger(__name__)

AUDIT_STATUS = "admin.status"
AUDIT_SOURCES = "admin.sources"
AUDIT_REINDEX = "admin.reindex"
AUDIT_REPORT = "admin.report"

Command = Literal["status", "sources", "reindex", "report"]
Outcome = Literal["ok", "denied", "invalid", "started", "failed"]


@dataclass(frozen=True, slots=True)
class AdminResult:
    """What an admin command did, as data for the platform renderers plus a plain-text rendering.

    Attributes:
        command: ``status``, ``sources`` or ``reindex``.
        outcome: ``ok``, ``denied``, ``invalid``, ``started`` or ``failed`` (see the module docstring).
        rows: ``IndexJobs.status()`` rows (``status``, ``sources``).
        names: the configured source names.
        source: the source asked for (``reindex``; None: all).
        full: ``--full`` was asked (``reindex``).
        results: the job results of a finished re-index.
        seconds: how long the re-index took.
        error: why it failed (``failed``), for logs; not shown to users; or why a report request is
            ``invalid`` (shown).
        since: the report's period as asked (``report``).
        report: the knowledge-gap report (``report``, ``ok``).
    """

    command: Command
    outcome: Outcome
    rows: list[dict[str, Any]] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    source: str | None = None
    full: bool = False
    results: list[JobResult] = field(default_factory=list)
    seconds: float = 0.0
    error: str = ""
    since: str = ""
    report: GapReport | None = None

    @property
    def text(self) -> str:
        """The result as plain Markdown (what Teams and logs show)."""
        if self.command == "report" and self.outcome in {"denied", "invalid", "ok", "started"}:
            if self.outcome == "denied":
                return ("Sorry, the knowledge-gap report is for the knowledge base's admins: it quotes people's "
                        "questions. Ask one of them for it.")
            if self.outcome == "started":
                return f"Preparing the knowledge-gap report ({self.since}); it follows here."
            return summary_markdown(self.report) if self.report is not None else self.error
        if self.outcome == "denied":
            return "Sorry, only admins can run that. Ask one of the bot's admins if the index needs a refresh."
        if self.outcome == "invalid":
            return _invalid_text(self.source, self.names)
        if self.command == "reindex" and self.outcome == "started":
            what = self.source or "all sources"
            return f"Re-indexing {what}{' from scratch' if self.full else ''}. I'll post a summary here."
        if self.outcome == "failed" and not self.results:
            if self.command == "reindex":
                return "The re-index failed before it could start."
            return f"Sorry, I couldn't read the {self.command} right now."
        if self.command == "status":
            return status_text(self.rows)
        if self.command == "sources":
            return sources_text(self.names, self.rows)
        return reindex_text(self.results)


class AdminService:
    """Status, sources and re-index for every platform (see the module docstring).

    Args:
        jobs: the index jobs, or None when the bot has none (every command then reports no sources).
        store: the state store (audit log).
        executor: where re-index jobs run (None: asyncio's default executor); the caller owns it.
    """

    def __init__(self, jobs: IndexJobs | None, store: StateStore, executor: Executor | None = None) -> None:
        self.jobs = jobs
        self.store = store
        self.executor = executor

    # -- reads ------------------------------------------------------------------------------------
    async def status(self, msg: InboundMessage) -> AdminResult:
        """Per source: pages, chunks, last and next sync, last error. Never raises (``failed`` instead)."""
        return await self._read("status", AUDIT_STATUS, msg)

    async def sources(self, msg: InboundMessage) -> AdminResult:
        """The configured sources with their status rows. Never raises (``failed`` instead)."""
        return await self._read("sources", AUDIT_SOURCES, msg)

    async def _read(self, command: Command, action: str, msg: InboundMessage) -> AdminResult:
        try:
            rows = await asyncio.to_thread(self.jobs.status) if self.jobs is not None else []
            names = self.jobs.names() if self.jobs is not None else []
        except Exception as exc:  # noqa: BLE001 - told to the user as "couldn't read", logged here
            log.exception("admin %s failed", command)
            await self._audit(msg, action, "", "failed", {"error": f"{type(exc).__name__}: {exc}"})
            return AdminResult(command, "failed", error=f"{type(exc).__name__}: {exc}")
        await self._audit(msg, action, "", "ok", {})
        return AdminResult(command, "ok", rows=rows, names=names)

    # -- re-index ---------------------------------------------------------------------------------
    async def request_reindex(self, msg: InboundMessage, source: str | None, full: bool = False) -> AdminResult:
        """Check a re-index request: ``denied`` (not an admin), ``invalid`` (unknown source, or none
        configured) or ``started`` (audited; pass it to :meth:`run_reindex`). Never raises."""
        target = source or "*"
        detail = self._detail(msg, full)
        names = self.jobs.names() if self.jobs is not None else []
        if not msg.is_admin:
            await self._audit(msg, AUDIT_REINDEX, target, "denied", detail)
            log.info("denied a re-index to %s on %s (not an admin)", msg.user_id, msg.platform)
            return AdminResult("reindex", "denied", names=names, source=source, full=full)
        if not names or (source and source not in names):
            await self._audit(msg, AUDIT_REINDEX, target, "invalid", detail)
            return AdminResult("reindex", "invalid", names=names, source=source, full=full)
        await self._audit(msg, AUDIT_REINDEX, target, "started", detail)
        return AdminResult("reindex", "started", names=names, source=source, full=full)

    async def run_reindex(self, msg: InboundMessage, started: AdminResult) -> AdminResult:
        """Run the re-index that :meth:`request_reindex` accepted, on the executor; ``ok`` when every
        source synced, else ``failed`` (audited with each source's outcome). Never raises.

        Raises:
            ValueError: when ``started`` is not an accepted request (a programming error).
        """
        if started.command != "reindex" or started.outcome != "started" or not msg.is_admin or self.jobs is None:
            raise ValueError("run_reindex needs the 'started' result of request_reindex for an admin")
        target = started.source or "*"
        detail = self._detail(msg, started.full)
        t0 = time.monotonic()
        try:
            loop = asyncio.get_running_loop()
            results = await loop.run_in_executor(self.executor, self.jobs.run, started.source, started.full,
                                                 f"{msg.platform}:{msg.user_id}")
        except Exception as exc:  # noqa: BLE001 - IndexJobs.run reports source failures itself; this is the rest
            log.exception("re-index of %s failed before it could start", target)
            error = f"{type(exc).__name__}: {exc}"
            await self._audit(msg, AUDIT_REINDEX, target, "failed", {**detail, "error": error})
            return AdminResult("reindex", "failed", names=started.names, source=started.source, full=started.full,
                               seconds=time.monotonic() - t0, error=error)
        seconds = time.monotonic() - t0
        # "queued": a web replica left it for the worker (chatops serve --role web), which is the request's success.
        outcome: Outcome = "ok" if all(r.status in {"ok", "queued"} for r in results) else "failed"
        await self._audit(msg, AUDIT_REINDEX, target, outcome, {**detail, "seconds": round(seconds, 2), "results": [
            r.as_dict() for r in results]})
        log.info("re-index of %s by %s on %s: %s in %.1f s", target, msg.user_id, msg.platform, outcome, seconds)
        return AdminResult("reindex", outcome, names=started.names, source=started.source, full=started.full,
                           results=results, seconds=seconds)

    # -- the knowledge-gap report -----------------------------------------------------------------
    async def request_report(self, msg: InboundMessage, since: str = DEFAULT_SINCE) -> AdminResult:
        """Check a report request (fast, so a chat adapter can answer it in its acknowledgement): ``denied``
        (not an admin; audited), ``invalid`` (a bad period, or no index; audited, :attr:`AdminResult.text`
        says why) or ``started`` (pass it to :meth:`run_report`). Never raises."""
        since = since or DEFAULT_SINCE
        detail = {"since": since, "channel": msg.channel_id}
        if not msg.is_admin:
            await self._audit(msg, AUDIT_REPORT, "", "denied", detail)
            return AdminResult("report", "denied", since=since)
        error = "" if self.jobs is not None else "There is no index to report on yet: no sources are configured."
        try:
            parse_since(since, datetime.now(timezone.utc))
        except ValueError as exc:
            error = f"{exc}."
        if error:
            await self._audit(msg, AUDIT_REPORT, "", "invalid", detail)
            return AdminResult("report", "invalid", since=since, error=error.replace("--since ", "The period "))
        return AdminResult("report", "started", since=since)

    async def run_report(self, msg: InboundMessage, started: AdminResult) -> AdminResult:
        """Build the report that :meth:`request_report` accepted (off the event loop, over the running
        index and this state store): ``ok`` with :attr:`AdminResult.report`, or ``failed``; audited. Never
        raises for a failed read.

        Raises:
            ValueError: when ``started`` is not an accepted request for an admin (a programming error).
        """
        if started.command != "report" or started.outcome != "started" or not msg.is_admin or self.jobs is None:
            raise ValueError("run_report needs the 'started' result of request_report for an admin")
        detail = {"since": started.since, "channel": msg.channel_id}
        runtime = self.jobs.runtime
        try:
            until = datetime.now(timezone.utc)
            since = parse_since(started.since, until)
            index = runtime.index
            report = await asyncio.to_thread(
                gap_report, self.store, index.manifest, index.keyword, index.embedder.embed, since=since, until=until,
                stale_after_days=runtime.settings.stale_after_days)
        except Exception as exc:  # noqa: BLE001 - told to the user as "couldn't build", logged here
            log.exception("the knowledge-gap report failed")
            await self._audit(msg, AUDIT_REPORT, "", "failed", {**detail, "error": f"{type(exc).__name__}: {exc}"})
            return AdminResult("report", "failed", since=started.since, error=f"{type(exc).__name__}: {exc}")
        await self._audit(msg, AUDIT_REPORT, "", "ok", {**detail, "questions": report.questions,
                                                        "refused": report.refused})
        return AdminResult("report", "ok", since=started.since, report=report)

    # -- audit ------------------------------------------------------------------------------------
    @staticmethod
    def _detail(msg: InboundMessage, full: bool) -> dict[str, Any]:
        return {"full": full, "channel": msg.channel_id, "text": msg.text}

    async def _audit(self, msg: InboundMessage, action: str, target: str, outcome: str, detail: dict[str, Any]) -> None:
        try:
            await asyncio.to_thread(self.store.audit, msg.user_id, msg.platform, action, target, outcome, detail)
        except Exception:  # noqa: BLE001 - an audit failure is logged loudly but does not hide the reply
            log.exception("could not write the audit log entry %s %s %s", msg.user_id, action, outcome)


def _invalid_text(source: str | None, names: list[str]) -> str:
    known = ", ".join(f"`{n}`" for n in names) or "none (set `CHATOPS_SOURCES`)"
    what = f"There is no source named `{source}`." if source else "No sources are configured."
    return f"{what} Known sources: {known}."


def status_text(rows: list[dict[str, Any]]) -> str:
    """Status rows as Markdown, one bullet per source (pages, chunks, last sync and outcome, next, error)."""
    if not rows:
        return "No sources are configured."
    lines = []
    for r in rows:
        last = r.get("last_run") or "never"
        err = f"; last error: {r['last_error']}" if r.get("last_error") else ""
        nxt = f"; next: {r['next_run']}" if r.get("next_run") else ""
        lines.append(f"- **{r['source']}**: {r['pages']} pages, {r['chunks']} chunks; last sync {last} "
                     f"({r.get('last_status') or '-'}){nxt}{err}")
    return "\n".join(lines)


def sources_text(names: list[str], rows: list[dict[str, Any]]) -> str:
    """The configured sources with their page counts, as Markdown."""
    if not names:
        return "No sources are configured."
    pages = {row.get("source"): row.get("pages", 0) for row in rows}
    return "\n".join(f"- **{n}**: {pages.get(n, 0)} pages" for n in names)


def reindex_text(results: list[JobResult]) -> str:
    """A finished re-index as Markdown, one bullet per source."""
    lines = []
    for r in results:
        if r.status == "ok" and r.summary is not None:
            s = r.summary
            lines.append(f"- **{r.source}**: {s.added} added, {s.updated} updated, {s.deleted} deleted, "
                         f"{s.unchanged} unchanged ({s.seconds:.1f} s)")
        elif r.status == "queued":
            lines.append(f"- **{'every source' if r.source == '*' else r.source}**: {r.error}; "
                         "`status` shows its run when it is done")
        else:
            lines.append(f"- **{r.source}**: {r.status}: {r.error}")
    head = "Re-index queued" if results and all(r.status == "queued" for r in results) else "Re-index finished"
    return f"{head}:\n" + "\n".join(lines)
