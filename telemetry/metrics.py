"""The process's Prometheus metrics (``prometheus-client``) and the one function per event that moves them.

Every metric is named ``chatops_...`` in base units (seconds), counters end in ``_total``, and every label
has a small bounded set of values: platforms, routes and outcomes are the agent's own words, Web API
methods and error codes are checked against a pattern (anything else is ``other``), and source names come
from the operator's configuration. User text, ids and trace ids never become labels.

The metrics live in :data:`REGISTRY`, this module's own :class:`~prometheus_client.CollectorRegistry`,
not in ``prometheus_client``'s default one: the counters are process-wide (one process serves one bot),
while the web app adds its own scrape-time collectors (pages per source, pending actions) bound to its
index and state store; :func:`bot.server.create_app` builds a registry per app that reads this one
(:data:`PROCESS_METRICS`) plus those collectors, so two apps in one process (tests) never collide, and
a library that registers in the default registry cannot leak onto ``/metrics``.

Functions (all cheap, thread-safe, never raise for a bad label: it becomes ``other``):
:func:`count_turn`, :func:`count_turn_error`, :func:`count_feedback`, :func:`count_api_error`,
:func:`count_rate_limited`, :func:`count_sync_run`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

__all__ = ["REGISTRY", "PROCESS_METRICS", "TURNS", "TURN_SECONDS", "REFUSALS", "CITATIONS", "FEEDBACK", "FEEDBACK_REASON",
           "API_ERRORS", "RATE_LIMITED", "SYNC_RUNS", "OUTCOMES", "REFUSAL_REASONS", "count_turn",
           "count_turn_error", "count_feedback", "count_api_error", "count_rate_limited", "count_sync_run",
           "label"]

REGISTRY = CollectorRegistry(auto_describe=True)
"""The registry holding every metric below (see the module docstring for why not the default one)."""

OUTCOMES = ("answered", "refused", "replied", "action", "error")
"""A turn's outcomes: ``agent.agent.turn_outcome``'s four, and ``error`` (the agent raised)."""

REFUSAL_REASONS = ("no_close_passage", "answer_type_missing", "specific_term_missing", "too_few_passages",
                   "unverified_citations", "withheld", "no_access", "index_unavailable", "llm_unsupported",
                   "compliance", "other")
"""The bounded values of ``chatops_refusals_total``'s ``reason`` (``app.metrics.refusal_reason`` maps to them)."""

PLATFORMS = ("slack", "teams", "cli", "mcp")
FEEDBACK_VALUES = ("helpful", "not_helpful")
FEEDBACK_REASONS = ("wrong", "outdated", "incomplete", "other")
SYNC_KINDS = ("content", "permissions")
SYNC_OUTCOMES = ("ok", "failed", "busy")

TURNS = Counter("chatops_turns_total", "Chat turns answered by the agent, by platform, route and outcome.",
                ["platform", "route", "outcome"], registry=REGISTRY)
TURN_SECONDS = Histogram("chatops_turn_duration_seconds", "Time the agent took for a turn (retrieval, gate, "
                         "LLM), by platform.", ["platform"], registry=REGISTRY,
                         buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60))
REFUSALS = Counter("chatops_refusals_total", "Turns refused for lack of evidence, by platform and reason.",
                   ["platform", "reason"], registry=REGISTRY)
CITATIONS = Histogram("chatops_answer_citations", "Distinct cited passages per answered turn.", ["platform"],
                      registry=REGISTRY, buckets=(1, 2, 3, 4, 5, 6, 8, 10))
FEEDBACK = Counter("chatops_feedback_total", "Feedback clicks on answers, by platform and value "
                   "(helpful, not_helpful).", ["platform", "value"], registry=REGISTRY)
FEEDBACK_REASON = Counter("chatops_feedback_reasons_total", "Reasons given for \"not helpful\" (the feedback "
                          "form), by platform and reason (wrong, outdated, incomplete, other).",
                          ["platform", "reason"], registry=REGISTRY)
API_ERRORS = Counter("chatops_chat_api_errors_total", "Chat platform Web API calls that failed for good, by "
                     "platform, method and error code (Slack's error, or the HTTP status).",
                     ["platform", "method", "code"], registry=REGISTRY)
RATE_LIMITED = Counter("chatops_chat_api_rate_limited_total", "HTTP 429 answers from a chat platform's Web "
                       "API (each one, retried or not), by platform and method.", ["platform", "method"],
                       registry=REGISTRY)
SYNC_RUNS = Counter("chatops_sync_runs_total", "Sync runs by source, kind (content, permissions) and outcome "
                    "(ok, failed, busy: another run held the lock).", ["source", "kind", "outcome"],
                    registry=REGISTRY)

_TOKEN = re.compile(r"^[A-Za-z0-9_.:-]{1,60}$")


def label(value: object, allowed: Iterable[str] | None = None) -> str:
    """``value`` as a label value: one of ``allowed`` (when given), else a short token of letters, digits and
    ``_.:-`` (Slack method names and error codes, HTTP statuses, source names); anything else is ``other``."""
    text = str(value or "").strip()
    if allowed is not None:
        return text if text in allowed else "other"
    return text if _TOKEN.match(text) else "other"


def count_turn(platform: str, route: str, outcome: str, seconds: float, citations: int = 0,
               refusal_reason: str | None = None) -> None:
    """Count one finished turn.

    Args:
        platform: ``slack``, ``teams``, ``cli`` or ``mcp`` (an AI assistant through ``chatops mcp``).
        route: the agent's route (``knowledge``, ``followup``, ``smalltalk``...).
        outcome: one of :data:`OUTCOMES`.
        seconds: how long the agent took.
        citations: distinct cited passages (observed for ``answered`` turns only).
        refusal_reason: one of :data:`REFUSAL_REASONS` for refused turns.
    """
    platform = label(platform, PLATFORMS)
    outcome = label(outcome, OUTCOMES)
    TURNS.labels(platform, label(route), outcome).inc()
    TURN_SECONDS.labels(platform).observe(max(0.0, float(seconds)))
    if outcome == "answered":
        CITATIONS.labels(platform).observe(citations)
    if outcome == "refused":
        REFUSALS.labels(platform, label(refusal_reason, REFUSAL_REASONS)).inc()


def count_turn_error(platform: str, route: str = "unknown") -> None:
    """Count a turn whose agent raised (outcome ``error``)."""
    TURNS.labels(label(platform, PLATFORMS), label(route), "error").inc()


def count_feedback(platform: str, value: str) -> None:
    """Count one feedback click (``helpful`` or ``not_helpful``)."""
    FEEDBACK.labels(label(platform, PLATFORMS), label(value, FEEDBACK_VALUES)).inc()


def count_feedback_reason(platform: str, reason: str) -> None:
    """Count one reason given for a "not helpful" vote (the vote itself was counted by :func:`count_feedback`)."""
    FEEDBACK_REASON.labels(label(platform, PLATFORMS), label(reason, FEEDBACK_REASONS)).inc()


def count_api_error(platform: str, method: str, code: str) -> None:
    """Count a Web API call that failed for good (``code``: Slack's error code or the HTTP status)."""
    API_ERRORS.labels(label(platform, PLATFORMS), label(method), label(code)).inc()


def count_rate_limited(platform: str, method: str) -> None:
    """Count one HTTP 429 answer of a chat platform's Web API."""
    RATE_LIMITED.labels(label(platform, PLATFORMS), label(method)).inc()


def count_sync_run(source: str, kind: str, outcome: str) -> None:
    """Count one sync run of ``source`` (``kind``: content or permissions; ``outcome``: ok, failed or busy)."""
    SYNC_RUNS.labels(label(source), label(kind, SYNC_KINDS), label(outcome, SYNC_OUTCOMES)).inc()


class _ProcessMetrics(Collector):
    """Yields every metric of :data:`REGISTRY`, so a per-app registry can include them."""

    def collect(self) -> Iterator[Metric]:
        yield from REGISTRY.collect()

    def describe(self) -> Iterator[Metric]:
        return iter(())  # the names are checked in REGISTRY already; an app registers this once


PROCESS_METRICS = _ProcessMetrics()
"""A collector of the process-wide metrics, to register in a per-app registry."""
