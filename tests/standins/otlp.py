"""A stand-in OpenTelemetry collector on 127.0.0.1: the OTLP/HTTP traces endpoint (``POST /v1/traces``).

It speaks the wire format the real collector does: a protobuf ``ExportTraceServiceRequest`` body with
``Content-Type: application/x-protobuf`` (anything else is answered 415, a body that does not decode 400),
answered with an empty ``ExportTraceServiceResponse``. Every span received is kept, flattened to
:class:`ReceivedSpan` (hex ids, attributes as a dict), for tests to wait on.

Used by tests/test_tracing.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (ExportTraceServiceRequest,
                                                                       ExportTraceServiceResponse)

from tests.standins.base import StandIn

__all__ = ["OtlpStandin", "ReceivedSpan"]


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as received: names, hex ids, attributes and the resource's ``service.name``."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]
    service: str


def _value(v) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind in {"string_value", "bool_value", "int_value", "double_value"} else str(v)


class OtlpStandin(StandIn):
    """Start with ``OtlpStandin().start()``; :attr:`url` is the ``OTEL_EXPORTER_OTLP_ENDPOINT`` to give."""

    def __init__(self) -> None:
        super().__init__()
        self.spans: list[ReceivedSpan] = []
        self.requests = 0

    def web_app(self) -> web.Application:
        """``POST /v1/traces``."""
        app = web.Application()
        app.router.add_post("/v1/traces", self._traces)
        return app

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return self.origin

    async def _traces(self, request: web.Request) -> web.Response:
        if request.content_type != "application/x-protobuf":
            return web.Response(status=415, text="OTLP/HTTP traces must be application/x-protobuf")
        try:
            req = ExportTraceServiceRequest.FromString(await request.read())
        except DecodeError as exc:
            return web.Response(status=400, text=f"not an ExportTraceServiceRequest: {exc}")
        got = []
        for rs in req.resource_spans:
            service = next((_value(a.value) for a in rs.resource.attributes if a.key == "service.name"), "")
            for ss in rs.scope_spans:
                for s in ss.spans:
                    got.append(ReceivedSpan(s.name, s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(),
                                            {a.key: _value(a.value) for a in s.attributes}, service))
        with self.lock:
            self.requests += 1
            self.spans.extend(got)
            self.lock.notify_all()
        return web.Response(body=ExportTraceServiceResponse().SerializeToString(),
                            content_type="application/x-protobuf")

    def wait_for(self, predicate: Callable[[list[ReceivedSpan]], Any], timeout: float = 30) -> Any:
        """Wait until ``predicate(spans)`` is truthy and return it.

        Raises:
            AssertionError: after ``timeout`` seconds, with the span names received so far.
        """
        return self.wait_until(lambda: predicate(list(self.spans)), timeout,
                               lambda: f"spans so far: {[s.name for s in self.spans]}")
