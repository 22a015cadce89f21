"""Personal data in text: payment cards and national id numbers.

- A payment card number is 13 to 19 digits (single spaces or dashes between groups allowed) that
  pass the Luhn check (``stdnum.luhn``) and start with a card network's prefix (Visa 4, Mastercard
  51-55 and 2221-2720, American Express 34/37, Discover 6011/644-649/65, JCB 35, Diners 30/36/38,
  UnionPay 62): a random 16-digit id passes Luhn one time in ten, the prefix too far less often.
  Digits inside a URL or an assignment (after ``/``, ``=``, ``#``...) are ids, not cards.
- A US social security number is ``AAA-GG-SSSS`` (or nine digits right after "SSN"/"social
  security number") that ``stdnum.us.ssn`` accepts: area not 000, 666 or 9xx, group not 00,
  serial not 0000, not a published example number.
- A UK National Insurance number is two prefix letters (HMRC's allowed letters; not BG, GB, KN,
  NK, NT, TN, ZZ), six digits and a suffix A-D, e.g. ``QQ 12 34 56 C`` in upper case.

Work e-mail addresses, channel names and phone numbers are not flagged: handbooks are full of them
(the IT help desk, the benefits provider's hotline, the on-call number) and they are how employees
reach a team or a provider; a phone number alone does not tell a private line from a service's.
"""

from __future__ import annotations

import re

from stdnum import luhn
from stdnum.us import ssn

from .findings import Finding

__all__ = ["find_personal", "is_card_number"]

_CARD = re.compile(r"(?<![\w./=#?&:-])\d(?:[ -]?\d){12,18}(?![\w-]|\.\d)")
_CARD_PREFIX = re.compile(r"^(?:4|5[1-5]|222[1-9]|22[3-9]\d|2[3-6]\d\d|27[01]\d|2720|3[47]|6011|64[4-9]|65|35|30|36|38|62)")
_SSN = re.compile(r"(?<![\w-])(\d{3})-(\d{2})-(\d{4})(?![\w-])")
_SSN_PLAIN = re.compile(r"(?i)\b(?:SSN|social security(?: number| no\.?)?)\b\D{0,20}?(?<!\d)(?P<v>\d{9})(?!\d)")
_NINO = re.compile(r"\b(?!BG|GB|KN|NK|NT|TN|ZZ)[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z] ?\d{2} ?\d{2} ?\d{2} ?[A-D]\b")


def is_card_number(candidate: str) -> bool:
    """True when ``candidate`` (digits, spaces, dashes) is a plausible payment card number."""
    digits = re.sub(r"[ -]", "", candidate)
    return 13 <= len(digits) <= 19 and digits.isdigit() and bool(_CARD_PREFIX.match(digits)) and luhn.is_valid(digits)


def find_personal(text: str) -> list[Finding]:
    """Personal data in ``text``, as findings of category ``personal`` (unsorted, may overlap)."""
    found: list[Finding] = []
    for m in _CARD.finditer(text):
        if is_card_number(m.group(0)):
            found.append(Finding("a payment card number", "personal", m.start(), m.end()))
    for m in _SSN.finditer(text):
        if ssn.is_valid(m.group(0)):
            found.append(Finding("a US social security number", "personal", m.start(), m.end()))
    for m in _SSN_PLAIN.finditer(text):
        if ssn.is_valid(m.group("v")):
            found.append(Finding("a US social security number", "personal", m.start("v"), m.end("v")))
    found.extend(Finding("a UK National Insurance number", "personal", m.start(), m.end()) for m in _NINO.finditer(text))
    return found
