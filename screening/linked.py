"""A credential noun and a value in the same sentence, however the sentence is built.

:mod:`screening.statements` reads constructions ("X is Y", "X: Y", "use Y to log in"); every new phrasing
("uses the password X", "is still X", "type X when it asks for the key") needs a new one, and held-out text
keeps bringing them. This module links instead of parsing: a sentence that names a credential (the nouns of
:mod:`screening.statements`: password, passphrase, PIN, door or alarm code, Wi-Fi key, API key, token, secret, in
English, German, French and Spanish) **and** holds, within a few words of that noun, a token that is not
language is taken to give the credential's value. Sentences that only describe a credential (a policy, a reset,
a rotation, where to find it) are made of words; a value is not. A token is a value when it is:

- **mixed**: letters with digits or with typed symbols (``Tintenfass88``, ``kX9!rT2q``, ``jbt_8842aa91c7``), five
  characters or more, unless it is a version, a slug or an image name, an issue (``zoekt#86``), a file, a host and
  port, a setting (``user=x``), a measure ("90-days"), a product with a number (``OAuth2``, ``SHA256``,
  ``1Password``) or a placeholder;
- **a keypad code**: four to eight digits, possibly grouped (``4711``, ``0-4-0-8``, ``12 - 40 - 7``), unless it is a
  year or a date, a reference in parentheses, a round quantity before a word ("3600 seconds"), or the words before
  it make it a room, an extension, a postcode or an error (:data:`screening.statements.ID_CODES`);
- **no word**: eight or more lower-case letters that are no word of English, German, French or Spanish by their
  frequency (:mod:`screening.vocabulary`: ``bluebirdcanyonriver``, ``factorydefault``), after the noun, and not in
  a code span or a line that reads like a command or a config file, where tools' names are no words either;
- **a password beside a user** (``qa1@ledgerly.test / QaPass#1``): mixing three kinds of character (lower and upper
  case, digits, symbols) after a user or an e-mail address and a slash, noun or not.

How far from the noun a value may stand depends on its evidence (:data:`REACH`); the word right before a noun names
whose credential it is ("the Okta password", "gcloud secrets"), not a value, and the words before a noun do not
name its value ("the branch office has combination 22-48-16": "office" is no postcode). A verb of logging in ("sign
in to the booth Mac with X", "se entra con X", "connectez-vous ... avec X", "meldet sich ... an") links a value as a
noun does, except a number ("log in to room 4012"); a number right after a door or a gate names which one. A quoted phrase of words is left to
:mod:`screening.statements` (quoted words after "is" or ":"): beside a noun but not given by it, quotes mark a label
or a search term ("type `guest wifi` in Slack").

A bare "code" or "combination", and a door, gate, keypad, lock, safe or alarm (:data:`screening.statements.PLACE`),
link only a keypad code or a short code mostly of digits (``4B71``), and a bare code only when the word before or
after it names no identifier ("postal code", "code postal"); a bare "key" links only in a sentence about a Wi-Fi
network, and "pin" only written "PIN" (lower case, it is a verb: "pin to a commit"). Tokens in a Markdown table row
are left to :mod:`screening.tables`. Public:
:func:`find_linked_values`.
"""

from __future__ import annotations

import re

from .findings import Finding
from .statements import CODE_NOUN, ID_CODES, LOCATOR, NOUN, NUMBERED, PLACE
from .vocabulary import is_word

__all__ = ["find_linked_values", "REACH"]

#: how far (in tokens, either side) a value may stand from the credential noun, by the strength of its evidence:
#: a token mixing three kinds of character reaches across a clause, a number or a short mix a few words, a run of
#: lower-case letters that is no word across a second clause ("... was never changed and is still X"). Chosen on the
#: statement corpus, held-out batches 1-2 and the 18F and Meltano handbooks, checked on the Sourcegraph handbook; the
#: reach of "no word" raised from 8 to 12 on batches 1-5 (bench/credential_screen.py).
REACH = {"strong": 10, "mixed": 8, "keypad": 8, "no word": 12}

_NOUN_RE = re.compile(NOUN, re.I)
_CODE_RE = re.compile(rf"(?i)(?<![\w-]){CODE_NOUN}(?![\w-])")
_PRE = re.compile(r"(?P<w>[\w'’-]+)\s+$")  # the word before a bare code ("postal code")
# what every value holds (a digit, a typed symbol, or eight lower-case letters in a row): a sentence with none is
# skipped before its nouns are looked for
_CANDIDATE = re.compile(r"[\d!@#$%^&*+=~?]|[a-zß-öø-ÿ]{8}")
_DIGIT = re.compile(r"\d")
# a sentence: up to ". ", "! ", "? ", "; " or a line end (a full stop inside a token, as in a URL, does not end it)
_SENTENCE = re.compile(r"[^\n]+?(?:[.!?;](?=\s|$)|$)", re.M)
_TOKEN = re.compile(r"[^\s\"“”„«»‘’`()\[\]{}<>|,;]+")
_CODE_SPAN = re.compile(r"`[^`\n]*`")
# a shell command or a config line: "$(gcloud secrets ...)", "--project", "key: value # comment", "{...}"
_CODE_LIKE = re.compile(r"\$[\w({]|(?:^|\s)--?[a-z]|[{}=]|^\s*[\w.-]+:\s*(?:#|$)|\s#\s", re.M)
_REFERENCE = re.compile(r"\(\d+\)|\(\d+\s|\s\d+\)")
_TRAIL = ".,;:!?'’"
_LEAD = "'’:¿¡"
_POST = re.compile(r"(?i)\s+(?:de\s+|d['’]\s*)?(?P<w>[\w-]+)")
_WIFI = re.compile(r"(?i)(?<![\w-])(?:wi-?fi|wlan|ssid|wpa2?)(?![\w-])")
# derivation: a word with one of these is a word ("subaccounts", "referenceable", "multitenant")
_PREFIX = re.compile(r"^(?:sub|re|un|non|pre|post|multi|inter|co|de|dis|over|under|auto|micro|anti|self|cross|super)")
_SUFFIX = re.compile(r"(?:able|ible|ness|less|ful|ly|ity|ers?|ed|ing|s|es)$")
# verbs of logging in, in the four languages
_LOGIN = re.compile(r"(?i)\b(?:(?:log|sign)(?:s|ged|ging)?[ \t]+in(?:to)?(?![\w-])|einloggen|loggt[ \t]+sich|anmelden|"
                    r"meldet[ \t]+sich|melde[ \t]+dich|meldet[ \t]+man[ \t]+sich|connecte[zr]?[ \t-]+vous|se[ \t]+connecte|"
                    r"identifiez-vous|inici(?:a|e|ar)[ \t]+sesi(?:ó|o)n|se[ \t]+entra|entra[ \t]+como)\b")
_VERB_PIN = re.compile(r"[Pp]ins?|Pins?")
_KEY = re.compile(r"(?i)key|schl|cl")
_PARTICIPLE = re.compile(r"^(?:\w{3,}ed|ge\w{3,}(?:t|en)|\w{3,}(?:é|ée|és|ées|ado|ada|ados|adas|ido|ida|idos|idas))$")
_ASSIGNING = re.compile(r"^(?:set|changed|updated|reset|switched|moved|gesetzt|geändert|changée?|modifiée?|cambiad[oa]|"
                        r"modificad[oa]|puest[oa])$")
_PREPOSITIONS = frozenset("with to for by in at on mit an für von bei in avec à pour par en dans con a para por en".split())

# not a value whatever its letters: a URL, an e-mail address, a path, a file, a placeholder, a variable, a version,
# a time or a date, a number with a unit, an issue or a channel, a host and port, a setting, markdown
_NOT_VALUE = re.compile(
    r"(?ix)^(?: [a-z][a-z0-9+.-]*://.* | www\..* | [^@\s]+@[^@\s]+\.[a-z]{2,} | [#@].* | [~./\\].* | .*/.*/.*"
    r" | [\w-]+\.(?:md|txt|html?|json|ya?ml|toml|py|js|ts|go|rb|sh|env|pdf|png|jpe?g|csv|xlsx?|docx?|zip|gz|com|org|net|io|dev|test)"
    r" | [$%{<\[].* | .*[}>\]]$ | v?\d+(?:\.\d+)+[a-z]?"
    r" | \d{1,2}:\d{2}(?::\d{2})?(?:am|pm)? | \d{4}-\d{2}-\d{2}.* | \d{1,2}[./]\d{1,2}[./]\d{2,4}"
    r" | \d+(?:[.,]\d+)?(?:k|m|b|kb|mb|gb|tb|ms|s|h|d|min|px|%|x|st|nd|rd|th|er|e|ème|º|ª)"
    r" | .*[@:_-]v?\d+(?:\.\d+)*[a-z]? | .*:\d+ | .*= | [a-z_]+=.*"
    r" | [*_~]+.* | .*[*_~]{2,} | x{3,} | \*+ | \.{3,} | -.* | .*- )$")
_ISSUE = re.compile(r"^[a-z0-9_./-]+#\d+$")  # ``zoekt#86``: an issue, not ``QaPass#1``
_VARIABLE = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")  # ``DB_PASSWORD``: a name, not a value
_KEYPAD = re.compile(r"^[#*]?\d(?:[\d#*]|[ -](?=\d))*[#*]?$")
_SHORT_CODE = re.compile(r"^(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{4,8}$")
_PRODUCT = re.compile(r"^(?:[A-Z]{1,4}-?\d+[A-Z]?|\d+[A-Z]{1,3}|[A-Za-z]+\d|\d[A-Za-z]+|[A-Za-z]+-\d+(?:-[A-Za-z]+)?)$")
_TYPED = frozenset("!@#$%^&*+=~?")
_SEPARATORS = re.compile(r"[-_:/.]")
_RANDOM_RUN = re.compile(r"(?=[A-Za-z0-9]*[a-z])(?=[A-Za-z0-9]*[A-Z])(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{10,}")
_GROUPED = re.compile(r"^\d+(?:[ -]\d+)+$")
_DAY, _MONTH = r"(?:0?[1-9]|[12]\d|3[01])", r"(?:0?[1-9]|1[0-2])"
# a date written with dashes (day and month either way round, a year of two or four digits)
_DATE = re.compile(rf"^(?:{_DAY}-{_MONTH}|{_MONTH}-{_DAY})-(?:19|20)?\d\d$|^(?:19|20)\d\d-{_MONTH}(?:-{_DAY})?$")
_YEAR = re.compile(r"^(?:19|20)\d\d(?:\d{4})?$")  # a year, or a date written YYYYMMDD
# "12 - 40 - 7": a combination written in spaced groups
_GROUPS = re.compile(r"(?<![\w.,/:-])\d{1,3}(?:[ \t]+[-–][ \t]+\d{1,3}){2,5}(?![\w/-])")
# "qa1@ledgerly.test / QaPass#1", "admin / Winter2024!": a user and a password side by side, no noun needed when the
# password mixes three kinds of character
_PAIR = re.compile(r"(?<!\S)(?:[\w.+-]+@[\w-]+(?:\.[\w-]+)+[ \t]*|[a-z][\w.-]{1,30}[ \t]+)/[ \t]*(?P<v>[^\s/]+)")


def _words_of(token: str) -> list[str]:
    return [w for w in re.split(r"[^\w]+|_|\d+", token) if w]


def _classes(token: str) -> int:
    """How many of lower case, upper case, digits and typed symbols (not separators) ``token`` mixes."""
    return (any(c.islower() for c in token) + any(c.isupper() for c in token) + any(c.isdigit() for c in token)
            + any(c in _TYPED for c in token))


def _keypad(token: str, before: list[str], after: str | None) -> bool:
    """Four to eight digits, possibly grouped, that no word around makes a quantity, a year, a place or an id."""
    if not _KEYPAD.match(token) or not 4 <= sum(c.isdigit() for c in token) <= 8 or _YEAR.match(token):
        return False
    if any(w.lower().strip(_TRAIL) in ID_CODES or w.lower().strip(_TRAIL) in LOCATOR for w in before[-3:]):
        return False
    if before and NUMBERED.search(before[-1] + " "):
        return False  # "next to door 2104": which door
    # "3600 seconds", "5000 requests": a round number followed by a word is a quantity
    return not (token.endswith("00") and after is not None and after.isalpha() and is_word(after))


def _mixed(token: str) -> bool:
    """Letters mixed with digits or typed symbols: something a person types, not a name, a slug or a number."""
    letters = sum(c.isalpha() for c in token)
    if len(token) < 5 or letters == 0 or _PRODUCT.match(token):
        return False
    if len(_SEPARATORS.findall(token)) >= 2 and not _RANDOM_RUN.search(token):
        return False  # a slug, an image or a pod name: "redis-store-7c5fb8dd89-jzx44", "alpine-3.14-slim"
    measure = re.fullmatch(r"\d+-(?P<w>[^\W\d_]+)", token)
    if measure and is_word(measure.group("w")):
        return False  # "90-days", "12-character", "24-Stunden": a measure
    if any(c.isdigit() for c in token):
        return True  # "Tintenfass88", "orangekettle42", "a8f2c91e7d4b", "Pumpk1n-Spice"
    # letters and a typed symbol ("Garten!zaun"), not words joined by a slash, a dash or a dot ("on/offboarding",
    # "read-only", "data.vault.secret") nor a snake_case field name ("client_secret")
    return any(c in _TYPED for c in token) and not all(is_word(w) for w in _words_of(token))


def _not_a_word(token: str) -> bool:
    """Lower-case letters, eight or more, that are no word of English, German, French or Spanish, nor a word with a
    prefix or a suffix (``subaccounts``, ``referenceable``): a passphrase run together (``bluebirdcanyonriver``,
    ``factorydefault``) or a made-up string; shorter ones are as often a tool's name (``gcloud``, ``yubikey``)."""
    if len(token) < 8 or not token.isalpha() or not token.islower() or is_word(token):
        return False
    stem = _PREFIX.sub("", token)
    return not any(len(w) >= 4 and is_word(w) for w in {stem, _SUFFIX.sub("", stem), _SUFFIX.sub("", token)})


def _evidence(token: str, before: list[str], after: str | None, *, code_only: bool, in_code: bool) -> str | None:
    """What makes ``token`` a value (a key of :data:`REACH`), or None.

    ``code_only``: the nearest noun is a bare code, a combination or a place (a door, a keypad): only digits or a
    short code of digits and capitals count. ``in_code``: the token is in a Markdown code span or a sentence that
    reads like a command or a config line, where names of tools and commands are no words either (``gcloud``): a
    token that is merely no word does not count there.
    """
    # digits in groups ("14-22-9"), which the shapes of versions and names ("alpine-3") would take, dates excepted
    if _GROUPED.match(token) and not _DATE.match(token) and _keypad(token, before, after):
        return "keypad"
    if _NOT_VALUE.match(token) or _VARIABLE.match(token) or _ISSUE.match(token) or _NOUN_RE.search(token):
        return None
    if _keypad(token, before, after):
        return "keypad"
    if code_only:
        # a door code is mostly digits ("19A84"); a word with a number is a promotion or a product ("SPRING24")
        short = _SHORT_CODE.match(token) and 2 * sum(c.isdigit() for c in token) > len(token)
        return "keypad" if short else None
    if _mixed(token):
        return "strong" if len(token) >= 8 and _classes(token) >= 3 else "mixed"
    return "no word" if not in_code and _not_a_word(token) else None


def _nouns(sentence: str, *, codes: bool) -> list[tuple[int, int, bool]]:
    """Credential nouns in ``sentence``: ``(start, end, code_only)``.

    code_only for a bare code, a combination or a place (a door, a gate, a keypad, a lock, a safe, an alarm). A bare
    code is left out when the word before or after it names an identifier ("postal code", "code postal", "código de
    descuento"); a bare key counts only in a sentence about a Wi-Fi network, where it is the password ("SSID X, key
    Y"): elsewhere a key is a database's, a keyboard's or a map's. ``codes=False`` (a sentence with no digit and no
    Wi-Fi network, where a code-only noun could link nothing) looks for the credential nouns only.
    """
    # "pin to a specific commit": a PIN is written in capitals; "pin" is a verb or a badge
    found = [(m.start(), m.end(), False) for m in _NOUN_RE.finditer(sentence) if not _VERB_PIN.fullmatch(m.group(0))]
    if not codes:
        return found
    found += [(m.start(), m.end(), True) for m in PLACE.finditer(sentence)
              if not any(s < m.end() and m.start() < e for s, e, _ in found)]
    wifi = bool(_WIFI.search(sentence))
    for m in _CODE_RE.finditer(sentence):
        before = _PRE.search(sentence, max(0, m.start() - 60), m.start())
        pre = before.group("w").lower() if before else ""
        comp = (m.group("comp") or "").lower().rstrip("-")
        post = _POST.match(sentence, m.end())
        if {pre, comp, comp.removesuffix("s"), (post.group("w") if post else "").lower()} & ID_CODES:
            continue
        start = m.start()
        key = bool(_KEY.match(sentence, start))
        if (wifi or not key) and not any(s <= start < e for s, e, _ in found):
            found.append((start, m.end(), not key))
    return found


def find_linked_values(text: str) -> list[Finding]:
    """Values standing near a credential noun in the same sentence of ``text``.

    Args:
        text: plain text or Markdown (a chunk, a draft answer, a passage before it reaches a model).

    Returns:
        Findings of kind ``a credential`` (category ``secret``) covering the value only; ``[]`` when no
        sentence names a credential and holds a value. Markdown table rows are skipped (:mod:`screening.tables`).
    """
    found: list[Finding] = []
    for m in _PAIR.finditer(text):
        v = m.group("v").rstrip(_TRAIL)
        if _mixed(v) and _classes(v) >= 3 and not _NOT_VALUE.match(v) and not _ISSUE.match(v):
            found.append(Finding("a credential", "secret", m.start("v"), m.start("v") + len(v)))
    for sent in _SENTENCE.finditer(text):
        s = sent.group(0)
        if s.lstrip().startswith("|") or not _CANDIDATE.search(s):
            continue
        nouns = _nouns(s, codes=bool(_DIGIT.search(s) or _WIFI.search(s)))
        if nouns:
            found.extend(Finding("a credential", "secret", sent.start() + a, sent.start() + b)
                         for a, b in _sentence_values(s, nouns))
        # "sign in to the booth Mac with studiolight", "se entra con luzestudio": a verb of logging in links a value
        # as a credential noun does (not a number: "log in to room 4012")
        logins = [(m.start(), m.end(), False) for m in _LOGIN.finditer(s)]
        if logins:
            found.extend(Finding("a credential", "secret", sent.start() + a, sent.start() + b)
                         for a, b in _sentence_values(s, logins, keypad=False))
    return found


def _sentence_values(s: str, nouns: list[tuple[int, int, bool]], *, keypad: bool = True) -> list[tuple[int, int]]:
    """The ranges of ``s`` (one sentence) holding a value close enough to one of its ``nouns`` (``keypad=False``: not
    a keypad code, for the verbs of logging in)."""
    tokens = [(m.start(), m.end(), m.group(0)) for m in _TOKEN.finditer(s)]
    spans = [(_index(tokens, ns), _index(tokens, ne - 1), code) for ns, ne, code in nouns]
    code_spans = [m.span() for m in _CODE_SPAN.finditer(s)]
    code_like = bool(_CODE_LIKE.search(s))
    out: list[tuple[int, int]] = []
    for g in _GROUPS.finditer(s):
        i = _index(tokens, g.start())
        if sum(c.isdigit() for c in g.group(0)) >= 4 and any(
                first - REACH["keypad"] <= i <= last + REACH["keypad"] for first, last, _ in spans):
            out.append(g.span())
    for i, (start, end, raw) in enumerate(tokens):
        lead = len(raw) - len(raw.lstrip(_LEAD))
        token = raw[lead:].rstrip(_TRAIL)
        if not token or any(ns < end and start < ne for ns, ne, _ in nouns):
            continue
        # the word right before a noun names whose credential it is ("the Okta password", "gcloud secrets")
        close = [(max(first - i, i - last), code) for first, last, code in spans if i != first - 1]
        if not close:
            continue
        distance = min(d for d, _ in close)
        after_noun = any(i > last for _, last, _ in spans)
        code_only = all(code for d, code in close if d <= max(REACH.values()))
        # the words before the value that may name it (a room, an extension): not across its noun ("the branch office
        # has combination 22-48-16": "office" names the vault, not the number)
        noun_end = max((last for _, last, _ in spans if last < i), default=-1)
        before = [t for _, _, t in tokens[max(0, i - 3, noun_end + 1):i]]
        after = tokens[i + 1][2].strip(_TRAIL) if i + 1 < len(tokens) else None
        in_code = code_like or any(a <= start < b for a, b in code_spans)
        kind = _evidence(token, before, after, code_only=code_only, in_code=in_code)
        if kind == "no word" and (not after_noun or _described(tokens, spans, i)) or \
                kind == "keypad" and _REFERENCE.match(s, max(0, start - 1)):
            continue  # a value that is only no word follows its noun, not a description of it; "(16256)" is a reference
        if kind == "keypad" and (not keypad or i and NUMBERED.search(tokens[i - 1][2] + " ")):
            continue  # "next to door 2104": which door; a verb of logging in links no number
        if kind and distance <= REACH[kind]:
            out.append((start + lead, start + lead + len(token)))
    return out


def _described(tokens: list[tuple[int, int, str]], spans: list[tuple[int, int, bool]], i: int) -> bool:
    """True when a participle stands between the nearest noun before token ``i`` and it, and the token is the object
    of the preposition after it ("the alarm code is shared with keyholders", "das Passwort wird an Admins gesendet"):
    the sentence says what happens to the credential, not what it is. "set to", "changed to" are assignments."""
    last = max((last for _, last, _ in spans if last < i), default=None)
    if last is None or i - last < 3:
        return False
    between = [t.lower().strip(_TRAIL) for _, _, t in tokens[last + 1:i]]
    return any(_PARTICIPLE.match(w) and not _ASSIGNING.match(w) for w in between[:-1]) and \
        between[-1] in _PREPOSITIONS


def _index(tokens: list[tuple[int, int, str]], pos: int) -> int:
    """The index of the token holding (or first after) character ``pos``."""
    for i, (start, end, _) in enumerate(tokens):
        if pos < end:
            return i
    return len(tokens)
