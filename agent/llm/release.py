"""Releasing a draft answer sentence by sentence while the model is still writing it.

:class:`SentenceRelease` is fed the answer model's text deltas (:meth:`agent.llm.client.LLMClient.chat`'s
``on_delta``). Once a sentence is complete (the next one has begun), it is cited exactly as the whole
draft will be (:meth:`agent.llm.citing.Citer.cite_sentence`: markers checked against the passages shown, its figures,
dates, identifiers and names found in the passages it cites (:mod:`agent.grounding`), renumbered
by first use) and released only if it also passes the checks one sentence allows: its citations are
valid for this turn's evidence (:func:`agent.citations.validate_citations`: retrieved passage, verbatim
quote) and the compliance scan finds nothing in it. A sentence that fails is never released; a flagged
one stops the release altogether (the draft will be written again). What is released is exactly the
final answer's text so far (sentences joined by spaces) as long as nothing later removes a sentence;
whoever shows it must compare with the final reply and rewrite when they differ (the claim check, the
agent's minimum of sources and its refusals decide on the whole draft).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

from tools.knowledge_search import Evidence

from ..citations import validate_citations
from ..models import Citation
from .compliance import scan

__all__ = ["SentenceRelease"]

log = logging.getLogger(__name__)

CiteSentence = Callable[[str, list[Evidence], dict[int, int]], "tuple[str, set[int], list[Citation]] | None"]


class SentenceRelease:
    """See the module docstring.

    Args:
        shown: the passages the model was shown (numbered from 1, as in the prompt).
        sentence: the draft's sentence pattern (:data:`agent.llm.citing.SENTENCE`).
        cite: cites one sentence (:meth:`agent.llm.citing.Citer.cite_sentence`).
        emit: told each released piece (a sentence, preceded by a space after the first).

    Attributes:
        released: the text released so far.
    """

    def __init__(self, shown: list[Evidence], sentence: re.Pattern[str], cite: CiteSentence,
                 emit: Callable[[str], None]) -> None:
        self.shown = shown
        self.sentence = sentence
        self.cite = cite
        self.emit = emit
        self.released = ""
        self._text = ""
        self._done = 0  # characters of the draft already judged
        self._numbers: dict[int, int] = {}
        self._stopped = False

    def feed(self, delta: str) -> None:
        """Take the next delta; release the sentences it completes. Never raises."""
        if self._stopped or not delta:
            return
        self._text += delta.replace("\n", " ")
        try:
            matches = list(self.sentence.finditer(self._text, self._done))
            for m in matches[:-1]:  # the last one may still grow
                self._judge(m.group(0))
                self._done = m.end()
                if self._stopped:
                    return  # type: ignore[unreachable]  # _judge may set it; mypy keeps the narrowing above
        except Exception:  # noqa: BLE001 - releasing early is a nicety; the final answer decides
            log.debug("releasing a sentence failed; releasing stops", exc_info=True)
            self._stopped = True

    def _judge(self, raw: str) -> None:
        if scan(raw):
            self._stopped = True  # flagged content: the draft is written again, nothing more goes out early
            return
        cited = self.cite(raw, self.shown, self._numbers)
        if cited is None:
            return
        text, _, citations = cited
        check = validate_citations(text, citations, self.shown)
        if check.rejected or check.dangling_markers:
            return
        piece = (" " if self.released else "") + text
        self.released += piece
        self.emit(piece)
