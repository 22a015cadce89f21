"""Reading a file inside a folder without following links or blocking: for the ``folder:`` source.

A folder source is often a git checkout anyone in the company can push to, so a page there must
not be a door to the rest of the machine: ``it/env.md -> /proc/self/environ`` would index the
bot's own secrets, a link to ``/etc/passwd`` would be quoted as a page, and a FIFO named
``pipe.md`` would hang the sync forever while it holds its lock.

:func:`read_regular_file` reads only a *regular file* that lies *inside* the root:

1. ``lstat``: a symbolic link or anything that is not a regular file (FIFO, socket, device,
   directory) is refused before it is opened;
2. the path, resolved, must stay under the (resolved) root;
3. the file is opened relative to the root one component at a time (``openat`` with
   ``O_NOFOLLOW``, ``O_DIRECTORY`` for the folders), so a folder swapped for a link after the
   listing is not followed either, and with ``O_NONBLOCK``, so a FIFO swapped in cannot block;
4. ``fstat`` of the opened descriptor must again be a regular file;
5. at most ``limit + 1`` bytes are read (``/proc`` files report size 0, so the size is checked on
   what was read, not on what ``stat`` claims).

Every refusal raises :class:`RefusedFileError` with a reason that says what to do.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

__all__ = ["RefusedFileError", "read_regular_file"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


class RefusedFileError(ValueError):
    """A file the folder source will not read (a link, a special file, outside the root, too large)."""


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def read_regular_file(root: Path, path: Path, limit: int) -> tuple[bytes, float]:
    """Read the regular file ``path`` under ``root`` (see the module docstring).

    Args:
        root: the source's root folder, already resolved (absolute, no links).
        path: a file under ``root`` as listed by ``os.walk`` (not resolved).
        limit: the largest size accepted, in bytes.

    Returns:
        ``(content, mtime)``: the bytes and the modification time (seconds since the epoch).

    Raises:
        RefusedFileError: a symbolic link, a special file, a path outside ``root`` or a file over ``limit``.
        OSError: the file vanished or cannot be opened.
    """
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise RefusedFileError("is a symbolic link; links are not followed (only regular files inside the folder "
                               "are indexed): copy the page into the folder instead")
    if not stat.S_ISREG(st.st_mode):
        raise RefusedFileError(f"is {_kind(st.st_mode)}, not a regular file; only regular files are indexed")
    rel = path.relative_to(root)
    if not path.resolve().is_relative_to(root) or ".." in rel.parts:
        raise RefusedFileError("resolves outside the folder; only files inside the folder are indexed")
    fd = _open_beneath(root, rel.parts)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise RefusedFileError(f"is {_kind(st.st_mode)}, not a regular file; only regular files are indexed")
        if st.st_size > limit:
            raise RefusedFileError(f"file is {st.st_size} bytes, over the {limit}-byte limit; split the page")
        chunks: list[bytes] = []
        got = 0
        while got <= limit:
            data = os.read(fd, min(1 << 20, limit + 1 - got))
            if not data:
                break
            chunks.append(data)
            got += len(data)
        if got > limit:
            raise RefusedFileError(f"file is over the {limit}-byte limit; split the page")
        return b"".join(chunks), st.st_mtime
    finally:
        os.close(fd)


def _open_beneath(root: Path, parts: tuple[str, ...]) -> int:
    """Open ``root/parts...`` read-only, following no link on the way (``openat`` per component)."""
    flags = os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC
    if os.open not in os.supports_dir_fd or not _NOFOLLOW:  # pragma: no cover - not on Linux or macOS
        return os.open(root.joinpath(*parts), flags)
    try:
        dfd = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        try:
            for part in parts[:-1]:
                nxt = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=dfd)
                os.close(dfd)
                dfd = nxt
            return os.open(parts[-1], flags, dir_fd=dfd)
        finally:
            os.close(dfd)
    except OSError as exc:
        if exc.errno in {errno.ELOOP, errno.ENOTDIR, errno.EMLINK}:
            raise RefusedFileError("a link (or a file where a folder should be) is on its path; links are not "
                                   "followed (only regular files inside the folder are indexed)") from exc
        raise
