"""A credential cue and a filled value slot in the same sentence, in English, German, French or Spanish.

:mod:`screening.statements` reads constructions and :mod:`screening.linked` links shaped tokens to a fixed list of
nouns; each held-out batch brought phrasings and inflections neither had ("La clé pré-partagée du VPN ... est
faucondebraise", "Empfangs-iPad-Code = 240624", "Das Passwort ... heißt seit 2019 pelikan"). This module asks two
questions of a sentence instead:

1. **a cue**: a noun of the credential vocabulary (:data:`CUES`), matched on word stems so that compounds and
   inflections count ("Windows-Passwort", "Kennwörter", "contraseñas", "jetons", "VPN-Schlüssel", "Empfangs-iPad-Code",
   "clé pré-partagée"), or a login label ("login", "Zugang", "accès", "acceso", "identifiants") whose value follows
   a user;
2. **a filled value slot** after it, in the same sentence:

   - *a shaped token*: what :func:`screening.linked.evidence` calls a value (a keypad code that no neighbour makes a
     quantity, a date, a room or a version; letters mixed with digits or symbols; a run of letters that no dictionary
     has), up to :data:`REACH` tokens after the cue; a bare code, PIN or combination takes digits only;
   - *a word in a slot*: the first word after an **opener** (a copula, a colon, "=", a verb of setting or staying:
     "is", "ist", "lautet", "heißt", "est", "es", "set to", "auf ... geändert", "est passé à", "pasó a ser", "stays",
     "bleibt", "reste", "sigue siendo"; adverbs and a time phrase in between are skipped: "ist seit 2019", "toujours"),
     after the noun itself when it is named as the thing ("with the password X.", "a pour mot de passe X", "als
     Kennwort X") or, for a login label, after a user ("marketing@ledgerly.test, copperwillow"); and the object of a
     verb of typing or giving ("give it X when asked", "X eingeben", "donnez X", "escribe X") in a sentence with a cue,
     a verb of logging in or a door. The word is a value when it is no word of everyday prose
     (:func:`screening.vocabulary.is_common`: "pelican", "tangerine", "faucondebraise" are not; "required", "stored",
     "policy" are), nor a function word, a participle or an adjective by its ending; a run of two to five such words
     ending the sentence is a passphrase.

A sentence that only describes a credential ("the password policy requires 12 characters", "tokens are created under
Settings > Auth Tokens") fills no slot: its words after the noun are everyday prose, its numbers quantities. Public:
:func:`find_slot_values`.
"""

from __future__ import annotations

import re

from .findings import Finding
from .linked import CODE_LIKE, CODE_SPAN, LOGIN, evidence
from .statements import ID_CODES, PLACE, PREDICATE
from .vocabulary import is_common, is_everyday, is_word

__all__ = ["find_slot_values", "CUES", "REACH"]

#: how many tokens after its cue a shaped value may stand (a sentence's clause or two).
REACH = 12

# stems of the credential vocabulary, matched at the end of a token (so a compound or a prefix counts: "Admin-Passwort",
# "Routerkennwort", "VPN-Schlüssel") with an inflection after them ("Kennwörter", "contraseñas", "jetons")
_STRONG = (r"pass(?:word|wort|phrase|code|wd)|passw(?:ö|oe)rter|kennw(?:ort|örter|oerter)|contrase(?:ñ|n)a|pwd|mdp|"
           r"geheimzahl|zugangscode|digicode")
_WEAK = (r"tokens?|jetons?|secrets?|secretos?|geheimnis(?:se)?|keys?|schl(?:ü|ue)ssel|cl(?:é|e)s?|claves?|"
         r"api-?key|apikey")
_CODE = (r"pins?|codes?|c(?:ó|o)digos?|combinations?|combos?|kombinationen|kombination|combinaisons?|"
         r"combinaci(?:ó|o)n(?:es)?|zahlenkombination")
_LABEL = r"logins?|zugang|zugangsdaten|anmeldedaten|anmeldung|identifiants?|acc(?:è|e)s|acceso|credentials?|credenciales|creds"
_MULTI = (r"mots?\s+de\s+passe|phrases?\s+(?:de\s+passe|secr(?:è|e)tes?)|frases?\s+(?:de\s+(?:paso|contrase(?:ñ|n)a)|secretas?)|"
          r"pre-?shared\s+keys?|cl(?:é|e)s?\s+pr(?:é|e)-?partag(?:é|e)es?|claves?\s+precompartidas?|"
          r"c(?:ó|o)digos?\s+de\s+acceso|code\s+d['’]acc(?:è|e)s")
#: the credential cues (a regular expression, case-insensitive), each group naming its kind: ``strong`` a password or
#: passphrase, ``weak`` a token, secret or key, ``code`` a PIN, code or combination (digits only), ``label`` a login.
CUES = re.compile(
    rf"(?i)(?<![\w-])(?:(?P<multi>{_MULTI})|(?:[\w-]*?)(?:(?P<strong>{_STRONG})|(?P<weak>{_WEAK})|(?P<code>{_CODE})|"
    rf"(?P<label>{_LABEL}))(?=[\W_]|$)(?![\w-]))")

_SENTENCE = re.compile(r"[^\n]+?(?:[.!?](?=\s|$)|$)", re.M)
_TOKEN = re.compile(r"[^\s\"“”„«»‘’`()\[\]{}<>|]+")
_TRAIL = ".,;:!?'’)"
_LEAD = "'’:¿¡("
# openers: what says that the next word is the value
_COPULA = frozenset("""is was are were stays stayed remains remained becomes became
ist war sind lautet lauten heißt heisst bleibt blieb
est était sont reste resté demeure devient devenu devenue
es era son fue sigue queda""".split())
_OPENER_PAIRS = {("set", "to"), ("changed", "to"), ("switched", "to"), ("updated", "to"), ("goes", "by"),
                 ("passé", "à"), ("passe", "à"), ("pasó", "a"), ("ser", ""), ("siendo", ""), ("c'est", ""),
                 ("it's", ""), ("that's", ""), ("wurde", "auf"), ("ist", "auf"), ("auf", "")}
# skipped between an opener and its value: adverbs of time and persistence, and what a time phrase is made of
_SKIP = frozenset("""still now currently always again simply just also
noch immer weiterhin unverändert jetzt nun einfach auch seit
toujours encore désormais maintenant simplement aussi depuis
todavía aún ahora siempre simplemente también desde siendo ser""".split())
_TIME_WORD = re.compile(r"(?i)^(?:(?:19|20)\d\d|last|letzten|letzte|dernier|pasado|friday|freitag|vendredi|viernes)$")
# before the cue, naming it as the thing: "als Kennwort X", "a pour mot de passe X", "como clave X", "with the password X"
_NAMING = frozenset("""as als comme como pour with mit avec con the das dem den le la el""".split())
# verbs of typing or giving: their object is a value in a sentence with a cue, a login verb or a door
_TYPE_VERB = frozenset("""enter type give punch dial
eingeben eintippen tippen tippe gib geben
tapez tape saisissez saisir entrez donnez donne composez
escribe escriba teclea marca introduce da dale""".split())
_OBJECT_SKIP = frozenset("it in them ihm ihr lui leur le la lo le les".split())
_FUNCTION = frozenset("""a an the this that these those it its my your our their his her one some any no not none all each
every same other another only just also there here what which who how where when
in on at to for from by with without of about into via per as than under over and or but so if because
der die das den dem des ein eine einen einem einer kein keine mein dein ihr ihre unser sein seine im am an auf aus bei
mit nach seit von vor zu zum zur für über unter und oder aber wenn bis nicht nur noch
le la les un une des du de au aux ce cet cette ces mon ma mes votre vos notre nos leur leurs son sa ses dans sur sous
avec sans pour par chez et ou mais si pas plus ne
el los las unos unas lo su sus mi mis tu tus nuestro nuestra en sobre bajo con sin para por del al y o pero
no si""".split())
# participles and adjectives or abstract nouns by their endings: what a sentence says of a credential, not a value
_PARTICIPLE = re.compile(r"(?i)^(?:\w{3,}(?:ed|ing)|(?:ab|an|auf|aus|ein|mit|vor|zu|zurück|ver|er|be)?ge\w{3,}(?:t|en)|"
                         r"\w{3,}(?:é|ée|és|ées|ado|ada|ados|adas|ido|ida|idos|idas))$")
_ABSTRACT = re.compile(r"(?i)^\w{3,}(?:ness|ity|tion|sion|ment|ance|ence|ency|ancy|ous|ive|ible|able|ical|ful|less|"
                       r"al|ary|ory|ly|heit|keit|ung|lich|isch|ig|bar|ité|eux|euse|dad|ción|sión|ble|ivo|iva|ente|ante)$")
_WIFI = re.compile(r"(?i)(?<![^\W_])(?:wi-?fi|wlan|ssid|wpa2?|psk)(?![^\W_])")
_EMAIL = re.compile(r"^[\w.+-]+@[\w-]+(?:\.[\w-]+)+$")


def _plain_value(word: str) -> bool:
    """A word that no everyday prose of the four languages has, written as a value (lower case, or joined by hyphens:
    "pelican", "faucondebraise", "wombat-quarry-ledger"); not a function word, a participle or an adjective."""
    parts = word.split("-")
    if not all(p.isalpha() for p in parts) or not word.islower() or len(word) < 4 or _PARTICIPLE.match(parts[-1]):
        return False
    if len(parts) > 1:
        return len(parts) <= 4 and not all(is_common(p) for p in parts)
    return not (word.lower() in _FUNCTION or _PARTICIPLE.match(word) or _ABSTRACT.match(word) or is_common(word))


def _core(raw: str) -> tuple[int, str]:
    """The token without leading and trailing punctuation, and the offset of its start in ``raw``."""
    lead = len(raw) - len(raw.lstrip(_LEAD))
    return lead, raw[lead:].rstrip(_TRAIL)


def find_slot_values(text: str) -> list[Finding]:
    """Values given in sentences of ``text`` that hold a credential cue and a filled value slot.

    Args:
        text: plain text or Markdown (a chunk, a draft answer, a passage before it reaches a model).

    Returns:
        Findings of kind ``a credential`` (category ``secret``) covering the value only; ``[]`` when no sentence
        names a credential and fills a slot. Markdown table rows are skipped (:mod:`screening.tables`).
    """
    found: list[Finding] = []
    for sent in _SENTENCE.finditer(text):
        s = sent.group(0)
        if s.lstrip().startswith("|"):
            continue
        found.extend(Finding("a credential", "secret", sent.start() + a, sent.start() + b) for a, b in _values(s))
    return found


def _cues(s: str, tokens: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """The cues of sentence ``s``: ``(first token, last token, kind)``.

    A stem ends a compound after a hyphen ("Sentry-Token", "Host-PIN", "Empfangs-iPad-Code"); joined without one only
    a password's ("Tresorpasswort"), a key's or a combination's German name, or a code after a word of three letters or
    more ("Türcode", "Zugangscode"; not "decode"; no short stem: "lifecycle", "enclaves"). A code named for an identifier ("error code", "code
    postal", "Postleitzahl-Code") is none, nor "pin" in lower case (a verb), nor an English "key" before a word (an
    adjective: "key takeaways").
    """
    out = []
    for m in CUES.finditer(s):
        kind = next(k for k in ("multi", "strong", "weak", "code", "label") if m.group(k))
        word, stem = m.group(0), m.group(kind)
        prefix = word[: len(word) - len(stem)]
        if prefix and not prefix.endswith("-") and not (
                kind == "strong" or re.match(r"(?i)schl|kombi|zahlen", stem)
                or kind == "code" and stem.lower().startswith("code") and len(prefix) >= 3 and is_word(prefix)):
            continue
        post = re.match(r"\s+(?:de\s+|d['’]\s*)?([\w-]+)", s[m.end():])
        if kind == "code":
            if re.fullmatch(r"pins?", stem):
                continue  # "pin to a commit": a PIN is written in capitals
            pre = re.findall(r"[\w'’-]+", s[: m.start()])[-1:]
            if {prefix.lower().rstrip("-"), *(w.lower() for w in pre), post.group(1).lower() if post else ""} & ID_CODES:
                continue
        if not prefix and stem.lower() in ("key", "keys") and post and post.group(1).isalpha() and \
                post.group(1).islower() and post.group(1) not in _FUNCTION:
            continue  # "key takeaways", "key deliverables": an adjective
        first = _index(tokens, m.start())
        out.append((first, _index(tokens, m.end() - 1), "weak" if kind == "multi" and "cl" in word.lower()[:3] else
                    "strong" if kind == "multi" else kind))
    return out


def _values(s: str) -> list[tuple[int, int]]:
    """The ranges of sentence ``s`` that hold a value in a slot of one of its cues."""
    tokens = [(m.start(), m.end(), m.group(0)) for m in _TOKEN.finditer(s)]
    cues = _cues(s, tokens)
    code_spans = [m.span() for m in CODE_SPAN.finditer(s)]
    code_like = bool(CODE_LIKE.search(s))
    wifi = bool(_WIFI.search(s))
    out: list[tuple[int, int]] = []
    cue_tokens = {i for first, last, _ in cues for i in range(first, last + 1)}
    in_code = {i for i, (start, _, _) in enumerate(tokens) if any(a <= start < b for a, b in code_spans)}
    for first, last, kind in cues:
        # shaped tokens after the cue; a token, a secret or a key links a number only on a Wi-Fi line ("key 23505" is a
        # database's), a code only digits, a login label only a token mixing three kinds of character
        for i in range(last + 1, min(len(tokens), last + 1 + REACH)):
            if i in cue_tokens:
                break
            start, _, raw = tokens[i]
            lead, token = _core(raw)
            if not token:
                continue
            before = [t for _, _, t in tokens[max(last + 1, i - 3):i]]
            after = _core(tokens[i + 1][2])[1] if i + 1 < len(tokens) else None
            ev = evidence(token, before, after, code_only=kind == "code", in_code=code_like or i in in_code)
            if ev is None or kind == "label" and ev != "strong" or kind == "weak" and ev == "keypad" and not wifi:
                continue
            out.append((start + lead, start + lead + len(token)))
        slot = None if kind == "code" or code_like else _slot(tokens, first, last, kind)
        if slot is not None and slot not in in_code:
            start, _, raw = tokens[slot]
            lead, token = _core(raw)
            out.append((start + lead, start + lead + len(token)))
    # the object of a verb of typing or giving, in a sentence about a credential, a login or a door
    if not code_like and (cues or LOGIN.search(s) or PLACE.search(s)):
        for i, (_, _, raw) in enumerate(tokens):
            if _core(raw)[1].lower() not in _TYPE_VERB:
                continue
            for j in (i + 1, i + 2, i - 1):
                if not 0 <= j < len(tokens):
                    continue
                if j in cue_tokens or j in in_code:
                    break
                lead, token = _core(tokens[j][2])
                if j == i + 1 and token.lower() in _OBJECT_SKIP:
                    continue
                if _plain_value(token) and (j != i - 1 or tokens[j][2] == token):
                    out.append((tokens[j][0] + lead, tokens[j][0] + lead + len(token)))
                break
    return out


def _slot(tokens: list[tuple[int, int, str]], first: int, last: int, kind: str) -> int | None:
    """The token filling the slot after the cue ``tokens[first..last]``, or None.

    The slot opens after a copula, a colon, "=" or a verb of setting or staying within the cue's clause; there any
    word but one of the most frequent of its language is a value ("ist seit 2019 pelikan", not "is strict"). Right
    after a cue named as the thing ("with the password X.", "als Kennwort X") a word is a value when it ends the
    clause, or else when it is no word of everyday prose. A login label opens a slot only with a colon, and its value
    follows a user ("Zugang: a@b.test, X").
    """
    words = [_core(t)[1].lower() for _, _, t in tokens]
    raws = [t for _, _, t in tokens]
    i = last + 1
    opened = raws[last].endswith((":", "="))
    if not opened:
        for j in range(i, min(len(tokens), i + REACH)):
            w, nxt = words[j], words[j + 1] if j + 1 < len(words) else ""
            if j > i and raws[j - 1].endswith((",", ";")) or j > i and _cue_at(tokens, j):
                break  # the noun's clause ended, or another noun's began
            if raws[j] in (":", "=", "→") or raws[j].endswith((":", "=")) and not w.endswith("/"):
                i, opened = j + 1, True
                break
            if kind != "label" and (w in _COPULA or (w, nxt) in _OPENER_PAIRS or (w, "") in _OPENER_PAIRS):
                i, opened = j + 1 + ((w, nxt) in _OPENER_PAIRS), True
                break
    named = not opened and kind != "label" and first > 0 and words[first - 1] in _NAMING
    if not (opened or named):
        return None
    # skip adverbs and a time phrase ("seit 2019", "toujours", "letzten Freitag auf")
    while opened and i < len(tokens) and (words[i] in _SKIP or _TIME_WORD.match(words[i]) or words[i] in ("auf", "a", "à")):
        i += 1
    if opened and i < len(tokens) and kind == "label" and (_EMAIL.match(words[i]) or words[i + 1:i + 2] == ["/"]):
        i += 2 if words[i + 1:i + 2] == ["/"] else 1  # the user, then the password
    if i >= len(tokens):
        return None
    token = _core(raws[i])[1]
    ends = i + 1 == len(tokens) or raws[i].endswith((".", ";", ",", "!", "?")) or _TIME_WORD.match(words[i + 1]) \
        or words[i + 1] in ("since", "seit", "depuis", "desde") \
        or _PARTICIPLE.match(words[i + 1]) and (i + 2 == len(tokens) or raws[i + 1].endswith((".", ";", "!")))
    # a word that runs on into a phrase ("is reset after every incident", "sont distinctes par environnement") is
    # a value only when no dictionary has it ("est faucondebraise pour ...")
    # a capitalised word ending the clause after a copula or a colon ("ist Regenbogen.", "Kennwort: Bergkristall") is a
    # value when it is no word of everyday prose (not a noun a German sentence capitalises: "ist Pflicht.")
    capital = opened and ends and token[:1].isupper() and token[1:].islower() and _slot_word(token.lower()) and \
        not is_common(token)
    # right after a cue named as the thing, a frequent word is the head of a compound ("Check the password expiry.")
    if "/" in token or not (capital or (_slot_word(token) and (opened or not is_common(token)) if ends else
                                        _slot_word(token) and len(token) >= 6 and not is_word(token))):
        return None
    return i


def _slot_word(word: str) -> bool:
    """A word standing where a value is given that is a value: lower case (or joined by hyphens), not a function word,
    a participle, an adjective by its ending nor one of the most frequent words of its language."""
    parts = word.split("-")
    if not all(p.isalpha() for p in parts) or not word.islower() or len(word) < 4 or _PARTICIPLE.match(parts[-1]):
        return False
    if len(parts) > 1:
        return len(parts) <= 4 and not all(is_common(p) for p in parts)
    w = word
    return not (w in _FUNCTION or w in PREDICATE or _ABSTRACT.match(w) or is_everyday(w))


def _cue_at(tokens: list[tuple[int, int, str]], j: int) -> bool:
    return bool(CUES.fullmatch(_core(tokens[j][2])[1]))


def _index(tokens: list[tuple[int, int, str]], pos: int) -> int:
    """The index of the token holding (or first after) character ``pos``."""
    for i, (start, end, _) in enumerate(tokens):
        if pos < end:
            return i
    return len(tokens)
