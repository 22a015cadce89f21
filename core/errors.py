"""The errors of the index and its model, shared by every layer that opens an index (ground floor).

The tree, so callers can catch at the right level::

    ChatopsError                    base of every error a user can fix (connectors.errors.ConnectorError too)
    ├── EmbeddingError              the embedding model cannot be loaded or called
    ├── ChunkLimitError             a page would make more chunks than the per-page cap (it is skipped)
    └── IndexError_                 an index on disk is unusable
        ├── IndexCorruptError       an index file is damaged (cannot be opened or read); rebuild it
        ├── IndexLockedError        another process holds the index (local Qdrant is single-process)
        ├── IndexOutdatedError      the index was built before read access was recorded; rebuild it
        ├── IndexUnavailableError   a shared index's services (the Qdrant server of QDRANT_URL, the database
        │                           holding its manifest) cannot be reached, refused the key, failed, or
        │                           the database lacks the manifest's tables
        └── DiskFullError           a write failed for lack of space (ENOSPC, EFBIG, SQLite "disk is full")

Every message says what to do next.
"""

from __future__ import annotations

__all__ = [
    "ChatopsError",
    "EmbeddingError",
    "ChunkLimitError",
    "IndexError_",
    "IndexCorruptError",
    "IndexLockedError",
    "IndexOutdatedError",
    "IndexUnavailableError",
    "DiskFullError",
]


class ChatopsError(Exception):
    """Base of the errors a user or an operator can fix; each message says how."""


class EmbeddingError(ChatopsError):
    """The embedding model cannot be loaded or the embeddings API failed."""


class ChunkLimitError(ChatopsError, ValueError):
    """A page would make more chunks than ``ChunkerConfig.max_chunks_per_page``; the indexer skips it."""


class IndexError_(ChatopsError):
    """An index on disk is unusable. (Trailing underscore: ``IndexError`` is a builtin.)"""


class IndexCorruptError(IndexError_):
    """An index file is damaged: it exists but cannot be opened or read.

    The message names the damaged file or folder and says how to rebuild it.
    """


class IndexLockedError(IndexError_):
    """Another process holds the index open (local-mode Qdrant allows one process)."""


class IndexOutdatedError(IndexError_):
    """The index was built before each chunk recorded who may read it, so it cannot enforce access:
    readers refuse it (``chatops index --full`` rebuilds it)."""


class IndexUnavailableError(IndexError_):
    """A shared index's services cannot be used: the index server (``QDRANT_URL``) cannot be reached,
    refused the API key or failed a request, or the state database that holds the index's manifest
    (``DATABASE_URL``) cannot be reached or lacks the manifest's tables (not migrated: ``chatops db upgrade``).

    Nothing on disk is damaged: the same call may succeed once the service answers again. The message
    names the service, what it answered and what to check.
    """


class DiskFullError(IndexError_):
    """A write failed because the disk (or the process's file-size limit) is full.

    What was committed before stays consistent: the manifest's journal undoes a half-written page
    on the next run.
    """
