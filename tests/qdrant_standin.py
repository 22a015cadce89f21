"""A stand-in Qdrant server on 127.0.0.1: Qdrant's REST wire format, executed by qdrant-client's local engine.

No Qdrant server can be installed here, so this one answers the REST requests ``qdrant-client`` (1.20, as
installed) sends with ``QdrantClient(url=...)``: the project's server code path (``QDRANT_URL``). It is a
stand-in, not Qdrant:

- one process, every request executed by qdrant-client's own local-mode engine (``QdrantClient(path=DIR)``,
  or ``":memory:"``) inside the stand-in, one call at a time (a lock);
- scores are exact (local mode is brute force; a server's HNSW is approximate), and with
  ``Modifier.IDF`` local mode counts document frequencies over the live points only, where a server
  still counts deleted points until its optimiser has merged the segments;
- payload indexes are recorded (``GET /collections/{c}`` shows them in ``payload_schema``, with the
  number of points holding the field) but, as in local mode, do not change how a filter runs;
  ``strict=True`` refuses a filter on a field without one (a server in strict mode with
  ``unindexed_filtering_retrieve/update: false`` answers the same 400).

What is faithful: the wire format the real client sends and parses. Request bodies are parsed with the
client's own OpenAPI models (:mod:`qdrant_client.http.models`, ``extra="forbid"``: a field Qdrant does
not know is a 400), the REST defaults of the server apply (``with_payload`` false for queries, true
for retrieve and scroll; ``limit`` 10), and answers use Qdrant's envelope ``{"result": ..., "status":
"ok", "time": <seconds>}``; errors the status Qdrant uses with ``{"status": {"error": "..."}, "time":
...}``: 404 for a missing collection (``Not found: Collection `c` doesn't exist!``), 409 for creating
one that exists, 400 for a body that does not parse or an input the engine refuses (``Wrong input:
...``), 401 without the right API key (``api-key`` header or ``Authorization: Bearer``;
``GET /``, ``/healthz``, ``/livez``, ``/readyz`` need none, as on a server), 403 for a write with the
read-only key (``Write access denied``). ``GET /`` reports the installed client's version, so the
client's compatibility check passes quietly.

Endpoints (``{c}`` a collection): ``GET /``, ``GET /healthz|/livez|/readyz``, ``GET /collections``,
``GET|PUT|DELETE /collections/{c}``, ``GET /collections/{c}/exists``, ``PUT /collections/{c}/index``,
``DELETE /collections/{c}/index/{field}``, ``PUT /collections/{c}/points`` (upsert), ``POST
/collections/{c}/points`` (retrieve), ``GET /collections/{c}/points/{id}``, ``POST .../points/delete``,
``POST|PUT .../points/payload`` (set, overwrite), ``POST .../points/payload/delete|clear``, ``POST
.../points/scroll``, ``POST .../points/count``, ``POST .../points/query`` and ``POST
.../points/query/batch``. Writes take ``?wait=``: the engine always applies them at once; the answer's
status is ``completed`` with ``wait=true``, else ``acknowledged`` (as a server answers). Anything else is
a 404 saying the stand-in does not implement it.

Two ways to run it:

- in process: ``with QdrantStandIn(path) as q: QdrantClient(url=q.url)`` (a daemon thread); faults with
  :meth:`QdrantStandIn.fail` / :meth:`~QdrantStandIn.drop` / :meth:`~QdrantStandIn.slow`, the request
  log in :attr:`QdrantStandIn.requests`;
- as a process, for several client processes: ``python -m tests.qdrant_standin --port 0 [--path DIR]
  [--api-key K] [--read-only-api-key K] [--strict] [--keep-bodies]`` (from the repository root, or with it
  on ``PYTHONPATH``) prints its URL on the first stdout line and serves until SIGTERM or SIGINT (exit 0); :class:`QdrantStandInProcess` starts one and drives its faults and log over
  the control endpoints under ``/__standin/`` (no key needed, never logged; not part of Qdrant's API).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import parse_qsl, unquote, urlsplit

import httpx
import pydantic
from qdrant_client import QdrantClient, models

__all__ = ["QdrantStandIn", "QdrantStandInProcess", "LoggedRequest", "Fault", "main"]

INDEXES_FILE = "standin-payload-indexes.json"  #: the recorded payload indexes, beside local mode's files
CONTROL = "/__standin/"  #: the control endpoints' prefix (not Qdrant's API)
NO_KEY = "Must provide an API key or an Authorization bearer token"
BAD_KEY = "Invalid API key or JWT"
#: POST paths a read-only key may call (everything else but GET writes): retrieve, count, scroll, query and
#: facet are reads on a server (its access table), so a web replica's document-frequency refresh is allowed.
READ_POSTS = re.compile(r"/collections/[^/]+/(points(/count|/scroll|/query|/query/batch)?|facet)")


class LoggedRequest(NamedTuple):
    """One request as the stand-in received it (before faults and auth)."""

    method: str
    path: str  #: unquoted, without the query string
    query: dict[str, str]
    body: Any  #: the parsed JSON body (``None`` without one, or when bodies are not kept)
    #: which configured key the request carried: ``"api"``, ``"read-only"``, ``"other"`` (a key that is
    #: neither), ``None`` (no key); so a test with several client processes, each given its own key, can
    #: tell whose request each was (recorded before the key is checked)
    key: str | None = None


@dataclass
class Fault:
    """Answer the next ``times`` requests whose ``"METHOD /path?query"`` matches ``pattern`` (after ``skip``
    matches) with ``status`` and ``{"status": {"error": error}}``; ``status=0`` closes the connection without
    an answer (``drop``); ``delay`` seconds first (with ``status=None``: then answer normally)."""

    pattern: re.Pattern[str]
    status: int | None
    times: int
    skip: int = 0
    error: str = "injected fault"
    delay: float = 0.0
    hits: int = 0


class ApiError(Exception):
    """An error answer: HTTP ``status`` with Qdrant's ``{"status": {"error": message}}``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class QdrantStandIn:
    """The server; use as a context manager or call :meth:`start` / :meth:`stop`.

    Args:
        path: local mode's folder (created if missing; a restarted stand-in finds its collections and
            recorded payload indexes there), or ``None`` for an in-memory engine.
        api_key: when set, every request but ``GET /`` and the health checks needs it (``api-key`` header or
            ``Authorization: Bearer``), else 401.
        read_only_api_key: a second key that may only read (GET, retrieve, scroll, count, query, facet): 403 on writes.
        strict: refuse filters on fields without a payload index (400), as a server in strict mode.
        port: the port to listen on (0: a free one).
        keep_bodies: keep each request's parsed JSON body in :attr:`requests` (off for long runs).

    Attributes:
        requests: every request received, in order (:class:`LoggedRequest`; control requests excluded).
        unknown: ``(method, path)`` of every request the stand-in does not implement (answered 404), so a
            test can assert the code under test only made calls the stand-in speaks.
        engine: the local-mode client executing the requests (hold :attr:`lock` to use it directly).
        lock: serialises the engine, the log and the faults.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, api_key: str | None = None,
                 read_only_api_key: str | None = None, strict: bool = False, port: int = 0,
                 keep_bodies: bool = True) -> None:
        self.path = Path(path) if path is not None else None
        self.api_key = api_key
        self.read_only_api_key = read_only_api_key
        self.strict = strict
        self.port = port
        self.keep_bodies = keep_bodies
        self.requests: list[LoggedRequest] = []
        self.unknown: list[tuple[str, str]] = []
        self.faults: list[Fault] = []
        self.lock = threading.RLock()
        if self.path is not None:
            self.path.mkdir(parents=True, exist_ok=True)
        self.engine = QdrantClient(path=str(self.path)) if self.path is not None else QdrantClient(":memory:")
        #: collection -> field -> (data type, params or None), as ``PUT /collections/{c}/index`` created them
        self.indexes: dict[str, dict[str, tuple[str, dict | None]]] = self._load_indexes()
        self._operation = 0
        self._last_request = 0.0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> QdrantStandIn:
        """Listen on 127.0.0.1 (``port``) in a daemon thread."""
        standin = self

        class Handler(_Handler):
            state = standin

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True, name="qdrant-standin")  # stop() waits one poll
        self._thread.start()
        return self

    def stop(self, grace: float = 0.15) -> None:
        """Stop listening and close the engine (releases local mode's folder).

        First waits until ``grace`` seconds have passed since the last request: a ``QdrantClient(url=...)``
        checks the server's version from a thread some 60 ms after it is made, and a stand-in already gone
        makes it warn "Failed to obtain server version".
        """
        wait = self._last_request + grace - time.monotonic()
        if self._server and wait > 0:
            time.sleep(wait)
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with self.lock:
            self.engine.close()

    def __enter__(self) -> QdrantStandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (what ``QDRANT_URL`` is set to)."""
        assert self._server is not None, "the stand-in is not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # -- faults and the log ------------------------------------------------------------------------
    def fail(self, pattern: str, status: int = 500, times: int = 1, *, skip: int = 0,
             error: str = "Service internal error: injected fault") -> Fault:
        """Answer the next ``times`` requests whose ``"METHOD /path?query"`` matches the regex ``pattern``
        (after skipping ``skip`` matches) with ``status`` and Qdrant's error body."""
        return self._add(Fault(re.compile(pattern), status, times, skip, error))

    def drop(self, pattern: str, times: int = 1, *, skip: int = 0) -> Fault:
        """Close the connection of the next ``times`` matching requests without answering (the client sees
        "Server disconnected without sending a response")."""
        return self._add(Fault(re.compile(pattern), 0, times, skip))

    def slow(self, pattern: str, seconds: float, times: int = 1_000_000, *, skip: int = 0) -> Fault:
        """Delay matching requests by ``seconds``, then answer them normally."""
        return self._add(Fault(re.compile(pattern), None, times, skip, delay=seconds))

    def _add(self, fault: Fault) -> Fault:
        with self.lock:
            self.faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        """Remove every injected fault."""
        with self.lock:
            self.faults.clear()

    def count(self, pattern: str, method: str | None = None) -> int:
        """Requests so far whose path matches the regex ``pattern`` (``re.search``), of ``method`` if given."""
        rx = re.compile(pattern)
        with self.lock:
            return sum(1 for r in self.requests if rx.search(r.path) and method in (None, r.method))

    def payload_indexes(self, collection: str) -> dict[str, str]:
        """The payload indexes created in ``collection``: field to data type (``"keyword"``, ...)."""
        with self.lock:
            return {f: t for f, (t, _) in self.indexes.get(collection, {}).items()}

    def _log(self, method: str, path: str, query: dict[str, str], body: Any,
             key: str | None = None) -> tuple[Fault | None, float]:
        """Log a request (``key``: as :attr:`LoggedRequest.key`); the fault that answers it (if any) and the
        delay to wait first."""
        delay = 0.0
        with self.lock:
            self._last_request = time.monotonic()
            self.requests.append(LoggedRequest(method, path, query, body if self.keep_bodies else None, key))
            target = f"{method} {path}" + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")
            for f in self.faults:
                if f.times <= 0 or not f.pattern.search(target):
                    continue
                if f.skip > 0:
                    f.skip -= 1
                    continue
                f.times -= 1
                f.hits += 1
                delay = max(delay, f.delay)
                if f.status is not None:
                    return f, delay
        return None, delay

    # -- auth --------------------------------------------------------------------------------------
    @staticmethod
    def _key_of(headers) -> str | None:
        """The key a request carries (``api-key`` header or ``Authorization: Bearer``), else ``None``."""
        bearer = headers.get("authorization", "")
        return headers.get("api-key") or (bearer[len("Bearer "):] if bearer.startswith("Bearer ") else None)

    def key_role(self, headers) -> str | None:
        """Which configured key ``headers`` carry: ``"api"``, ``"read-only"``, ``"other"`` or ``None`` (no key)."""
        key = self._key_of(headers)
        if not key:
            return None
        return "api" if key == self.api_key else "read-only" if key == self.read_only_api_key else "other"

    def check_key(self, method: str, path: str, headers) -> None:
        """Raise :class:`ApiError` (401/403) unless the request carries a key allowed to do this."""
        if self.api_key is None and self.read_only_api_key is None:
            return
        if method == "GET" and (path in ("/", "/healthz") or re.match(r"/(readyz|livez)", path)):
            return
        key = self._key_of(headers)
        if not key:
            raise ApiError(401, NO_KEY)
        if self.api_key is not None and key == self.api_key:
            return
        if self.read_only_api_key is not None and key == self.read_only_api_key:
            if method == "GET" or (method == "POST" and READ_POSTS.fullmatch(path)):
                return
            raise ApiError(403, "Write access denied")
        raise ApiError(401, BAD_KEY)

    # -- payload indexes ---------------------------------------------------------------------------
    def _load_indexes(self) -> dict[str, dict[str, tuple[str, dict | None]]]:
        if self.path is None or not (self.path / INDEXES_FILE).exists():
            return {}
        raw = json.loads((self.path / INDEXES_FILE).read_text())
        return {c: {f: (t, p) for f, (t, p) in fields.items()} for c, fields in raw.items()}

    def _save_indexes(self) -> None:
        if self.path is not None:
            (self.path / INDEXES_FILE).write_text(json.dumps(self.indexes))

    # -- the API -----------------------------------------------------------------------------------
    def handle(self, method: str, path: str, query: dict[str, str], body: Any) -> Any:
        """Execute one REST call; returns the ``result`` (JSON-ready) or raises :class:`ApiError`."""
        for route_method, rx, name in ROUTES:
            if route_method == method and (m := rx.fullmatch(path)):
                args = [unquote(g) for g in m.groups()]
                with self.lock:
                    if args and name not in ("create_collection", "collection_exists", "delete_collection"):
                        self._need(args[0])
                    return getattr(self, "_" + name)(*args, query=query, body=body)
        with self.lock:
            self.unknown.append((method, path))
        raise ApiError(404, f"the Qdrant stand-in does not implement {method} {path}")

    def _need(self, c: str) -> None:
        if not self.engine.collection_exists(c):
            raise ApiError(404, f"Not found: Collection `{c}` doesn't exist!")

    def _update(self, query: dict[str, str]) -> dict:
        self._operation += 1
        done = query.get("wait", "false") == "true"
        return models.UpdateResult(operation_id=self._operation,
                                   status=models.UpdateStatus.COMPLETED if done else models.UpdateStatus.ACKNOWLEDGED
                                   ).model_dump(mode="json")

    def _strict(self, c: str, where: models.Filter | None) -> None:
        """With ``strict``: every field a filter's conditions test must have a payload index (of any type)."""
        if not self.strict or where is None:
            return
        for key in _filter_keys(where):
            if key not in self.indexes.get(c, {}):
                raise ApiError(400, f'Bad request: Index required but not found for "{key}". '
                                    "Help: Create an index for this key or use a different filter.")

    def _root(self, **_: Any) -> dict:
        return {"title": "qdrant - vector search engine", "version": importlib.metadata.version("qdrant-client"),
                "commit": "standin"}

    def _health(self, **_: Any) -> str:
        return "healthz check passed"

    def _collections(self, **_: Any) -> dict:
        return self.engine.get_collections().model_dump(mode="json")

    def _collection_exists(self, c: str, **_: Any) -> dict:
        return {"exists": self.engine.collection_exists(c)}

    def _collection_info(self, c: str, **_: Any) -> dict:
        info = self.engine.get_collection(c)
        schema = {}
        for field, (kind, params) in self.indexes.get(c, {}).items():
            holding = models.Filter(must_not=[models.IsEmptyCondition(is_empty=models.PayloadField(key=field))])
            schema[field] = {"data_type": kind, "params": params,
                             "points": self.engine.count(c, count_filter=holding, exact=True).count}
        out = info.model_dump(mode="json")
        out["payload_schema"] = schema
        return out

    def _create_collection(self, c: str, body: Any, **_: Any) -> bool:
        req = _parse(models.CreateCollection, body or {})
        if self.engine.collection_exists(c):
            raise ApiError(409, f"Wrong input: Collection `{c}` already exists!")
        _engine(lambda: self.engine.create_collection(
            c, vectors_config=req.vectors if req.vectors is not None else {},
            sparse_vectors_config=req.sparse_vectors, metadata=req.metadata))
        self.indexes.pop(c, None)
        self._save_indexes()
        return True

    def _delete_collection(self, c: str, **_: Any) -> bool:
        existed = self.engine.delete_collection(c)
        if self.indexes.pop(c, None) is not None:
            self._save_indexes()
        return existed

    def _create_index(self, c: str, query: dict[str, str], body: Any) -> dict:
        req = _parse(models.CreateFieldIndex, body)
        schema = req.field_schema
        if schema is None:
            raise ApiError(400, "Wrong input: field_schema is required")
        if isinstance(schema, models.PayloadSchemaType):
            kind, params = schema.value, None
        else:
            kind, params = str(schema.type.value if hasattr(schema.type, "value") else schema.type), \
                schema.model_dump(mode="json", exclude_none=True)
            if isinstance(schema, models.TextIndexParams):  # the only index local mode uses (text scoring)
                _engine(lambda: self.engine.create_payload_index(c, req.field_name, field_schema=schema))
        self.indexes.setdefault(c, {})[req.field_name] = (kind, params)
        self._save_indexes()
        return self._update(query)

    def _delete_index(self, c: str, field: str, query: dict[str, str], **_: Any) -> dict:
        if self.indexes.get(c, {}).pop(field, None) is not None:
            self._save_indexes()
        return self._update(query)

    def _upsert(self, c: str, query: dict[str, str], body: Any) -> dict:
        req = _parse(models.PointInsertOperations, body)
        if isinstance(req, models.PointsList):
            points: Any = req.points
        else:
            points = req.batch
        self._strict(c, req.update_filter)
        _engine(lambda: self.engine.upsert(c, points=points, update_filter=req.update_filter,
                                           update_mode=req.update_mode, wait=True))
        return self._update(query)

    def _delete_points(self, c: str, query: dict[str, str], body: Any) -> dict:
        selector = _parse(models.PointsSelector, body)
        if isinstance(selector, models.FilterSelector):
            self._strict(c, selector.filter)
        _engine(lambda: self.engine.delete(c, points_selector=selector, wait=True))
        return self._update(query)

    def _selector(self, c: str, ids: list | None, where: models.Filter | None) -> models.PointsSelector:
        if ids is not None:
            return models.PointIdsList(points=ids)
        if where is not None:
            self._strict(c, where)
            return models.FilterSelector(filter=where)
        raise ApiError(400, "Wrong input: either `points` or `filter` is required")

    def _set_payload(self, c: str, query: dict[str, str], body: Any) -> dict:
        req = _parse(models.SetPayload, body)
        selector = self._selector(c, req.points, req.filter)
        _engine(lambda: self.engine.set_payload(c, payload=req.payload, points=selector, key=req.key, wait=True))
        return self._update(query)

    def _overwrite_payload(self, c: str, query: dict[str, str], body: Any) -> dict:
        req = _parse(models.SetPayload, body)
        selector = self._selector(c, req.points, req.filter)
        _engine(lambda: self.engine.overwrite_payload(c, payload=req.payload, points=selector, wait=True))
        return self._update(query)

    def _delete_payload(self, c: str, query: dict[str, str], body: Any) -> dict:
        req = _parse(models.DeletePayload, body)
        selector = self._selector(c, req.points, req.filter)
        _engine(lambda: self.engine.delete_payload(c, keys=req.keys, points=selector, wait=True))
        return self._update(query)

    def _clear_payload(self, c: str, query: dict[str, str], body: Any) -> dict:
        selector = _parse(models.PointsSelector, body)
        if isinstance(selector, models.FilterSelector):
            self._strict(c, selector.filter)
        _engine(lambda: self.engine.clear_payload(c, points_selector=selector, wait=True))
        return self._update(query)

    def _retrieve(self, c: str, body: Any, **_: Any) -> list:
        req = _parse(models.PointRequest, body)
        got = _engine(lambda: self.engine.retrieve(
            c, ids=req.ids, with_payload=_default(req.with_payload, True),
            with_vectors=_default(req.with_vector, False)))
        return [p.model_dump(mode="json") for p in got]

    def _get_point(self, c: str, pid: str, **_: Any) -> dict:
        ident: int | str = int(pid) if pid.isdigit() else pid
        got = _engine(lambda: self.engine.retrieve(c, ids=[ident], with_payload=True, with_vectors=True))
        if not got:
            raise ApiError(404, f"Not found: No point with id {pid} found")
        return got[0].model_dump(mode="json")

    def _scroll(self, c: str, body: Any, **_: Any) -> dict:
        req = _parse(models.ScrollRequest, body or {})
        self._strict(c, req.filter)
        points, offset = _engine(lambda: self.engine.scroll(
            c, scroll_filter=req.filter, limit=_default(req.limit, 10), order_by=req.order_by, offset=req.offset,
            with_payload=_default(req.with_payload, True), with_vectors=_default(req.with_vector, False)))
        return models.ScrollResult(points=points, next_page_offset=offset).model_dump(mode="json")

    def _count(self, c: str, body: Any, **_: Any) -> dict:
        req = _parse(models.CountRequest, body or {})
        self._strict(c, req.filter)
        return _engine(lambda: self.engine.count(c, count_filter=req.filter, exact=True)).model_dump(mode="json")

    def _facet(self, c: str, body: Any, **_: Any) -> dict:
        """``POST /collections/{c}/facet``: value counts of a payload key; as on a server, the key needs a payload
        index (400 otherwise, strict or not)."""
        req = _parse(models.FacetRequest, body or {})
        if req.key not in self.indexes.get(c, {}):
            raise ApiError(400, f'Bad request: Index required but not found for "{req.key}" of one of the following '
                                "types: [keyword, integer, uuid]. Help: Create an index for this key.")
        self._strict(c, req.filter)
        return _engine(lambda: self.engine.facet(c, key=req.key, facet_filter=req.filter,
                                                 limit=_default(req.limit, 10), exact=bool(req.exact))
                       ).model_dump(mode="json")

    def _query_one(self, c: str, req: models.QueryRequest) -> models.QueryResponse:
        self._strict(c, req.filter)
        for where in _prefetch_filters(req.prefetch):
            self._strict(c, where)
        return _engine(lambda: self.engine.query_points(
            c, query=req.query, using=req.using, prefetch=req.prefetch, query_filter=req.filter,
            search_params=req.params, limit=_default(req.limit, 10), offset=req.offset,
            with_payload=_default(req.with_payload, False), with_vectors=_default(req.with_vector, False),
            score_threshold=req.score_threshold, lookup_from=req.lookup_from))

    def _query(self, c: str, body: Any, **_: Any) -> dict:
        return self._query_one(c, _parse(models.QueryRequest, body or {})).model_dump(mode="json")

    def _query_batch(self, c: str, body: Any, **_: Any) -> list:
        req = _parse(models.QueryRequestBatch, body)
        return [self._query_one(c, r).model_dump(mode="json") for r in req.searches]


_C = r"/collections/([^/]+)"
#: (method, path regex, handler name): the first match answers.
ROUTES: list[tuple[str, re.Pattern[str], str]] = [(m, re.compile(p), n) for m, p, n in [
    ("GET", r"/", "root"),
    ("GET", r"/(?:healthz|livez|readyz)", "health"),
    ("GET", r"/collections", "collections"),
    ("GET", _C + r"/exists", "collection_exists"),
    ("GET", _C, "collection_info"),
    ("PUT", _C, "create_collection"),
    ("DELETE", _C, "delete_collection"),
    ("PUT", _C + r"/index", "create_index"),
    ("DELETE", _C + r"/index/([^/]+)", "delete_index"),
    ("PUT", _C + r"/points", "upsert"),
    ("POST", _C + r"/points", "retrieve"),
    ("POST", _C + r"/points/delete", "delete_points"),
    ("POST", _C + r"/points/payload", "set_payload"),
    ("PUT", _C + r"/points/payload", "overwrite_payload"),
    ("POST", _C + r"/points/payload/delete", "delete_payload"),
    ("POST", _C + r"/points/payload/clear", "clear_payload"),
    ("POST", _C + r"/points/scroll", "scroll"),
    ("POST", _C + r"/points/count", "count"),
    ("POST", _C + r"/facet", "facet"),
    ("POST", _C + r"/points/query", "query"),
    ("POST", _C + r"/points/query/batch", "query_batch"),
    ("GET", _C + r"/points/([^/]+)", "get_point"),
]]


def _parse(model: Any, body: Any) -> Any:
    """``body`` as the client's OpenAPI ``model`` (a class or a union type alias); 400 when it does not fit."""
    try:
        return pydantic.TypeAdapter(model).validate_python(body)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ApiError(400, f"Format error in JSON body: {where}: {first['msg']}") from exc


def _engine(call: Callable[[], Any]) -> Any:
    """Run an engine call; what the engine refuses (ValueError, AssertionError) is a 400, as a server's bad input."""
    try:
        return call()
    except (ValueError, AssertionError, KeyError) as exc:
        raise ApiError(400, f"Wrong input: {exc}") from exc


def _default(value: Any, default: Any) -> Any:
    return default if value is None else value


def _filter_keys(where: models.Filter) -> list[str]:
    """Every payload key a filter's field conditions test (nested filters included)."""
    keys: list[str] = []
    groups: list[Any] = [where.must, where.should, where.must_not]
    if where.min_should is not None:
        groups.append(where.min_should.conditions)
    for group in groups:
        for cond in ([group] if group is not None and not isinstance(group, list) else group or []):
            if isinstance(cond, models.FieldCondition):
                keys.append(cond.key)
            elif isinstance(cond, models.Filter):
                keys.extend(_filter_keys(cond))
            elif isinstance(cond, models.NestedCondition):
                keys.append(cond.nested.key)
    return keys


def _prefetch_filters(prefetch: Any) -> list[models.Filter]:
    out: list[models.Filter] = []
    for p in (prefetch if isinstance(prefetch, list) else [prefetch] if prefetch is not None else []):
        if p.filter is not None:
            out.append(p.filter)
        out.extend(_prefetch_filters(p.prefetch))
    return out


class _Handler(BaseHTTPRequestHandler):
    state: QdrantStandIn
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet test output
        pass

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in two writes: without TCP_NODELAY, Nagle and delayed ACKs add ~40 ms each.
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _send(self, status: int, payload: Any, content_type: str = "application/json") -> None:
        body = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

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
        st = self.state
        started = time.perf_counter()
        parts = urlsplit(self.path)
        path = unquote(parts.path) if parts.path.startswith(CONTROL) else parts.path
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
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
        st = self.state
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


class QdrantStandInProcess:
    """A stand-in in its own process (``python -m tests.qdrant_standin``), for tests with several client
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
        cmd = [sys.executable, "-m", "tests.qdrant_standin", "--port", "0"]
        cmd += ["--path", str(path)] if path is not None else []
        cmd += ["--api-key", api_key] if api_key else []
        cmd += ["--read-only-api-key", read_only_api_key] if read_only_api_key else []
        cmd += ["--strict"] if strict else []
        cmd += ["--keep-bodies"] if keep_bodies else []
        root = Path(__file__).resolve().parents[1]
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
    """``python -m tests.qdrant_standin``: serve until SIGTERM/SIGINT, the URL on the first stdout line."""
    parser = argparse.ArgumentParser(prog="python -m tests.qdrant_standin", description=__doc__.split("\n")[0])
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


if __name__ == "__main__":
    sys.exit(main())
