"""The id of a knowledge index: which index a sync cursor, a run record or a sync lock describes.

Several ``chatops serve`` replicas may share one state store (``DATABASE_URL``) while each keeps its own
index in its own data dir. A cursor says "this index holds every change up to here"; kept per source
alone, the replica that synced last would move it for all of them, and the others would never list
the edits made in the windows it synced. So cursors, runs and locks are keyed by the index's id.

Two kinds of id:

- **Embedded** (no ``QDRANT_URL``): a random id (``uuid4().hex``) kept in the manifest's key/value
  table (``meta``, key :data:`INDEX_ID_KEY`), made the first time the index is opened and kept across
  runs. Deleting the index folder, or clearing the index (another embedding model or schema version),
  makes a new one: the new index holds nothing, so no earlier cursor may describe it.
- **Shared** (``QDRANT_URL``): derived from the server's URL and the collection's name
  (:func:`shared_index_id`), so every replica that writes that collection computes the same id without
  asking anyone, and shares one cursor and one lock. It is also the ``scope`` of the index's manifest in
  the state database (:class:`~index.manifest.Manifest` with ``database_url``), so it is known before the
  manifest is opened. Derived rather than stored in the collection: the
  id must be known to processes that only read the manifest (``chatops status``) and cannot reach or
  may not write the collection, and it needs no write to a server another team may run. The price:
  a collection dropped and created again under the same name keeps its id, so its old cursor would
  say it is up to date; run ``chatops sync --full`` after recreating a collection. Two spellings of
  one server's address (an IP and a DNS name) give two ids, which is the safe direction: each keeps
  its own cursor and lists what it needs (more calls, no missed edits).
"""

from __future__ import annotations

import hashlib
import uuid
from urllib.parse import urlsplit

from .manifest import Manifest

__all__ = ["INDEX_ID_KEY", "SHARED_PREFIX", "shared_index_id", "index_id_of", "ensure_index_id"]

#: The manifest's metadata key holding the index id.
INDEX_ID_KEY = "index_id"
#: How a shared (``QDRANT_URL``) index id begins.
SHARED_PREFIX = "qdrant-"


def shared_index_id(qdrant_url: str, collection: str) -> str:
    """The id of the index held in ``collection`` on the Qdrant server at ``qdrant_url``.

    The URL is compared as scheme, lower-case host, port and path without a trailing slash (credentials,
    query and fragment dropped), so ``http://Qdrant:6333/`` and ``http://qdrant:6333`` give one id.

    Returns:
        ``"qdrant-"`` and 20 hex digits of a SHA-256 of the normalised URL and the collection.
    """
    parts = urlsplit(qdrant_url.strip())
    host = (parts.hostname or "").lower()
    where = f"{parts.scheme.lower()}://{host}{f':{parts.port}' if parts.port else ''}{parts.path.rstrip('/')}"
    return SHARED_PREFIX + hashlib.sha256(f"{where}\n{collection}".encode()).hexdigest()[:20]


def _scoped_id(manifest: Manifest, qdrant_url: str | None, collection: str) -> str | None:
    """The id a manifest in the state database is scoped by (``None`` for a manifest file).

    Raises:
        ValueError: when ``qdrant_url`` and ``collection`` name another index than the manifest's scope.
    """
    if manifest.scope is None:
        return None
    if qdrant_url and shared_index_id(qdrant_url, collection) != manifest.scope:
        raise ValueError(f"the manifest is scoped by {manifest.scope!r}, not by the id of collection {collection!r} "
                         f"on {qdrant_url} ({shared_index_id(qdrant_url, collection)!r})")
    return manifest.scope


def index_id_of(manifest: Manifest, qdrant_url: str | None = None, collection: str = "chunks") -> str | None:
    """The id of the index whose manifest is ``manifest`` (read only), or ``None`` for an index never
    opened (its manifest file has no id yet; nothing can have been recorded for it). A manifest in the
    state database answers its scope.

    Raises:
        ValueError: for a manifest in the state database scoped by another index than ``qdrant_url``'s.
    """
    scoped = _scoped_id(manifest, qdrant_url, collection)
    if scoped is not None:
        return scoped
    if qdrant_url:
        return shared_index_id(qdrant_url, collection)
    return manifest.get(INDEX_ID_KEY)


def ensure_index_id(manifest: Manifest, qdrant_url: str | None = None, collection: str = "chunks") -> str:
    """The index's id, made and stored in ``manifest`` when it has none (see the module docstring).

    The shared id is stored too (so readers of the manifest alone see which collection it described); a
    data dir that held a shared id and is opened without ``QDRANT_URL`` gets a new random one (its local
    Qdrant is not that collection). A manifest in the state database has its scope as its id.

    Raises:
        ValueError: for a manifest in the state database scoped by another index than ``qdrant_url``'s.
    """
    have = manifest.get(INDEX_ID_KEY)
    scoped = _scoped_id(manifest, qdrant_url, collection)
    if scoped is not None:
        want = scoped
    elif qdrant_url:
        want = shared_index_id(qdrant_url, collection)
    elif have and not have.startswith(SHARED_PREFIX):
        want = have
    else:  # new, or a data dir that wrote a shared collection before: its local Qdrant is another index
        want = uuid.uuid4().hex
    if have != want:
        manifest.set(INDEX_ID_KEY, want)
    return want
