"""The LLM planner's settings (:class:`LLMPlannerConfig`) and each step's usual size, from which its time is
predicted at the model's measured latency."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LLMPlannerConfig", "STEP_TOKENS", "STEP_PROMPT_CHARS"]


@dataclass(frozen=True, slots=True)
class LLMPlannerConfig:
    """Models, sizes and budgets of the LLM planner."""

    planner_model: str = "gpt-4o-mini"
    answer_model: str = "gpt-4o-mini"
    k: int = 16
    passages: int = 6
    max_retries: int = 2
    claim_check: bool = True
    compliance_model_check: bool = True
    budget_ms: float = 20_000
    budget_tokens: int = 12_000
    budget_calls: int = 8
    route_cache_ttl_s: float = 3600
    answer_cache_ttl_s: float = 3600
    fallback_reserve_ms: float = 3000


#: Completion tokens each call usually writes, for predicting its time from the measured latency.
STEP_TOKENS = {"route": 40, "rewrite": 120, "reflect": 60, "answer": 200, "claims": 40, "compliance": 20}

#: Characters each call's prompt usually has (six passages of ~800 characters for reflection and the answer).
STEP_PROMPT_CHARS = {"route": 1600, "rewrite": 1400, "reflect": 5800, "answer": 5800, "claims": 3000,
                     "compliance": 1400}
