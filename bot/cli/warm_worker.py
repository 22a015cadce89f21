"""The warm ask worker (``python -m bot.cli.warm_worker``, started by ``chatops``; see :mod:`.warm`).

One process per data dir, started in the background (:func:`.warm.start_worker`) by a ``chatops ask`` that answered
itself, by ``chatops index`` and ``chatops sync`` when they finish, or by ``chatops ask --start-worker``, with that
command's environment and working directory. It holds ``run/ask.lock`` for its whole life (a second one exits at once),
imports what answering needs and resolves the settings, then listens on ``run/ask.sock`` (mode 0600 in a 0700
folder) while it loads the embedding model in a background thread (the local ONNX model with its graph optimised, as
indexing and ``chatops serve`` load it: 0.3-0.4 s more to load, once, and a new question's batch of 15-25 texts runs
20-30 % faster; its vectors differ from ``chatops ask``'s by less than 1e-5, and the embedding cache they share
already holds both kinds): a question that arrives first is answered at once when the embedding cache holds its
vectors, and otherwise waits for the load, not for a second one. After a second without a question it opens the
index once (holding its lock for that time, as a question does), so the dense snapshot's rows are read before the first
question (kept parsed while the store is
unchanged: :mod:`index.stores.dense_snapshot`). It answers one question per connection, one at a time:

1. the request's fingerprint (code version, working directory, the environment variables the settings are read
   from, ``.env``; :func:`.warm.fingerprint`) must equal its own, and the settings resolved again now must hash to
   what they did at start (secrets hashed, not kept in the clear): otherwise it answers ``stale`` and exits, and
   the client answers itself (and starts a worker of its own settings);
2. it runs what ``chatops ask`` runs, :func:`.asking.ask_here` under :func:`.run.run_command` (the same error
   mapping and exit status, the same permission logic: ``--as`` reads that person's groups anew), with its
   stdout and stderr captured, and sends them back. Nothing is cached from one question to the next but the
   imports and the model: the index is opened for each question and closed after it (so it holds the index's
   one-process lock only while answering, and ``chatops index`` or ``sync`` run as before between questions; a
   re-indexed page is seen by the next question), and so is the embedding cache.

It exits after ``ASK_WORKER_IDLE_SECONDS`` without a question, on SIGTERM or SIGINT, when its socket file is
removed or replaced, and after a stale request; it then removes its socket (if still its own) and releases the
lock. One line per event goes to ``run/ask-worker.log``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from . import warm

if TYPE_CHECKING:
    from app.settings import Settings
    from index.embeddings import Embedder

__all__ = ["Worker", "main", "settings_digest", "relevant_names"]

log = logging.getLogger("chatops.ask_worker")

#: Variables read on ``chatops ask``'s path besides the settings: the machine's zone (terminal commands), the user
#: name (the requester id, :func:`getpass.getuser`), the home folder (``~`` in paths) and the code's search path.
EXTRA_NAMES = frozenset({"tz", "home", "logname", "user", "lname", "username", "pythonpath"})


def relevant_names() -> frozenset[str]:
    """The environment variables (lower case) a worker and its client must agree on: every name a setting is read
    from (field names and aliases; the settings ignore case) and :data:`EXTRA_NAMES`."""
    from app.settings import setting_variables

    return EXTRA_NAMES | setting_variables()


def settings_digest(settings: Settings) -> str:
    """SHA-256 of the resolved settings, each secret replaced by its own SHA-256."""
    from pydantic import SecretStr

    values: dict[str, Any] = {}
    for name in type(settings).model_fields:
        value = getattr(settings, name)
        if isinstance(value, SecretStr):
            value = hashlib.sha256(value.get_secret_value().encode()).hexdigest()
        values[name] = value
    return hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()


class _Captured(io.StringIO):
    """A captured stream that says it is a terminal when the client's is (the log format follows it)."""

    def __init__(self, tty: bool = False) -> None:
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def _argv(ask: Any) -> list[str]:
    """``chatops ask``'s command line from the request's arguments (parsed again by the real parser).

    Raises:
        ValueError: not an object of arguments, or an argument of the wrong type.
    """
    if not isinstance(ask, dict):
        raise ValueError("no ask arguments")
    question, history, retriever = ask.get("question"), ask.get("history") or [], ask.get("retriever") or "hybrid"
    as_user = ask.get("as_user")
    if not (isinstance(question, str) and isinstance(history, list) and all(isinstance(h, str) for h in history)
            and isinstance(retriever, str) and isinstance(as_user, str | None)):
        raise ValueError("malformed ask arguments")
    argv = ["ask", "--retriever", retriever, "--no-worker"]
    for earlier in history:
        argv += ["--history", earlier]
    if ask.get("json"):
        argv.append("--json")
    if as_user is not None:
        argv += ["--as", as_user]
    return [*argv, "--", question]


class Worker:
    """The worker of one data dir (:class:`.warm.Place`), for the settings of this process's environment.

    Raises (from :meth:`__init__`):
        OSError: the lock is held (another worker) or the folder is not private.
    """

    def __init__(self, where: warm.Place) -> None:
        self.where = where
        if not where.make():
            raise OSError(f"{where.folder} is not a private folder")
        self._lock = open(where.lock, "a")  # noqa: SIM115 - held for the worker's life
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock.close()
            raise
        start = time.perf_counter()
        self.fingerprint = warm.fingerprint()  # before the imports: an edit after this makes every client stale
        from .settings import load_settings

        self.settings = load_settings(answers_on_stdout=True, terminal=True)
        self.digest = settings_digest(self.settings)
        self.names = relevant_names()
        self.model = self._model(self.settings)  # loaded in the background once listening (:meth:`serve`)
        self._preload()
        self.idle = self.settings.ask_worker_idle_seconds
        self._listener: socket.socket | None = None
        self._inode = 0
        self._start = start

    @staticmethod
    def _model(settings: Settings) -> Embedder | None:
        """The local embedding model, optimised as a long-lived process loads it, not loaded yet; ``None`` for an API
        model."""
        if settings.embedding_model not in ("", "local"):
            return None
        from index.embeddings import OnnxMiniLMEmbedder

        return OnnxMiniLMEmbedder(lazy=True, optimize=True)

    def _load_model(self) -> None:
        """Load the model (the background thread :meth:`serve` starts); a failure is logged, and the question that
        needs the model loads it again and reports the error as ``chatops ask`` does."""
        from index.embeddings import OnnxMiniLMEmbedder

        if not isinstance(self.model, OnnxMiniLMEmbedder):
            return
        start = time.perf_counter()
        try:
            self.model.load()
        except Exception as exc:
            log.warning("the embedding model did not load: %s", exc)
            return
        log.info("model loaded in %.2f s", time.perf_counter() - start)

    def _preload(self) -> None:
        """Import what answering imports (opening the index opens nothing: no lock is taken here)."""
        import agent.models  # noqa: F401
        import app.inbound  # noqa: F401
        import app.layout  # noqa: F401
        import app.turns  # noqa: F401
        import app.wiring  # noqa: F401
        import index.stores.dense_snapshot  # noqa: F401
        import index.stores.whoosh_store  # noqa: F401
        import screening  # noqa: F401
        from screening.scan import unexplained_on
        from screening.unexplained import preload

        if unexplained_on():
            preload()  # the fail-closed tier's word lists, read at the first sentence naming a credential

        from .. import cli_actions, console  # noqa: F401
        from .parser import build_parser

        self.parser = build_parser()

    def _warm_index(self) -> None:
        """Open the embedded index once and close it, so its dense snapshot's rows are read and checked now, not at
        the first question (they are kept parsed while the store is unchanged: 0.45-0.6 s on a 10k-chunk handbook).
        Only when a snapshot exists (never creates an index); a failure (the index locked by an index run, damage) is
        logged and left to the first question, which opens the index as ``chatops ask`` does."""
        from app.wiring import build_embedder, open_index
        from index.stores.dense_snapshot import snapshot_file

        folder = self.settings.index_dir / "qdrant"
        if self.settings.qdrant_url or not snapshot_file(folder, self.settings.qdrant_collection).is_file():
            return
        start = time.perf_counter()
        try:
            embedder = build_embedder(self.settings, lazy_model=True, model=self.model)
            try:
                open_index(self.settings, embedder).close()
            finally:
                embedder.cache.close()
        except Exception as exc:
            log.info("the index was not read ahead (%s: %s)", type(exc).__name__, exc)
            return
        log.info("index read ahead in %.2f s", time.perf_counter() - start)

    def stale(self, request: dict) -> str:
        """What differs between a request's fingerprint and this worker's (``""``: nothing)."""
        own = self.fingerprint
        for key in ("v", "code", "cwd", "dotenv"):
            if request.get(key) != own[key]:
                return key
        env = request.get("env")
        if not isinstance(env, dict):
            return "env"
        mine = {k: v for k, v in own["env"].items() if k.lower() in self.names}
        theirs = {k: v for k, v in env.items() if isinstance(k, str) and k.lower() in self.names}
        if mine != theirs:
            return "environment: " + ", ".join(sorted(k for k in mine.keys() | theirs.keys()
                                                      if mine.get(k) != theirs.get(k)))
        return ""

    def serve(self) -> None:
        """Listen and answer until idle, stale, signalled or displaced; then clean up."""
        signal.signal(signal.SIGTERM, _exit)
        signal.signal(signal.SIGINT, _exit)
        try:
            self._bind()
            log.info("pid %d ready in %.2f s (model %s)", os.getpid(), time.perf_counter() - self._start,
                     "loading" if self.model is not None else "per question")
            threading.Thread(target=self._load_model, name="load-model", daemon=True).start()
            last = time.monotonic()
            warmed = False
            while True:
                assert self._listener is not None
                try:
                    conn, _ = self._listener.accept()
                except TimeoutError:
                    if not warmed:  # a second without a first question: read the index's snapshot ahead
                        warmed = True
                        self._warm_index()
                    if time.monotonic() - last > self.idle:
                        log.info("idle for %.0f s: exiting", self.idle)
                        return
                    if not self._still_mine():
                        log.info("the socket file was removed or replaced: exiting")
                        return
                    continue
                with conn:
                    keep = self._answer(conn)
                warmed = True  # the question read it
                last = time.monotonic()
                if not keep:
                    return
        except SystemExit:
            log.info("signalled: exiting")
        finally:
            self.close()

    def _bind(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.where.socket.unlink()  # we hold the lock: no live worker owns it
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            with warm._short(self.where.socket) as address:
                listener.bind(address)
        finally:
            os.umask(old)
        os.chmod(self.where.socket, 0o600)
        self._inode = os.stat(self.where.socket).st_ino
        listener.listen(16)
        listener.settimeout(1.0)
        self._listener = listener

    def _still_mine(self) -> bool:
        try:
            return os.stat(self.where.socket).st_ino == self._inode
        except OSError:
            return False

    def _send(self, conn: socket.socket, message: dict) -> None:
        conn.sendall(json.dumps(message, ensure_ascii=False).encode("utf-8", "surrogateescape") + b"\n")

    def _answer(self, conn: socket.socket) -> bool:
        """Answer one connection; False when the worker should exit (a stale request)."""
        conn.settimeout(warm.ACCEPT_TIMEOUT)
        try:
            pid, uid = warm.peer(conn)
            if uid != os.getuid():
                log.warning("refused a connection from uid %d", uid)
                return True
            with conn.makefile("rb") as stream:
                request = warm.read_line(stream)
            start = time.perf_counter()
            why = self.stale(request)
            out, err = _Captured(), _Captured(bool(request.get("stderr_tty")))
            settings = None
            if not why:
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    settings = self._settings()
                why = "settings" if settings is None else ""
            if why or settings is None:
                log.info("stale request (%s differs): exiting", why)
                self.close()  # the socket goes first, so the client's next worker can bind it
                self._send(conn, {"status": "stale", "why": why})
                return False
            argv = _argv(request.get("ask"))
            self._send(conn, {"status": "accepted", "pid": os.getpid()})
            rc = self._run(argv, settings, out, err)
            conn.settimeout(warm.ANSWER_TIMEOUT)
            self._send(conn, {"status": "ok", "rc": rc, "stdout": out.getvalue(), "stderr": err.getvalue()})
            log.info("answered pid %d (exit %d) in %.3f s", pid, rc, time.perf_counter() - start)
        except (OSError, ValueError) as exc:
            log.warning("dropped a request: %s", exc)
        except Exception:  # a bug on the ask path: the client answers itself (and shows it)
            log.exception("failed to answer; the client answers itself")
        return True

    def _settings(self) -> Settings | None:
        """The settings resolved now, as ``chatops ask`` resolves them; ``None`` unless they hash as at start."""
        from .settings import load_settings

        try:
            settings = load_settings(answers_on_stdout=True, terminal=True)
        except Exception:
            return None
        return settings if settings_digest(settings) == self.digest else None

    def _run(self, argv: list[str], settings: Settings, out: _Captured, err: _Captured) -> int:
        """``chatops ask`` with this command line and settings, its output in ``out`` and ``err``: its exit status."""
        from ..terminal import install
        from .asking import ask_here
        from .run import run_command

        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                with install():
                    args = self.parser.parse_args(argv)
            except SystemExit as exc:  # argparse's own error (printed to err)
                return int(exc.code or 0) if isinstance(exc.code, int) else 2
            with install(as_json=bool(args.json)):
                return run_command(args, lambda a: ask_here(a, settings, model=self.model))

    def close(self) -> None:
        """Stop listening, remove the socket if it is still ours, release the lock (idempotent)."""
        if self._listener is not None:
            if self._still_mine():
                with contextlib.suppress(OSError):
                    self.where.socket.unlink()
            self._listener.close()
            self._listener = None
        if not self._lock.closed:
            self._lock.close()  # releases the flock


def _exit(signum: int, frame: Any) -> None:
    raise SystemExit(0)


def main() -> int:
    """Start a worker for the data dir of this environment; 0 also when another holds the lock."""
    handler = logging.StreamHandler(sys.stderr)  # run/ask-worker.log (start_worker's redirect)
    handler.setFormatter(logging.Formatter("%(asctime)s ask worker %(process)d: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False  # load_settings replaces the root logger's handlers on each question
    try:
        worker = Worker(warm.place())
    except OSError as exc:
        log.info("not started: %s", exc)
        return 0
    except Exception:
        log.exception("not started")
        return 1
    worker.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
