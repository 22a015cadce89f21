"""The source contract: what every connector offers the indexer and the sync engine.

Two :class:`typing.Protocol` classes, checked structurally (a source does not inherit from them)
and at run time (``isinstance``) where the engine must choose a path:

- :class:`Source`: a name and a complete listing (:meth:`Source.scan`), as the ``folder:PATH``
  source and every connector offer (``chatops index``).
- :class:`IncrementalSource`: a :class:`Source` that can also say what changed since a saved
  cursor (:meth:`IncrementalSource.sync`, used by :class:`index.sync.SyncEngine`), links chunks to
  its own heading anchors, counts the HTTP requests it sent and has an HTTP client to close
  (Confluence, MediaWiki).

Two optional abilities, also structural protocols (issue 11, read access):

- :class:`MembershipSource`: a source whose pages' access names groups of its own, and which read
  those groups' members during its last run (:meth:`MembershipSource.memberships`); the sync engine
  stores them in the state store so askers can be matched to ``group:<source>/<group>`` principals.
- :class:`PermissionSource`: a :class:`MembershipSource` that can re-read the access of every indexed
  page without fetching bodies (:meth:`PermissionSource.permissions`), for the permission sync
  (:meth:`index.sync.SyncEngine.run_permissions`; Confluence).

What a scan and a sync yield is the contract of :mod:`core.models` (``Document``,
``Tombstone``), :class:`connectors.folder.SkippedPage` (a page that could not be read this time)
and :class:`connectors.cursor.CursorUpdate` (the last item of a sync). ``tests/contracts`` holds
one test suite that every source passes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol, runtime_checkable

from core.access import Access
from .cursor import CursorUpdate
from .folder import SkippedPage
from core.models import Document, Tombstone

__all__ = ["Source", "IncrementalSource", "MembershipSource", "PermissionSource", "ScanItem", "SyncItem"]

#: What :meth:`Source.scan` yields.
ScanItem = Document | Tombstone | SkippedPage
#: What :meth:`IncrementalSource.sync` yields (one :class:`CursorUpdate`, last).
SyncItem = Document | Tombstone | SkippedPage | CursorUpdate


@runtime_checkable
class Source(Protocol):
    """A source of pages.

    Attributes:
        name: the source name stored with every chunk (unique among the configured sources).
        complete_listing: True when :meth:`scan` lists every live page, so a page it does not
            yield (after a scan that finished) was deleted and leaves the index.
    """

    name: str
    complete_listing: bool

    def scan(self) -> Iterator[ScanItem]:
        """Yield every current page (:class:`Document`), pages that could not be read
        (:class:`SkippedPage`, with the reason) and, for sources that know them, deletions (:class:`Tombstone`).

        Raises:
            SourceUnavailableError: (and subclasses) when the source cannot be listed at all.
        """
        ...


@runtime_checkable
class IncrementalSource(Source, Protocol):
    """A :class:`Source` that syncs from a cursor (the sync engine's incremental path).

    Attributes:
        calls: HTTP requests sent so far, retries included (the engine reports the run's difference).
        retries: of which retries.
    """

    @property
    def calls(self) -> int:
        """HTTP requests sent so far (retries included)."""
        ...

    @property
    def retries(self) -> int:
        """HTTP requests sent again after a failure, so far."""
        ...

    def sync(self, cursor: Mapping[str, Any] | None, known: Iterable[str], full: bool = False) -> Iterator[SyncItem]:
        """Yield what changed since ``cursor``, the deletions, then one :class:`CursorUpdate` last.

        Args:
            cursor: the cursor saved after the last successful run (``None``: first run); it may
                hold :data:`connectors.cursor.RETRY_DOCS`, doc ids to fetch again.
            known: doc ids of this source in the index (for pruning).
            full: list and fetch every page, ignoring the watermark.

        Raises:
            SourceUnavailableError: (and subclasses) when a listing fails; nothing after the
                failure is yielded, so no deletion happens and no cursor is saved.
        """
        ...

    def section_anchor(self, doc: Document, heading: str) -> str:
        """The URL fragment of ``heading`` on ``doc``'s page (``""``: link the page itself)."""
        ...

    def close(self) -> None:
        """Release the source's HTTP client."""
        ...


@runtime_checkable
class MembershipSource(Protocol):
    """A source that knows the members of the groups its pages' access names."""

    name: str

    def memberships(self) -> Mapping[str, frozenset[str]]:
        """The members' e-mails (lower case) of each group read during the last run, by group name as
        it appears in ``group:<source>/<name>``; a group mapped to no one has no members (or could not
        be read: fail closed). The engine replaces each listed group's stored members."""
        ...


@runtime_checkable
class PermissionSource(MembershipSource, Protocol):
    """A :class:`MembershipSource` whose pages' read access can be re-read without their bodies.

    Attributes:
        calls, retries: as :class:`IncrementalSource` (the engine reports the run's difference).
    """

    @property
    def calls(self) -> int:
        """HTTP requests sent so far (retries included)."""
        ...

    @property
    def retries(self) -> int:
        """HTTP requests sent again after a failure, so far."""
        ...

    def permissions(self, known: Iterable[str]) -> Iterator[tuple[str, Access]]:
        """``(doc_id, access)`` for every page of ``known`` (doc ids in the index), read now; a page
        whose permissions could not be read gets :meth:`Access.nobody` (never an exception).

        Raises:
            SourceUnavailableError: (and subclasses) when the listing itself fails.
        """
        ...
