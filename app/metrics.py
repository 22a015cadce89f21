"""What the application adds to the Prometheus metrics (:mod:`telemetry.metrics`): the turn observer and
the scrape-time collector.

- :class:`TurnMetrics` is an agent observer (:meth:`agent.agent.Agent.observe`): every finished turn counts
  in ``chatops_turns_total`` (platform, route, outcome), ``chatops_turn_duration_seconds``,
  ``chatops_answer_citations`` (answered turns) and ``chatops_refusals_total`` (refused turns, by
  :func:`refusal_reason`).
- :class:`StoreCollector` answers at scrape time from aggregate queries (constant time in corpus size:
  no page or row reaches Python): ``chatops_index_pages`` and ``chatops_index_chunks`` per source,
  ``chatops_sync_last_success_timestamp_seconds`` and ``chatops_sync_last_success_age_seconds`` per
  source, ``chatops_pending_actions`` by state.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from agent import messages
from agent.agent import turn_outcome
from agent.models import Reply, Turn
from index.manifest import Manifest
from state import StateStore
from telemetry.metrics import count_turn

__all__ = ["TurnMetrics", "StoreCollector", "refusal_reason"]

log = logging.getLogger(__name__)

# The evidence gate's refusal reasons (agent/gate.py, ``refuse(...)``) start with these words; what follows
# (the missing terms, counts) is per question and never becomes a label.
_GATE_REASONS = (
    ("no passage was close enough", "no_close_passage"),
    ("no supporting passage states", "answer_type_missing"),
    ("no supporting passage mentions", "specific_term_missing"),
    ("only ", "too_few_passages"),
)


def refusal_reason(reply: Reply) -> str:
    """The bounded reason (one of :data:`telemetry.metrics.REFUSAL_REASONS`) a refused ``reply`` was refused for.

    Read from the turn's trace, latest decision first: the channel-audience access refusal
    (``no_access``), the agent's citation check (``unverified_citations``, or ``withheld`` when the rest
    was screened out), the LLM planner's compliance refusal (``compliance``), then the evidence gate's
    verdict (``no_close_passage``, ``answer_type_missing``, ``specific_term_missing``,
    ``too_few_passages``), or ``llm_unsupported`` when the gate passed and the model's draft could not be
    tied to the passages; ``other`` for anything else.
    """
    trace = reply.trace
    for step in reversed(trace.steps):
        name = step.get("step")
        if name == "access_refusal":
            return "no_access"
        if name == "refuse":
            return "withheld" if "left out as credentials" in str(step.get("reason", "")) else "unverified_citations"
    if reply.text == messages.COMPLIANCE_REFUSAL:
        return "compliance"
    gate = trace.gate or {}
    if gate.get("sufficient") is False:
        reason = str(gate.get("reason", ""))
        for prefix, code in _GATE_REASONS:
            if reason.startswith(prefix):
                return code
        return "other"
    if gate.get("sufficient"):
        return "llm_unsupported"
    return "other"


class TurnMetrics:
    """An agent observer that counts every finished turn (see the module docstring)."""

    def __call__(self, turn: Turn, reply: Reply) -> None:
        """Count ``turn`` and its ``reply``."""
        outcome = turn_outcome(reply)
        count_turn(turn.platform, reply.route or reply.trace.route or "unknown", outcome,
                   reply.trace.timings_ms.get("total", 0.0) / 1000.0,
                   citations=len({c.chunk_id for c in reply.citations}),
                   refusal_reason=refusal_reason(reply) if outcome == "refused" else None)


class StoreCollector(Collector):
    """Scrape-time gauges from the index manifest and the state store (see the module docstring).

    Args:
        manifest: the index's manifest (pages and chunks per source).
        store: the state store (sync runs, pending actions).
        clock: seconds since the epoch (tests may pass their own).
        index_id: the id of the index ``manifest`` describes: the last successful sync per source is
            that of runs into this index (replicas sharing the state store each report their own);
            ``None``: runs into any index.

    A query that fails (database down) is logged and its gauges are left out of that scrape; ``/readyz``
    is where the failure shows.
    """

    def __init__(self, manifest: Manifest, store: StateStore, clock: Callable[[], float] = time.time, *, index_id: str | None = None) -> None:
        self.index_id = index_id
        self.manifest = manifest
        self.store = store
        self.clock = clock

    def describe(self) -> Iterator[GaugeMetricFamily]:
        """Nothing: the registry need not run the queries when this collector is registered."""
        return iter(())

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """The gauges, from three aggregate queries."""
        try:
            by_source = self.manifest.counts_by_source()
        except Exception:  # noqa: BLE001 - a scrape never fails for one source of numbers
            log.warning("metrics: cannot read the index manifest", exc_info=True)
        else:
            pages = GaugeMetricFamily("chatops_index_pages", "Pages indexed, by source.", labels=["source"])
            chunks = GaugeMetricFamily("chatops_index_chunks", "Chunks indexed, by source.", labels=["source"])
            for source, (p, c) in sorted(by_source.items()):
                pages.add_metric([source], p)
                chunks.add_metric([source], c)
            yield pages
            yield chunks
        try:
            last = self.store.last_successful_runs(self.index_id)
            pending = self.store.pending_counts()
        except Exception:  # noqa: BLE001
            log.warning("metrics: cannot read the state store", exc_info=True)
            return
        now = self.clock()
        stamp = GaugeMetricFamily("chatops_sync_last_success_timestamp_seconds",
                                  "When the latest successful sync run of a source finished (Unix time).",
                                  labels=["source"])
        age = GaugeMetricFamily("chatops_sync_last_success_age_seconds",
                                "Seconds since the latest successful sync run of a source finished.", labels=["source"])
        for source, at in sorted(last.items()):
            stamp.add_metric([source], at.timestamp())
            age.add_metric([source], max(0.0, now - at.timestamp()))
        yield stamp
        yield age
        actions = GaugeMetricFamily("chatops_pending_actions", "Side-effect actions in the state store, by state "
                                    "(pending, executing, done, cancelled, failed).", labels=["state"])
        for state in ("pending", "executing", "done", "cancelled", "failed"):
            actions.add_metric([state], pending.get(state, 0))
        yield actions
