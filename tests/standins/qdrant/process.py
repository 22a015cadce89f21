"""The Qdrant stand-in in a process of its own, for tests with several client processes."""

from __future__ import annotations

import argparse
import os
import re
import select
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx

from tests.standins.qdrant.engine import QdrantStandIn
from tests.standins.qdrant.model import CONTROL, LoggedRequest


class QdrantStandInProcess:
    """A stand-in in its own process (``python -m tests.standins.qdrant``), for tests with several client
    processes; a context manager. Same knobs as :class:`QdrantStandIn`; faults and the log go over HTTP.

    Args:
        path: local mode's folder (``None``: in memory).
        api_key, read_only_api_key, strict: as for :class:`QdrantStandIn`.
        keep_bodies: keep request bodies in the log.
        startup_timeout: seconds to wait for the URL line.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, api_key: str | None = None,
                 read_only_api_key: str | None = None, strict: bool = False, keep_bodies: bool = False,
                 startup_timeout: float = 30.0) -> None:
        cmd = [sys.executable, "-m", "tests.standins.qdrant", "--port", "0"]
        cmd += ["--path", str(path)] if path is not None else []
        cmd += ["--api-key", api_key] if api_key else []
        cmd += ["--read-only-api-key", read_only_api_key] if read_only_api_key else []
        cmd += ["--strict"] if strict else []
        cmd += ["--keep-bodies"] if keep_bodies else []
        root = Path(__file__).resolve().parents[3]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
        self.proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE, text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], startup_timeout)
        line = self.proc.stdout.readline().strip() if ready else ""  # type: ignore[union-attr]
        if not line.startswith("http://"):
            self.stop()
            raise RuntimeError(f"the Qdrant stand-in did not start (first line {line!r}, exit {self.proc.poll()})")
        #: ``http://127.0.0.1:PORT``
        self.url = line
        self._http = httpx.Client(base_url=line + CONTROL.rstrip("/"), timeout=10)

    @property
    def pid(self) -> int:
        """The stand-in's process id."""
        return self.proc.pid

    @property
    def requests(self) -> list[LoggedRequest]:
        """Every request the stand-in received so far (fetched now)."""
        return [LoggedRequest(**r) for r in self._http.get("/requests").raise_for_status().json()]

    def count(self, pattern: str, method: str | None = None) -> int:
        """Requests so far whose path matches the regex ``pattern``, of ``method`` if given."""
        rx = re.compile(pattern)
        return sum(1 for r in self.requests if rx.search(r.path) and method in (None, r.method))

    def fail(self, pattern: str, status: int = 500, times: int = 1, *, skip: int = 0,
             error: str = "Service internal error: injected fault") -> None:
        """As :meth:`QdrantStandIn.fail`."""
        self._fault(kind="fail", pattern=pattern, status=status, times=times, skip=skip, error=error)

    def drop(self, pattern: str, times: int = 1, *, skip: int = 0) -> None:
        """As :meth:`QdrantStandIn.drop`."""
        self._fault(kind="drop", pattern=pattern, times=times, skip=skip)

    def slow(self, pattern: str, seconds: float, times: int = 1_000_000, *, skip: int = 0) -> None:
        """As :meth:`QdrantStandIn.slow`."""
        self._fault(kind="slow", pattern=pattern, seconds=seconds, times=times, skip=skip)

    def _fault(self, **args: Any) -> None:
        self._http.post("/faults", json=args).raise_for_status()

    def reset(self) -> None:
        """Forget every fault and the request log."""
        self._http.post("/reset").raise_for_status()

    def stop(self) -> None:
        """SIGTERM, then wait (the stand-in closes its engine and exits 0)."""
        if getattr(self, "_http", None) is not None:
            self._http.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> QdrantStandInProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.standins.qdrant``: serve until SIGTERM/SIGINT, the URL on the first stdout line."""
    parser = argparse.ArgumentParser(prog="python -m tests.standins.qdrant", description="A stand-in Qdrant server on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--path", help="local mode's folder (default: in memory)")
    parser.add_argument("--api-key", help="require this key (api-key header or Authorization: Bearer)")
    parser.add_argument("--read-only-api-key", help="a key that may only read")
    parser.add_argument("--strict", action="store_true", help="refuse filters on fields without a payload index")
    parser.add_argument("--keep-bodies", action="store_true", help="keep request bodies in the request log")
    args = parser.parse_args(argv)
    standin = QdrantStandIn(args.path, api_key=args.api_key, read_only_api_key=args.read_only_api_key,
                            strict=args.strict, port=args.port, keep_bodies=args.keep_bodies)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    standin.start()
    print(standin.url, flush=True)
    done.wait()  # a signal interrupts the wait, its handler sets the event
    standin.stop()
    return 0
