"""Whether a sentence's checkable facts occur in the passages it cites.

One job: :func:`ungrounded` takes a sentence (plain text, ``[n]`` markers removed) and the texts of the
passages it cites, and returns the *facts* of the sentence that none of those passages holds; an empty
list means the sentence is grounded. The LLM planner drops a generated sentence with an ungrounded fact
before it is streamed or posted (:mod:`agent.llm.planner`), and ``chatops eval`` counts posted sentences
with one (``unsupported_posted``, :mod:`bot.evaluate`), for the extractive answers too.

A fact is one of five kinds, found by a short pattern set (not a word list of any wiki):

==============  ==========================================================  ====================================
kind            in the sentence                                              held by a passage when
==============  ==========================================================  ====================================
``number``      a figure: digits (``25``, ``1,000``, ``2.5``, ``$5k``,         a figure of the passage has the same
                ``10%``, ``25th``), a number word (``two`` ... ``twenty``,      *value*: thousands separators are
                ``thirty`` ... ``ninety``, ``twenty-five``, ``hundred``,       ignored, number words count as their
                ``thousand``, ``million``; ``one`` only before a unit:         value, ``a``/``an``/``per`` before a
                ``one week``), ``N hundred/thousand/million``                  unit counts as 1 (``$1,000`` = ``1000
                                                                               USD`` = ``one thousand``; ``two
                                                                               weeks`` = ``2 weeks``)
``time``        a clock time (``3:30``, ``3:30 PM``, ``3pm``)                   the passage has that time, 12- or
                                                                               24-hour (``3 PM`` = ``15:00``)
``date``        a month or weekday name, capitalised (``March``, ``Fri``)      the passage names the same month or
                                                                               weekday (``Sept`` = ``September``)
``identifier``  a code-like token: backticked code, a URL, an e-mail, a          the passage holds it verbatim,
                ``#channel``, ``@handle``, ``/command``, ``--flag``,           case-insensitively, not inside a
                ``ABC-123``, ``E42``/``v1.2.3``, ``SNAKE_CASE``,
                ``dotted.name``, ``multi-part-label-2`` (not ``up-to-date``:   longer token
                a hyphenated lower-case word is a word)
``name``        a capitalised word that does not start the sentence            the passage has the word,
                (``PeopleDesk``, ``Slack``, ``PTO``; not ``I``)                case-insensitively, as a whole word
==============  ==========================================================  ====================================

What it does not check: units and currencies (``25 days`` against a passage saying only ``25 weeks``
passes: the figure is there), which figure goes with which noun, negation, and any claim made in
generic words ("you must ask your manager first" has no checkable fact and is always grounded). A
sentence's first word is never a name (it is capitalised anyway). Numeric dates (``2024-05-01``,
``31/03``) are checked as their numbers.

Example::

    >>> [f.text for f in ungrounded("Everyone gets 30 days of PTO.", ["Everyone gets 25 days of PTO per year."])]
    ['30']
    >>> ungrounded("Ask in #eng-help first.", ["Questions go to #eng-help."])
    []
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tools.identifiers import contains, identifiers, is_code

__all__ = ["Fact", "FACT_KINDS", "facts", "ungrounded"]

FACT_KINDS = ("number", "time", "date", "identifier", "name")


@dataclass(frozen=True, slots=True)
class Fact:
    """One checkable fact of a sentence.

    Attributes:
        kind: one of :data:`FACT_KINDS`.
        text: the fact as written in the sentence (``"$1,000"``, ``"3:30 PM"``, ``"#eng-help"``).
        value: what is compared: a number (``1000.0``), a time ``(hour, minute)``, a month or weekday
            (``"month:3"``, ``"day:4"``), or the lower-cased identifier or name.
    """

    kind: str
    text: str
    value: object


_WORDS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve thirteen "
                                    "fourteen fifteen sixteen seventeen eighteen nineteen twenty".split())}
_TENS = {"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
_NUMBER_WORDS = {**_WORDS, **_TENS, "twenty": 20}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000, "billion": 1_000_000_000}
_UNIT = (r"(?:seconds?|minutes?|mins?|hours?|hrs?|days?|nights?|weeks?|months?|quarters?|years?|yrs?|times?|"
         r"percent|per cent|dollars?|euros?|pounds?|person|people|employees?|members?|pages?|items?|hires?)")

_CURRENCY = r"[$€£¥₹]"
# A figure: an optional currency sign, digits (thousands separators, decimals), an optional k/m after a currency.
_FIGURE = re.compile(rf"(?P<cur>{_CURRENCY}\s?)?(?<![\d.,])(?P<num>\d{{1,3}}(?:,\d{{3}})+|\d+)(?P<dec>\.\d+)?"
                     r"(?:(?P<suffix>[kKmM])(?![A-Za-z]))?")
_WORD_FIGURE = re.compile(r"\b(?:(?P<tens>" + "|".join(_TENS) + r"|twenty)[-\s](?P<ones>one|two|three|four|five|six|"
                          r"seven|eight|nine)|(?P<word>" + "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True)) +
                          r"))\b", re.I)
_SCALED = re.compile(r"(?P<base>\d+(?:\.\d+)?|" + "|".join(_NUMBER_WORDS) + r")[\s-]+(?P<scale>" + "|".join(_SCALES) +
                     r")\b", re.I)
_BARE_SCALE = re.compile(r"\b(?:an?\s+)?(?P<scale>" + "|".join(_SCALES) + r")\b", re.I)
_ONE_UNIT = re.compile(rf"\b(?:a|an|per|each|every|one)\s+{_UNIT}\b", re.I)
_ONE = re.compile(rf"\bone(?=[\s-]+{_UNIT}\b)", re.I)

_TIME = re.compile(r"(?<![\d:])(?P<h>\d{1,2})(?::(?P<m>\d{2}))?\s?(?P<ampm>[ap]\.?m\b\.?)?", re.I)

_MONTHS = ("january february march april may june july august september october november december").split()
_DAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
_DATE_WORD = re.compile(r"\b(?:(?P<month>January|February|March|April|May|June|July|August|September|October|"
                        r"November|December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept?|Oct|Nov|Dec)|"
                        r"(?P<day>Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday|Mon|Tue|Tues|Wed|Thu|"
                        r"Thurs|Fri|Sat|Sun))(?:s|'s)?\b\.?")

# Code-like tokens :func:`tools.identifiers.identifiers` does not look for.
_EXTRA_IDENTIFIERS = [
    re.compile(r"https?://[^\s<>()\[\]`\"']+[^\s<>()\[\]`\"'.,;:!?]"),          # a URL
    re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b"),                              # an e-mail
    re.compile(r"\b\w+_\w+(?:_\w+)*\b"),                                           # SNAKE_CASE, snake_case
    re.compile(r"(?<![\w@/.])[A-Za-z][\w-]*(?:\.[A-Za-z][\w-]+)+\b"),             # config.yaml, Node.js, x.com
    re.compile(r"(?<![\w/])(?:\w[\w.-]*/)+\w[\w.-]*\.\w+"),                        # docs/guide.md
]
_ABBREVIATION = re.compile(r"^(?:[A-Za-z]\.)+[A-Za-z]?$")                           # e.g, i.e, U.S
_NOT_NAMES = frozenset({"I", "I'm", "I'll", "I've", "I'd", "OK", "AM", "PM"})
_WORD = re.compile(r"[A-Za-z][A-Za-z'’]*(?:-[A-Za-z]+)*")
_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|])")


def facts(sentence: str) -> list[Fact]:
    """The checkable facts of ``sentence``, in order of appearance (see the module docstring).

    Args:
        sentence: one sentence or list item, plain text or Markdown, ``[n]`` markers removed.

    Returns:
        ``Fact`` objects; a figure inside an identifier (``SF-182``) or a time is not a figure of its own.

    Example::

        >>> [(f.kind, f.text) for f in facts("Post `/incident` in #eng-help by 3:30 PM on Friday, within 2 days.")]
        [('identifier', '/incident'), ('identifier', '#eng-help'), ('time', '3:30 PM'), ('date', 'Friday'), ('number', '2')]
    """
    text = _ESCAPE.sub(r"\1", sentence)
    found: list[tuple[int, Fact]] = []
    taken: list[tuple[int, int]] = []

    def free(a: int, b: int) -> bool:
        return not any(a < y and x < b for x, y in taken)

    def add(a: int, b: int, fact: Fact) -> None:
        taken.append((a, b))
        found.append((a, fact))

    for a, b, term in _identifier_spans(text):
        if free(a, b):
            add(a, b, Fact("identifier", term, term.lower()))
    for m in _TIME.finditer(text):
        if (m.group("m") or m.group("ampm")) and free(m.start(), m.end()):
            t = _clock(m)
            if t is not None:
                add(m.start(), m.end(), Fact("time", m.group().strip().rstrip("."), t))
    for m in _DATE_WORD.finditer(text):
        if free(m.start(), m.end()) and not (m.group("month") == "May" and not _dated(text, m)):
            add(m.start(), m.end(), Fact("date", m.group().rstrip("."), _date_value(m)))
    for a, b, value in _figures(text, sentence_side=True):
        if free(a, b):
            add(a, b, Fact("number", text[a:b].strip(), value))
    first = _WORD.search(text)
    for m in _WORD.finditer(text):
        word = re.sub(r"(?:'s|’s|')$", "", m.group())
        if (m.start() == (first.start() if first else -1) or not word[:1].isupper() or word in _NOT_NAMES
                or not free(m.start(), m.end()) or _ONE_LETTER.fullmatch(word)):
            continue
        add(m.start(), m.end(), Fact("name", word, word.lower()))
    return [f for _, f in sorted(found, key=lambda x: x[0])]


_ONE_LETTER = re.compile(r"[A-Z]")


def ungrounded(sentence: str, passages: Iterable[str]) -> list[Fact]:
    """The facts of ``sentence`` (:func:`facts`) that none of ``passages`` holds; ``[]`` when it is grounded.

    Args:
        sentence: one sentence, ``[n]`` markers removed.
        passages: the texts of the passages it cites, as written (title and section may be included).

    Returns:
        The missing facts in sentence order. A sentence citing no passage has all its facts missing.

    Example::

        >>> [f.text for f in ungrounded("Budget up to $1,000 a year.", ["The budget is 1000 USD per year."])]
        []
        >>> [f.kind for f in ungrounded("Ask Dana in Lisbon.", ["Ask your manager."])]
        ['name', 'name']
    """
    found = facts(sentence)
    if not found:
        return []
    held = _Holdings([_ESCAPE.sub(r"\1", p) for p in passages])
    return [f for f in found if not held.has(f)]


class _Holdings:
    """What a set of passages holds, computed once per call of :func:`ungrounded`."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.texts = texts
        self._numbers: set[float] | None = None
        self._times: set[tuple[int, int]] | None = None
        self._dates: set[str] | None = None

    def has(self, fact: Fact) -> bool:
        if fact.kind == "number":
            return _key(fact.value) in self.numbers()  # type: ignore[arg-type]  # a number fact's value is a float
        if fact.kind == "time":
            return fact.value in self.times()
        if fact.kind == "date":
            return fact.value in self.dates()
        if fact.kind == "identifier":
            return any(_holds_identifier(t, fact.text) for t in self.texts)
        pattern = re.compile(r"(?<![A-Za-z])" + re.escape(fact.text) + r"(?![a-z])", re.I)
        return any(pattern.search(t) for t in self.texts)

    def numbers(self) -> set[float]:
        if self._numbers is None:
            self._numbers = {_key(v) for t in self.texts for _, _, v in _figures(t, sentence_side=False)}
        return self._numbers

    def times(self) -> set[tuple[int, int]]:
        if self._times is None:
            out: set[tuple[int, int]] = set()
            for t in self.texts:
                for m in _TIME.finditer(t):
                    if m.group("m") or m.group("ampm"):
                        h, mi = int(m.group("h")), int(m.group("m") or 0)
                        out.add((h, mi))
                        c = _clock(m)
                        if c is not None:
                            out.add(c)
            self._times = out
        return self._times

    def dates(self) -> set[str]:
        if self._dates is None:
            self._dates = {_date_value(m) for t in self.texts for m in _DATE_WORD.finditer(t)}
        return self._dates


def _key(value: float) -> float:
    return round(float(value), 6)


def _identifier_spans(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, term)`` of the code-like identifiers of ``text`` (acronyms are names here, not identifiers)."""
    out: list[tuple[int, int, str]] = []
    for m in re.finditer(r"`([^`\n]{1,80})`", text):
        if m.group(1).strip():
            out.append((m.start(), m.end(), m.group(1).strip()))
    for pat in _EXTRA_IDENTIFIERS:
        for m in pat.finditer(text):
            term = m.group().rstrip(".")
            if not _ABBREVIATION.match(term) and not re.fullmatch(r"[\d.,_]+", term):
                out.append((m.start(), m.start() + len(term), term))
    for term in identifiers(text):
        if not is_code(term) or re.fullmatch(r"[a-z]+(?:-[a-z]+)+", term):
            continue  # an acronym (a name here) or a hyphenated word ("up-to-date")
        for m in re.finditer(re.escape(term), text):
            out.append((m.start(), m.end(), term))
    out.sort(key=lambda x: (x[0], -(x[1] - x[0])))
    kept: list[tuple[int, int, str]] = []
    for a, b, term in out:
        if all(b <= x or a >= y for x, y, _ in kept):
            kept.append((a, b, term))
    return kept


def _holds_identifier(text: str, term: str) -> bool:
    """Whether ``text`` holds ``term`` verbatim, case-insensitively, not inside a longer token (a URL or a
    term ending in a symbol: anywhere)."""
    return contains(text, term) or (not re.match(r"\w", term[-1:]) or "://" in term) and term.lower() in text.lower()


def _clock(m: re.Match[str]) -> tuple[int, int] | None:
    """``(hour, minute)`` of a time match, in 24-hour form when am/pm is given; None when not a time."""
    h, mi = int(m.group("h")), int(m.group("m") or 0)
    if h > 24 or mi > 59:
        return None
    ampm = (m.group("ampm") or "").lower()
    if ampm.startswith("p") and h < 12:
        h += 12
    elif ampm.startswith("a") and h == 12:
        h = 0
    return (h, mi)


def _dated(text: str, m: re.Match[str]) -> bool:
    """Whether a "May" is a month (a number or a year next to it), not the verb."""
    return bool(re.match(r"\s+\d", text[m.end():]) or re.search(r"\d\s*(?:of\s+)?$", text[:m.start()]))


def _date_value(m: re.Match[str]) -> str:
    if m.group("month"):
        word = m.group("month").lower()
        return f"month:{next(i for i, name in enumerate(_MONTHS, 1) if name.startswith(word[:3]))}"
    word = m.group("day").lower()
    return f"day:{next(i for i, name in enumerate(_DAYS, 1) if name.startswith(word[:3]))}"


def _figures(text: str, sentence_side: bool) -> list[tuple[int, int, float]]:
    """``(start, end, value)`` of the figures of ``text``.

    On the sentence side every figure is one fact, at its most specific (``two hundred`` is 200); on the
    passage side every reading counts (``two hundred`` holds 2, 100 and 200; ``$5k`` holds 5 and 5000; ``a
    week`` holds 1), so the check is tolerant of how the passage writes a number.
    """
    out: list[tuple[int, int, float]] = []
    taken: list[tuple[int, int]] = []

    def put(a: int, b: int, v: float) -> None:
        if sentence_side and any(a < y and x < b for x, y in taken):
            return
        taken.append((a, b))
        out.append((a, b, v))

    for m in _SCALED.finditer(text):
        base = m.group("base").lower()
        v = float(base) if base[0].isdigit() else float(_NUMBER_WORDS[base])
        put(m.start(), m.end(), v * _SCALES[m.group("scale").lower()])
    for m in _FIGURE.finditer(text):
        v = float(m.group("num").replace(",", "") + (m.group("dec") or ""))
        suffix = (m.group("suffix") or "").lower()
        if suffix and m.group("cur"):
            if not sentence_side:
                out.append((m.start(), m.end(), v))
            v *= 1000 if suffix == "k" else 1_000_000
        put(m.start(), m.end(), v)
    for m in _WORD_FIGURE.finditer(text):
        if m.group("tens"):
            v = float(_NUMBER_WORDS[m.group("tens").lower()] + _WORDS[m.group("ones").lower()])
        else:
            word = m.group("word").lower()
            if word in ("zero",) or (word == "one" and sentence_side and not _ONE.match(text, m.start())):
                continue  # "one of", "no one": a pronoun; "one week" is a figure
            v = float(_NUMBER_WORDS[word])
        put(m.start(), m.end(), v)
    for m in _BARE_SCALE.finditer(text):
        put(m.start(), m.end(), float(_SCALES[m.group("scale").lower()]))
    if not sentence_side:
        out.extend((m.start(), m.end(), 1.0) for m in _ONE_UNIT.finditer(text))
    return sorted(out)
