"""``chatops ask``'s side of the warm ask worker (issue 24 item 12): find it, ask it, start it. Standard library only.

A shell question is one process that spends most of its time importing and loading the model (see
docs/explanation/operating.md). The ask worker (:mod:`.warm_worker`, as mypy's dmypy or eslint_d) is a background
process per data dir that has done that once; ``chatops ask`` first hands it the question and prints its reply, and
only when none answers does it answer itself, as before, and then (when enabled) starts one for the next question.
This module runs before any heavy import: it costs a ``stat``, a hash of the code's file times and one connection.

When (:func:`enabled`): ``ASK_WORKER`` (environment or ``.env``, as :class:`app.settings.Settings` reads it):
``auto`` (the default) only when stdin and stdout are both terminals, a person at a shell, so scripts, pipes and
tests never start one or talk to one; ``on`` always; ``off`` never; ``chatops ask --no-worker`` is ``off`` for one
question.

Where (:class:`Place`): the folder ``run/`` of the data dir (``CHATOPS_DATA_DIR``, resolved as the settings resolve
it), mode 0700 and owned by the user, else it is not used: ``ask.sock`` (a Unix socket, mode 0600), ``ask.lock``
(held by the live worker, so at most one per data dir) and ``ask-worker.log`` (one line per question served).

The exchange (one request per connection, one JSON object per line, at most :data:`MAX_LINE` bytes): the client
sends ``{"v", "code", "cwd", "env", "dotenv", "stderr_tty", "ask"}``: the code version (:func:`code_version`), the
working directory, a SHA-256 per environment variable (name=value: no secret in the clear), the ``.env`` file's
SHA-256, and ``ask``, the arguments of ``chatops ask`` (question, history, json, retriever, as_user). The worker
answers ``{"status": "stale"}`` and exits when any of those that the settings are read from differs from its own
(:func:`fingerprint`), else ``{"status": "accepted", "pid"}`` at once and then
``{"status": "ok", "rc", "stdout", "stderr"}`` when done: what ``chatops ask`` would have printed and its exit status.

A worker that is starting (it holds the lock, and has not bound its socket yet: ``chatops index`` or the last question
started it moments ago) is waited for, up to :data:`START_WAIT` s, rather than doing the same imports and model load
a second time beside it on the same cores; the wait ends at once when it exits or fails (the lock is released).

Fail safe (:func:`ask_worker` returns ``None`` and the client answers itself): no socket and no worker starting, or
one that did not listen within :data:`START_WAIT` s; a socket nobody listens on (removed when no worker holds the lock,
so it never blocks the next one); a peer that is another user; no
``accepted`` within :data:`ACCEPT_TIMEOUT` s (a worker busy with another question); no answer within
:data:`ANSWER_TIMEOUT` s after ``accepted``, or a reply that is not what was expected (the worker is then sent
SIGTERM, when its command line in ``/proc`` is a worker's); ``stale``. Never an exception.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator
from typing import BinaryIO
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Place", "Reply", "PROTOCOL", "PACKAGES", "MAX_LINE", "ACCEPT_TIMEOUT", "ANSWER_TIMEOUT", "START_WAIT",
           "ask_worker", "code_version", "fingerprint", "enabled", "mode", "place", "start_worker", "warm_up",
           "read_line", "peer"]

#: The protocol version: a worker speaking another answers ``stale``.
PROTOCOL = 1
#: The project's top-level packages (pyproject's ``packages.find``; a test keeps them equal): their files'
#: modification times and sizes are the code version.
PACKAGES = ("bot", "app", "agent", "tools", "index", "connectors", "core", "state", "screening", "telemetry")
#: Largest request or reply line, bytes.
MAX_LINE = 16 * 1024 * 1024
#: Seconds to connect and be accepted (the worker checks the request and says so at once).
ACCEPT_TIMEOUT = 3.0
#: Seconds the worker may take to answer (a new question loads nothing: 0.1-1 s on a loaded machine).
ANSWER_TIMEOUT = 30.0
#: Seconds to wait for a worker that is starting (lock held, socket not bound yet) before answering locally: its
#: start-up (imports, settings, the model) takes 1.5-3 s on 2 cores, 5-8 s under a load average of 6-8.
START_WAIT = 15.0
#: ``ask-worker.log`` is started afresh past this size, bytes.
MAX_LOG = 1024 * 1024
#: The longest socket path bound or connected directly (AF_UNIX allows 107 bytes); longer: relative to its folder.
_SUN_PATH = 100


@dataclass(frozen=True)
class Place:
    """The worker's files under a data dir's ``run/`` folder."""

    folder: Path

    @property
    def socket(self) -> Path:
        return self.folder / "ask.sock"

    @property
    def lock(self) -> Path:
        return self.folder / "ask.lock"

    @property
    def log(self) -> Path:
        return self.folder / "ask-worker.log"

    def private(self) -> bool:
        """True when the folder exists, is a real folder of this user, and no one else may enter it (0700)."""
        try:
            st = os.lstat(self.folder)
        except OSError:
            return False
        import stat

        return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077

    def make(self) -> bool:
        """Create the folder (0700) when missing; True when it is :meth:`private`."""
        with contextlib.suppress(OSError):
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        return self.private()


@dataclass(frozen=True)
class Reply:
    """What the worker printed for a question: ``chatops ask``'s exit status, stdout and stderr; its pid."""

    rc: int
    stdout: str
    stderr: str
    pid: int


def _setting(name: str, default: str) -> str:
    """A setting as :class:`app.settings.Settings` finds it, without importing it: the environment (any case),
    else ``.env`` in the working directory (python-dotenv, which pydantic-settings reads it with), else ``default``."""
    for key, value in os.environ.items():
        if key.lower() == name:
            return value
    if os.path.isfile(".env"):
        try:
            from dotenv import dotenv_values

            for entry, found in dotenv_values(".env", encoding="utf-8").items():
                if entry.lower() == name and found is not None:
                    return found
        except Exception:  # an unreadable .env: the settings will say what is wrong with it
            pass
    return default


def mode(no_worker: bool = False) -> str:
    """``on``, ``off`` or ``auto`` (``ASK_WORKER``; ``off`` with ``--no-worker``; an unknown value is ``off``)."""
    if no_worker:
        return "off"
    value = _setting("ask_worker", "auto").strip().lower()
    return value if value in {"auto", "on", "off"} else "off"


def enabled(no_worker: bool = False, setting: str | None = None) -> bool:
    """Whether to use (and start) a worker: ``setting`` (the resolved ``ASK_WORKER``, default :func:`mode`) is ``on``,
    or ``auto`` with stdin and stdout both terminals."""
    value = "off" if no_worker else (setting or mode())
    if value == "auto":
        return sys.stdin.isatty() and sys.stdout.isatty()
    return value == "on"


def place() -> Place:
    """The ``run/`` folder of the data dir in use (``CHATOPS_DATA_DIR``, default ``.chatops``, resolved from here)."""
    data = Path(_setting("chatops_data_dir", ".chatops")).expanduser().resolve()
    return Place(data / "run")


def code_version() -> str:
    """A hash of the running code: the Python build, ``PYTHONPATH``, the site-packages folders' modification times
    (an install or upgrade changes them) and every file's path, time and size under the project's packages
    (:data:`PACKAGES`). Editing a module, pulling or reinstalling changes it. 2-10 ms."""
    import site

    h = hashlib.sha256()
    h.update(f"{sys.version}\0{sys.prefix}\0{os.environ.get('PYTHONPATH', '')}\0".encode())
    for folder in site.getsitepackages():
        with contextlib.suppress(OSError):
            h.update(f"{folder}\0{os.stat(folder).st_mtime_ns}\0".encode())
    root = Path(__file__).resolve().parents[2]
    for package in PACKAGES:
        for dirpath, dirnames, filenames in os.walk(root / package):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                path = os.path.join(dirpath, name)
                with contextlib.suppress(OSError):
                    st = os.stat(path)
                    h.update(f"{path}\0{st.st_mtime_ns}\0{st.st_size}\0".encode())
    return h.hexdigest()


def _sha(text: str | bytes) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text).hexdigest()


def fingerprint(code: str | None = None) -> dict:
    """What the settings are read from, as this process sees it: ``code`` (:func:`code_version`), ``cwd``, ``env``
    (variable name -> SHA-256 of ``name=value``) and ``dotenv`` (SHA-256 of ``./.env``, ``""`` without one)."""
    try:
        dotenv = _sha(Path(".env").read_bytes())
    except OSError:
        dotenv = ""
    return {"v": PROTOCOL, "code": code or code_version(), "cwd": os.getcwd(),
            "env": {k: _sha(f"{k}={v}") for k, v in os.environ.items()}, "dotenv": dotenv}


@contextlib.contextmanager
def _short(path: Path) -> Iterator[str]:
    """The address of socket ``path``: itself, or (too long for AF_UNIX) its name with its folder as the working
    directory for the duration (the client and the worker are single-threaded when they bind or connect)."""
    if len(os.fsencode(path)) <= _SUN_PATH:
        yield str(path)
        return
    here = os.getcwd()
    os.chdir(path.parent)
    try:
        yield path.name
    finally:
        os.chdir(here)


def peer(conn: socket.socket) -> tuple[int, int]:
    """The other end's (pid, uid) (Linux ``SO_PEERCRED``; elsewhere (0, this user): the folder's mode protects it)."""
    if not hasattr(socket, "SO_PEERCRED"):
        return 0, os.getuid()
    pid, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return pid, uid


def read_line(stream: BinaryIO) -> dict:
    """One JSON object line from ``stream`` (a socket's ``makefile("rb")``: buffered, so a line that arrives in the
    same packet as the one before it is kept for the next call; the socket's timeout applies to each read).

    Raises:
        OSError: the connection failed or timed out. ValueError: no full line, too long, or not a JSON object.
    """
    line = stream.readline(MAX_LINE + 1)
    if not line.endswith(b"\n"):
        raise ValueError("line too long" if len(line) > MAX_LINE else "the connection closed before a full line")
    value = json.loads(line)
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value


def connect(where: Place, timeout: float, wait: float = 0.0) -> socket.socket | None:
    """A connection to the worker of ``where``, else ``None``: no private folder, no socket, or a socket nobody
    listens on (then removed, unless a worker holds the lock: one starting up). With ``wait`` (seconds), a worker
    that is starting (it holds the lock, its socket not bound or not listening yet) is waited for that long, as long
    as it holds the lock."""
    import time

    if not where.private():
        return None
    deadline = time.monotonic() + wait
    while True:
        conn = _connect_once(where, timeout)
        if conn is not None or time.monotonic() >= deadline or not _starting(where):
            return conn
        time.sleep(0.05)


def _connect_once(where: Place, timeout: float) -> socket.socket | None:
    if not where.socket.exists():
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(timeout)
    try:
        with _short(where.socket) as address:
            conn.connect(address)
    except OSError:
        conn.close()
        _remove_stale(where)
        return None
    return conn


def _starting(where: Place) -> bool:
    """True when a live process holds ``where``'s lock (a worker, starting or listening)."""
    import fcntl

    if not where.lock.exists():
        return False
    try:
        with open(where.lock, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:  # held
        return True
    except OSError:  # the lock cannot be opened: nothing to wait for
        return False
    return False


def _remove_stale(where: Place) -> None:
    """Remove a socket left by a worker that died (``kill -9``, a crash): only when no live worker holds the lock."""
    import fcntl

    try:
        with open(where.lock, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            with contextlib.suppress(FileNotFoundError):
                where.socket.unlink()
    except OSError:  # held: a worker is starting; or the lock cannot be opened
        pass


def ask_worker(ask: dict, where: Place | None = None) -> Reply | None:
    """``chatops ask``'s answer from the worker, or ``None`` when it cannot give it (see the module docstring).

    Args:
        ask: the ``chatops ask`` arguments: question (str), history (list of str), json (bool), retriever (str),
            as_user (str or None).
    """
    where = where or place()
    conn = connect(where, ACCEPT_TIMEOUT, wait=START_WAIT)
    if conn is None:
        return None
    pid = 0
    stream = conn.makefile("rb")  # closed with the socket below (the socket's file stays open while it is)
    try:
        pid, uid = peer(conn)
        if uid != os.getuid():
            pid = 0
            return None
        request = {**fingerprint(), "stderr_tty": sys.stderr.isatty(), "ask": ask}
        conn.sendall(json.dumps(request).encode("utf-8", "surrogateescape") + b"\n")
        try:
            first = read_line(stream)
        except TimeoutError:
            pid = 0  # busy with another question, or starting to hang: leave it (its next client may stop it)
            return None
        if first.get("status") != "accepted":
            pid = 0  # stale: the worker exits by itself
            return None
        conn.settimeout(ANSWER_TIMEOUT)
        done = read_line(stream)
        if done.get("status") != "ok" or not isinstance(done.get("rc"), int) or not all(
                isinstance(done.get(k), str) for k in ("stdout", "stderr")):
            raise ValueError("a malformed reply")
        reply, pid = Reply(done["rc"], done["stdout"], done["stderr"], int(first.get("pid") or pid)), 0
        return reply
    except (OSError, ValueError):  # timed out, crashed, or not our protocol: answer locally
        return None
    finally:
        stream.close()
        conn.close()
        if pid > 0:  # a worker that hung or spoke nonsense: stop it, the next question starts a sound one
            _stop(pid)


def _stop(pid: int) -> None:
    """SIGTERM to ``pid`` if it is an ask worker (its command line says so: whatever else listens there is left)."""
    try:
        if b"bot.cli.warm_worker" in Path(f"/proc/{pid}/cmdline").read_bytes():
            os.kill(pid, signal.SIGTERM)
    except OSError:
        pass


def start_worker(where: Place | None = None) -> bool:
    """Start a worker in the background for the next question (this environment and working directory), unless one
    holds the lock already; True when one was started. Its output goes to :attr:`Place.log`."""
    where = where or place()
    if not where.make():
        return False
    import fcntl

    try:
        with open(where.lock, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False  # a worker is alive (or starting)
    with contextlib.suppress(OSError):
        if where.log.stat().st_size > MAX_LOG:
            where.log.unlink()  # one line per start, question and exit: a fresh log now and then
    with open(where.log, "ab") as log:
        # -P: the modules this command runs, not a bot/ package that the working directory may hold
        subprocess.Popen([sys.executable, "-P", "-m", "bot.cli.warm_worker"], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=log, start_new_session=True, close_fds=True)
    return True


def warm_up(setting: str | None = None) -> bool:
    """Start this data dir's worker now when the worker is :func:`enabled` (``setting``: the resolved ``ASK_WORKER``),
    so that the next ``chatops ask`` finds it warm: what ``chatops index`` and ``sync`` do when they finish, and
    ``chatops ask --start-worker``. True when one was started (False: disabled, or one is alive or starting)."""
    return enabled(False, setting) and start_worker()
