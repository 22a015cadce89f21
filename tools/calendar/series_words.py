"""The words of a meeting request that ask for a series ("weekly", "every other tuesday", "monthly on
the 1st"), read into the parts of an RFC 5545 rule (:class:`SeriesWords`).

:func:`take_series` finds them in a message and blanks them out, so the rest of the extraction
(:mod:`tools.calendar.extract`) does not read "mondays" as a date or "sessions" as a title. Which
day the series starts on is decided there, from the rule and the message time
(:func:`tools.calendar.recurrence.next_start`).

Understood: ``daily``/``every day``, ``every other day``; ``weekly``/``every week``/``each week``/
``once a week``; ``biweekly``/``fortnightly``/``every other week``/``every 2 weeks``/``every N weeks``;
weekdays (``every monday``, ``every tue and thu``, ``on mondays``, ``every other tuesday``);
``every weekday``/``weekdays``/``mon-fri``; ``monthly``/``every month``/``quarterly``/``every N months``;
``the 1st of every month``, ``the first monday of each month``, ``the last friday of the month``
(with a monthly word); ends: ``for 6 weeks``, ``for 3 months``, ``6 times``/``for 4 sessions``,
``until dec 20``/``through the end of the year``.
A word such as ``recurring`` with nothing that says how often is kept as :attr:`SeriesWords.unclear`.

Series words in the request's object (``object_lead``: its topic, "to go over the weekly report",
"about the daily numbers") that describe one of its nouns are not read
(:func:`tools.dates.describes_a_noun`, the reading the reminder tool shares): the object names no
schedule. Outside it, an adjective of the meeting itself (``a weekly sync``) asks for a series.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tools.dates import describes_a_noun

from .recurrence import WEEKDAY_CODES

__all__ = ["SeriesWords", "take_series"]

_SEP = " \u00a6 "
_N = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
      "eleven": 11, "twelve": 12, "other": 2, "second": 2, "2nd": 2, "alternate": 2}
_NUMW = r"(\d{1,3}|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_WD = r"(?:mon|tues?|wed(?:nes)?|weds|thu(?:rs?)?|fri|sat(?:ur)?|sun)(?:day)?s?"
_WD_LIST = rf"{_WD}(?:\s*(?:,|and|&|\+|/|or)\s*(?:on\s+|every\s+)?{_WD})*"
_ORD = {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4, "last": -1}
_ORD_RE = r"(first|1st|second|2nd|third|3rd|fourth|4th|last)"

_NTH_WEEKDAY = re.compile(rf"\b(?:on\s+)?(?:the\s+|every\s+)?{_ORD_RE}\s+({_WD})"
                          rf"(?P<tail>\s+(?:of\s+)?(?:every|each|the|a)\s+month)?\b", re.I)
_MONTHDAY = re.compile(r"\b(?:on\s+)?(?:the\s+)?(\d{1,2})(?:st|nd|rd|th)?\s+(?:day\s+)?of\s+(?:every|each)\s+month\b",
                       re.I)
_WORKWEEK = re.compile(r"\b(?:(?:every|each|on)\s+)?(?:week\s*day|work\s*day|working\s+day|business\s+day)s?\b|"
                       r"\bmon(?:day)?\s*(?:-|\u2013|to|through|thru)\s*fri(?:day)?\b", re.I)
_EVERY_WD = re.compile(rf"\b(?:every|each)\s+(?:(other|second|2nd|alternate)\s+)?({_WD_LIST})\b", re.I)
_PLURAL_WD = re.compile(r"\b(?:on\s+)?((?:mon|tues|wednes|thurs|fri|satur|sun)days"
                        r"(?:\s*(?:,|and|&|\+|/)\s*(?:on\s+)?(?:mon|tues|wednes|thurs|fri|satur|sun)days)*)\b", re.I)
_ON_WD_LIST = re.compile(rf"\bon\s+({_WD}(?:\s*(?:,|and|&|\+|/)\s*{_WD})+)\b", re.I)
_FREQ: list[tuple[re.Pattern[str], str, int | None]] = [
    (re.compile(r"\bevery\s+(?:other|second|2nd|alternate)\s+week\b|\bbi-?weekly\b|\bfortnightly\b|"
                r"\bevery\s+fortnight\b", re.I), "WEEKLY", 2),
    (re.compile(rf"\bevery\s+{_NUMW}\s+weeks\b", re.I), "WEEKLY", None),
    (re.compile(r"\b(?:weekly|every\s+week|each\s+week|once\s+a\s+week|once\s+per\s+week)\b", re.I), "WEEKLY", 1),
    (re.compile(r"\bquarterly\b", re.I), "MONTHLY", 3),
    (re.compile(r"\bevery\s+(?:other|second|2nd)\s+month\b", re.I), "MONTHLY", 2),
    (re.compile(rf"\bevery\s+{_NUMW}\s+months\b", re.I), "MONTHLY", None),
    (re.compile(r"\b(?:monthly|every\s+month|each\s+month|once\s+a\s+month|once\s+per\s+month)\b", re.I), "MONTHLY", 1),
    (re.compile(r"\bevery\s+(?:other|second)\s+day\b", re.I), "DAILY", 2),
    (re.compile(rf"\bevery\s+{_NUMW}\s+days\b", re.I), "DAILY", None),
    (re.compile(r"\b(?:daily|every\s+day|each\s+day|every\s+single\s+day)\b", re.I), "DAILY", 1),
]
_FOR_SPAN = re.compile(rf"\bfor\s+(?:the\s+next\s+)?{_NUMW}\s+(weeks|months)\b", re.I)
_COUNT = re.compile(rf"\b(?:for\s+)?{_NUMW}\s+(?:times|sessions|occurrences|meetings|instances)\b", re.I)
_MONTH = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|"
          r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)")
_UNTIL = re.compile(rf"\b(?:until|till|til|through|thru|ending(?:\s+on)?|up\s+to)\s+(?:the\s+)?"
                    rf"((?:{_MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH})"
                    rf"(?:,?\s+\d{{4}})?|\d{{4}}-\d{{2}}-\d{{2}}|end\s+of\s+(?:the\s+)?(?:year|month|{_MONTH}))\b", re.I)
_UNCLEAR = re.compile(r"\b(?:recurring|repeating|regular|recurrent)\b", re.I)


@dataclass(slots=True)
class SeriesWords:
    """What the message said about a series.

    Attributes:
        phrase: the words read, joined (for the trace and questions: ``weekly on mondays``).
        freq: ``DAILY``, ``WEEKLY`` or ``MONTHLY`` ("" when only :attr:`unclear` words were found).
        interval: repeat every N periods.
        byday: weekday codes (``MO``), with an ordinal for monthly rules (``1MO``, ``-1FR``).
        bymonthday: the day of the month of a monthly rule, or None.
        count: the number of events (``6 times``), or None.
        span: ``(n, "weeks"|"months")`` for ``for 6 weeks``, or None.
        until: the last day's words (``dec 20``, ``end of the year``), read against the message time
            by the extractor, or "".
        unclear: a word such as ``recurring`` that does not say how often.
    """

    phrase: str = ""
    freq: str = ""
    interval: int = 1
    byday: list[str] = field(default_factory=list)
    bymonthday: int | None = None
    count: int | None = None
    span: tuple[int, str] | None = None
    until: str = ""
    unclear: str = ""


def _num(s: str) -> int:
    s = s.lower()
    return _N[s] if s in _N else int(s)


def _codes(text: str) -> list[str]:
    out: list[str] = []
    for m in re.finditer(_WD, text, re.I):
        code = WEEKDAY_CODES[["mo", "tu", "we", "th", "fr", "sa", "su"].index(m[0][:2].lower())]
        if code not in out:
            out.append(code)
    return out


def take_series(s: str, object_lead: re.Pattern[str] | None = None) -> tuple[SeriesWords | None, str]:
    """Find series words in ``s`` (see the module docstring).

    Args:
        s: the request (what earlier readers took out already replaced by separators).
        object_lead: where the request's object starts (its first match in ``s``): after it, words
            that describe a noun (``the weekly report``) are left in ``s``, unread.

    Returns:
        ``(words, rest)``: the series read (None when the message asks for one event) and ``s`` with
        the words read replaced by a separator.
    """
    w = SeriesWords()
    said: list[str] = []

    def find(pattern: re.Pattern[str]) -> re.Match[str] | None:
        lead = object_lead.search(s) if object_lead is not None else None
        for m in pattern.finditer(s):
            if lead is None or m.start() < lead.end() or not describes_a_noun(s, m.start(), m.end()):
                return m
        return None

    def cut(m: re.Match[str]) -> None:
        nonlocal s
        said.append(" ".join(m[0].split()))
        s = s[:m.start()] + _SEP + s[m.end():]

    m = find(_NTH_WEEKDAY)
    nth = None
    if m:
        nth = (f"{_ORD[m[1].lower()]}{_codes(m[2])[0]}", m)
    m = find(_MONTHDAY)
    if m and 1 <= int(m[1]) <= 31:
        w.freq, w.bymonthday = "MONTHLY", int(m[1])
        cut(m)
    m = find(_WORKWEEK)
    if m:
        w.freq, w.byday = "WEEKLY", list(WEEKDAY_CODES[:5])
        cut(m)
    m = find(_EVERY_WD)
    if m and not w.byday:
        w.freq, w.byday = "WEEKLY", _codes(m[2])
        if m[1]:
            w.interval = 2
        cut(m)
    m = find(_PLURAL_WD)
    if m and not w.byday:
        w.freq, w.byday = "WEEKLY", _codes(m[1])
        cut(m)
    for pattern, freq, interval in _FREQ:
        m = find(pattern)
        if not m:
            continue
        n = interval if interval is not None else _num(m[1])
        if freq == "DAILY" and w.freq == "WEEKLY":
            cut(m)  # "daily on weekdays": the weekdays say it
            break
        if freq == "MONTHLY" and w.byday and not any(len(d) > 2 for d in w.byday):
            w.byday = []  # "monthly ... mondays" makes no rule; the month wins, the day comes from the start
        w.freq, w.interval = freq, max(n, w.interval if w.freq == freq else 1)
        cut(m)
        break
    if nth and (w.freq == "MONTHLY" or nth[1]["tail"]):
        m = find(_NTH_WEEKDAY)  # positions moved: find it again
        if m:
            w.freq, w.byday, w.bymonthday = "MONTHLY", [nth[0]], None
            cut(m)
    if w.freq == "WEEKLY" and not w.byday:
        m = find(_ON_WD_LIST)
        if m:
            w.byday = _codes(m[1])
            cut(m)
    if w.freq:
        m = _FOR_SPAN.search(s)
        if m:
            w.span = (_num(m[1]), m[2].lower())
            cut(m)
        m = _UNTIL.search(s)
        if m:
            w.until = m[1]
            cut(m)
        m = _COUNT.search(s)
        if m and _num(m[1]) >= 1:
            w.count = _num(m[1])
            cut(m)
    m = find(_UNCLEAR)
    if m:
        if not w.freq:
            w.unclear = m[0]
        cut(m)
    if not w.freq and not w.unclear:
        return None, s
    w.phrase = " ".join(said)
    return w, s
