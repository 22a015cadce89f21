"""``telemetry.timing.timed``: the block's wall time measured, its span opened with the attributes given, and an
exception leaving the block propagated after its time was recorded (and recorded on the span).

The spans go to OpenTelemetry's in-memory exporter (the SDK's own, synchronous) through the tracer
:mod:`telemetry.tracing` uses, so nothing leaves the process; tests/test_tracing.py checks the OTLP export end to end.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from agent.models import Trace
from telemetry import tracing
from telemetry.timing import timed


@pytest.fixture
def exported(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """Tracing on, its spans kept in memory (what :func:`telemetry.tracing.configure_tracing` sets up, with the
    in-memory exporter in place of OTLP/HTTP)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tracing, "_tracer", provider.get_tracer("test"))
    yield exporter
    provider.shutdown()


def test_the_elapsed_time_is_measured_and_the_span_opened_with_its_attributes(exported: InMemorySpanExporter) -> None:
    with timed("chatops.step", {"chatops.source": "handbook"}) as clock:
        assert clock.seconds is None
        time.sleep(0.05)
        inside = clock.elapsed()
        clock.span.set_attribute("chatops.outcome", "ok")
    assert 0.05 <= inside <= clock.seconds < 5
    assert clock.elapsed() == clock.seconds and clock.ms == clock.seconds * 1000
    [span] = exported.get_finished_spans()
    assert span.name == "chatops.step"
    assert dict(span.attributes) == {"chatops.source": "handbook", "chatops.outcome": "ok"}
    assert (span.end_time - span.start_time) / 1e9 == pytest.approx(clock.seconds, abs=0.01)


def test_an_exception_propagates_and_its_time_is_still_recorded(exported: InMemorySpanExporter) -> None:
    with pytest.raises(RuntimeError, match="the step failed"):
        with timed("chatops.step") as clock:
            time.sleep(0.02)
            raise RuntimeError("the step failed")
    assert clock.seconds is not None and clock.seconds >= 0.02
    [span] = exported.get_finished_spans()
    assert span.status.status_code == StatusCode.ERROR
    assert [e.name for e in span.events] == ["exception"]


def test_spans_nest_under_the_span_open_when_they_start(exported: InMemorySpanExporter) -> None:
    with timed("chatops.turn") as turn:
        with timed("chatops.search"):
            pass
    inner, outer = exported.get_finished_spans()
    assert (inner.name, outer.name) == ("chatops.search", "chatops.turn")
    assert inner.parent is not None and inner.parent.span_id == outer.context.span_id
    assert turn.seconds is not None


def test_without_tracing_the_time_is_still_measured() -> None:
    assert not tracing.tracing_enabled()
    with timed("chatops.step", {"chatops.source": "handbook"}) as clock:
        clock.span.set_attributes({"ignored": True})
    assert clock.seconds is not None and clock.seconds >= 0


def test_a_trace_stage_adds_its_time_to_the_timings_also_when_it_raises(exported: InMemorySpanExporter) -> None:
    trace = Trace()
    with trace.timed("gate"):
        time.sleep(0.01)
    with pytest.raises(ValueError):
        with trace.timed("gate"):
            raise ValueError("bad evidence")
    assert trace.timings_ms["gate"] >= 10
    assert [s.name for s in exported.get_finished_spans()] == ["chatops.gate", "chatops.gate"]
