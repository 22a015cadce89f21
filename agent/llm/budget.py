"""Per-turn budgets for LLM work: calls, tokens and wall time.

The loop asks :meth:`TurnBudget.allows` before each optional step (reflection, claim check,
compliance) and degrades when the budget runs low instead of overrunning; every degradation is
recorded so the trace can say what was skipped and why.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TurnBudget", "Usage", "BudgetExceeded"]


class BudgetExceeded(Exception):
    """The turn has no budget left for the call it was about to make."""


@dataclass(slots=True)
class Usage:
    """Token usage and cost of a turn (cost in USD, from per-1k-token prices when configured)."""

    calls: int = 0
    failed: int = 0
    timeouts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    capped: int = 0  # calls whose max_tokens was lowered to what the time left allows at the measured speed

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def as_dict(self) -> dict[str, Any]:
        """Trace-friendly dict."""
        return {"calls": self.calls, "failed": self.failed, "timeouts": self.timeouts, "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "total_tokens": self.total_tokens, "cost_usd": round(self.cost_usd, 6), "capped": self.capped}


@dataclass(slots=True)
class TurnBudget:
    """Limits of one turn.

    Attributes:
        max_ms: wall-time budget in milliseconds, from the budget's creation.
        max_tokens: prompt + completion tokens over all calls.
        max_calls: LLM calls.
        usage: what has been spent.
        degraded: steps skipped for lack of budget, with the reason.
    """

    max_ms: float = 20_000
    max_tokens: int = 12_000
    max_calls: int = 8
    usage: Usage = field(default_factory=Usage)
    degraded: list[str] = field(default_factory=list)
    _t0: float = field(default_factory=time.perf_counter, repr=False)

    @property
    def elapsed_ms(self) -> float:
        """Milliseconds since the turn started."""
        return (time.perf_counter() - self._t0) * 1000

    @property
    def remaining_ms(self) -> float:
        """Milliseconds left (never negative)."""
        return max(0.0, self.max_ms - self.elapsed_ms)

    def allows(self, step: str, calls: int = 1, tokens: int = 1500, ms: float = 2000, reserve: int = 0) -> bool:
        """Whether an optional ``step`` costing about ``calls``/``tokens``/``ms`` still fits while
        leaving ``reserve`` calls (with ~1,500 tokens and 2 s each) for the steps that must run after
        it; records the degradation when it does not."""
        ok = (self.usage.calls + calls + reserve <= self.max_calls
              and self.usage.total_tokens + tokens + 1500 * reserve <= self.max_tokens
              and self.remaining_ms >= ms + 2000 * reserve)
        if not ok:
            self.degraded.append(f"skipped {step}: budget low (calls {self.usage.calls}/{self.max_calls}, "
                                 f"tokens {self.usage.total_tokens}/{self.max_tokens}, "
                                 f"{self.remaining_ms:.0f} ms left)")
        return ok

    def check(self) -> None:
        """Raise :class:`BudgetExceeded` when no call can be made at all."""
        if self.usage.calls >= self.max_calls or self.usage.total_tokens >= self.max_tokens or self.remaining_ms <= 0:
            raise BudgetExceeded(f"turn budget exhausted ({self.usage.calls} calls, {self.usage.total_tokens} tokens, "
                                 f"{self.elapsed_ms:.0f} ms)")

    def charge_failed(self, timed_out: bool = False) -> None:
        """Account a request that failed (an error status, a broken connection, a timeout): it is a call."""
        self.usage.calls += 1
        self.usage.failed += 1
        self.usage.timeouts += int(timed_out)

    def charge(self, prompt_tokens: int, completion_tokens: int, price_in: float = 0.0, price_out: float = 0.0) -> None:
        """Account one call's usage (prices in USD per 1,000 tokens)."""
        self.usage.calls += 1
        self.usage.prompt_tokens += prompt_tokens
        self.usage.completion_tokens += completion_tokens
        self.usage.cost_usd += prompt_tokens / 1000 * price_in + completion_tokens / 1000 * price_out
