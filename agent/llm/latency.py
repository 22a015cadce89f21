"""Measured call latency per model, so a turn can tell before a call whether it still fits.

:class:`LatencyMeter` keeps, per model, the last calls' wall times (the server's time: request sent to
response read) with the completion tokens each wrote, and predicts a call writing ``n`` tokens by a
least-squares line ``seconds = a + b * n`` over them (``a``: prompt processing and the round trip;
``b``: seconds per token); once calls of different prompt sizes are measured, by a plane
``seconds = a + p * prompt tokens + b * n`` (a slow server's prompt processing is the larger part of an
answer call over six passages), the prompt's tokens estimated from its characters at the ratio measured. With one call measured, or calls that all wrote about as much, the
prediction is their mean time per call (optimistic on purpose: a prediction too low costs one call that
times out inside the budget, which keeps a reserve for the extractive answer; one too high would never
use the model). A call that timed out sets a floor: no prediction is below the last timed-out call's
time. A model not measured yet is predicted as the slowest model measured on the same meter (one server
shares its hardware); before any call, the prediction is 0.

Measurements expire: once a model's newest one (call or timeout) is older than ``max_age_s`` (default
:data:`MAX_AGE_S`), all of them are forgotten and the model is predicted as never measured. Without that, a
model measured too slow during a load spike (or a cold start) would never be sent another call, so never
measured again, and a turn would skip it for good (kept across processes in ``llm-servers.json``, for every
later process too): SmolLM2 on a machine at load 13 made every later turn of a dev set skip it.

:meth:`LatencyMeter.affordable_tokens` inverts the prediction: how many completion tokens a call may ask
for (its ``max_tokens``) and still end within the seconds left, so that a call the client gives up on never
leaves a long generation occupying a single-slot server (llama.cpp) for the calls after it.
:meth:`LatencyMeter.snapshot` and :meth:`LatencyMeter.seed` carry the measurements across processes
(:class:`agent.llm.memory.ServerMemory`).
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["LatencyMeter", "ModelLatency"]


#: Characters per prompt token before any call is measured (English text, JSON and markup).
CHARS_PER_TOKEN = 4.0

#: Seconds after its newest measurement that a model's measurements are forgotten (see the module docstring): at
#: most one turn in this time pays for finding out that a model measured too slow is fast again.
MAX_AGE_S = 300.0


@dataclass(slots=True)
class ModelLatency:
    """What was measured for one model: recent ``(seconds, completion tokens, prompt tokens)``, the prompts'
    characters per token, the last timeout, and when the newest measurement was taken (Unix seconds)."""

    calls: deque[tuple[float, int, int]] = field(default_factory=lambda: deque(maxlen=20))
    timed_out_s: float = 0.0
    prompt_chars: int = 0
    prompt_tokens: int = 0
    measured_at: float = 0.0

    def prompt_tokens_of(self, chars: int) -> int:
        """Prompt tokens of a request of ``chars`` characters, at the ratio measured (4 characters a token
        before any)."""
        ratio = self.prompt_chars / self.prompt_tokens if self.prompt_tokens and self.prompt_chars else CHARS_PER_TOKEN
        return int(chars / max(ratio, 0.5))

    def _fit3(self) -> tuple[float, float, float] | None:
        """``(a, p, b)`` of ``seconds = a + p * prompt tokens + b * completion tokens`` over the calls, when
        they spread over both sizes and the fit is physical (no negative rate); else None."""
        if len(self.calls) < 4:
            return None
        secs = np.array([c[0] for c in self.calls], dtype=float)
        comp = np.array([c[1] for c in self.calls], dtype=float)
        prompt = np.array([c[2] for c in self.calls], dtype=float)
        if prompt.std() < 50 or comp.std() < 5:
            return None
        x = np.column_stack([np.ones_like(secs), prompt, comp])
        (a, p, b), *_ = np.linalg.lstsq(x, secs, rcond=None)
        if p < 0 or b <= 0:
            return None
        return max(0.0, float(a)), float(p), float(b)

    def _fit1(self) -> tuple[float, float] | None:
        """``(a, b)`` of ``seconds = a + b * completion tokens``, when the calls spread over sizes; else None."""
        toks = [c[1] for c in self.calls]
        if len(self.calls) < 2:
            return None
        mean_s, mean_t = statistics.fmean(c[0] for c in self.calls), statistics.fmean(toks)
        spread = sum((t - mean_t) ** 2 for t in toks)
        if spread < 25:
            return None
        b = max(0.0, sum((c[1] - mean_t) * (c[0] - mean_s) for c in self.calls) / spread)
        return max(0.0, mean_s - b * mean_t), b

    def predict_s(self, tokens: int, prompt_chars: int | None = None) -> float:
        """Seconds for a call writing ``tokens`` tokens, its prompt ``prompt_chars`` characters long when
        known (see the module docstring)."""
        if not self.calls:
            return self.timed_out_s
        fit3 = self._fit3() if prompt_chars is not None else None
        if fit3 is not None:
            a, p, b = fit3
            guess = a + p * self.prompt_tokens_of(prompt_chars or 0) + b * tokens
        elif (fit1 := self._fit1()) is not None:
            guess = fit1[0] + fit1[1] * tokens
        else:  # no usable spread of sizes: the mean call
            guess = statistics.fmean(c[0] for c in self.calls)
        return max(guess, self.timed_out_s)

    @property
    def tokens_per_s(self) -> float:
        """Completion tokens per second over the recent calls (0 before any)."""
        secs = sum(c[0] for c in self.calls)
        return sum(c[1] for c in self.calls) / secs if secs else 0.0

    def affordable(self, seconds: float, prompt_chars: int | None = None) -> int | None:
        """Completion tokens a call can write within ``seconds`` (None before any measured call).

        With calls spread over prompt and completion sizes, the fitted plane (the prompt's own time taken off
        first, ``prompt_chars`` long); with a spread of completion sizes, the fitted line ``a + b * n``;
        otherwise every second of the calls measured is counted as writing (``tokens_per_s``, the prompt's
        time included): a cautious cap, lifted as calls of other sizes are measured."""
        if not self.calls or sum(c[1] for c in self.calls) <= 0:
            return None
        fit3 = self._fit3() if prompt_chars is not None else None
        if fit3 is not None:
            a, p, b = fit3
            return max(0, int((seconds - a - p * self.prompt_tokens_of(prompt_chars or 0)) / b))
        fit1 = self._fit1()
        if fit1 is not None and fit1[1] > 0:
            return max(0, int((seconds - fit1[0]) / fit1[1]))
        return max(0, int(seconds * self.tokens_per_s))


class LatencyMeter:
    """See the module docstring. Thread-safe: one meter serves every turn of a process.

    Args:
        max_age_s: seconds after a model's newest measurement that all of its measurements are forgotten.
        clock: the time now, in Unix seconds (kept across processes, so wall-clock time).
    """

    def __init__(self, max_age_s: float = MAX_AGE_S, clock: Callable[[], float] = time.time) -> None:
        self._models: dict[str, ModelLatency] = {}
        self._lock = threading.Lock()
        self.max_age_s = max_age_s
        self.clock = clock

    def _current(self) -> dict[str, ModelLatency]:
        """The models, those whose newest measurement is older than :attr:`max_age_s` forgotten (lock held)."""
        now = self.clock()
        for name in [n for n, m in self._models.items() if now - m.measured_at > self.max_age_s]:
            del self._models[name]
        return self._models

    def observe(self, model: str, seconds: float, completion_tokens: int, timed_out: bool = False,
                prompt_tokens: int = 0, prompt_chars: int = 0) -> None:
        """Record one call of ``model``: its time, the completion tokens it wrote and its prompt (tokens as
        the server counted them, characters as sent); a call that ``timed_out`` sets the floor of later
        predictions instead."""
        with self._lock:
            m = self._current().setdefault(model, ModelLatency())
            m.measured_at = self.clock()
            if timed_out:
                m.timed_out_s = seconds
                return
            m.calls.append((seconds, completion_tokens, prompt_tokens))
            if prompt_tokens > 0 and prompt_chars > 0:
                m.prompt_tokens += prompt_tokens
                m.prompt_chars += prompt_chars

    def estimate_ms(self, model: str, completion_tokens: int, prompt_chars: int | None = None) -> float:
        """Predicted milliseconds of a call of ``model`` writing about ``completion_tokens`` tokens after a
        prompt of ``prompt_chars`` characters (when known)."""
        with self._lock:
            models = self._current()
            m = models.get(model)
            if m is not None and (m.calls or m.timed_out_s):
                return m.predict_s(completion_tokens, prompt_chars) * 1000
            return max((x.predict_s(completion_tokens, prompt_chars) for x in models.values()),
                       default=0.0) * 1000

    def tokens_per_s(self, model: str) -> float:
        """Completion tokens per second measured for ``model`` (0 before any call)."""
        with self._lock:
            m = self._current().get(model)
            return m.tokens_per_s if m else 0.0

    def affordable_tokens(self, model: str, seconds: float, prompt_chars: int | None = None) -> int | None:
        """Completion tokens ``model`` can write within ``seconds`` after a prompt of ``prompt_chars``
        characters, at its measured speed (see :meth:`ModelLatency.affordable`); a model not measured yet is
        taken to be as slow as the slowest one measured; None before any measured call."""
        with self._lock:
            models = self._current()
            m = models.get(model)
            if m is not None and m.calls:
                return m.affordable(seconds, prompt_chars)
            # not measured yet: as the slowest model measured on this meter (one server shares its hardware)
            fits = [n for x in models.values() if (n := x.affordable(seconds, prompt_chars)) is not None]
            return min(fits) if fits else None

    def snapshot(self, model: str) -> dict[str, Any]:
        """What was measured for ``model``, as JSON: ``{"calls": [[seconds, completion tokens, prompt tokens],
        ...], "prompt_chars": n, "prompt_tokens": n, "measured_at": unix seconds}`` (the timeout floor is this
        process's own: it is not carried over)."""
        with self._lock:
            m = self._current().get(model) or ModelLatency()
            return {"calls": [[round(s, 3), c, p] for s, c, p in m.calls], "prompt_chars": m.prompt_chars,
                    "prompt_tokens": m.prompt_tokens, "measured_at": round(m.measured_at, 3)}

    def seed(self, model: str, snapshot: dict[str, Any]) -> None:
        """Start ``model``'s measurements from a :meth:`snapshot` (another process's); malformed entries are
        ignored, and a snapshot without ``measured_at`` (written before it was kept) counts as expired."""
        snapshot = snapshot if isinstance(snapshot, dict) else {}
        calls = []
        for item in snapshot.get("calls") or []:
            try:
                secs, toks, prompt = float(item[0]), int(item[1]), int(item[2]) if len(item) > 2 else 0
            except (TypeError, ValueError, IndexError):
                continue
            if secs >= 0 and toks >= 0 and prompt >= 0:
                calls.append((secs, toks, prompt))
        try:
            chars, tokens = max(0, int(snapshot.get("prompt_chars") or 0)), max(0, int(snapshot.get("prompt_tokens") or 0))
            at = float(snapshot.get("measured_at") or 0.0)
        except (TypeError, ValueError):
            chars = tokens = 0
            at = 0.0
        if not calls or self.clock() - at > self.max_age_s:
            return
        with self._lock:
            m = self._current().setdefault(model, ModelLatency())
            m.calls.extend(calls)
            m.prompt_chars += chars
            m.prompt_tokens += tokens
            m.measured_at = max(m.measured_at, at)
