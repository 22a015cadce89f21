"""The words every part reads: what a consumed span becomes (:data:`SEP`) and numbers in words."""

from __future__ import annotations

__all__ = ["HOUR_UNIT", "MIN_UNIT", "NUM", "SEP", "number_value"]

SEP = " \u00a6 "  # what a consumed span becomes: it breaks phrases (titles, names) apart


_NUMBER_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30, "forty": 40,
    "fortyfive": 45, "forty-five": 45, "forty five": 45, "sixty": 60, "ninety": 90,
}
NUM = (r"(?:\d+(?:[.,]\d+)?|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|"
        r"thirty|forty[- ]?five|forty|sixty|ninety)")
HOUR_UNIT = r"(?:hours?|hrs?|h)"
MIN_UNIT = r"(?:minutes?|mins?|m)"


def number_value(s: str) -> float:
    s = s.lower().strip()
    if s in _NUMBER_WORDS:
        return float(_NUMBER_WORDS[s])
    if s.replace("-", " ") in _NUMBER_WORDS:
        return float(_NUMBER_WORDS[s.replace("-", " ")])
    return float(s.replace(",", "."))
