"""A draft's sentences tied to the passages they cite: markers renumbered by first use, each citation's quote
the passage's verbatim sentence closest to the claim, and a sentence whose figures, dates, identifiers or names
none of its passages holds dropped (:mod:`agent.grounding`)."""

from __future__ import annotations

import re
from collections.abc import Callable

from tools.knowledge_search import Evidence

from ..grounding import Fact, ungrounded
from ..models import Citation, Trace
from ..screen import chunk_findings, span_flagged
from ..text import sentence_spans
from .compliance import redact

__all__ = ["Citer", "MARKERS", "SENTENCE", "as_shown", "masked"]

#: A run of ``[n]`` markers.
MARKERS = re.compile(r"(?:\s*\[(\d{1,2})\])+")
#: One sentence of a draft with the markers after it (the unit that is cited, checked and streamed).
SENTENCE = re.compile(r"[^.!?]*?[.!?]?(?:\s*\[\d{1,2}\])+[.!?]?|[^.!?]+[.!?]+")


class Citer:
    """Cites a draft against the passages shown to the model.

    Args:
        analyze: the index's analyzer (text -> terms), which picks each citation's closest sentence.
    """

    def __init__(self, analyze: Callable[[str], list[str]]) -> None:
        self.analyze = analyze

    def cite(self, text: str, shown: list[Evidence], trace: Trace | None = None
             ) -> tuple[list[tuple[str, set[int]]], list[Citation]]:
        """Split the draft into sentences with their markers; renumber markers by first use and
        attach, per (sentence, passage), the passage's verbatim sentence closest to the claim. Sentences
        dropped as ungrounded (see :meth:`cite_sentence`) are recorded in ``trace`` (step ``grounding``)."""
        numbers: dict[int, int] = {}
        citations: list[Citation] = []
        out: list[tuple[str, set[int]]] = []
        dropped: list[tuple[str, list[Fact]]] = []
        for m in SENTENCE.finditer(text.replace("\n", " ")):
            cited = self.cite_sentence(m.group(0), shown, numbers, dropped)
            if cited is not None:
                out.append((cited[0], cited[1]))
                citations.extend(cited[2])
        if dropped and trace is not None:
            trace.step("grounding", dropped=[s for s, _ in dropped],
                       facts=[[f"{f.kind}:{f.text}" for f in facts] for _, facts in dropped])
        return out, citations

    def cite_sentence(self, raw: str, shown: list[Evidence], numbers: dict[int, int],
                      dropped: list[tuple[str, list[Fact]]] | None = None
                      ) -> tuple[str, set[int], list[Citation]] | None:
        """One sentence of a draft, cited: ``(text with its markers renumbered at the end, its numbers,
        its citations)``, or None when it cites no passage shown (an uncited sentence is dropped: nothing
        uncited leaves the agent) or when it is not grounded: a figure, time, date, identifier or name of it
        is in none of the passages it cites (:func:`agent.grounding.ungrounded`; title, section and text as
        the model was shown them), whatever the claim check says later; such a sentence and its missing
        facts are appended to ``dropped``. This is the one check both the streamed release
        (:class:`agent.llm.release.SentenceRelease`) and the final draft go through. ``numbers`` (passage
        -> marker, by first use) is updated only for a sentence kept."""
        raw = raw.strip()
        if not raw:
            return None
        marks = [int(x) for x in re.findall(r"\[(\d{1,2})\]", raw)]
        claim = MARKERS.sub("", raw).strip()
        valid = [x for x in dict.fromkeys(marks) if 1 <= x <= len(shown)]
        if not valid or not claim:
            return None
        missing = ungrounded(claim, [as_shown(shown[x - 1]) for x in valid])
        if missing:
            if dropped is not None:
                dropped.append((claim, missing))
            return None
        new_marks = []
        citations = []
        for x in valid:
            if x not in numbers:
                numbers[x] = len(numbers) + 1
            n = numbers[x]
            new_marks.append(n)
            chunk = shown[x - 1].chunk
            citations.append(Citation(n, chunk.chunk_id, chunk.doc_id, chunk.title, chunk.url, chunk.section,
                                      self.quote(claim, chunk.text)))
        return f"{claim} " + "".join(f"[{n}]" for n in new_marks), set(new_marks), citations

    def quote(self, claim: str, text: str) -> str:
        """The sentence of ``text`` (15 characters or more, none the screening flags) sharing the most terms
        with ``claim``; the text's first 200 characters when none."""
        want = set(self.analyze(claim))
        best, score = "", -1.0
        for span in sentence_spans(text, min_chars=15):
            if span_flagged(text, span.start, span.end):
                continue  # never quote a credential, personal data or a planted instruction
            have = set(self.analyze(span.text))
            s = len(want & have) / (len(want | have) or 1)
            if s > score:
                best, score = span.text, s
        return best or text[:200]


def as_shown(e: Evidence) -> str:
    """A passage as the model was shown it: title, section and text (what leaves the agent is checked against)."""
    c = e.chunk
    return f"{c.title}\n{c.section}\n{masked(c.text)}"


def masked(text: str) -> str:
    """A passage as the model sees it: credentials, personal data and planted instructions left out."""
    found = chunk_findings(text)
    return redact(text, found) if found else text
