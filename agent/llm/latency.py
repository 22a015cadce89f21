"""Measured call latency per model, so a turn can tell before a call whether it still fits.

:class:`LatencyMeter` keeps, per model, the last calls' wall times (the server's time: request sent to
response read) with the completion tokens each wrote, and predicts a call writing ``n`` tokens by a
least-squares line ``seconds = a + b * n`` over them (``a``: prompt processing and the round trip;
``b``: seconds per token). With one call measured, or calls that all wrote about as much, the
prediction is their mean time per call (optimistic on purpose: a prediction too low costs one call that
times out inside the budget, which keeps a reserve for the extractive answer; one too high would never
use the model). A call that timed out sets a floor: no prediction is below the last timed-out call's
time. A model not measured yet is predicted as the slowest model measured on the same meter (one server
shares its hardware); before any call, the prediction is 0.

:meth:`LatencyMeter.affordable_tokens` inverts the prediction: how many completion tokens a call may ask
for (its ``max_tokens``) and still end within the seconds left, so that a call the client gives up on never
leaves a long generation occupying a single-slot server (llama.cpp) for the calls after it.
:meth:`LatencyMeter.snapshot` and :meth:`LatencyMeter.seed` carry the measurements across processes
(:class:`agent.llm.memory.ServerMemory`).
"""

from __future__ import annotations

import statistics
import threading
from collections import deque
from dataclasses import dataclass, field

__all__ = ["LatencyMeter", "ModelLatency"]


@dataclass(slots=True)
class ModelLatency:
    """What was measured for one model: recent ``(seconds, completion tokens)`` and the last timeout."""

    calls: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=20))
    timed_out_s: float = 0.0

    def predict_s(self, tokens: int) -> float:
        """Seconds for a call writing ``tokens`` tokens (see the module docstring)."""
        if not self.calls:
            return self.timed_out_s
        secs = [s for s, _ in self.calls]
        toks = [t for _, t in self.calls]
        mean_s, mean_t = statistics.fmean(secs), statistics.fmean(toks)
        spread = sum((t - mean_t) ** 2 for t in toks)
        if len(self.calls) < 2 or spread < 25:  # no usable spread of sizes: the mean call
            guess = mean_s
        else:
            b = max(0.0, sum((t - mean_t) * (s - mean_s) for s, t in self.calls) / spread)
            a = max(0.0, mean_s - b * mean_t)
            guess = a + b * tokens
        return max(guess, self.timed_out_s)

    @property
    def tokens_per_s(self) -> float:
        """Completion tokens per second over the recent calls (0 before any)."""
        secs = sum(s for s, _ in self.calls)
        return sum(t for _, t in self.calls) / secs if secs else 0.0

    def affordable(self, seconds: float) -> int | None:
        """Completion tokens a call can write within ``seconds`` (None before any measured call).

        With a usable spread of sizes, the fitted line ``a + b * n <= seconds``; otherwise every second of
        the calls measured is counted as writing (``tokens_per_s``, the prompt's time included): a cautious
        cap, lifted as calls of other sizes are measured."""
        if not self.calls or sum(t for _, t in self.calls) <= 0:
            return None
        secs = [s for s, _ in self.calls]
        toks = [t for _, t in self.calls]
        mean_s, mean_t = statistics.fmean(secs), statistics.fmean(toks)
        spread = sum((t - mean_t) ** 2 for t in toks)
        b = sum((t - mean_t) * (s - mean_s) for s, t in self.calls) / spread if len(self.calls) >= 2 and spread >= 25 else 0.0
        if b > 0:
            a = max(0.0, mean_s - b * mean_t)
            return max(0, int((seconds - a) / b))
        return max(0, int(seconds * self.tokens_per_s))


class LatencyMeter:
    """See the module docstring. Thread-safe: one meter serves every turn of a process."""

    def __init__(self) -> None:
        self._models: dict[str, ModelLatency] = {}
        self._lock = threading.Lock()

    def observe(self, model: str, seconds: float, completion_tokens: int, timed_out: bool = False) -> None:
        """Record one call of ``model``: its time and the completion tokens it wrote; a call that
        ``timed_out`` sets the floor of later predictions instead."""
        with self._lock:
            m = self._models.setdefault(model, ModelLatency())
            if timed_out:
                m.timed_out_s = seconds
            else:
                m.calls.append((seconds, completion_tokens))

    def estimate_ms(self, model: str, completion_tokens: int) -> float:
        """Predicted milliseconds of a call of ``model`` writing about ``completion_tokens`` tokens."""
        with self._lock:
            m = self._models.get(model)
            if m is not None and (m.calls or m.timed_out_s):
                return m.predict_s(completion_tokens) * 1000
            return max((x.predict_s(completion_tokens) for x in self._models.values()), default=0.0) * 1000

    def tokens_per_s(self, model: str) -> float:
        """Completion tokens per second measured for ``model`` (0 before any call)."""
        with self._lock:
            m = self._models.get(model)
            return m.tokens_per_s if m else 0.0

    def affordable_tokens(self, model: str, seconds: float) -> int | None:
        """Completion tokens ``model`` can write within ``seconds`` at its measured speed (see
        :meth:`ModelLatency.affordable`); None while it has no measured call."""
        with self._lock:
            m = self._models.get(model)
            return m.affordable(seconds) if m else None

    def snapshot(self, model: str) -> dict:
        """What was measured for ``model``, as JSON: ``{"calls": [[seconds, tokens], ...]}`` (the timeout floor
        is this process's own: it is not carried over)."""
        with self._lock:
            m = self._models.get(model) or ModelLatency()
            return {"calls": [[round(s, 3), t] for s, t in m.calls]}

    def seed(self, model: str, snapshot: dict) -> None:
        """Start ``model``'s measurements from a :meth:`snapshot` (another process's); malformed entries are
        ignored."""
        calls = []
        for item in (snapshot or {}).get("calls") or []:
            try:
                secs, toks = float(item[0]), int(item[1])
            except (TypeError, ValueError, IndexError):
                continue
            if secs >= 0 and toks >= 0:
                calls.append((secs, toks))
        with self._lock:
            self._models.setdefault(model, ModelLatency()).calls.extend(calls)
