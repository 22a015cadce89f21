"""Index jobs: the one sync routine that the scheduler, ``/kb reindex`` and ``chatops sync`` share.

Sources come from the sources file (``CHATOPS_CONFIG``, default ``./chatops.yml`` when it exists)
and from ``CHATOPS_SOURCES`` spec strings (``folder:./wiki?name=handbook``,
``confluence:URL?space=KEY``, ``mediawiki:API_URL``); names must be unique across both. Each run
of a source goes through :class:`index.sync.SyncEngine`: the state store's lock
``sync:<index id>:<name>`` (one run per source and index at a time, across processes), fetch, convert,
chunk, index, then the cursor (of this index: replicas with their own data dirs on one database each
keep theirs, see :mod:`index.identity`); a run summary (added, updated, deleted, unchanged, skipped, errors, seconds,
calls) is recorded, and on failure the error, while the indexes keep serving what they had.

Writers and readers (issue 12, step 3): ``chatops worker`` (:mod:`bot.worker`) and the default ``chatops
serve`` write the index; ``chatops serve --role web`` builds its jobs with ``writes=False``, so
:meth:`IndexJobs.run` (``/kb reindex``) leaves a job in the state store's ``index_jobs`` table for the
worker of the same index (:meth:`IndexJobs.run_queued`) instead of writing, and answers ``queued``.

Confluence sources also get a permission sync (:meth:`IndexJobs.run_permissions`, every
``permissions_interval``, default 1h): under the same lock, it re-reads every indexed page's read
access and the members of its groups (:meth:`index.sync.SyncEngine.run_permissions`).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, ParamSpec, TypeVar

from connectors.base import IncrementalSource, Source
from connectors.config import ConfluenceConfig, Schedule, SourceConfig
from connectors.factory import BuiltSource, build_source
from connectors.errors import SourceSpecError
from connectors.sources import parse_source_spec
from index.indexer import IndexReport
from index.summary import SyncSummary
from index.identity import index_id_of
from index.sync import SyncEngine, adopt_legacy, holder_is_gone, sources_status
from state import StateStore, StateStoreError

from .config import ChatopsConfig, parse_config
from .settings import Settings
from .sources_file import load_sources_config, split_specs
from .wiring import Runtime

__all__ = ["IndexJobs", "JobResult", "RunLog", "parse_sources", "load_sources_config", "split_specs",
           "cli_sources_list", "cli_sources_remove"]

log = logging.getLogger(__name__)

_P = ParamSpec("_P")
_R = TypeVar("_R")


def parse_sources(value: str) -> list[BuiltSource]:
    """Parse ``CHATOPS_SOURCES`` into connector objects.

    Raises:
        SourceSpecError: for a malformed spec or duplicate names.
    """
    sources = [parse_source_spec(s) for s in split_specs(value)]
    names = [s.name for s in sources]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise SourceSpecError(f"several sources are named {', '.join(sorted(dupes))}; give each a unique ?name=")
    return sources


@dataclass(slots=True)
class JobResult:
    """What one source's run did.

    Attributes:
        source: the source name (``*`` for a queued re-index of every source).
        status: ``ok``, ``failed``, ``busy`` (another run holds the lock), ``unknown`` (no such source) or
            ``queued`` (left for the worker by a process that does not write the index; ``error`` says which job).
        summary: the run summary (``added``, ``updated``, ``deleted``, ``unchanged``, ``skipped``,
            ``errors`` (messages), ``seconds``, ``calls``, ...); ``None`` when the run did not start
            (busy, unknown, a source that could not be built).
        error: the failure, or ``""``.
    """

    source: str
    status: str  # ok | failed | busy | unknown | queued
    summary: SyncSummary | None = None
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict (``summary`` as :meth:`SyncSummary.as_dict`, ``{}`` without one)."""
        return {"source": self.source, "status": self.status,
                "summary": self.summary.as_dict() if self.summary else {}, "error": self.error}


class IndexJobs:
    """Runs sync jobs against the runtime's index and records them in the state store.

    Args:
        runtime: the runtime whose ``index`` is written.
        store: the state store (cursors, runs, locks).
        sources: connector objects (``FolderSource``, ``ConfluenceSource``, ``MediaWikiSource``),
            config entries (built into connectors on first use, so a missing credential fails
            that source's runs with a clear error instead of the whole bot), or a ``ChatopsConfig``.
        default_schedule: the schedule of sources that declare none (``None``: not scheduled).
        writes: False in a process that must not write the index (``chatops serve --role web``):
            :meth:`run` then queues the re-index for the worker instead of running it.

    Attributes:
        config: the sources as a config (for the scheduler).
        scheduler: the running scheduler, set by :func:`bot.scheduler.build_scheduler` (``None`` without one).
        next_run_times: set with it: a callable giving ``{source: next fire time or None}`` for ``status()``.
    """

    def __init__(self, runtime: Runtime, store: StateStore, sources: Sequence[Source | SourceConfig] | ChatopsConfig | None = None,
                 default_schedule: Schedule | None = None, *, writes: bool = True) -> None:
        self.writes = writes
        self.runtime = runtime
        self.store = store
        self.default_schedule = default_schedule
        self.scheduler = None
        self.next_run_times: Callable[[], dict[str, datetime | None]] | None = None
        self._write = threading.Lock()
        self._build = threading.Lock()
        self.sources: dict[str, Any] = {}
        configs = []
        items = sources.sources if isinstance(sources, ChatopsConfig) else list(sources or [])
        for s in items:
            if s.name in self.sources:
                raise SourceSpecError(f"several sources are named {s.name!r}; names must be unique")
            self.sources[s.name] = s
            if not isinstance(s, Source):
                configs.append(s)
        self.config = sources if isinstance(sources, ChatopsConfig) else parse_config(
            {"sources": [c.model_dump(mode="python") for c in configs]})
        self._built: dict[str, BuiltSource] = {}
        self.engine = SyncEngine(runtime.index, store, lock_ttl=timedelta(minutes=30), write_lock=self._write)
        if writes:
            adopt_legacy(runtime.index.manifest, store, runtime.index.index_id)  # cursors from before 0004

    @classmethod
    def from_settings(cls, runtime: Runtime, store: StateStore, settings: Settings | None = None, *,
                      writes: bool = True) -> IndexJobs:
        """Jobs for the sources of ``CHATOPS_CONFIG`` and ``CHATOPS_SOURCES`` (see :func:`load_sources_config`).

        Raises:
            ConfigFileError, SourceSpecError: for a bad sources file or spec.
        """
        settings = settings or runtime.settings
        cfg = load_sources_config(settings)
        interval = str(getattr(settings, "chatops_sync_interval", "") or "off").strip()
        default = None if interval.lower() in {"off", "none", "0", ""} else Schedule(interval=interval)
        return cls(runtime, store, cfg, default_schedule=default, writes=writes)

    def names(self) -> list[str]:
        """Configured source names."""
        return sorted(self.sources)

    def schedules(self) -> dict[str, Schedule | None]:
        """Each source's schedule: its own, else the default (``None``: run only on demand)."""
        out: dict[str, Schedule | None] = {}
        for name, s in self.sources.items():
            own = None if isinstance(s, Source) else s.schedule  # a connector object has no schedule of its own
            out[name] = own or self.default_schedule
        return out

    def permission_schedules(self) -> dict[str, timedelta]:
        """The permission sync's interval of each source that has one (Confluence sources from config
        entries whose ``permissions_interval`` is not ``off``)."""
        out: dict[str, timedelta] = {}
        for name, s in self.sources.items():
            if isinstance(s, ConfluenceConfig):
                every = s.permissions_every()
                if every is not None:
                    out[name] = every
        return out

    def source(self, name: str) -> Source:
        """The connector for ``name``, built from its config entry on first use and kept.

        Raises:
            KeyError: for an unknown name.
            MissingCredentialError: when a credential variable is unset.
        """
        s = self.sources[name]
        if isinstance(s, Source):
            return s
        with self._build:
            if name not in self._built:
                self._built[name] = build_source(s)
            return self._built[name]

    def run(self, source: str | None = None, full: bool = False, requested_by: str = "") -> list[JobResult]:
        """Sync one source (or all, one after the other); never raises for a source's failure.

        In a process that does not write the index (``writes=False``) a known source (or all) is queued
        for the worker instead (one ``queued`` result naming the job; ``requested_by`` is stored with it).
        """
        if not self.writes and (source is None or source in self.sources):
            job = self.store.enqueue_index_job(self.runtime.index.index_id, source, full, requested_by)
            log.info("re-index of %s queued for the worker as job %d", source or "every source", job)
            return [JobResult(source or "*", "queued", None, f"queued for the worker as job {job}")]
        names = [source] if source else self.names()
        results = []
        for name in names:
            if name not in self.sources:
                results.append(JobResult(name, "unknown", None, f"no source named {name!r}; known: "
                                         f"{', '.join(self.names()) or 'none (add sources to chatops.yml or CHATOPS_SOURCES)'}"))
                continue
            try:
                src = self.source(name)
            except Exception as exc:  # noqa: BLE001 - e.g. a missing credential: recorded, the others go on
                error = f"{type(exc).__name__}: {exc}"
                run_id = self.store.start_run(name, index_id=self.runtime.index.index_id)
                self.store.finish_run(run_id, "failed", {}, error=error)
                results.append(JobResult(name, "failed", None, error))
                continue
            res = self.engine.run(src, full=full)
            results.append(JobResult(name, res.status, res.summary, res.error))
        return results

    def run_permissions(self, source: str) -> JobResult:
        """Run the permission sync of one source (:meth:`SyncEngine.run_permissions`); never raises for
        the source's failure (``failed``, ``busy`` or ``unknown`` with the reason)."""
        if source not in self.sources:
            return JobResult(source, "unknown", None, f"no source named {source!r}; known: "
                             f"{', '.join(self.names()) or 'none'}")
        try:
            src = self.source(source)
        except Exception as exc:  # noqa: BLE001 - e.g. a missing credential: recorded, the bot goes on
            error = f"{type(exc).__name__}: {exc}"
            run_id = self.store.start_run(source, index_id=self.runtime.index.index_id)
            self.store.finish_run(run_id, "failed", SyncSummary(mode="permissions").as_dict(), error=error)
            return JobResult(source, "failed", None, error)
        res = self.engine.run_permissions(src)
        return JobResult(source, res.status, res.summary, res.error)

    def run_queued(self, owner: str | None = None, limit: int = 10) -> list[tuple[int, list[JobResult]]]:
        """Run the re-index jobs web replicas queued for this index (oldest first, at most ``limit``; and any
        left running by a killed worker of this host), each claimed once (:meth:`state.StateStore.claim_index_job`) and finished with its results; never raises
        for a source's failure. Returns ``[(job id, results)]``; a worker calls it every few seconds.

        Raises:
            RuntimeError: in a process that does not write the index (``writes=False``).
        """
        if not self.writes:
            raise RuntimeError("this process does not write the index; the worker runs queued jobs")
        owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        done: list[tuple[int, list[JobResult]]] = []
        for _ in range(limit):
            # A job left running by a worker of this host that was killed is run again.
            job = self.store.claim_index_job(self.runtime.index.index_id, owner, is_dead=holder_is_gone)
            if job is None:
                break
            try:
                results = self.run(job.source or None, full=job.full)
            except Exception as exc:  # noqa: BLE001 - recorded on the job; the worker goes on
                results = [JobResult(job.source or "*", "failed", None, f"{type(exc).__name__}: {exc}")]
            status: Literal["done", "failed"] = "done" if all(r.status == "ok" for r in results) else "failed"
            self.store.finish_index_job(job.id, owner, status, [r.as_dict() for r in results])
            log.info("index job %d (%s, requested by %s): %s", job.id, job.source or "every source",
                     job.requested_by or "?", status)
            done.append((job.id, results))
        return done

    def next_runs(self) -> dict[str, datetime | None]:
        """Next scheduled run per source (empty without a running scheduler)."""
        return self.next_run_times() if self.next_run_times is not None else {}

    def status(self) -> list[dict[str, Any]]:
        """Per source: pages and chunks indexed, the last run, its outcome and summary, the next run.

        Keys: ``source``, ``pages``, ``chunks``, ``last_run``, ``last_status``, ``last_summary`` (a
        :class:`SyncSummary` or ``None``), ``last_error``, ``next_run``, ``schedule``, ``watermark``.
        """
        schedules = {n: s.describe() if s else None for n, s in self.schedules().items()}
        return sources_status(self.runtime.index.manifest, self.store, self.names(), self.next_runs(), schedules,
                              index_id=self.runtime.index.index_id)

    def close(self) -> None:
        """Close the connectors built from config entries (their HTTP clients)."""
        for src in self._built.values():
            if isinstance(src, IncrementalSource):  # a folder holds nothing to close
                src.close()
        self._built.clear()


# -- the CLI's `chatops sync` and `chatops status` (kept here so bot/cli.py only wires them) -------------

def format_result(r: JobResult) -> str:
    """One line per run: ``eng: ok, 3 added, 1 updated, 0 deleted, 120 unchanged, 0 skipped, 0 errors in 2.31 s (14 calls)``."""
    s = r.summary
    if r.status in {"ok", "failed"} and s is not None:
        errors = s.errors
        line = (f"{r.source}: {r.status}, {s.added} added, {s.updated} updated, "
                f"{s.deleted} deleted, {s.unchanged} unchanged, {s.skipped} skipped, "
                f"{len(errors)} errors in {s.seconds:.2f} s ({s.calls} calls)")
        if s.repaired:
            line += f"\n  {s.repaired}"
        if r.status == "failed":
            line += f"\n  error: {r.error}\n  the cursor was not advanced; the next run starts from the same point"
        elif errors:
            line += "".join(f"\n  - {e}" for e in errors[:5])
        return line
    return f"{r.source}: {r.status}: {r.error}"


class RunLog:
    """Records ``chatops index`` runs in the state store's run table, like syncs, so ``chatops status``
    shows them (mode ``index``).

    Bookkeeping only: when the state store cannot be opened or written, the run goes on unrecorded
    and a warning is logged.

    Args:
        store: the state store, or ``None`` (nothing is recorded).
        index_id: the id of the index the runs write (:attr:`index.knowledge.KnowledgeIndex.index_id`).
    """

    def __init__(self, store: StateStore | None, index_id: str) -> None:
        self.store = store
        self.index_id = index_id

    @classmethod
    def open(cls, settings: Settings, index_id: str) -> RunLog:
        """A log on the settings' state store (``DATABASE_URL`` or the data dir's SQLite) for the index ``index_id``."""
        try:
            return cls(StateStore(settings.state_url), index_id)
        except StateStoreError as exc:
            log.warning("index runs are not recorded: %s", exc)
            return cls(None, index_id)

    @contextmanager
    def run(self, source: str) -> Iterator[Callable[..., None]]:
        """Context of one run of ``source``; call the yielded function with the run's
        :class:`~index.indexer.IndexReport` (and ``pages=``, the source's pages in the index after it).
        The run is recorded with a :class:`SyncSummary` of mode ``index``. An exception records the
        run as failed and propagates."""
        store = self.store
        run_id = self._call(store.start_run, source, index_id=self.index_id) if store else None
        done: list[SyncSummary] = []

        def record(rep: IndexReport, pages: int | None = None) -> None:
            done.append(SyncSummary.from_report(rep, "index", pages=pages))

        try:
            yield record
        except BaseException as exc:
            if store is not None and run_id is not None:
                self._call(store.finish_run, run_id, "failed", SyncSummary(mode="index").as_dict(),
                           error=f"{type(exc).__name__}: {exc}")
            raise
        if store is not None and run_id is not None and done:
            summary = done[-1]
            self._call(store.finish_run, run_id, "ok", summary.as_dict(), error="; ".join(summary.errors[:5]))

    @staticmethod
    def _call(fn: Callable[_P, _R], *args: _P.args, **kwargs: _P.kwargs) -> _R | None:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - bookkeeping never fails the index run it records
            log.warning("could not record the index run: %s", exc)
            return None

    def close(self) -> None:
        """Close the state store."""
        if self.store is not None:
            self.store.close()


def cli_sources_list(settings: Settings, as_json: bool = False) -> int:
    """``chatops sources list [--json]``: every source in the index or the configuration, one line each.

    Reads only the manifest and the state store (works while ``chatops serve`` holds the index).
    """
    import json

    from .wiring import open_index_manifest

    configured = {s.name for s in load_sources_config(settings).sources}
    store = StateStore(settings.state_url)
    manifest = open_index_manifest(settings)
    try:
        index_id = index_id_of(manifest, settings.qdrant_url, settings.qdrant_collection)
        adopt_legacy(manifest, store, index_id)
        rows = sources_status(manifest, store, sorted(configured), index_id=index_id)
    finally:
        manifest.close()
        store.close()
    out = [{"source": r["source"], "pages": r["pages"], "chunks": r["chunks"], "configured": r["source"] in configured,
            "last_run": r["last_run"]} for r in rows]
    if as_json:
        print(json.dumps(out, ensure_ascii=False))
        return 0
    if not out:
        print(f"no sources in {settings.chatops_data_dir} and none configured")
    for r in out:
        where = "configured" if r["configured"] else "indexed only (not in chatops.yml or CHATOPS_SOURCES)"
        print(f"{r['source']}: {r['pages']} pages, {r['chunks']} chunks; {where}")
    return 0


def cli_sources_remove(settings: Settings, name: str, yes: bool = False) -> int:
    """``chatops sources remove NAME --yes``: delete NAME's pages from both indexes, forget its cursor and runs
    (this index's: other indexes sharing the state store keep theirs, and their pages).

    Returns:
        0 when removed, 2 without ``--yes`` or for a name with no pages (nothing changes then).
    """
    import sys

    from index.indexer import Indexer

    from .wiring import open_index

    index = open_index(settings)
    try:
        pages = index.manifest.pages_of(name)
        if not pages:
            known = sorted({p.source for p in index.manifest.all_pages()})
            print(f"chatops: no pages of a source named {name!r} in {settings.chatops_data_dir}; indexed: "
                  f"{', '.join(known) or 'none'}", file=sys.stderr)
            return 2
        if not yes:
            print(f"chatops: this deletes the {len(pages)} pages of {name!r} from the index; run again with --yes "
                  "to do it", file=sys.stderr)
            return 2
        rep = Indexer(index).remove_source(name)
        index_id = index.index_id
    finally:
        index.close()
    store = StateStore(settings.state_url)
    try:
        store.forget_source(name, index_id=index_id)
    finally:
        store.close()
    print(f"{name}: removed {rep.deleted} pages ({rep.chunks_deleted} chunks)")
    if name in {s.name for s in load_sources_config(settings).sources}:
        print(f"note: {name!r} is still configured (chatops.yml or CHATOPS_SOURCES); its next sync indexes it again")
    return 0


def cli_sync(settings: Settings, source: str | None, full: bool, as_json: bool = False) -> int:
    """``chatops sync [--source NAME] [--full] [--json]``: run the sync jobs once, print one line per source.

    Returns:
        0 when every run is ok, 1 when one failed or was busy, 2 for an unknown source or no sources.

    Raises:
        ConfigFileError, SourceSpecError: for a bad sources file or spec.
    """
    import json
    import sys

    from .wiring import build_agent, open_index

    cfg = load_sources_config(settings)
    if not cfg.sources:
        print("chatops: no sources configured: list them in chatops.yml (or CHATOPS_CONFIG) or CHATOPS_SOURCES; "
              "see the README's Sources and sync section", file=sys.stderr)
        return 2
    if source and source not in {s.name for s in cfg.sources}:
        print(f"chatops: no source named {source!r}; configured: {', '.join(s.name for s in cfg.sources)}",
              file=sys.stderr)
        return 2
    store = StateStore(settings.state_url)
    index = open_index(settings, repair=True, full=full)  # an indexing run rebuilds a damaged store
    try:
        rt = build_agent(settings, index=index)
    except BaseException:
        index.close()
        store.close()
        raise
    jobs = IndexJobs(rt, store, cfg)
    try:
        results = jobs.run(source, full=full)
        if any(r.status == "ok" for r in results):
            from agent.calibration import calibrate_index

            calibrate_index(rt.index)  # refit the gate when the index changed substantially
    finally:
        jobs.close()
        rt.close()
        store.close()
    if as_json:
        print(json.dumps([r.as_dict() for r in results], ensure_ascii=False, default=str))
    else:
        for r in results:
            print(format_result(r))
    return 0 if all(r.status == "ok" for r in results) else 1


def cli_status(settings: Settings, as_json: bool = False) -> int:
    """``chatops status [--json]``: per source, pages and chunks indexed, the last run and its summary.

    Reads only the index manifest and the state store, so it works while ``chatops serve`` holds the index (it
    writes only the adoption of cursors recorded before they were kept per index: :func:`index.sync.adopt_legacy`).
    """
    import json

    from .wiring import open_index_manifest

    cfg = load_sources_config(settings)
    interval = str(getattr(settings, "chatops_sync_interval", "") or "off").strip()
    default = None if interval.lower() in {"off", "none", "0", ""} else f"every {interval}"
    schedules = {s.name: s.schedule.describe() if s.schedule else default for s in cfg.sources}
    from .retention import status_line

    store = StateStore(settings.state_url)
    manifest = open_index_manifest(settings)
    try:
        index_id = index_id_of(manifest, settings.qdrant_url, settings.qdrant_collection)
        adopt_legacy(manifest, store, index_id)
        rows = sources_status(manifest, store, [s.name for s in cfg.sources], None, schedules, index_id=index_id)
        retention = status_line(store)
        from agent.calibration import describe, index_calibration

        calibration = describe(index_calibration(manifest, settings.index_dir))
    finally:
        manifest.close()
        store.close()
    if as_json:
        rows_out = [{**row, "last_summary": row["last_summary"].as_dict() if row["last_summary"] else {}} for row in rows]
        print(json.dumps(rows_out, ensure_ascii=False, default=str))
        return 0
    from .layout import SectionPrinter

    out = SectionPrinter()  # the data dir, the sources, the gate's calibration: three sections
    out(f"data dir: {settings.chatops_data_dir}")
    out(retention)
    out.section()
    if not rows:
        out("no sources configured and nothing indexed")
        return 0
    for row in rows:
        s = row["last_summary"] or SyncSummary()
        last = (f"last run {row['last_run']} {row['last_status']}: {s.added} added, {s.updated} "
                f"updated, {s.deleted} deleted, {s.unchanged} unchanged, "
                f"{len(s.errors)} errors in {s.seconds:.2f} s") if row["last_run"] else "never run"
        out(f"{row['source']}: {row['pages']} pages, {row['chunks']} chunks; {last}; "
            f"schedule: {row['schedule'] or 'on demand'}")
        if row["last_error"]:
            out(f"  last error: {row['last_error']}")
        for line in flag_lines(row):
            out(f"  {line}")
    out.section(calibration)
    return 0


def flag_lines(row: dict[str, Any]) -> list[str]:
    """The index-time scan's counts of a :func:`~index.sync.sources_status` row, and its pages whose read
    access is unresolved, one line each (none when clean)."""
    lines = []
    if row.get("pages_sensitive"):
        lines.append(f"pages with secrets or personal data: {row['pages_sensitive']} (they are never quoted)")
    if row.get("pages_injection"):
        lines.append(f"pages with instructions addressed to the bot: {row['pages_injection']} (left out of answers)")
    if row.get("pages_unscanned"):
        lines.append(f"pages not yet scanned for secrets: {row['pages_unscanned']} (`chatops index` or `chatops sync --full` scans them)")
    if row.get("pages_unresolved_access"):
        lines.append(f"pages with unresolved access: {row['pages_unresolved_access']} (readable by nobody, never "
                     "cited, until a sync can read their permissions)")
    return lines
