"""The Qdrant stand-in's state: qdrant-client's local engine executing the REST calls, payload indexes, keys,
faults and the request log."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from qdrant_client import QdrantClient, models

from tests.standins.base import StandIn
from tests.standins.qdrant.api import QdrantHandler
from tests.standins.qdrant.model import (BAD_KEY, INDEXES_FILE, NO_KEY, READ_POSTS, ROUTES, ApiError, Fault,
                                         LoggedRequest, default, engine_call, filter_keys, parse_body,
                                         prefetch_filters)


class QdrantStandIn(StandIn):
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

    handler = QdrantHandler
    poll_interval = 0.02  # stop() waits one poll

    def __init__(self, path: str | os.PathLike[str] | None = None, *, api_key: str | None = None,
                 read_only_api_key: str | None = None, strict: bool = False, port: int = 0,
                 keep_bodies: bool = True) -> None:
        super().__init__(port)
        self.path = Path(path) if path is not None else None
        self.api_key = api_key
        self.read_only_api_key = read_only_api_key
        self.strict = strict
        self.keep_bodies = keep_bodies
        self.requests: list[LoggedRequest] = []
        self.unknown: list[tuple[str, str]] = []
        self.faults: list[Fault] = []
        if self.path is not None:
            self.path.mkdir(parents=True, exist_ok=True)
        self.engine = QdrantClient(path=str(self.path)) if self.path is not None else QdrantClient(":memory:")
        #: collection -> field -> (data type, params or None), as ``PUT /collections/{c}/index`` created them
        self.indexes: dict[str, dict[str, tuple[str, dict | None]]] = self._load_indexes()
        self._operation = 0
        self._last_request = 0.0

    def stop(self, grace: float = 0.15) -> None:
        """Stop listening and close the engine (releases local mode's folder).

        First waits until ``grace`` seconds have passed since the last request: a ``QdrantClient(url=...)``
        checks the server's version from a thread some 60 ms after it is made, and a stand-in already gone
        makes it warn "Failed to obtain server version".
        """
        wait = self._last_request + grace - time.monotonic()
        if self.server is not None and wait > 0:
            time.sleep(wait)
        super().stop()
        with self.lock:
            self.engine.close()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (what ``QDRANT_URL`` is set to)."""
        assert self.server is not None, "the stand-in is not started"
        return self.origin

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
            self.record(self.requests, LoggedRequest(method, path, query, body if self.keep_bodies else None, key))
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
        for key in filter_keys(where):
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
        req = parse_body(models.CreateCollection, body or {})
        if self.engine.collection_exists(c):
            raise ApiError(409, f"Wrong input: Collection `{c}` already exists!")
        engine_call(lambda: self.engine.create_collection(
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
        req = parse_body(models.CreateFieldIndex, body)
        schema = req.field_schema
        if schema is None:
            raise ApiError(400, "Wrong input: field_schema is required")
        if isinstance(schema, models.PayloadSchemaType):
            kind, params = schema.value, None
        else:
            kind, params = str(schema.type.value if hasattr(schema.type, "value") else schema.type), \
                schema.model_dump(mode="json", exclude_none=True)
            if isinstance(schema, models.TextIndexParams):  # the only index local mode uses (text scoring)
                engine_call(lambda: self.engine.create_payload_index(c, req.field_name, field_schema=schema))
        self.indexes.setdefault(c, {})[req.field_name] = (kind, params)
        self._save_indexes()
        return self._update(query)

    def _delete_index(self, c: str, field: str, query: dict[str, str], **_: Any) -> dict:
        if self.indexes.get(c, {}).pop(field, None) is not None:
            self._save_indexes()
        return self._update(query)

    def _upsert(self, c: str, query: dict[str, str], body: Any) -> dict:
        req = parse_body(models.PointInsertOperations, body)
        if isinstance(req, models.PointsList):
            points: Any = req.points
        else:
            points = req.batch
        self._strict(c, req.update_filter)
        engine_call(lambda: self.engine.upsert(c, points=points, update_filter=req.update_filter,
                                           update_mode=req.update_mode, wait=True))
        return self._update(query)

    def _delete_points(self, c: str, query: dict[str, str], body: Any) -> dict:
        selector = parse_body(models.PointsSelector, body)
        if isinstance(selector, models.FilterSelector):
            self._strict(c, selector.filter)
        engine_call(lambda: self.engine.delete(c, points_selector=selector, wait=True))
        return self._update(query)

    def _selector(self, c: str, ids: list | None, where: models.Filter | None) -> models.PointsSelector:
        if ids is not None:
            return models.PointIdsList(points=ids)
        if where is not None:
            self._strict(c, where)
            return models.FilterSelector(filter=where)
        raise ApiError(400, "Wrong input: either `points` or `filter` is required")

    def _set_payload(self, c: str, query: dict[str, str], body: Any) -> dict:
        req = parse_body(models.SetPayload, body)
        selector = self._selector(c, req.points, req.filter)
        engine_call(lambda: self.engine.set_payload(c, payload=req.payload, points=selector, key=req.key, wait=True))
        return self._update(query)

    def _overwrite_payload(self, c: str, query: dict[str, str], body: Any) -> dict:
        req = parse_body(models.SetPayload, body)
        selector = self._selector(c, req.points, req.filter)
        engine_call(lambda: self.engine.overwrite_payload(c, payload=req.payload, points=selector, wait=True))
        return self._update(query)

    def _delete_payload(self, c: str, query: dict[str, str], body: Any) -> dict:
        req = parse_body(models.DeletePayload, body)
        selector = self._selector(c, req.points, req.filter)
        engine_call(lambda: self.engine.delete_payload(c, keys=req.keys, points=selector, wait=True))
        return self._update(query)

    def _clear_payload(self, c: str, query: dict[str, str], body: Any) -> dict:
        selector = parse_body(models.PointsSelector, body)
        if isinstance(selector, models.FilterSelector):
            self._strict(c, selector.filter)
        engine_call(lambda: self.engine.clear_payload(c, points_selector=selector, wait=True))
        return self._update(query)

    def _retrieve(self, c: str, body: Any, **_: Any) -> list:
        req = parse_body(models.PointRequest, body)
        got = engine_call(lambda: self.engine.retrieve(
            c, ids=req.ids, with_payload=default(req.with_payload, True),
            with_vectors=default(req.with_vector, False)))
        return [p.model_dump(mode="json") for p in got]

    def _get_point(self, c: str, pid: str, **_: Any) -> dict:
        ident: int | str = int(pid) if pid.isdigit() else pid
        got = engine_call(lambda: self.engine.retrieve(c, ids=[ident], with_payload=True, with_vectors=True))
        if not got:
            raise ApiError(404, f"Not found: No point with id {pid} found")
        return got[0].model_dump(mode="json")

    def _scroll(self, c: str, body: Any, **_: Any) -> dict:
        req = parse_body(models.ScrollRequest, body or {})
        self._strict(c, req.filter)
        points, offset = engine_call(lambda: self.engine.scroll(
            c, scroll_filter=req.filter, limit=default(req.limit, 10), order_by=req.order_by, offset=req.offset,
            with_payload=default(req.with_payload, True), with_vectors=default(req.with_vector, False)))
        return models.ScrollResult(points=points, next_page_offset=offset).model_dump(mode="json")

    def _count(self, c: str, body: Any, **_: Any) -> dict:
        req = parse_body(models.CountRequest, body or {})
        self._strict(c, req.filter)
        return engine_call(lambda: self.engine.count(c, count_filter=req.filter, exact=True)).model_dump(mode="json")

    def _facet(self, c: str, body: Any, **_: Any) -> dict:
        """``POST /collections/{c}/facet``: value counts of a payload key; as on a server, the key needs a payload
        index (400 otherwise, strict or not)."""
        req = parse_body(models.FacetRequest, body or {})
        if req.key not in self.indexes.get(c, {}):
            raise ApiError(400, f'Bad request: Index required but not found for "{req.key}" of one of the following '
                                "types: [keyword, integer, uuid]. Help: Create an index for this key.")
        self._strict(c, req.filter)
        return engine_call(lambda: self.engine.facet(c, key=req.key, facet_filter=req.filter,
                                                 limit=default(req.limit, 10), exact=bool(req.exact))
                       ).model_dump(mode="json")

    def _query_one(self, c: str, req: models.QueryRequest) -> models.QueryResponse:
        self._strict(c, req.filter)
        for where in prefetch_filters(req.prefetch):
            self._strict(c, where)
        return engine_call(lambda: self.engine.query_points(
            c, query=req.query, using=req.using, prefetch=req.prefetch, query_filter=req.filter,
            search_params=req.params, limit=default(req.limit, 10), offset=req.offset,
            with_payload=default(req.with_payload, False), with_vectors=default(req.with_vector, False),
            score_threshold=req.score_threshold, lookup_from=req.lookup_from))

    def _query(self, c: str, body: Any, **_: Any) -> dict:
        return self._query_one(c, parse_body(models.QueryRequest, body or {})).model_dump(mode="json")

    def _query_batch(self, c: str, body: Any, **_: Any) -> list:
        req = parse_body(models.QueryRequestBatch, body)
        return [self._query_one(c, r).model_dump(mode="json") for r in req.searches]
