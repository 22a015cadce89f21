"""The Qdrant stand-in's nouns: its constants, the request log's entries, faults, API errors, the REST routes and
how bodies are parsed with the client's own OpenAPI models."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import pydantic
from qdrant_client import models

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


def parse_body(model: Any, body: Any) -> Any:
    """``body`` as the client's OpenAPI ``model`` (a class or a union type alias); 400 when it does not fit."""
    try:
        return pydantic.TypeAdapter(model).validate_python(body)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ApiError(400, f"Format error in JSON body: {where}: {first['msg']}") from exc


def engine_call(call: Callable[[], Any]) -> Any:
    """Run an engine call; what the engine refuses (ValueError, AssertionError) is a 400, as a server's bad input."""
    try:
        return call()
    except (ValueError, AssertionError, KeyError) as exc:
        raise ApiError(400, f"Wrong input: {exc}") from exc


def default(value: Any, default: Any) -> Any:
    return default if value is None else value


def filter_keys(where: models.Filter) -> list[str]:
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
                keys.extend(filter_keys(cond))
            elif isinstance(cond, models.NestedCondition):
                keys.append(cond.nested.key)
    return keys


def prefetch_filters(prefetch: Any) -> list[models.Filter]:
    out: list[models.Filter] = []
    for p in (prefetch if isinstance(prefetch, list) else [prefetch] if prefetch is not None else []):
        if p.filter is not None:
            out.append(p.filter)
        out.extend(prefetch_filters(p.prefetch))
    return out
