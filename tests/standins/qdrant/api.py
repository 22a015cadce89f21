"""The Qdrant stand-in's HTTP side: the envelope, injected faults, the key check and the control endpoints."""

from __future__ import annotations

import json
import socket
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, urlsplit

from tests.standins.base import Handler
from tests.standins.qdrant.model import CONTROL, ApiError

if TYPE_CHECKING:
    from tests.standins.qdrant.engine import QdrantStandIn


class QdrantHandler(Handler):
    """Answers one request in Qdrant's envelope, after the stand-in's log, faults and key check."""

    standin: QdrantStandIn
    protocol_version = "HTTP/1.1"

    def _send(self, status: int, payload: Any, content_type: str = "application/json") -> None:
        if isinstance(payload, str):
            self.reply(status, payload.encode(), content_type)
        else:
            self.reply_json(status, payload, content_type=content_type)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._serve("GET")

    def do_PUT(self) -> None:  # noqa: N802
        self._serve("PUT")

    def do_POST(self) -> None:  # noqa: N802
        self._serve("POST")

    def do_DELETE(self) -> None:  # noqa: N802
        self._serve("DELETE")

    def _serve(self, method: str) -> None:
        """Read the body, log it, apply faults and the key check, then answer in Qdrant's envelope."""
        st = self.standin
        started = time.perf_counter()
        parts = urlsplit(self.path)
        path = unquote(parts.path) if parts.path.startswith(CONTROL) else parts.path
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        raw = self.body()
        if path.startswith(CONTROL):
            self._control(method, path[len(CONTROL):], raw)
            return
        try:
            body = json.loads(raw) if raw.strip() else None
        except ValueError as exc:
            self._send(400, {"status": {"error": f"Json deserialize error: {exc}"}, "time": 0.0})
            return
        logged_path = "/".join(unquote(s) for s in path.split("/"))
        fault, delay = st._log(method, logged_path, query, body, st.key_role(self.headers))
        if delay:
            time.sleep(delay)
        if fault is not None:
            if fault.status == 0:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self._send(fault.status or 500, {"status": {"error": fault.error}, "time": time.perf_counter() - started})
            return
        try:
            st.check_key(method, path, self.headers)
            result = st.handle(method, path, query, body)
        except ApiError as exc:
            self._send(exc.status, {"status": {"error": str(exc)}, "time": time.perf_counter() - started})
            return
        except Exception as exc:  # noqa: BLE001 - a server answers 500 rather than hanging up
            self._send(500, {"status": {"error": f"Service internal error: {type(exc).__name__}: {exc}"},
                             "time": time.perf_counter() - started})
            return
        if path == "/":
            self._send(200, result)  # the root answers VersionInfo itself, no envelope
        elif path in ("/healthz", "/livez", "/readyz"):
            self._send(200, result, "text/plain")
        else:
            self._send(200, {"result": result, "status": "ok", "time": time.perf_counter() - started})

    def _control(self, method: str, what: str, raw: bytes) -> None:
        """The stand-in's own endpoints (for :class:`QdrantStandInProcess`)."""
        st = self.standin
        args = json.loads(raw) if raw.strip() else {}
        if method == "GET" and what == "requests":
            with st.lock:
                self._send(200, [r._asdict() for r in st.requests])
        elif method == "POST" and what == "faults":
            kind = args.pop("kind", "fail")
            f = {"fail": st.fail, "drop": st.drop, "slow": st.slow}[kind](**args)
            self._send(200, {"pattern": f.pattern.pattern, "times": f.times})
        elif method == "POST" and what == "reset":
            with st.lock:
                st.faults.clear()
                st.requests.clear()
            self._send(200, True)
        else:
            self._send(404, {"status": {"error": f"no control endpoint {method} {CONTROL}{what}"}})
