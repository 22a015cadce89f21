"""The LLM planner's structured steps: each one call whose reply is validated into a pydantic model
(:mod:`agent.llm.structured`), with one repair round and then the step's deterministic fallback
(``None``), and each skipped when the model's measured latency says it would not fit the time left.

The steps: the query rewrite, reflection on the evidence, the claim check and the compliance model check;
:meth:`StructuredSteps.ask` is the call they (and routing by JSON) share.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

from tools.knowledge_search import Evidence

from ..models import Citation, Trace, Turn
from ..text import display_text
from . import prompts
from .budget import TurnBudget
from .citing import MARKERS, masked
from .client import LLMClient, LLMResult
from .compliance import reasons, scan
from .plan_config import STEP_PROMPT_CHARS, STEP_TOKENS, LLMPlannerConfig
from .structured import Claims, ComplianceVerdict, Reflection, Rewrite

_M = TypeVar("_M", bound=BaseModel)

__all__ = ["StructuredSteps", "others"]


def others(turn: Turn, last: int = 6) -> tuple[str, ...]:
    """Other participants' messages among the thread's last ``last`` messages, oldest first."""
    return tuple(h.text for h in turn.history[-last:] if not h.from_requester)


class StructuredSteps:
    """The structured calls of one planner.

    Args:
        llm: the budgeted client.
        config: models, passages shown, and whether the claim and compliance checks run.
    """

    def __init__(self, llm: LLMClient, config: LLMPlannerConfig) -> None:
        self.llm = llm
        self.config = config

    # -- the call they share ---------------------------------------------------------------------
    def ask(self, step: str, out: type[_M], msgs: list[dict[str, Any]], schema: dict[str, Any], trace: Trace,
            budget: TurnBudget, max_tokens: int = 400, before_answer: str | None = None) -> _M | None:
        """One structured call validated into ``out``; one repair round on an invalid reply, then None
        (the caller's deterministic fallback), recorded as ``invalid_output``. ``before_answer`` (the step's
        key in :data:`STEP_TOKENS`): the answer's predicted time is kept free (the call's ``max_tokens`` is
        lowered to what fits before it; see :meth:`answer_reserve_s`)."""
        model = self.config.planner_model
        reserve_s = self.answer_reserve_s(before_answer, budget) if before_answer else 0.0
        res = self.llm.chat(model, msgs, budget, schema=schema, schema_name=step, max_tokens=max_tokens,
                            reserve_s=reserve_s)
        try:
            return _validated(out, res)
        except ValueError as exc:
            error = _short_error(exc)
        trace.step("output_repair", output=step, error=error)
        if not budget.allows(f"{step} repair", tokens=1500):
            trace.step("invalid_output", output=step, error=error, repaired=False)
            return None
        fix = self.llm.chat(model, [*msgs, {"role": "assistant", "content": res.content[:2000]},
                                    {"role": "user", "content": prompts.repair_output(error, schema)}],
                            budget, schema=schema, schema_name=step, max_tokens=max_tokens, reserve_s=reserve_s)
        try:
            return _validated(out, fix)
        except ValueError as exc:
            trace.step("invalid_output", output=step, error=_short_error(exc), repaired=True)
            return None

    # -- time ------------------------------------------------------------------------------------
    def predict_ms(self, *calls: str, passages: list[Evidence] | None = None) -> float:
        """Milliseconds ``calls`` (keys of :data:`STEP_TOKENS`) take at the models' measured latency, their
        prompts of the usual size (:data:`STEP_PROMPT_CHARS`) or, for reflection and the answer, over
        ``passages`` when given."""
        def chars(c: str) -> int:
            if passages is not None and c in ("reflect", "answer"):
                return 1000 + sum(len(e.chunk.text) + 120 for e in passages[: self.config.passages])
            return STEP_PROMPT_CHARS[c]

        return sum(self.llm.latency.estimate_ms(self.config.answer_model if c == "answer" else self.config.planner_model,
                                                STEP_TOKENS[c], chars(c)) for c in calls)

    def answer_reserve_s(self, step: str, budget: TurnBudget) -> float:
        """Seconds a ``step`` before the answer leaves free for it: the answer's predicted time when the step
        and the answer both fit the time left, else none (the answer will not fit whatever the step writes,
        and a routing call squeezed to nothing would leave the model unused)."""
        answer_ms = self.predict_ms("answer")
        if self.predict_ms(step) + answer_ms <= budget.remaining_ms:
            return answer_ms / 1000
        return 0.0

    def fits(self, step: str, budget: TurnBudget, *calls: str, passages: list[Evidence] | None = None) -> bool:
        """Whether ``calls`` (keys of :data:`STEP_TOKENS`) fit the time left at the model's measured latency;
        records the degradation when they do not."""
        need = self.predict_ms(*calls, passages=passages)
        if need <= budget.remaining_ms:
            return True
        budget.degraded.append(f"skipped {step}: model too slow (~{need:.0f} ms needed, "
                               f"{budget.remaining_ms:.0f} ms left)")
        return False

    # -- the steps -------------------------------------------------------------------------------
    @staticmethod
    def as_asked(turn: Turn, query: str) -> dict[str, Any]:
        """The rewrite without the model: ``query`` as the standalone question (a follow-up with the thread's
        last message before it: it may lean on anyone's message, as context, not instructions), no sub-queries,
        keywords or hypothetical answer."""
        return {"standalone": query if not turn.history else f"{turn.history[-1].text} {turn.text}",
                "sub_queries": [], "expansion": [], "hypothetical_answer": ""}

    def rewrite(self, turn: Turn, query: str, trace: Trace, budget: TurnBudget) -> dict[str, Any]:
        """The standalone question, sub-queries, expansion keywords and a hypothetical answer (HyDE) for
        ``query``; without the model (no budget, too slow, invalid output) the question as asked."""
        base = self.as_asked(turn, query)
        if not budget.allows("query rewriting", reserve=1) or not self.fits("query rewriting", budget, "rewrite", "answer"):
            return base
        history = "\n".join(f"- {h}" for h in turn.own_history[-6:]) or "(none)"
        thread = others(turn)
        context = f"{prompts.format_others(thread)}\n\n" if thread else ""
        got = self.ask("rewrite", Rewrite, [
            {"role": "system", "content": prompts.REWRITE_SYSTEM},
            {"role": "user", "content": f"{context}Conversation history (earlier user messages):\n{history}\n\n"
                                        f"Latest message: {turn.text}\nSearch query proposed: {query}"}],
            prompts.REWRITE_SCHEMA, trace, budget, before_answer="rewrite")
        if got is None:
            return base
        out = {
            "standalone": got.standalone[:1000],
            "sub_queries": [q[:500] for q in got.sub_queries][:4],
            "expansion": [t[:60] for t in got.expansion][:6],
            "hypothetical_answer": got.hypothetical_answer[:1500],
        }
        trace.step("rewrite", **out)
        return out

    def reflect(self, question: str, evidence: list[Evidence], trace: Trace, budget: TurnBudget) -> Reflection | None:
        """The model's verdict on the evidence (relevant? sufficient? missing? next query?), or None when it
        was skipped or invalid."""
        if (not budget.allows("reflection", tokens=2500, reserve=1)
                or not self.fits("reflection", budget, "reflect", "answer", passages=evidence)):
            return None
        passages = prompts.format_passages([(i + 1, e.chunk.title, e.chunk.section, masked(e.chunk.text))
                                            for i, e in enumerate(evidence[: self.config.passages])])
        got = self.ask("reflection", Reflection, [
            {"role": "system", "content": prompts.REFLECT_SYSTEM},
            {"role": "user", "content": f"{passages}\n\nQuestion: {question}"}],
            prompts.REFLECT_SCHEMA, trace, budget, max_tokens=200, before_answer="reflect")
        if got is None:
            return None
        trace.step("reflect", **got.model_dump())
        return got

    def check_claims(self, sentences: list[tuple[str, set[int]]], citations: list[Citation],
                     shown: list[Evidence], trace: Trace, budget: TurnBudget
                     ) -> tuple[list[tuple[str, set[int]]], list[Citation]]:
        """The sentences (and their citations) the model judges supported by the passages they cite; all of
        them when the verdicts are unusable (the deterministic grounding check stands alone)."""
        by_n = {c.n: c for c in citations}
        items = []
        for i, (s, marks) in enumerate(sentences, start=1):
            srcs = "\n".join(f"[{n}] {display_text(masked(next(e.chunk.text for e in shown if e.chunk.chunk_id == by_n[n].chunk_id)))[:1200]}"
                             for n in sorted(marks))
            items.append(f"Claim {i}: {MARKERS.sub('', s).strip()}\nCited passages:\n{srcs}")
        got = self.ask("claims", Claims, [
            {"role": "system", "content": prompts.CLAIMS_SYSTEM},
            {"role": "user", "content": "\n\n".join(items)}], prompts.CLAIMS_SCHEMA, trace, budget)
        if got is None:
            return sentences, citations  # no usable verdicts: the deterministic grounding check stands alone
        verdicts = {v.claim: v.supported for v in got.verdicts}
        kept = [(s, m) for i, (s, m) in enumerate(sentences, start=1) if verdicts.get(i, True)]
        dropped = len(sentences) - len(kept)
        trace.step("claim_check", checked=len(sentences), dropped=dropped)
        used: set[int] = set().union(*(m for _, m in kept)) if kept else set()
        return kept, [c for c in citations if c.n in used]

    def compliance_reasons(self, text: str, budget: TurnBudget, trace: Trace) -> list[str]:
        """Why ``text`` may not be posted: the deterministic scan's reasons, else the model check's (when on and
        it fits); [] when it may."""
        found = reasons(scan(text))
        if (found or not self.config.compliance_model_check or not budget.allows("compliance check", tokens=1200)
                or not self.fits("compliance check", budget, "compliance")):
            return found
        got = self.ask("compliance", ComplianceVerdict, [
            {"role": "system", "content": prompts.COMPLIANCE_SYSTEM},
            {"role": "user", "content": text}], prompts.COMPLIANCE_SCHEMA, trace, budget, max_tokens=200)
        if got is None or got.ok:
            return []  # an unusable verdict: the deterministic scan (above) is the check
        return [r for r in got.reasons][:5] or ["flagged by the reviewer"]


def _validated(out: type[_M], res: LLMResult) -> _M:
    if res.data is None:
        raise ValueError("the reply held no JSON object")
    return out.model_validate(res.data)


def _short_error(exc: Exception) -> str:
    return " ".join(str(exc).split())[:300]
