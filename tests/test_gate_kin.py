"""The evidence gate's kin rule (:mod:`agent.gate`, :mod:`agent.kin`): an absent question word whose kin (the
corpus's own words for it, found with the real embedding model among the retrieved passages' words) the window
holds must be quoted through one of them. Analyzer, embedder and gate are real; the cosines are chosen."""

from __future__ import annotations

import math

import pytest

from agent.gate import EvidenceGate, GateConfig
from agent.terms import key_terms
from index.embeddings import CachedEmbedder

from tests.test_gate import FILLER, analyze, ev

#: Chunks holding each term in a corpus of 1,000: "payday" is absent, "pay" is not.
DF = {"dai": 90, "month": 80, "pai": 12, "payrol": 6, "date": 40, "write": 60, "year": 70, "pr": 50, "size": 30,
      "max": 20, "limit": 15, "file": 45}


def idf(t: str) -> float:
    return math.log1p(1000 / (DF.get(t, 0) + 0.5))


@pytest.fixture(scope="module")
def gate(embedder: CachedEmbedder) -> EvidenceGate:
    return EvidenceGate(GateConfig(), analyze, embedder.embed)


DATES = [ev("Write dates as Dec 4, 2024: the month, the day of the month, then the year.", 0.46, 1),
         ev("In headings write the month and the day, never the year alone.", 0.45, 2)]


def test_an_absent_word_the_corpus_says_in_its_own_words_must_be_quoted_through_them(
        gate: EvidenceGate, embedder: CachedEmbedder) -> None:
    q = key_terms("what day of the month is payday?", analyze, idf)
    assert "paydai" in q.absent
    window = [*DATES, ev("Your pay is run by Gusto.", 0.31, 3), *FILLER]
    v = gate.judge(window, q)
    assert not v.sufficient, v.reason
    assert "'payday' or the corpus's words for it (pay" in v.reason, v.reason
    # without the rule the two passages on writing dates answer (the near miss of issue 22)
    assert EvidenceGate(GateConfig(kin_cosine=None), analyze, embedder.embed).judge(window, q).sufficient


def test_support_quoting_the_kin_passes(gate: EvidenceGate) -> None:
    q = key_terms("what day of the month is payday?", analyze, idf)
    v = gate.judge([ev("Pay arrives on the 25th day of each month.", 0.46, 1),
                    ev("Payroll runs once a month, on the 25th.", 0.45, 2), *FILLER], q)
    assert v.sufficient, v.reason


def test_a_word_without_kin_in_the_window_is_left_to_the_dense_similarity(gate: EvidenceGate) -> None:
    q = key_terms("is there a max size for PRs? mine is getting humongous", analyze, idf)
    assert "humong" in q.absent or "humongous" in q.absent, q.absent
    v = gate.judge([ev("Keep PRs under a max size of 400 changed lines.", 0.47, 1),
                    ev("Split a PR over the size limit into smaller ones.", 0.45, 2), *FILLER], q)
    assert v.sufficient, v.reason
    assert not v.features.get("absent_kin"), v.features
