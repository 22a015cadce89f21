"""Optional OpenTelemetry spans, exported over OTLP/HTTP when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set.

:func:`configure_tracing` (called once by the CLI with the setting) builds an ``opentelemetry-sdk``
``TracerProvider`` with a batch processor and the OTLP/HTTP protobuf exporter posting to
``ENDPOINT/v1/traces``; the SDK flushes it at exit. Without an endpoint nothing of OpenTelemetry is
imported (``chatops --help`` stays fast) and :func:`span` is a no-op costing one global read.

Spans: ``chatops.turn`` (attributes ``chatops.trace_id``, ``chatops.platform``, ``chatops.route``,
``chatops.outcome``) over the turn's timed steps (``chatops.route``, ``chatops.retrieve``, ``chatops.gate``...),
``chatops.search`` (``chatops.retriever``, ``chatops.results``) over its stages, ``chatops.llm``
(``chatops.llm.model``, ``chatops.llm.kind``) over its HTTP request, and ``chatops.sync`` (``chatops.source``,
``chatops.sync.kind``, ``chatops.outcome``) over the run; a step timed for a log field or a metric opens its
span through :func:`telemetry.timing.timed`. Never the question, the answer or a user id.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

__all__ = ["configure_tracing", "span", "tracing_enabled", "shutdown_tracing"]

log = logging.getLogger(__name__)

_tracer: Any = None
_provider: Any = None
_lock = threading.Lock()


class _NoSpan:
    """What :func:`span` yields when tracing is off: accepts attributes and drops them."""

    def set_attribute(self, key: str, value: Any) -> None:
        """Dropped."""

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        """Dropped."""


_NO_SPAN = _NoSpan()


def configure_tracing(endpoint: str | None, service_name: str = "chatops") -> bool:
    """Start exporting spans to the OTLP/HTTP collector at ``endpoint`` (e.g. ``http://otel:4318``).

    Does nothing and returns False when ``endpoint`` is empty or tracing is already configured.

    Args:
        endpoint: the collector's base URL; spans are posted to ``{endpoint}/v1/traces`` as protobuf.
        service_name: the ``service.name`` resource attribute.

    Raises:
        ValueError: when ``endpoint`` is not an ``http://`` or ``https://`` URL, or the ``otel`` extra
            (``chatops-bot[otel]``: the SDK and the OTLP exporter) is not installed.
    """
    global _tracer, _provider
    endpoint = (endpoint or "").strip()
    if not endpoint:
        return False
    if not endpoint.startswith(("http://", "https://")):
        raise ValueError(f"OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL (the collector's "
                         f"OTLP/HTTP port, usually 4318), got {endpoint!r}")
    with _lock:
        if _tracer is not None:
            return False
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError as exc:  # the CLI says so before it gets here (app.extras)
            raise ValueError("OTEL_EXPORTER_OTLP_ENDPOINT needs the otel extra, which is not installed: "
                             "pip install 'chatops-bot[otel]'") from exc

        provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces",
                                                                        timeout=10)))
        _provider = provider
        _tracer = provider.get_tracer("chatops")
    log.info("tracing: exporting spans to %s/v1/traces", endpoint.rstrip("/"))
    return True


def tracing_enabled() -> bool:
    """True once :func:`configure_tracing` started an exporter."""
    return _tracer is not None


def shutdown_tracing() -> None:
    """Flush and stop the exporter (the SDK also does it at exit); tracing is off afterwards."""
    global _tracer, _provider
    with _lock:
        provider, _provider, _tracer = _provider, None, None
    if provider is not None:
        provider.shutdown()


@contextmanager
def span(name: str, attributes: Mapping[str, Any] | None = None) -> Iterator[Any]:
    """A span named ``name`` around the block, child of the current one (a no-op when tracing is off).

    Yields the span (``set_attribute(key, value)``, ``set_attributes(mapping)``); an exception leaving the
    block is recorded on it and re-raised.
    """
    tracer = _tracer
    if tracer is None:
        yield _NO_SPAN
        return
    with tracer.start_as_current_span(name, attributes=dict(attributes or {})) as sp:
        yield sp
