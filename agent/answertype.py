"""What kind of answer a question asks for, and whether a sentence states one.

Rule-based, in the manner of the answer-type taxonomies of open-domain QA (Li & Roth 2002, "Learning
Question Classifiers"), reduced to the types a handbook question asks for (money is the answer-type taxonomy's NUM:money,
split from the other amounts because a budget question answered by a count or a period is a near miss) and an extractive
answer can show:

=============  ======================================================  ==========================================
type           asked by                                                 stated by a sentence with
=============  ======================================================  ==========================================
``amount``     how many / how much; what/is there a rate, %, cost,       a digit, a currency sign, ``%``, a number
               price, budget, limit, max/min, cap, allowance, match,     word (``two``, ``half``, ``double``) or an
               stipend, salary, bonus amount, per diem                   unbounded amount (``unlimited``, ``free``,
                                                                        ``fully``, ``no limit``)
``money``      an ``amount`` question about money (budget, cost, price,  a currency sign or code (``$``, ``MXN``), a
               pay, spend, stipend, fee, expense, bonus); "what's the     percentage, or an unbounded amount
               most ..."                                                 (``unlimited``, ``in full``, ``at cost``);
                                                                        a bare number ("every nine months") is not
``period``     how many days / weeks / hours...; the number of days...  a number or number word with a unit of time
                                                                        (``16 weeks``, ``3-5 years``, ``32-hour``)
                                                                        or ``unlimited``
``duration``   how long / how soon / how quickly / how fast / how often  a number or number word, or a period or
               / how early / how far in advance, ahead or out            frequency word (``weekly``, ``a month``,
                                                                        ``immediately``, ``within``), or no bound
                                                                        ("as much time off as you need")
``number``     what's the (phone, ticket...) number                      a digit (not a number word: "one-on-one"), or
                                                                        where it is kept (a #channel or a link)
``time``       when / what day / what date / what time / which day /    a digit, a weekday or month name, or a
               what day of the month                                    time word (``quarter``, ``end``, ``before``,
                                                                        ``after``, ``every``, ``daily``...)
``person``     who / whom / which team / which person                    a capitalised name or role, an @handle or
                                                                        e-mail, a role noun (``manager``...), or a
                                                                        first name after a verb of contacting
                                                                        ("please email James")
``place``      where / which channel / what link / what url              a URL, a #channel, a path, an @handle, a
                                                                        place noun (``channel``, ``page``...) or
                                                                        "in/at" a capitalised name
``name``       which <noun> no other type covers ("which hotel",        a capitalised word inside a sentence (not a
               "which app"); what do we use for / to ...                weekday or month), a name with digits
                                                                        (``BC3``), a label in quotes, code or bold,
                                                                        or a link
=============  ======================================================  ==========================================

Only the question's head is read: a wh-word after the first opens an embedded clause, left out
("what's the command to see who's on call" asks for no person), unless it starts a question of its
own (after a sentence's end or "and"/"or"/"but"). A question asks for at most one
type (the first that matches, in the order of the table's specificity: period and duration before money
before amount, since "how many days" asks for a period).
The gate masks what the question itself names before asking whether a sentence states a type
(:func:`mask_asked`: "the 401k match" is not answered by "401k", the hotel "in Chicago" not by "Chicago"). Yes/no and "how do
I" questions ask for none, and the gate does not check them. The tests in ``tests/test_gate.py``
hold each row.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection

__all__ = ["asked_type", "question_head", "states_type", "mask_numbers", "mask_asked", "asked_unit", "states_unit",
           "ANSWER_TYPES"]

ANSWER_TYPES = ("percent", "period", "duration", "money", "number", "amount", "time", "person", "label", "place", "name")

_UNIT_WORDS = r"seconds?|secs?|minutes?|mins?|hours?|hrs?|days?|nights?|weeks?|months?|quarters?|years?|yrs?"
_UNITS = rf"(?:{_UNIT_WORDS})"
# "how many hours", "the number of days": a count of a unit of time (the unit is the group)
_COUNT_ASKED = rf"\b(?:how many|number of) (?:[\w-]+\s+)?({_UNIT_WORDS})\b"
# what a "what's the ... / is there a ..." question names before its noun: "the", "our", up to three modifiers
_OBJECT = r"(?:(?:is|are)\s+)?(?:(?:the|our|my|a|an)\s+)?(?:[\w'-]+\s+){0,3}?"
# "how much", "what's the most", "what's the (per-person) budget / cap / rate ...": an amount
_AMOUNT_ASKED = (rf"\bhow (?:many|much)\b|\b(?:what|whats|what's)\s+(?:is\s+)?(?:the\s+)?most\b|"
                 rf"\b(?:what|whats|what's|is there an?|any)\s+{_OBJECT}(?:rate|cost|price|budget|limit|max|maximum|"
                 r"minimum|min|cap|allowance|stipend|amount|match|salary|per diem|fee|reimbursement)\b")
_ASKS = {
    # "how many days/weeks/hours": a count of a unit of time, answered by a number with a unit of time
    "period": re.compile(_COUNT_ASKED, re.I),
    "percent": re.compile(r"%|\bpercent(?:age)?\b|\bwhat share\b", re.I),
    "duration": re.compile(r"\bhow (?:long|soon|quickly|fast|often|early|far (?:in advance|ahead|out))\b|"
                           r"\bhow much (?:\w+\s+){0,2}?(?:time|notice|leave|advance)\b", re.I),
    "amount": re.compile(rf"{_AMOUNT_ASKED}|%|\bpercent(?:age)?\b", re.I),
    # An amount asked about money (a budget, a price, what is paid): the coarse "amount" with a money word.
    "money": re.compile(rf"^(?=.*(?:{_AMOUNT_ASKED}))"
                        r"(?=.*(?:\$|€|£|\b(?:budget|costs?|price[sd]?|pay|paid|pays|spend|spent|stipend|allowance|salary|"
                        r"fees?|reimburs\w*|expens\w*|per diem|bonus|dollars?|euros?|money)\b))", re.I | re.S),
    # "what's the phone number": digits, not a number word ("one-on-one")
    "number": re.compile(rf"\b(?:what|whats|what's|which|any|is there an?)\s+{_OBJECT}numbers?\b(?!\s+of\b)", re.I),
    "time": re.compile(r"\bwhen\b|\b(?:what|which) (?:day|date|time|weekday|month)\b|\bpayday\b", re.I),
    "person": re.compile(r"\bwho(?:m|'s|s)?\b|\b(?:which|what) (?:team|person|people|group|role)\b", re.I),
    # "what option do I pick?", "which status should I set?": a label the page names in quotes, code or bold.
    "label": re.compile(r"\b(?:what|which|whats|what's)\s+(?:[\w-]+\s+){0,2}?(?:option|setting|status|category|label|button|"
                        r"field|value|choice|template|menu|tab)s?\b", re.I),
    "place": re.compile(r"\bwhere(?:'s|s)?\b|\b(?:which|what) (?:channel|link|url|page|site|folder|repo|doc)\b", re.I),
    # "which hotel", "which app": one named thing of a kind no other type covers (Li & Roth's ENTY and HUM:gr)
    "name": re.compile(r"\bwhich\s+(?!(?:of|one|ones|is|are|was|were|do|does|did|can|could|should|would|will|way|"
                       r"ways|part|parts)\b)[a-z][\w-]*|\bwhat (?:do|does|did|should) (?:we|you|i|they|people) use (?:for|to|as|in)\b", re.I),
}
_NUMBER_WORDS = (r"one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|fifty|"
                 r"hundred|thousand|half|double|twice|once|dozen|single|first|second|third")
_NUMBER = rf"\d|[$€£¥₹]|%|\b(?:{_NUMBER_WORDS})\b"
# a period or an amount given without a bound: "as much time off as you need", "as long as needed", "no set limit"
_UNBOUNDED = (r"\bas (?:much|many)\b(?:\s+[\w-]+){0,3}\s+as\b|\bas long as (?:you |they )?(?:need|needed|necessary|required)\b|"
              r"\bno (?:set |fixed )?(?:limit|time limit|maximum)\b")
_CALENDAR = (r"Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday|January|February|March|April|May|June|July|"
             r"August|September|October|November|December")


def _count_of(units: str, words: int, counts: str = _NUMBER_WORDS) -> str:
    """A pattern for a number (or a range) of ``units`` with up to ``words`` words between: "16 weeks", "3-5 years",
    "32-hour", "240 annual leave hours"."""
    n = rf"(?:\d[\d.,]*|\b(?:{counts})\b)"
    return rf"{n}(?:\s*(?:-|–|to|or)\s*{n})?[\s-]*(?:[a-z-]+\s+){{0,{words}}}\b(?:{units})\b"


_STATES = {
    "period": re.compile(rf"{_count_of(_UNIT_WORDS, 1, _NUMBER_WORDS + '|an?|few|several')}|\bunlimited\b|"
                         rf"{_UNBOUNDED}", re.I),
    "number": re.compile(r"\d|#[\w-]+|https?://|www\.|\[[^\]]+\]\("),  # or where it is kept ("pinned in #incidents")
    "percent": re.compile(r"\d\s?%|\bpercent\b|\bper cent\b|\bhalf\b|\bfull\b|\ball\b|\bnone\b", re.I),
    "money": re.compile(r"[$€£¥₹]|\d\s?%|\b\d[\d,.]*\s?(?:k|K|m|M)?\s?(?:USD|EUR|GBP|CAD|AUD|MXN|INR|BRL|CHF|JPY|dollars?|"
                        r"euros?|pounds?)\b|\b(?:USD|EUR|GBP|CAD|AUD|MXN|INR|BRL|CHF|JPY)\s?\d|\b(?:unlimited|free of charge|"
                        r"for free|no (?:limit|cap|maximum)|full cost|in full|at cost|actual cost)\b", re.I),
    "amount": re.compile(rf"{_NUMBER}|\b(?:unlimited|free|fully|no (?:limit|cap|maximum)|full cost|covered|"
                         r"reimburs\w*|paid in full)\b", re.I),
    "duration": re.compile(rf"{_NUMBER}|\b(?:an?|per|each|every|within|until|after|before)\s+{_UNITS}\b|"
                           r"\b(?:hourly|daily|weekly|monthly|quarterly|yearly|annually|biweekly|bi-weekly|"
                           r"immediately|asap|same day|next day|overnight|unlimited|indefinitely)\b|"
                           rf"{_UNBOUNDED}", re.I),
    "time": re.compile(rf"{_NUMBER}|\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|"
                       r"march|april|may|june|july|august|september|october|november|december|mon|tue|wed|thu|fri|"
                       r"sat|sun|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec|today|tomorrow|tonight|morning|"
                       r"afternoon|evening|noon|midnight|eod|weekend|weekly|daily|monthly|quarterly|annually|yearly|"
                       rf"quarter|end|start|beginning|before|after|during|until|upon|once|every|each|last|next|"
                       rf"immediately|soon|{_UNIT_WORDS})\b", re.I),
    # ... or a first name after a verb of contacting ("please email James and Charles")
    "person": re.compile(r"@\w|\b[\w.+-]+@[\w-]+\.\w|\b[A-Z][a-z]+(?: (?:of|for) [A-Z][a-z]+| [A-Z][a-z]+)|"
                         r"\b(?i:e-?mail|ask|contact|ping|message|tell|call|notify|cc|(?:speak|talk|reach out|go|turn|"
                         r"report it|escalate it) to)\s+[A-Z][a-z]+\b|"
                         r"\b(?:CEO|CTO|CFO|COO|VP|HR|IT|ops)\b|\b(?:manager|lead|head|owner|team|director|officer|"
                         r"admin\w*|engineer|person|people|member|champion|buddy|partner|department|committee|"
                         r"recruiter|coordinator|contact|responsible|on-call)s?\b"),
    "label": re.compile(r"\"[^\"\n]{2,40}\"|\u201c[^\u201d\n]{2,40}\u201d|`[^`\n]{2,40}`|\*\*[^*\n]{2,40}\*\*"),
    "place": re.compile(r"(?-i:\b(?:in|at|near|from)\s+(?:the\s+)?[A-Z][a-z]+)|https?://|www\.|#[\w-]+|\[[^\]]+\]\(|(?:^|\s)/[\w-]+|`[^`]+`|@\w|\b(?:channel|page|site|"
                        r"folder|drive|repo|repository|doc|document|handbook|wiki|link|url|portal|tool|app|office|"
                        r"room|board|tracker|sheet|form|inbox|email|notion|confluence|github|gitlab|slack|zoom|"
                        r"google)s?\b", re.I),
    # a capitalised word inside a sentence (not its first), a name with digits ("BC3", "1Password"), a label in
    # quotes, code or bold, or a link
    "name": re.compile(rf"(?<=[\w,;:)|] )(?!(?:{_CALENDAR})\b)[A-Z][\w&'-]*|\b(?=[A-Za-z]*\d)(?=\d*[A-Za-z])[A-Za-z\d]{2,}\b|"
                       r"\"[^\"\n]{2,40}\"|\u201c[^\u201d\n]{2,40}\u201d|`[^`\n]{2,40}`|\*\*[^*\n]{2,40}\*\*|https?://"),
}


# A quantity asked per a unit ("the reimbursement rate per mile", "the max per night"); "per diem" and "per cent"
# name an amount, not a rate.
_RATE = re.compile(r"\bper\s+(?!diem\b|cent\b|se\b)([a-z]+)", re.I)
_QUANTITIES = ("percent", "period", "duration", "money", "amount")
_TIME_UNITS = r"second|sec|minute|min|hour|hr|day|night|week|fortnight|month|quarter|year|yr|pay period"
_TIME_UNIT = re.compile(_TIME_UNITS)
_TIME_ADJECTIVES = r"hourly|daily|nightly|weekly|biweekly|bi-weekly|monthly|quarterly|yearly|annual|annually"


# An interrogative word, with the contracted or run-together verb chat writes after it ("who's", "whats").
_WH = re.compile(r"\b(?:what|which|whose|whom|who|when|where|why|how)(?:'s|s|'re|'d|'ll)?\b", re.I)
# What may stand before a wh-word that opens a question of its own: nothing, a sentence's end, or a
# coordinating conjunction ("... and when does it ship?").
_OPENS = re.compile(r"(?:^|[.?!;:]|\b(?:and|or|but)\b,?)\s*$", re.I)


# In a yes/no question (one opening with an auxiliary), "when", "where", "who" and "which" open a condition or a
# relative clause ("does my pay change when I move?", "is there a rule where ..."), not a question, unless a verb of
# knowing or telling introduces them ("do you know where the recording is?").
_SUBORDINATE = re.compile(r"(?:when|where|who|whom|which)\b", re.I)
_YES_NO = re.compile(r"\s*(?:do|does|did|is|are|was|were|am|can|could|should|would|will|may|might|must|have|has|had)\b", re.I)
_KNOWING = re.compile(r"\b(?:know|knows|tell|remind|idea|sure|wondering|ask|asking|find out|confirm)\s*$", re.I)
_SENTENCE_END = re.compile(r"[.?!;:]|\s[-–—]\s")


def question_head(question: str) -> str:
    """The parts of ``question`` that say what it asks for: each question it holds, without its embedded clauses.

    A question asks through its first wh-word (or, without one, as a whole); a later wh-word opens an
    embedded clause, left out up to the next question ("what's the command to see *who's* on call" asks
    for a command, not a person; "what do I do *when* I'm sick" asks for no time), unless it opens a
    question of its own: at the start, after a sentence's end or after "and"/"or"/"but" ("how do I ship
    a fix and *when* does it go out?" asks for a time). In a yes/no question, "when", "where", "who" and
    "which" open a condition or a relative clause even as the first wh-word ("does my pay change *when* I
    move?"), unless a verb of knowing or telling introduces them ("do you know *where* it is?").
    """
    kept: list[str] = []
    start, cut, asked = 0, False, False
    for m in _WH.finditer(question):
        if _OPENS.search(question[: m.start()]):
            if cut:
                start, cut = m.start(), False
            asked = True
        elif not asked:
            asked = True  # the first wh-word of a question that opens otherwise ("is there a limit on how many")
            if _SUBORDINATE.match(m.group()) and _YES_NO.match(_SENTENCE_END.split(question[: m.start()])[-1]) \
                    and not _KNOWING.search(question[: m.start()]):
                kept.append(question[start: m.start()])  # "does my pay change *when* I move?": a condition, no ask
                cut = True
        elif not cut:
            kept.append(question[start: m.start()])
            cut = True
    if not cut:
        kept.append(question[start:])
    return " ".join(piece.strip() for piece in kept)


def asked_type(question: str) -> str | None:
    """The answer type ``question`` asks for (one of :data:`ANSWER_TYPES`), or None (yes/no, "how do I").

    Only the question's head (:func:`question_head`) is read: a wh-word in an embedded clause sets no type.
    A quantity asked *per* a unit ("the rate per mile") is that type with its unit, ``"money per mile"``:
    see :func:`states_type`.
    """
    head = question_head(question)
    for kind in ANSWER_TYPES:
        if _ASKS[kind].search(head):
            rate = _RATE.search(question) if kind in _QUANTITIES else None
            return f"{kind} per {rate.group(1).lower()}" if rate else kind
    return None


def states_type(text: str, kind: str | None, setting: str = "") -> bool:
    """True when ``text`` states an answer of type ``kind`` (always True for ``None``).

    A rate (``"money per night"``) needs the type stated in ``text`` and the unit ("per night", "a night",
    "/night", "nightly") in ``text`` or in ``setting``, the text it is read in: a table row's header ("Hotel per
    night"), its section headings ("Daily limits"). A figure without the unit asked is a neighbouring fact (a
    receipt threshold quoted for a mileage rate).

    Raises:
        KeyError: for an unknown ``kind``.
    """
    if kind is None:
        return True
    kind, _, unit = kind.partition(" per ")
    return bool(_STATES[kind].search(text)) and (not unit or _states_rate(f"{text}\n{setting}", unit))


def _states_rate(text: str, unit: str) -> bool:
    """True when ``text`` states something per ``unit``: "per mile", "a mile", "each mile", "/mile", or, for a unit of
    time, per any unit of time ("$250/month" answers "per year": periods convert, miles and people do not)."""
    stem = unit[:-1] if unit.endswith("s") and len(unit) > 3 else unit
    if _TIME_UNIT.fullmatch(stem):
        units, adjectives = _TIME_UNITS, _TIME_ADJECTIVES
    else:
        units, adjectives = re.escape(stem), rf"{re.escape(stem)}ly"
    return bool(re.search(rf"\b(?:per|a|an|each|every)\s+(?:[\w-]+\s+){{0,2}}?(?:{units})s?\b|/\s?(?:{units})s?\b|"
                          rf"\b(?:{adjectives})\b", text, re.I))


_NUMERIC_TOKEN = re.compile(r"[\w$€£%.,/-]*\d[\w$€£%.,/-]*")


def mask_numbers(text: str, numeric: Collection[str], analyze: Callable[[str], list[str]]) -> str:
    """``text`` without the numbers the question itself names ("401k" states no amount for "the 401k match").

    ``numeric`` holds the question's analysed terms that contain a digit; a token of ``text`` whose analysed terms
    are all among them is blanked out before :func:`states_type` reads the text.
    """
    if not numeric:
        return text

    def drop(m: re.Match[str]) -> str:
        got = analyze(m.group())
        return " " if got and set(got) <= set(numeric) else m.group()

    return _NUMERIC_TOKEN.sub(drop, text)


_WORD_TOKEN = re.compile(r"[\w&'-]+")


def mask_asked(text: str, kind: str | None, asked: Collection[str], analyze: Callable[[str], list[str]]) -> str:
    """``text`` without what the question itself names, before :func:`states_type` reads it for ``kind``.

    Its numbers always (:func:`mask_numbers`); for a ``name`` its words too: "Chicago" does not name the hotel asked
    for in "which hotel do we stay at in chicago?". ``asked`` holds the question's analysed terms.
    """
    text = mask_numbers(text, {t for t in asked if any(ch.isdigit() for ch in t)}, analyze)
    if kind != "name" or not asked:
        return text
    own = set(asked)

    def drop(m: re.Match[str]) -> str:
        got = analyze(m.group())
        return " " if got and set(got) <= own else m.group()

    return _WORD_TOKEN.sub(drop, text)


_ASKED_UNIT = re.compile(_COUNT_ASKED, re.I)


def asked_unit(question: str) -> str | None:
    """The unit of time a *period* question counts in ("how many hours a week" -> ``"hour"``), singular, or None."""
    m = _ASKED_UNIT.search(question_head(question))
    if not m:
        return None
    unit = m.group(1).lower()
    return unit[:-1] if unit.endswith("s") and len(unit) > 3 else unit


def states_unit(text: str, unit: str) -> bool:
    """True when ``text`` states a number of ``unit`` ("32-hour", "16 hours", "two hours"), not only of another unit:
    the composer's preference among sentences that state a period ("4-day work weeks" for "how many hours")."""
    return bool(re.search(_count_of(rf"{re.escape(unit)}s?", 3), text, re.I))
