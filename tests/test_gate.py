"""The evidence gate's policy (:mod:`agent.gate`), case by case, on hand-made evidence.

Chunks, the analyzer (Whoosh's stemming analyzer, as the index uses) and the gate are real; only the
cosines and ranks are chosen by the test, to put each case on the right side of each threshold:
two supporting chunks answer; one needs the single-source exception (strong and on topic, both
retrievers agreeing, or standing out from the rest); a paraphrase needs a higher cosine than a
chunk that shares a key term; an exact identifier passes on lexical evidence; otherwise refuse,
naming what was not found.
"""

from __future__ import annotations

from whoosh.analysis import StemmingAnalyzer

from agent.gate import EvidenceGate, GateConfig
from agent.terms import key_terms
from connectors.models import Chunk
from tools.knowledge_search import Evidence

_ANA = StemmingAnalyzer()


def analyze(text: str) -> list[str]:
    return [t.text for t in _ANA(text)]


GATE = EvidenceGate(GateConfig(), analyze)


def ev(text: str, cos: float, n: int, dense: int = 50, bm25: int = 50) -> Evidence:
    chunk = Chunk(f"c{n:031d}", "folder", f"page{n}.md", f"Page {n}", ("Section",), "", text)
    return Evidence(chunk, 1.0 / n, {"dense": dense, "bm25": bm25}, {}, cos)


def terms(question: str):
    return key_terms(question, analyze, lambda t: 5.0)


FILLER = [ev(f"Unrelated note number {i} about the cafeteria menu.", 0.30, 10 + i) for i in range(6)]


def test_two_supporting_chunks_answer() -> None:
    q = terms("what is the home office budget?")
    v = GATE.judge([ev("The home office budget is $1,500.", 0.62, 1), ev("Office budget refresh: $250.", 0.47, 2),
                    *FILLER], q)
    assert v.sufficient and not v.single_source and len(v.support) == 2


def test_one_chunk_needs_the_single_source_exception() -> None:
    q = terms("what is the home office budget?")
    high_median = [ev(f"Generic office text {i}.", 0.41, 20 + i) for i in range(6)]
    weak = GATE.judge([ev("The home office budget is $1,500.", 0.46, 1), *high_median], q)
    assert not weak.sufficient and "only 1 supporting passage" in weak.reason
    strong = GATE.judge([ev("The home office budget is $1,500.", 0.58, 1), *high_median], q)
    assert strong.sufficient and strong.single_source and "strong and on topic" in strong.reason
    agreeing = GATE.judge([ev("The home office budget is $1,500.", 0.46, 1, dense=1, bm25=2), *high_median], q)
    assert agreeing.sufficient and agreeing.single_source


def test_a_standout_passage_answers_a_paraphrase_alone() -> None:
    q = terms("can i expense my gym membership?")
    v = GATE.judge([ev("The wellness stipend covers fitness classes.", 0.53, 1), *FILLER], q)
    assert v.sufficient and v.single_source and "stands out" in v.reason


def test_a_paraphrase_needs_a_higher_cosine_than_an_on_topic_chunk() -> None:
    q = terms("can i expense my gym membership?")
    off_words = GATE.judge([ev("The wellness stipend covers fitness classes.", 0.46, 1),
                            ev("Wellness benefits are paid monthly.", 0.45, 2), *FILLER], q)
    assert not off_words.sufficient
    on_words = GATE.judge([ev("Gym fees count as wellness.", 0.46, 1),
                           ev("A membership at a gym is covered.", 0.45, 2), *FILLER], q)
    assert on_words.sufficient


def test_an_exact_identifier_passes_on_lexical_evidence() -> None:
    q = terms("what's PTEP?")
    v = GATE.judge([ev("Your PTEP can be extended.", 0.38, 1), ev("Post-termination exercise period (PTEP).", 0.36, 2),
                    *FILLER], q)
    assert v.sufficient and len(v.support) == 2
    below = GATE.judge([ev("Your PTEP can be extended.", 0.30, 1), ev("PTEP rules.", 0.31, 2), *FILLER], q)
    assert not below.sufficient


def test_nothing_close_enough_is_refused_with_what_was_missing() -> None:
    q = terms("is there a sabbatical after five years?")
    v = GATE.judge([ev("Paid time off is flexible.", 0.40, 1), ev("Anniversary gifts at five years.", 0.39, 2),
                    *FILLER], q)
    assert not v.sufficient and not v.support
    assert "no passage was close enough" in v.reason and "sabbat" in v.reason
