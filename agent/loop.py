"""The one retrieve → gate → retry loop of both planners, so that a change of the gate, the retry
budget or the stop rule guards the LLM's answers as well as the measured rule-based ones.

The planner searches and judges attempt 0 (:meth:`EvidenceLoop.judge`); :meth:`EvidenceLoop.run`
retries at most ``max_retries`` times with the query its *retry policy* gives (the rule planner's
keyword rewrites, the LLM's reflection). It stops when the gate passed (unless ``ask_when_sufficient``),
when the policy gives no new query, or when the last retry did not improve the evidence
(:func:`improved`, "confidence decay": the rule-based planner's rule; the LLM planner's copy tested
the same three things).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tools.fusion import reciprocal_rank_fusion
from tools.knowledge_search import Evidence

from .gate import EvidenceGate, GateVerdict
from .models import Trace
from .terms import KeyTerms

__all__ = ["Attempt", "EvidenceLoop", "LoopResult", "RetryPolicy", "improved", "merge"]


@dataclass(slots=True)
class Attempt:
    """One search of a turn: the query searched, the evidence the gate read (best first), its verdict."""

    query: str
    evidence: list[Evidence]
    verdict: GateVerdict


#: ``policy(retry, attempts) -> query``: the query of retry ``retry`` (1-based) given the attempts so far
#: (the last is the one to improve on); None or "" stops the loop.
RetryPolicy = Callable[[int, list[Attempt]], str | None]


@dataclass(slots=True)
class LoopResult:
    """What :meth:`EvidenceLoop.run` did.

    Attributes:
        attempts: attempt 0 then each retry, in order.
        chosen: the attempt to answer (or refuse) from: with ``merge_k``, the last (its pool holds every
            retry's hits); otherwise the first the gate passed, else attempt 0.
    """

    attempts: list[Attempt]
    chosen: Attempt

    @property
    def searched(self) -> list[str]:
        """The queries searched, in order (what a refusal quotes)."""
        return [a.query for a in self.attempts]


def improved(new: GateVerdict, old: GateVerdict) -> bool:
    """True when a retry found closer or more complete evidence than the attempt before: a top cosine
    more than 0.01 higher, coverage more than 0.05 higher, or more supporting passages."""
    return new.top_cosine > old.top_cosine + 0.01 or new.coverage > old.coverage + 0.05 or len(new.support) > len(old.support)


def merge(a: list[Evidence], b: list[Evidence], k: int) -> list[Evidence]:
    """``a`` and ``b`` fused by reciprocal rank fusion (constant ``k``, ``a`` weighted 1.5), each passage once."""
    by_id = {e.chunk.chunk_id: e for e in [*b, *a]}
    fused = reciprocal_rank_fusion({"a": [e.chunk.chunk_id for e in a], "b": [e.chunk.chunk_id for e in b]}, k=k,
                                   weights={"a": 1.5})
    return [by_id[cid] for cid, _ in fused]


class EvidenceLoop:
    """The gate, the retry budget and the stop rule of a planner (see the module docstring).

    Args:
        gate: the evidence gate (the LLM planner passes the rule-based planner's own).
        max_retries: retries after attempt 0 (0: judge once, never retry).
        merge_k: None keeps each retry's evidence on its own; an RRF constant pools each retry's hits
            with the evidence so far (:func:`merge`), and the pool is what the gate judges.
        ask_when_sufficient: ask the policy even when the gate passed (the LLM's reflection may find
            that the passages do not answer); the gate still judges whatever the retry finds.
    """

    def __init__(self, gate: EvidenceGate, max_retries: int, merge_k: int | None = None,
                 ask_when_sufficient: bool = False) -> None:
        self.gate = gate
        self.max_retries = max_retries
        self.merge_k = merge_k
        self.ask_when_sufficient = ask_when_sufficient

    def judge(self, evidence: list[Evidence], terms: KeyTerms, trace: Trace, attempt: int) -> GateVerdict:
        """The gate's verdict on ``evidence`` for ``terms``, timed and traced as step ``gate`` of ``attempt``."""
        with trace.timed("gate"):
            verdict = self.gate.judge(evidence, terms)
        trace.step("gate", attempt=attempt, **verdict.as_dict())
        return verdict

    def run(self, first: Attempt, terms: KeyTerms, retrieve: Callable[[str, int], list[Evidence]],
            policy: RetryPolicy, trace: Trace) -> LoopResult:
        """Retry from the judged attempt 0 ``first`` until the gate passes or a stop rule holds.

        ``retrieve(query, retry)`` searches one retry's query (the planner's search, its trace and
        timings); ``terms`` are the question's key terms, which every attempt is judged against. Errors
        of ``retrieve`` and ``policy`` propagate.
        """
        attempts = [first]
        for n in range(1, self.max_retries + 1):
            last = attempts[-1]
            if last.verdict.sufficient and not self.ask_when_sufficient:
                break
            if n > 1 and not improved(last.verdict, attempts[-2].verdict):
                trace.step("stop", reason="the retry did not improve the evidence (confidence decay)")
                break
            query = policy(n, attempts)
            if not query or query in {a.query for a in attempts}:
                break
            evidence = retrieve(query, n)
            if self.merge_k is not None:
                evidence = merge(last.evidence, evidence, self.merge_k)
            attempts.append(Attempt(query, evidence, self.judge(evidence, terms, trace, n)))
        if self.merge_k is not None:
            return LoopResult(attempts, attempts[-1])
        return LoopResult(attempts, next((a for a in attempts if a.verdict.sufficient), attempts[0]))
