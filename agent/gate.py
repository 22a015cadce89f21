"""The evidence gate: answer only when the evidence answers the question, not when it is on topic.

The gate reads each retrieved chunk the way the extractive answer would quote it: its title and
section headings (the context every sentence of it inherits) plus its ``quoted_sentences`` sentences
(:func:`agent.text.sentence_spans`) that hold the most IDF weight of the question's key terms. Key
terms come sorted into common, absent and specific ones (:mod:`agent.terms`).

Policy (``GateConfig``):

- A chunk *supports* the question when its dense cosine to the question is at least
  ``relevance_floor`` and its quoted sentences or headings hold at least one *informative* key term
  (a term in a fifth or more of the chunks, such as the organisation's name, never counts); or,
  without any (a paraphrase: "gym" for a page on the "wellness" stipend), when its cosine is at least
  ``semantic_floor``; or when they hold every informative key term and its cosine is at least
  ``lexical_floor`` (an exact identifier such as "PTEP" that a small dense model does not know well); or
  (*agreed support*, ``agreed_support``) when it is at least ``lexical_floor`` close, both retrievers rank it
  among their top ``agreement_rank`` and its quoted sentences or headings hold the question's most specific
  term, provided every key term of the question is on some page: a chat question's cosine runs low while both
  rankings still find its answer first, but a word on no page may be the very thing asked ("a stipend for pet
  insurance" beside the stipend passages), and below the floor nothing tells the two apart. One such passage
  answers alone when the closest passage stands out by ``paraphrase_margin`` (the ranked route below).
- **The question's most specific term must be quoted.** The rarest key term the corpus contains is
  what the question is about; when no supporting sentence (or its headings) holds it, the corpus
  talks about that term elsewhere and the evidence is a near miss ("the 401k match" answered from a
  page on the 401k plan). Only a *paraphrase with a strong signal* passes without it: the closest
  passage is at least ``relevance_floor`` close and stands out from the ``margin_rank``-th closest by
  at least ``paraphrase_margin`` (:meth:`EvidenceGate._strong_paraphrase`). Terms the corpus does not
  contain at all (typos, chat words, a paraphrase's own words) are left to the dense similarity
  (holding them to the corpus's nearest words by the embedding model was measured and dropped: the
  paraphrases' words are as close to corpus words as a near miss's; ``docs/explanation/evaluation.md``).
  Not even that passes when a passage in the window that does *not* support has the term in its
  section headings ("FSA and HSA" for "how much goes into my HSA?"): the corpus has a section on
  what was asked, in the user's own word, and it is not what answers; the closest passages that
  do are about something else (a near miss, not a paraphrase). A term found only in a passage's
  body is not enough for this (an incidental example such as "a $6 usb cable" appears in tables).
- **A topic of the closest passages beside the support makes a near miss.** A specific term other than the
  most specific one, which no supporting passage mentions, refuses when a passage in the window that does not
  support has it in its section headings and it is a *topic* of the passages closest in meaning: its
  relevance-model clarity over the ``considered`` closest passages (:meth:`EvidenceGate.topicality`) is at
  least ``topical_clarity`` nats ("dress code" answered from sections on how people dress, with Code of
  Conduct sections beside them). A chat word rare in the corpus ("gross", "chip") that the closest passages
  do not use scores 0, however rare; the same rule over every specific term refused such paraphrases.
- **The answer type must be quoted** (:mod:`agent.answertype`): a question asking how many, how
  much, how long, how many days, when, who, where, which (thing) or for a number needs a supporting
  sentence that states a number, an amount, a period, a time, a person, a place or a name (a budget or
  price question: a sum of money, not a bare number). What the question itself names is masked first
  ("401k" does not state the match asked about, nor "Chicago" the hotel). No route skips this. When the
  most specific term is quoted, a sentence that holds it (itself or in its headings) must be the one
  that states the type (``require_type_span``): a page that names the term in one sentence and a figure
  in another is a near miss.
- The gate passes when at least ``min_citations`` distinct chunks support the question, or with one
  supporting chunk (**single-source exception**) when that chunk holds at least
  ``strong_coverage`` of the question's specific terms and either its cosine is at least
  ``strong_single`` or both retrievers rank it among their top ``agreement_rank``; or when it stands
  out (cosine at least ``relevance_floor`` and ``standout_margin`` over the median: a relative signal,
  since a chat question's absolute cosines run low on some corpora); or when two
  rank signals agree (**ranked route**): both retrievers rank it among their top ``agreement_rank``
  and the closest passage stands out from the ``margin_rank``-th by ``paraphrase_margin`` (the
  paraphrase signal, calibrated per corpus). A chat question's absolute cosine runs low on some
  corpora while its answer is still first in both rankings; a near miss rarely has both (its
  closest passages are equally close, or the two retrievers pick different ones). The two
  requirements above hold on every route.
- Cosine floors are absolute by default; :mod:`agent.calibration` refits them per corpus from
  self-made probes (stored with the index) because MiniLM's cosines shift with the corpus and the
  wording, and the rank signals (agreement of the two retrievers, margin over the median) do not.
- Otherwise the gate fails; the reason (for the trace and ``--json``, never the employee) names what
  was missing: "not found" only for words no chunk of the index holds, "only on passages that do not
  answer" for the others.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tools.knowledge_search import Evidence

from .answertype import mask_asked, states_type
from .terms import KeyTerms
from .text import sentence_spans
from .units import table_header

__all__ = ["EvidenceGate", "GateConfig", "GateVerdict", "Reading"]



@dataclass(frozen=True, slots=True)
class GateConfig:
    """Thresholds of the gate (cosines in [-1, 1], coverages in [0, 1]).

    ``calibrated`` names where the cosine floors came from (``"default"`` or the calibration file's
    date); :func:`agent.calibration.gate_config` fills them from the index's calibration.
    """

    min_citations: int = 2
    relevance_floor: float = 0.43
    semantic_floor: float = 0.50
    lexical_floor: float = 0.33
    strong_single: float = 0.55
    strong_coverage: float = 0.6
    agreement_rank: int = 2
    standout_margin: float = 0.15
    considered: int = 8
    quoted_sentences: int = 3
    require_specific: bool = True
    paraphrase_margin: float = 0.045
    margin_rank: int = 5
    require_type: bool = True
    require_type_span: bool = True
    topical_clarity: float = 1.0
    agreed_support: bool = True
    calibrated: str = "default"

    def __post_init__(self) -> None:
        if self.min_citations < 1:
            raise ValueError("MIN_CITATIONS must be at least 1")


@dataclass(frozen=True, slots=True)
class Reading:
    """A chunk as the gate reads it.

    Attributes:
        terms: analysed terms of its headings and its quoted sentences.
        typed: whether a quoted sentence states the question's answer type (True when none is asked).
        quoted: the quoted sentences' texts, best first.
        typed_specific: whether a quoted sentence that holds the question's most specific term (itself
            or in the headings it inherits) states the answer type (True when no type is asked; False
            when no quoted sentence holds the term).
    """

    terms: frozenset[str]
    typed: bool
    quoted: tuple[str, ...]
    typed_specific: bool = True


@dataclass(slots=True)
class GateVerdict:
    """The gate's decision.

    Attributes:
        sufficient: whether to answer.
        support: the supporting evidence, best first.
        coverage: key-term coverage of the supporting chunks' quoted sentences and headings.
        single_source: True when the single strong source exception applied.
        missing: key terms the evidence lacks, heaviest first.
        reason: a short human-readable reason.
        top_cosine: the best cosine among the chunks considered.
        features: the signals the decision read (for the trace and :mod:`agent.calibration`).
    """

    sufficient: bool
    support: list[Evidence] = field(default_factory=list)
    coverage: float = 0.0
    single_source: bool = False
    missing: list[str] = field(default_factory=list)
    reason: str = ""
    top_cosine: float = 0.0
    features: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Trace-friendly dict."""
        return {"sufficient": self.sufficient, "support": [e.chunk.chunk_id for e in self.support],
                "coverage": round(self.coverage, 3), "single_source": self.single_source,
                "missing": self.missing, "reason": self.reason, "top_cosine": round(self.top_cosine, 4),
                "features": self.features}


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else 0.0


class EvidenceGate:
    """Judges retrieved evidence against a question's key terms and answer type.

    Args:
        config: thresholds.
        analyze: the index analyzer (text to stemmed terms), to read chunk terms the same way.
    """

    def __init__(self, config: GateConfig, analyze: Callable[[str], list[str]]) -> None:
        self.config = config
        self.analyze = analyze
        self._cache: dict[tuple[str, str, tuple[str, ...], str],
                          tuple[frozenset[str], list[tuple[str, frozenset[str], str]]]] = {}

    def headings(self, e: Evidence) -> set[str]:
        """Analysed terms of chunk ``e``'s section headings (not its page title)."""
        return set(self.analyze(" ".join(e.chunk.section_path)))

    def read(self, e: Evidence, terms: KeyTerms) -> Reading:
        """How the gate reads chunk ``e`` for a question with key terms ``terms`` (see the module docstring)."""
        context, sentences = self._sentences(e)
        info = terms.informative
        scored = [(-sum(w for t, w in info.items() if t in st), i, text, st, setting)
                  for i, (text, st, setting) in enumerate(sentences)]
        scored.sort(key=lambda x: (x[0], x[1]))
        quoted = scored[: self.config.quoted_sentences]
        got = set(context)
        for _, _, _, st, _ in quoted:
            got |= st
        kind = None if terms.answer_type == "label" else terms.answer_type  # a label is the composer's preference
        states = [states_type(mask_asked(text, kind, terms.weights, self.analyze), kind, setting)
                  for _, _, text, _, setting in quoted]
        spec = terms.specific[0] if terms.specific else None
        typed_specific = kind is None or any(
            ok for ok, (_, _, _, st, _) in zip(states, quoted) if spec is None or spec in st or spec in context)
        return Reading(frozenset(got), any(states), tuple(text for _, _, text, _, _ in quoted), typed_specific)

    def _sentences(self, e: Evidence) -> tuple[frozenset[str], list[tuple[str, frozenset[str], str]]]:
        """Chunk ``e``'s analysed headings and its sentences with their analysed terms and the text they are read
        in (the headings and, for a table row, its header row), cached by chunk id (a retry re-reads mostly the
        same chunks; the cache holds at most 2,048 chunks)."""
        c = e.chunk
        key = (c.chunk_id, c.title, c.section_path, c.text)  # a re-indexed chunk with new text is read anew
        got = self._cache.get(key)
        if got is None:
            headings = f"{c.title}\n{' '.join(c.section_path)}"
            context = frozenset(self.analyze(headings))
            sentences = []
            for span in sentence_spans(c.text) or []:
                header = table_header(c.text, span.start)  # a row is read under its header, as the composer quotes it
                sentences.append((span.text, frozenset(self.analyze(f"{span.text}\n{header.text}" if header else span.text)),
                                  f"{headings}\n{header.text}" if header else headings))
            if not sentences and c.text.strip():
                sentences = [(c.text, frozenset(self.analyze(c.text)), headings)]
            if len(self._cache) >= 2048:
                self._cache.clear()
            got = self._cache[key] = (context, sentences)
        return got

    def judge(self, evidence: list[Evidence], terms: KeyTerms) -> GateVerdict:
        """Decide whether ``evidence`` answers a question with key terms ``terms``."""
        cfg = self.config
        considered = evidence[: cfg.considered]
        reads = {e.chunk.chunk_id: self.read(e, terms) for e in considered}
        top_cos = max((e.cosine or 0.0 for e in considered), default=0.0)
        info = set(terms.informative)
        median = _median([x.cosine for x in evidence if x.cosine is not None])

        spec0 = terms.specific[0] if terms.specific else None
        agreed_ok = cfg.agreed_support and spec0 is not None and not terms.absent

        def both_rank(e: Evidence) -> bool:  # among both retrievers' top ``agreement_rank``
            return all(e.ranks.get(r, 10**6) <= cfg.agreement_rank for r in ("dense", "bm25"))

        def supports(e: Evidence) -> bool:
            cos = e.cosine or 0.0
            held = reads[e.chunk.chunk_id].terms & info
            if cos >= cfg.semantic_floor or (cos >= cfg.relevance_floor and (held or not info)):
                return True
            if cos < cfg.lexical_floor:
                return False
            if info and held == info:
                return True
            # Agreed support: first or second in both rankings, quoting what the question is about, and no word
            # of the question missing from the wiki (a word on no page may be the very thing asked).
            return agreed_ok and spec0 in held and both_rank(e)

        support = [e for e in considered if supports(e)]
        covered: set[str] = set()
        for e in support:
            covered |= reads[e.chunk.chunk_id].terms
        coverage = terms.coverage(covered)
        missing = terms.missing(covered)
        specific = terms.specific
        features = {"top_cosine": round(top_cos, 4), "median_cosine": round(median, 4),
                    "specific": specific[:3], "answer_type": terms.answer_type,
                    "evidence_coverage": round(terms.evidence_coverage(covered), 3)}
        best = support[0] if support else None
        if best is not None:
            features.update(best_cosine=round(best.cosine or 0.0, 4),
                            margin=round((best.cosine or 0.0) - median, 4),
                            dense_rank=best.ranks.get("dense"), bm25_rank=best.ranks.get("bm25"))

        def refuse(reason: str) -> GateVerdict:
            # "not found" only for words no page holds; a word the index holds is named as elsewhere
            absent = [t for t in missing if t in terms.absent]
            elsewhere = [t for t in missing if t not in terms.absent]
            if absent:
                reason += f"; not found: {', '.join(terms.words(absent[:4]))}"
            if elsewhere:
                reason += f"; only on passages that do not answer: {', '.join(terms.words(elsewhere[:4]))}"
            return GateVerdict(False, support, coverage, False, missing, reason, top_cos, features)

        if not support:
            return refuse("no passage was close enough to the question")
        typed = [e for e in support if reads[e.chunk.chunk_id].typed]
        features["type_found"] = bool(typed)
        if cfg.require_type and not typed:
            return refuse(f"no supporting passage states the {terms.answer_type} asked for")
        spec_ok = not specific or specific[0] in covered
        paraphrase, margin_k = self._strong_paraphrase(evidence)
        # The asked-for term heads a section retrieved next to the support, which does not support: the
        # corpus has a section on it that does not answer (a near miss, not a paraphrase).
        beside = not spec_ok and any(specific[0] in self.headings(e) for e in considered if e not in support)
        features.update(specific_found=spec_ok, margin_k=round(margin_k, 4), specific_beside=beside)
        if cfg.require_specific and not spec_ok and (not paraphrase or beside):
            return refuse(f"no supporting passage mentions {terms.words(specific[:1])[0]!r}, "
                          "the question's most specific term")
        # A topic of the closest passages (a term they hold far more often than the corpus does) heads a
        # section beside the support, which does not mention it: the corpus has a section on that part of the
        # question, and the support answers another part ("dress" quoted, "code" of conduct beside it).
        clarity = self.topicality(evidence, terms)
        aside = [t for t in specific[1:] if t not in covered and clarity[t][1] >= cfg.topical_clarity
                 and any(t in self.headings(e) for e in considered if e not in support)]
        features["topical_beside"] = terms.words(aside)
        if cfg.require_specific and aside:
            return refuse(f"a section on {terms.words(aside[:1])[0]!r}, a topic of the closest passages, was found "
                          "beside the support, which does not mention it")
        # The sentence about what was asked must state the answer: a page that names the term in one sentence
        # and a number in another is a near miss ("the 401k plan" beside "a 3-month waiting period").
        span_typed = not specific or not spec_ok or any(reads[e.chunk.chunk_id].typed_specific for e in support)
        features["type_at_specific"] = span_typed
        if cfg.require_type and cfg.require_type_span and not span_typed:
            return refuse(f"no supporting passage states the {terms.answer_type} asked for in a sentence that "
                          f"mentions {terms.words(specific[:1])[0]!r}")  # the metrics' answer_type_missing
        if len(support) >= cfg.min_citations:
            return GateVerdict(True, support, coverage, False, missing,
                               f"{len(support)} supporting passages (best cosine {top_cos:.2f})", top_cos, features)
        e = support[0]
        cos = e.cosine or 0.0
        own_terms = set(reads[e.chunk.chunk_id].terms)
        own = terms.evidence_coverage(own_terms)
        agree = both_rank(e)
        strong = own >= cfg.strong_coverage and (cos >= cfg.strong_single or agree)
        standout = cos >= cfg.relevance_floor and cos - median >= cfg.standout_margin
        # Agreed support below the relevance floor stands on the margin alone (it already quotes the specific term).
        ranked = agree and (paraphrase or (agreed_ok and spec0 in own_terms and margin_k >= cfg.paraphrase_margin))
        if strong or standout or ranked:
            why = ("strong and on topic" if strong else f"stands out ({cos - median:+.2f} over the median)"
                   if standout else f"ranked top {cfg.agreement_rank} by both retrievers, {margin_k:+.2f} over the "
                   f"{cfg.margin_rank}th closest")
            return GateVerdict(True, [e], terms.coverage(own_terms), True, terms.missing(own_terms),
                               f"one source, {why} (single-source exception)", top_cos, features)
        return refuse(f"only {len(support)} supporting passage, {cfg.min_citations} needed")

    def topicality(self, evidence: list[Evidence], terms: KeyTerms) -> dict[str, tuple[float, float]]:
        """How much each of the question's specific terms is a topic of the passages closest in meaning.

        Returns ``{term: (p_R, clarity)}``: ``p_R`` is the share of the ``considered`` passages closest by
        cosine whose title, headings or text hold the term, and ``clarity = p_R * ln(p_R / p_C)`` (0 when
        ``p_R`` is 0) its contribution to the query clarity score (Cronen-Townsend et al. 2002) of a
        relevance model over those passages (Lavrenko & Croft 2001), in nats, against its corpus share
        ``p_C = (df + 0.5) / N = 1 / expm1(idf)`` read back from its IDF weight. A chat word rare in the
        corpus ("gross", "chip") that the closest passages do not use scores 0, however rare.
        """
        close = sorted((e for e in evidence if e.cosine is not None), key=lambda e: -(e.cosine or 0.0))
        close = close[: self.config.considered]
        held = []
        for e in close:
            context, sentences = self._sentences(e)
            got = set(context)
            for _, st, _ in sentences:
                got |= st
            held.append(got)
        out = {}
        for t in terms.specific:
            p_r = sum(t in h for h in held) / len(held) if held else 0.0
            p_c = 1.0 / math.expm1(terms.weights[t]) if terms.weights[t] > 0 else 1.0
            out[t] = (p_r, p_r * math.log(p_r / p_c) if p_r > 0 else 0.0)
        return out

    def _strong_paraphrase(self, evidence: list[Evidence]) -> tuple[bool, float]:
        """The paraphrase route: the closest passage stands out from the ``margin_rank``-th closest by at
        least ``paraphrase_margin`` and is at least ``relevance_floor`` close; returns (passes, margin).

        A rank-based signal: one passage far closer than its neighbours is a focused answer in other
        words, while a near miss finds several passages of the right page region equally close.
        """
        cfg = self.config
        cos = sorted((e.cosine for e in evidence if e.cosine is not None), reverse=True)
        if not cos:
            return False, 0.0
        margin = cos[0] - cos[min(cfg.margin_rank, len(cos)) - 1]
        return cos[0] >= cfg.relevance_floor and margin >= cfg.paraphrase_margin, margin
