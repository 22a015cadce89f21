"""A Qdrant server stand-in on 127.0.0.1: the REST routes chatops' stores call, answered by qdrant-client's
local mode in memory.

Tests of the shared mode (``QDRANT_URL``) need a server, and none runs here. The stand-in speaks Qdrant's
REST wire format (requests parsed with qdrant-client's own pydantic models, answers as ``{"result": ...,
"status": "ok", "time": 0}``), so the stores go through ``QdrantClient(url=...)`` and its REST client as in
production; the points live in a ``QdrantClient(":memory:")``. A request to a route it does not know is
answered 404 and recorded in :attr:`QdrantStandin.unknown` (tests assert it stays empty), so a store that
starts calling something new fails loudly instead of silently passing.

Routes: ``GET /`` (the version check), ``GET|PUT|DELETE /collections/{c}``, ``GET /collections/{c}/exists``,
``PUT /collections/{c}/index``, ``PUT /collections/{c}/points`` (upsert), ``POST /collections/{c}/points``
(retrieve) and ``.../points/{delete,payload,count,scroll,query}``.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from importlib.metadata import version

from pydantic import TypeAdapter
from qdrant_client import QdrantClient, models

__all__ = ["QdrantStandin"]

#: How long the stand-in keeps answering after its ``with`` block ends (see :meth:`QdrantStandin.__exit__`).
GRACE_SECONDS = 0.3
_ROUTE = re.compile(r"^/collections/(?P<c>[^/]+)(?P<rest>/.*)?$")
_SELECTOR = TypeAdapter(models.PointsSelector)
_INSERT = TypeAdapter(models.PointInsertOperations)


def _dump(value: Any) -> Any:
    """A result as JSON (pydantic models dumped as the server sends them)."""
    if isinstance(value, list):
        return [_dump(v) for v in value]
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    return value


def _done(_value: Any = None) -> dict:
    return {"operation_id": 0, "status": "completed"}


class QdrantStandin:
    """A Qdrant REST stand-in on 127.0.0.1 (a free port); use as a context manager.

    Attributes:
        url: the base URL to give as ``QDRANT_URL``.
        client: the in-memory local-mode client holding the points (tests may read it directly).
        unknown: ``"METHOD /path"`` of every request to a route the stand-in does not implement.
    """

    def __init__(self) -> None:
        self.client = QdrantClient(":memory:")
        self.unknown: list[str] = []
        self._lock = threading.Lock()  # local mode is not thread-safe; the server is threaded
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args) -> None:  # quiet
                pass

            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null") if length else None
                path = self.path.split("?", 1)[0]
                status, payload = standin.answer(method, path, body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 - http.server's names
                self._serve("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._serve("POST")

            def do_PUT(self) -> None:  # noqa: N802
                self._serve("PUT")

            def do_DELETE(self) -> None:  # noqa: N802
                self._serve("DELETE")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> QdrantStandin:
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        # qdrant-client checks the server's version in a background thread of each new client: give the
        # last ones time to ask before the port closes (else they warn that the check failed).
        time.sleep(GRACE_SECONDS)
        self._server.shutdown()
        self._server.server_close()
        self.client.close()

    def answer(self, method: str, path: str, body: Any) -> tuple[int, dict]:
        """``(HTTP status, JSON body)`` for one request."""
        if method == "GET" and path == "/":
            # The client's own version: its compatibility check passes (the stand-in speaks its REST dialect).
            return 200, {"title": "qdrant - vector search engine", "version": version("qdrant-client")}
        m = _ROUTE.match(path)
        handler = self._routes().get((method, m["rest"] or "")) if m else None
        if handler is None:
            self.unknown.append(f"{method} {path}")
            return 404, {"status": {"error": f"the stand-in does not implement {method} {path}"}, "time": 0}
        try:
            with self._lock:
                result = handler(m["c"], body or {})
        except (ValueError, KeyError) as exc:
            return 400, {"status": {"error": f"{type(exc).__name__}: {exc}"}, "time": 0}
        return 200, {"result": _dump(result), "status": "ok", "time": 0}

    def _routes(self) -> dict[tuple[str, str], Callable[[str, dict], Any]]:
        c = self.client
        return {
            ("GET", "/exists"): lambda name, _b: {"exists": c.collection_exists(name)},
            ("GET", ""): lambda name, _b: c.get_collection(name),
            ("PUT", ""): lambda name, b: c.create_collection(name, **self._fields(models.CreateCollection, b, {
                "vectors": "vectors_config", "sparse_vectors": "sparse_vectors_config"})),
            ("DELETE", ""): lambda name, _b: c.delete_collection(name),
            ("PUT", "/index"): lambda _name, _b: _done(),  # local mode has no payload indexes
            ("PUT", "/points"): lambda name, b: _done(c.upsert(name, points=_INSERT.validate_python(b).points)),
            ("POST", "/points"): lambda name, b: c.retrieve(name, **self._fields(models.PointRequest, b, {
                "ids": "ids", "with_payload": "with_payload", "with_vector": "with_vectors"})),
            ("POST", "/points/delete"): lambda name, b: _done(c.delete(name, points_selector=_SELECTOR.validate_python(b))),
            ("POST", "/points/payload"): lambda name, b: _done(self._set_payload(name, models.SetPayload.model_validate(b))),
            ("POST", "/points/count"): lambda name, b: c.count(name, **self._fields(models.CountRequest, b, {
                "filter": "count_filter", "exact": "exact"})),
            ("POST", "/points/scroll"): lambda name, b: self._scroll(name, models.ScrollRequest.model_validate(b)),
            ("POST", "/points/query"): lambda name, b: c.query_points(name, **self._fields(models.QueryRequest, b, {
                "query": "query", "using": "using", "prefetch": "prefetch", "filter": "query_filter",
                "params": "search_params", "limit": "limit", "offset": "offset", "with_payload": "with_payload",
                "with_vector": "with_vectors", "score_threshold": "score_threshold"})),
        }

    @staticmethod
    def _fields(model, body: dict, names: dict[str, str]) -> dict[str, Any]:
        """The request ``body`` parsed as ``model``, its fields renamed to the client's arguments (unset ones left out)."""
        req = model.model_validate(body)
        return {arg: getattr(req, field) for field, arg in names.items() if getattr(req, field) is not None}

    def _set_payload(self, name: str, req: models.SetPayload) -> Any:
        points = req.points if req.points is not None else req.filter
        return self.client.set_payload(name, payload=req.payload, points=points, key=req.key)

    def _scroll(self, name: str, req: models.ScrollRequest) -> dict:
        points, offset = self.client.scroll(name, scroll_filter=req.filter, limit=req.limit or 10, offset=req.offset,
                                            with_payload=req.with_payload if req.with_payload is not None else True,
                                            with_vectors=req.with_vector or False, order_by=req.order_by)
        return {"points": _dump(points), "next_page_offset": offset}
