"""What every stand-in shares: an HTTP server on 127.0.0.1 in a daemon thread (bind, start, stop, the context
manager, the origin URL), the request log kept under one condition (:meth:`StandIn.record`,
:meth:`StandIn.wait_until`) and JSON replies (:meth:`Handler.reply_json`).

Two engines, one lifecycle: a stand-in that answers request by request names a :class:`Handler` subclass
(served by the standard library's ``ThreadingHTTPServer``, one thread per connection); one that needs an
event loop (the Slack stand-in's Socket Mode WebSocket, the OTLP collector) builds an aiohttp application in
:meth:`StandIn.web_app` (served by :class:`bot.server.ServerThread`).
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

if TYPE_CHECKING:
    from aiohttp import web

__all__ = ["Handler", "StandIn"]

T = TypeVar("T")
HOST = "127.0.0.1"


class Handler(BaseHTTPRequestHandler):
    """A request handler of a stand-in (``self.standin``): quiet, Nagle off, JSON replies.

    The ``do_*`` methods hand the request to ``self.standin.serve(self, METHOD)``; a stand-in whose handler
    routes by itself overrides them.
    """

    standin: Any  # the stand-in serving (set on the per-server subclass :meth:`StandIn.bind` makes)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet test output
        return

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in two writes; without TCP_NODELAY, Nagle's algorithm and delayed ACKs
        # add ~40 ms to every keep-alive response.
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self.standin.serve(self, "GET")

    def do_POST(self) -> None:  # noqa: N802
        self.standin.serve(self, "POST")

    def do_PUT(self) -> None:  # noqa: N802
        self.standin.serve(self, "PUT")

    def do_DELETE(self) -> None:  # noqa: N802
        self.standin.serve(self, "DELETE")

    def body(self) -> bytes:
        """The request body (``Content-Length`` bytes; empty without one)."""
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def reply(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        """Answer ``status`` with ``body`` (``Content-Type`` and ``Content-Length`` set; ``headers`` added)."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def reply_json(self, status: int, payload: Any, headers: dict[str, str] | None = None,
                   content_type: str = "application/json") -> None:
        """Answer ``status`` with ``payload`` as JSON."""
        self.reply(status, json.dumps(payload).encode(), content_type, headers)


class _Server(ThreadingHTTPServer):
    quiet = False

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not self.quiet:
            super().handle_error(request, client_address)


class StandIn:
    """The base of every stand-in: a server on 127.0.0.1 and the request log (see the module docstring).

    Subclasses set :attr:`handler` (a :class:`Handler` subclass) or override :meth:`web_app`.

    Args:
        port: where to listen (0: a free port; :attr:`port` is the bound one once :meth:`bind` ran).
        tls: an ``ssl.SSLContext`` to serve HTTPS with (``handler`` stand-ins only).

    Attributes:
        lock: a re-entrant condition guarding the stand-in's state; :meth:`record` notifies it.
        server: the ``ThreadingHTTPServer`` or :class:`bot.server.ServerThread`, once bound.
    """

    handler: ClassVar[type[Handler] | None] = None
    #: how often the serving thread looks for a stop request (seconds): :meth:`stop` waits at most this long
    poll_interval: ClassVar[float] = 0.05
    #: a client that hung up before the answer (its own timeout) is no error worth printing
    quiet_disconnects: ClassVar[bool] = False

    def __init__(self, port: int = 0, tls: ssl.SSLContext | None = None) -> None:
        self.port = port
        self.lock = threading.Condition(threading.RLock())
        self.server: Any = None
        self._tls = tls
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------------
    def bind(self) -> Self:
        """Bind the port (the URL is known from here on) without serving yet; idempotent."""
        if self.server is not None or self.handler is None:
            return self
        handler = type(self.handler.__name__, (self.handler,), {"standin": self})
        server = _Server((HOST, self.port), handler)
        server.quiet = self.quiet_disconnects
        if self._tls is not None:
            server.socket = self._tls.wrap_socket(server.socket, server_side=True)
        self.server = server
        self.port = server.server_address[1]
        return self

    def start(self) -> Self:
        """Listen on 127.0.0.1 and serve in a daemon thread; returns self once it listens (idempotent).

        Raises:
            OSError: when the port cannot be bound.
        """
        if self._thread is not None:
            return self
        if self.handler is None:
            from bot.server import ServerThread

            self.server = ServerThread(self.web_app, host=HOST, port=self.port).start()
            self.port = self.server.port
            self._thread = self.server._thread
            return self
        self.bind()
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": self.poll_interval},
                                        daemon=True, name=f"{type(self).__name__}-standin")
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the port (idempotent)."""
        server, self.server, thread, self._thread = self.server, None, self._thread, None
        if server is None:
            return
        if self.handler is None:
            server.stop()
            return
        if thread is not None:
            server.shutdown()
        server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:PORT`` (``https`` with TLS)."""
        return f"{'https' if self._tls is not None else 'http'}://{HOST}:{self.port}"

    def web_app(self) -> web.Application:
        """The aiohttp application to serve when :attr:`handler` is None (built on the server's loop)."""
        raise NotImplementedError(f"{type(self).__name__} sets neither `handler` nor `web_app`")

    def serve(self, request: Handler, method: str) -> None:
        """Answer one request (the default :class:`Handler`'s ``do_*`` call this)."""
        request.reply_json(404, {"error": f"{type(self).__name__} does not answer {method} {request.path}"})

    # -- the request log -------------------------------------------------------------------------
    def record(self, log: list[T], entry: T) -> T:
        """Append ``entry`` to ``log`` under :attr:`lock` and wake :meth:`wait_until`; returns ``entry``."""
        with self.lock:
            log.append(entry)
            self.lock.notify_all()
        return entry

    def wait_until(self, predicate: Callable[[], T], timeout: float, describe: Callable[[], object] = lambda: "",
                 poll: float | None = None) -> T:
        """Wait until ``predicate()`` (called under :attr:`lock`) is truthy and return it.

        Args:
            describe: what to put in the error (the log so far).
            poll: look again at least this often (seconds) even without a :meth:`record`; None: only then.

        Raises:
            AssertionError: after ``timeout`` seconds, with ``describe()``.
        """
        deadline = time.monotonic() + timeout
        with self.lock:
            while True:
                value = predicate()
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out; {describe()}")
                self.lock.wait(left if poll is None else min(left, poll))
