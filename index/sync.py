"""The sync engine: one run of one source, from fetch to a saved cursor, and nothing lost on failure.

A run (:meth:`SyncEngine.run`):

1. takes the state store's lock ``sync:<index id>:<source>`` (one run per source and index at a time,
   across threads, processes and machines sharing the database; renewed while the run goes on,
   expiring after ``lock_ttl`` if its holder died), else returns ``busy``. Cursors, runs and the lock
   are the index's (:attr:`KnowledgeIndex.index_id <index.knowledge.KnowledgeIndex.index_id>`):
   replicas with their own index on one database sync it at the same time, each from its own cursor,
   and replicas that share one index share one lock and one cursor;
2. records the run's start (``start_run`` of the :class:`~index.ports.SyncState` port, which
   :class:`state.StateStore` implements);
3. asks an :class:`~connectors.base.IncrementalSource` for what changed since the saved cursor
   (``source.sync(cursor, known, full)``:
   :class:`~core.models.Document` items to (re)index, :class:`~core.models.Tombstone`
   items for pages gone upstream, :class:`~connectors.folder.SkippedPage` items for pages that could
   not be read, and one :class:`CursorUpdate` last), and feeds them to the
   :class:`~index.indexer.Indexer` as a source that is *not* a complete listing, so nothing is
   pruned but what the connector tombstoned (it tombstones only after a completed listing);
4. only after the Indexer returned, i.e. every page's chunks committed to both stores under the
   manifest's journal, saves the new cursor (``set_cursor``), with the doc ids of pages
   the indexer skipped because their chunking raised under :data:`RETRY_DOCS`, so the connector
   fetches them again next run (a skipped page is retried, never lost behind the watermark);
5. stores the members of the groups the source read (a :class:`~connectors.base.MembershipSource`,
   e.g. Confluence) through the state store's ``set_group_members`` (:class:`~index.ports.GroupState`);
6. records the :class:`~index.summary.SyncSummary` (``added``, ``updated``, ``deleted``, ``unchanged``,
   ``skipped``, ``errors``, ``seconds``, ``calls``, ...) with ``finish_run``, and releases the lock.

The permission sync (:meth:`SyncEngine.run_permissions`, a :class:`~connectors.base.PermissionSource`)
runs under the same lock and is recorded the same way (mode ``permissions``): it asks the source for
the read access of every indexed page, read again now, writes it with
:meth:`~index.knowledge.KnowledgeIndex.set_access` (both stores and the manifest, no re-embedding), and
stores the group members the source read. Restriction and group changes do not change a page's
version, so only this run sees them; a user removed from a group stops matching within one cycle.

A lock whose holder is a process of this host that no longer exists (killed before it could
release) is taken over at once (``take_over_lock``, one atomic swap in the state store).

If anything raises on the way (server down, 401, a listing that kept failing, a crash), the cursor
stays where it was: pages already written are complete (the journal undoes a half-written page
when the index is next opened), pages not reached keep their previous indexed copy, and the next
run lists the same window again. Re-listing is cheap: an unchanged page hash is neither re-chunked
nor re-embedded. Keys are page ids, so a re-run cannot duplicate a page.

Other :class:`~connectors.base.Source` objects (a folder) are indexed by :meth:`Indexer.run` with
their complete listing, under the same lock and run records.
"""

from __future__ import annotations

from connectors.cursor import RETRY_DOCS, CursorUpdate

import functools
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Any

from connectors.base import IncrementalSource, MembershipSource, PermissionSource, Source, SyncItem
from connectors.folder import SkippedPage
from telemetry.metrics import count_sync_run
from telemetry.timing import timed
from telemetry.tracing import span
from core.models import Chunk, Document, Tombstone

from .chunker import Chunker, ChunkerConfig
from .indexer import Indexer, IndexReport
from .knowledge import KnowledgeIndex
from .manifest import Manifest
from .ports import GroupState, SyncState
from .reconcile import reconcile
from .summary import SyncSummary

__all__ = ["CursorUpdate", "SyncEngine", "SyncResult", "SyncSummary", "AnchoredChunker", "sources_status", "adopt_legacy",
           "holder_is_gone",
           "RETRY_DOCS"]

log = logging.getLogger(__name__)

class AnchoredChunker(Chunker):
    """A :class:`Chunker` whose chunk URLs use the source's own heading anchors.

    The base chunker links sections with GitHub-style slugs; wikis make other anchors (MediaWiki
    ``Hotels_&_meals``, Confluence ``Page-Heading``). ``anchor(doc, heading)`` returns the fragment
    for the innermost heading of a chunk's section path (``None`` or ``""``: link the page itself).
    Chunk ids do not depend on URLs, so they are the same as the base chunker's.
    """

    def __init__(self, anchor: Callable[[Document, str], str | None], config: ChunkerConfig | None = None) -> None:
        super().__init__(config)
        self.anchor = anchor

    def chunk(self, doc: Document) -> list[Chunk]:
        """Chunk ``doc`` (see :meth:`Chunker.chunk`) and re-point section URLs at the source's anchors."""
        chunks = super().chunk(doc)
        if not doc.url:
            return chunks
        out = []
        for c in chunks:
            frag = self.anchor(doc, c.section_path[-1]) if c.section_path else None
            out.append(replace(c, url=f"{doc.url}#{frag}" if frag else doc.url))
        return out


@dataclass(slots=True)
class SyncResult:
    """The outcome of one run.

    Attributes:
        source: the source name.
        status: ``ok``, ``failed`` or ``busy`` (another run holds the lock).
        summary: counts (see :class:`SyncEngine`); partial counts for a failed run; ``None`` when busy.
        error: what went wrong (``""`` when ok); for ``ok`` runs, page-level problems are in
            ``summary.errors``.
        run_id: the state store's run id (``None`` when busy).
    """

    source: str
    status: str
    summary: SyncSummary | None = None
    error: str = ""
    run_id: int | None = None


class _Stream:
    """Adapts a connector's ``sync`` iterator to the Indexer's Source protocol (no pruning)."""

    complete_listing = False

    def __init__(self, name: str, items: Iterator[SyncItem], on_item: Callable[[], None]) -> None:
        self.name = name
        self._items = items
        self._on_item = on_item
        self.update: CursorUpdate | None = None
        self.counts = {"documents": 0, "tombstones": 0, "skipped": 0}

    def scan(self) -> Iterator[Document | Tombstone | SkippedPage]:
        for item in self._items:
            self._on_item()
            if isinstance(item, CursorUpdate):
                self.update = item
                continue
            if isinstance(item, Document):
                self.counts["documents"] += 1
            elif isinstance(item, Tombstone):
                self.counts["tombstones"] += 1
            elif isinstance(item, SkippedPage):
                self.counts["skipped"] += 1
            yield item


def _counted(kind: str) -> Callable[[Callable[..., SyncResult]], Callable[..., SyncResult]]:
    """Counts each run of the decorated method in ``chatops_sync_runs_total`` (source, ``kind``, status) and
    wraps it in a ``chatops.sync`` span (when tracing is on) with the source, kind and outcome."""

    def wrap(method: Callable[..., SyncResult]) -> Callable[..., SyncResult]:
        @functools.wraps(method)
        def counted(self: "SyncEngine", source: Source, *args: Any, **kwargs: Any) -> SyncResult:
            with span("chatops.sync", {"chatops.source": source.name, "chatops.sync.kind": kind}) as sp:
                result = method(self, source, *args, **kwargs)
                sp.set_attribute("chatops.outcome", result.status)
            count_sync_run(source.name, kind, result.status)
            return result
        return counted
    return wrap


class SyncEngine:
    """Runs syncs of sources into one index, with the state store's cursors, runs and locks.

    Args:
        index: the knowledge index to write.
        store: the state store (the :class:`~index.ports.SyncState` port; a :class:`state.StateStore`).
        lock_ttl: how long a run's lock lasts without renewal (renewed every batch and every 25 items).
        write_lock: a lock serialising index writes within this process (shared by every engine that
            writes ``index``); default: none.
        chunker_config: chunk sizes (default :class:`ChunkerConfig`).
    """

    def __init__(self, index: KnowledgeIndex, store: SyncState, *, lock_ttl: timedelta = timedelta(minutes=30),
                 write_lock: threading.Lock | None = None, chunker_config: ChunkerConfig | None = None) -> None:
        self.index = index
        self.store = store
        self.lock_ttl = lock_ttl
        self.write_lock = write_lock
        self.chunker_config = chunker_config

    def lock_name(self, source: str) -> str:
        """The state store's lock of a run of ``source`` into this engine's index: ``sync:<index id>:<source>``."""
        return f"sync:{self.index.index_id}:{source}"

    def _begin(self, name: str, owner: str) -> tuple[str, int] | None:
        """Take the run's lock (``None`` when another run holds it), adopt the source's legacy cursor and
        runs when this index holds its pages (:func:`adopt_legacy`), record the run's start;
        returns ``(lock, run id)``."""
        lock = self.lock_name(name)
        if not self.store.acquire_lock(lock, owner, ttl=self.lock_ttl) and not self._take_over_dead(lock, owner):
            return None
        try:
            if name in self.index.manifest.counts_by_source():  # one aggregate query, however many pages
                self.store.adopt_legacy(self.index.index_id, [name])
            return lock, self.store.start_run(name, index_id=self.index.index_id)
        except BaseException:
            self._release(lock, owner)
            raise

    @_counted("content")
    def run(self, source: Source, full: bool = False) -> SyncResult:
        """Sync ``source`` once (incrementally, or every page when ``full``).

        ``full`` on an :class:`~connectors.base.IncrementalSource` re-lists and re-fetches every page
        and prunes, without first emptying the index (a failed full run loses nothing); on a folder it
        is :meth:`Indexer.run`'s ``full``.

        Returns:
            The result; never raises for the source's failure (it is in ``status``/``error``, and
            recorded in the state store with the partial counts).
        """
        name = source.name
        owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        begun = self._begin(name, owner)
        if begun is None:
            return SyncResult(name, "busy", None, f"a sync of {name!r} into this index is already running "
                                                  f"(lock {self.lock_name(name)} is held)")
        lock, run_id = begun
        with timed("chatops.sync.run", {"chatops.source": name}) as clock:  # the run itself, once its lock is held
            progress: dict[str, Any] = {"report": None}
            counters = _counters(source)
            calls0, retries0 = counters()
            renew = _Renewer(self.store, lock, owner, self.lock_ttl)

            def on_progress(rep: IndexReport) -> None:
                progress["report"] = rep
                renew(force=True)

            mode = "full" if full else "incremental"
            stream: _Stream | None = None
            try:
                with self.write_lock or nullcontext():
                    # Stores first made to match the manifest; pages lost from both are forgotten, and a
                    # connector with a cursor then lists everything so that it fetches them again.
                    repair = reconcile(self.index, name)
                    if isinstance(source, IncrementalSource):
                        cursor = self.store.get_cursor(name, index_id=self.index.index_id)
                        if repair.pages_forgotten:
                            cursor = None
                        if cursor is None:
                            mode = "full"
                        known = set(self.index.manifest.pages_of(name))
                        stream = _Stream(name, source.sync(cursor, known, full=full), renew)
                        chunker = AnchoredChunker(source.section_anchor, self.chunker_config)
                        rep = Indexer(self.index, chunker).run(stream, full=False, progress=on_progress, repair=repair)
                        if stream.update is None:
                            raise RuntimeError(f"source {name!r} ended its sync without a cursor; nothing was saved")
                        # Every page is committed to both stores: only now may the cursor move. Pages the
                        # indexer could not chunk ride along, for the connector to fetch again next run.
                        cursor = {k: v for k, v in stream.update.cursor.items() if k != RETRY_DOCS}
                        if rep.failed_pages:
                            cursor[RETRY_DOCS] = sorted(set(rep.failed_pages))
                        self.store.set_cursor(name, cursor, index_id=self.index.index_id)
                        self._store_memberships(source)
                    else:
                        mode = "full" if full else "listing"
                        rep = Indexer(self.index, Chunker(self.chunker_config)).run(source, full=full,
                                                                                    progress=on_progress,
                                                                                    repair=repair)
                        self.store.set_cursor(name, {"synced_at": datetime.now(timezone.utc).isoformat()},
                                              index_id=self.index.index_id)
                summary = self._summary(name, rep, mode, counters, calls0, retries0, clock.elapsed(), stream)
                self.store.finish_run(run_id, "ok", summary.as_dict(), error="; ".join(rep.errors[:5]))
                log.info("sync of %s: %s", name, {"added": summary.added, "updated": summary.updated,
                                                  "deleted": summary.deleted, "unchanged": summary.unchanged})
                self._warm()
                return SyncResult(name, "ok", summary, "", run_id)
            except Exception as exc:  # noqa: BLE001 - a failed run is recorded and reported, the caller goes on
                error = f"{type(exc).__name__}: {exc}"
                log.warning("sync of %s failed (cursor not advanced): %s", name, error)
                rep = progress["report"] or IndexReport(source=name)
                summary = self._summary(name, rep, mode, counters, calls0, retries0, clock.elapsed(), stream)
                return self._failed(name, run_id, summary, error)
            finally:
                self._release(lock, owner)

    @_counted("permissions")
    def run_permissions(self, source: Source) -> SyncResult:
        """The permission sync of ``source``: re-read every indexed page's read access and group members.

        Under the lock ``sync:<index id>:<name>`` (a content sync and a permission sync of one source never overlap),
        recorded as a run of mode ``permissions``: ``updated`` counts pages whose stored access was
        rewritten (:meth:`KnowledgeIndex.set_access` returned chunks), ``unchanged`` the others, ``errors``
        the pages left readable by nobody (with why), ``calls`` the requests. Nothing is re-embedded.

        Returns:
            The result; never raises for the source's failure (``failed`` with the error; pages already
            updated keep their new access, which was read in this run). A source that is not a
            :class:`~connectors.base.PermissionSource` fails with a clear error.
        """
        name = source.name
        owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        begun = self._begin(name, owner)
        if begun is None:
            return SyncResult(name, "busy", None, f"a sync of {name!r} into this index is already running "
                                                  f"(lock {self.lock_name(name)} is held)")
        lock, run_id = begun
        with timed("chatops.sync.run", {"chatops.source": name}) as clock:  # the run itself, once its lock is held
            calls0, retries0 = (source.calls, source.retries) if isinstance(source, PermissionSource) else (0, 0)
            renew = _Renewer(self.store, lock, owner, self.lock_ttl)
            summary = SyncSummary(mode="permissions")
            try:
                if not isinstance(source, PermissionSource):
                    raise TypeError(f"source {name!r} has no per-page permissions to sync")
                known = self.index.manifest.pages_of(name)
                summary.pages = len(known)
                with self.write_lock or nullcontext():
                    for doc_id, access in source.permissions(list(known)):
                        renew()
                        if doc_id not in known:
                            continue
                        written = self.index.set_access(name, doc_id, access)
                        if written:
                            summary.updated += 1
                            summary.chunks_written += written
                        else:
                            summary.unchanged += 1
                        if not access.resolved:
                            summary.skipped += 1
                            if len(summary.errors) < 20:
                                summary.errors.append(f"{doc_id}: readable by nobody: {access.unresolved}")
                self._store_memberships(source)
                summary.seconds = round(clock.elapsed(), 3)
                summary.calls, summary.retries = source.calls - calls0, source.retries - retries0
                self.store.finish_run(run_id, "ok", summary.as_dict(), error="; ".join(summary.errors[:5]))
                log.info("permission sync of %s: %d pages updated, %d unchanged, %d unresolved, %d calls in %.1f s",
                         name, summary.updated, summary.unchanged, summary.skipped, summary.calls, summary.seconds)
                self._warm()
                return SyncResult(name, "ok", summary, "", run_id)
            except Exception as exc:  # noqa: BLE001 - a failed run is recorded and reported, the caller goes on
                error = f"{type(exc).__name__}: {exc}"
                log.warning("permission sync of %s failed: %s", name, error)
                summary.seconds = round(clock.elapsed(), 3)
                if isinstance(source, PermissionSource):
                    summary.calls, summary.retries = source.calls - calls0, source.retries - retries0
                return self._failed(name, run_id, summary, error)
            finally:
                self._release(lock, owner)

    def _failed(self, name: str, run_id: int, summary: SyncSummary, error: str) -> SyncResult:
        """Record run ``run_id`` of ``name`` as failed with ``error`` (added to the summary's errors) and
        return its result; a store that cannot record it is logged, never raised (it may be what failed)."""
        summary.errors.append(error)
        try:
            self.store.finish_run(run_id, "failed", summary.as_dict(), error=error)
        except Exception:  # noqa: BLE001 - the store itself may be what failed
            log.exception("cannot record the failed run of %s", name)
        return SyncResult(name, "failed", summary, error, run_id)

    def _warm(self) -> None:
        """Rebuild what searches need after this run's writes (:meth:`KnowledgeIndex.warm`) here, in the
        sync's thread, instead of in the next user's turn; a failure is logged (the search rebuilds it)."""
        try:
            self.index.warm()
        except Exception:  # noqa: BLE001 - an optimisation: the next search builds it anyway
            log.warning("could not prepare the dense search after the run", exc_info=True)

    def _release(self, lock: str, owner: str) -> None:
        """Release ``lock`` held by ``owner``; a failure is logged (the lock expires by itself)."""
        try:
            self.store.release_lock(lock, owner)
        except Exception:  # noqa: BLE001 - the lock expires by itself
            log.exception("cannot release lock %s", lock)

    def _store_memberships(self, source: Source) -> None:
        """Replace the stored members of every group ``source`` read this run (a no-op for other sources
        or a state store without groups)."""
        if not isinstance(source, MembershipSource):
            return
        groups = source.memberships()
        if not groups:
            return
        if not isinstance(self.store, GroupState):
            log.warning("the state store keeps no group members; askers are not matched to %s's groups", source.name)
            return
        for group_name, emails in groups.items():
            self.store.set_group_members(source.name, group_name, emails)

    def _take_over_dead(self, lock: str, owner: str) -> bool:
        """Take ``lock`` over when its holder is a process of this host that no longer exists.

        Owners are ``host:pid:nonce``; a holder that was killed (SIGKILL, OOM) would otherwise block
        the source until the lock expires. Returns True when the lock is now ours.
        """
        return self.store.take_over_lock(lock, owner, holder_is_gone, ttl=self.lock_ttl)

    def _summary(self, name: str, rep: IndexReport, mode: str, counters: Callable[[], tuple[int, int]],
                 calls0: int, retries0: int, seconds: float, stream: _Stream | None) -> SyncSummary:
        pages = self.index.manifest.pages_of(name)
        calls, retries = counters()
        return SyncSummary(
            mode=mode,
            added=rep.added,
            updated=rep.updated,
            deleted=rep.deleted,
            unchanged=max(0, len(pages) - rep.added - rep.updated),
            skipped=rep.skipped,
            errors=list(rep.errors[:20]),
            seconds=round(seconds, 3),
            calls=calls - calls0,
            retries=retries - retries0,
            fetched=stream.counts["documents"] if stream else rep.added + rep.updated + rep.unchanged,
            listed=stream.update.listed if stream and stream.update else None,
            pages=len(pages),
            chunks_written=rep.chunks_written,
            chunks_deleted=rep.chunks_deleted,
            embedded=rep.embedded,
            repaired=rep.repair.describe(),
        )


def _counters(source: Source) -> Callable[[], tuple[int, int]]:
    """``() -> (calls, retries)`` of ``source`` so far: its HTTP counters, ``(0, 0)`` for a source without."""
    if isinstance(source, IncrementalSource):
        return lambda: (source.calls, source.retries)
    return lambda: (0, 0)


def holder_is_gone(holder: str) -> bool:
    """True when lock owner ``holder`` (``host:pid:nonce``) is a process of this host that no longer exists."""
    host, _, rest = holder.partition(":")
    pid_text = rest.split(":", 1)[0]
    return host == socket.gethostname() and pid_text.isdigit() and not _alive(int(pid_text))


def _alive(pid: int) -> bool:
    """True when a process with ``pid`` exists on this host."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _Renewer:
    """Renews the run's lock at most every 25 calls (or when forced)."""

    def __init__(self, store: SyncState, lock: str, owner: str, ttl: timedelta) -> None:
        self.store, self.lock, self.owner, self.ttl = store, lock, owner, ttl
        self.n = 0

    def __call__(self, force: bool = False) -> None:
        self.n += 1
        if force or self.n % 25 == 0:
            if not self.store.acquire_lock(self.lock, self.owner, ttl=self.ttl):
                raise RuntimeError(f"lost the lock {self.lock} (it expired and another run took it); stopping")


def adopt_legacy(manifest: Manifest, store: SyncState, index_id: str | None) -> int:
    """Let the index ``index_id`` adopt the legacy cursors and runs (recorded before they were kept per
    index) of every source whose pages its ``manifest`` holds; returns the cursors adopted (0 for an
    index without an id: never opened, so it holds nothing)."""
    if not index_id:
        return 0
    return store.adopt_legacy(index_id, manifest.counts_by_source())


def sources_status(manifest: Manifest, store: SyncState, names: Iterable[str], next_runs: Mapping[str, datetime | None] | None = None,
                   schedules: Mapping[str, str | None] | None = None, *, index_id: str | None) -> list[dict[str, Any]]:
    """Per source: pages and chunks indexed, the last run into this index, its summary, and the next scheduled run.

    Args:
        manifest: the index manifest (:class:`index.manifest.Manifest`); read-only, so this
            works while another process holds the index.
        store: the state store.
        index_id: the index's id (:func:`index.identity.index_id_of`): runs and cursors of other indexes
            sharing the state store are not this index's; ``None`` (an index never opened) has none.
        names: the sources to report (sources only present in the index are added).
        next_runs: next fire time per source, from a running scheduler.
        schedules: a human description of each source's schedule (``"every 30m"``).

    Returns:
        One dict per source: ``source``, ``pages``, ``chunks``, ``last_run`` (ISO time or ``None``),
        ``last_status``, ``last_summary`` (a :class:`SyncSummary`, ``None`` before the first run), ``last_error``, ``next_run`` (ISO time or ``None``),
        ``schedule`` (or ``None``), ``cursor`` (the saved cursor's watermark, if any), and the
        index-time scan's page counts: ``pages_sensitive`` (pages with a credential or personal
        data), ``pages_injection`` (pages with instructions addressed to an assistant) and
        ``pages_unscanned`` (indexed before the scan existed; the next full listing scans them); and
        ``pages_unresolved_access``: pages readable by nobody because their read access could not be
        resolved (never cited until a later sync resolves it; :meth:`Manifest.unresolved_access`).
    """
    pages = manifest.all_pages()
    wanted = list(dict.fromkeys([*names, *sorted({p.source for p in pages})]))
    out = []
    for name in wanted:
        mine = [p for p in pages if p.source == name]
        runs = store.last_runs(name, limit=1, index_id=index_id) if index_id else []
        last = runs[0] if runs else None
        nxt = (next_runs or {}).get(name)
        cursor = (store.get_cursor(name, index_id=index_id) if index_id else None) or {}
        out.append({
            "source": name, "pages": len(mine), "chunks": sum(len(p.chunk_ids) for p in mine),
            "last_run": (last.finished_at or last.started_at).isoformat() if last else None,
            "last_status": last.status if last else None,
            "last_summary": SyncSummary.from_dict(last.summary) if last else None,
            "last_error": last.error if last else "",
            "next_run": nxt.isoformat() if nxt else None,
            "schedule": (schedules or {}).get(name),
            "watermark": cursor.get("watermark") or cursor.get("synced_at"),
            "pages_sensitive": sum(1 for p in mine if p.sensitive_chunks),
            "pages_injection": sum(1 for p in mine if p.injection_chunks),
            "pages_unscanned": sum(1 for p in mine if p.sensitive_chunks is None or p.injection_chunks is None),
            "pages_unresolved_access": sum(1 for p in mine if p.readable_by_nobody),
        })
    return out
