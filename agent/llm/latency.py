"""Measured call latency per model, so a turn can tell before a call whether it still fits.

:class:`LatencyMeter` keeps, per model, an exponentially weighted mean of seconds per completion
token (the call's whole wall time over its completion tokens, so prompt processing and the round
trip are folded in) and of seconds per call. A call that timed out is recorded with the tokens it
was allowed (a lower bound of how slow the model is). :meth:`LatencyMeter.estimate_ms` predicts a
step from the tokens it usually writes; before any call was measured it predicts 0 (optimistic:
the first call of a process is what measures the model), and a model not measured yet is taken to be
as slow as the slowest measured one.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

__all__ = ["LatencyMeter", "ModelLatency"]


@dataclass(slots=True)
class ModelLatency:
    """What was measured for one model: calls, mean seconds per completion token and per call."""

    calls: int = 0
    s_per_token: float = 0.0
    s_per_call: float = 0.0

    @property
    def tokens_per_s(self) -> float:
        """Completion tokens per second (0 before the first measurement)."""
        return 1 / self.s_per_token if self.s_per_token else 0.0


class LatencyMeter:
    """See the module docstring.

    Args:
        alpha: weight of the newest measurement in the running means (0 < alpha <= 1).
    """

    def __init__(self, alpha: float = 0.5) -> None:
        if not 0 < alpha <= 1:
            raise ValueError("alpha must be in (0, 1]")
        self.alpha = alpha
        self._models: dict[str, ModelLatency] = {}
        self._lock = threading.Lock()

    def observe(self, model: str, seconds: float, completion_tokens: int) -> None:
        """Record one call of ``model``: its wall time and the completion tokens it produced (for a
        timed-out call, the tokens it was allowed)."""
        spt = seconds / max(1, completion_tokens)
        with self._lock:
            m = self._models.setdefault(model, ModelLatency())
            a = self.alpha if m.calls else 1.0
            m.s_per_token = (1 - a) * m.s_per_token + a * spt
            m.s_per_call = (1 - a) * m.s_per_call + a * seconds
            m.calls += 1

    def get(self, model: str) -> ModelLatency:
        """What was measured for ``model`` (all zeros when nothing was)."""
        with self._lock:
            m = self._models.get(model)
            return ModelLatency(m.calls, m.s_per_token, m.s_per_call) if m else ModelLatency()

    def estimate_ms(self, model: str, completion_tokens: int) -> float:
        """Predicted milliseconds of a call of ``model`` writing about ``completion_tokens`` tokens; a model
        not measured yet is taken to be as slow as the slowest one measured (on one server they share the
        hardware)."""
        with self._lock:
            m = self._models.get(model)
            spt = m.s_per_token if m else max((x.s_per_token for x in self._models.values()), default=0.0)
        return spt * completion_tokens * 1000
