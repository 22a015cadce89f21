"""A sentence that names a credential gives its value unless every other token in it is proven innocent (fail-closed).

The construction rules (:mod:`screening.statements`) and the linking of shaped tokens (:mod:`screening.linked`) look
for evidence that a value is given; text written after them keeps bringing phrasings they do not read. This tier turns
the burden of proof round: a sentence holding a **credential cue** is taken to give a value **unless** each of its
tokens, other than the cue itself, is explained:

- **language**: a word of English, German, French or Spanish at or above :data:`EVERYDAY_ZIPF` (``wordfreq``), a
  function word, an inflection or a derivation of one ("expirent", "unauthenticated"), a word joined by hyphens or
  apostrophes whose parts all are words ("release-notifier", "l'adresse"), a capitalised compound of words
  ("Firmenkonto"; a lower-case one stays a value: "sonnenallee"), a capitalised name ("Okta", "GitLab": :data:`NAMES`);
- **a known innocent shape**: a URL, an e-mail address, a host, a path or a file, an IP address, a version, a date, a
  time, a percent, money, a number with a unit ("90-days", "10GB"), a reference (``SEC-4471``, ``18F``, ``#86``), an
  acronym of up to five capitals, a channel or a handle, Markdown, a command line's flag or variable, a phone number
  after a verb of calling; in a command line or a code span a name of letters (``gcloud``); a token of ``known``
  (the wiki's own vocabulary, given by the caller); a path of names (``actions/checkout@v4``), a shell variable with
  lower-case parts or a jq field path, a camelCase name with acronyms (``baseURL``), a fiscal quarter (``FY23Q3``), a
  token of three characters or fewer (``p4``, ``K8s``: a keypad code is digits, a password longer); a word the same
  text writes as a name ("WebAuthn", "a Yubikey");
- **where it stands**: a Markdown link's target; the argument of a long flag not named for a credential (``--zone
  us-central1-f``; not ``-p``, not ``--pass``); a field of a log line (``lvl=warn user=14191``); in a command given the
  credential by a flag (``-token <x>``), its other arguments; the host after ``ssh`` in a command; a record's number
  after a name or "see" (``ServiceNow KB0022142``); a number in parentheses before any cue ("Fix (16256): add a
  token field"); a name before a noun after a determiner or a place ("on the WorkLife4You Fact Sheet", "in our 1Pass
  vault"), or after a possessive ("configure your yubikey as ..."), never right after a cue, before one or after a
  copula ("est le 4471"); a word after a cue and "de"/"of" ("les secrets de webhook"); what is set up "as" something
  that is no credential ("set up yubikey as your MFA"); a line of a fenced code block is a command line; a terminal's
  escape sequences and control characters are blanks, not text;
- **a number that is a quantity, a year or a place**: three digits or fewer (a keypad code has four or more), a round
  number or a small one before a word ("3600 seconds"), a year not given as the value ("since 2019", not "est le
  1984"), a number after a word that makes it a room, an extension, a port, a door or a date ("extension 4711");

but a run of three or more numbers or digits written as words ("seven three one five", "31, then 8, then 22", "5 5 0 2
1 9") is a value whatever explains its parts.

A **cue** is the credential vocabulary matched as a stem at the end of a token, so compounds and inflections count
("VPN-Schlüssel", "Kennwörter", "Empfangs-iPad-Code", "clé pré-partagée"), a login label ("Zugangsdaten", "Wi-Fi"),
a place (a door, a keypad, a lock, a safe, an alarm, lockers) or a verb of logging in; "pin" in lower case is a verb,
"key" before a lower-case word an adjective ("key takeaways"), a code named for an identifier ("error code", "code
postal"), program text ("source code", "code host", "Code security") or a discount ("use code SPRING24 for 20% off"),
a database's key ("PRIMARY KEY"), a command that reads credentials ("get-credentials"), a capitalised cue in a title
("Code of Conduct"), a credential noun fused to a number ("1Password") and a screen's panel ("repo panel") no
credential. A bare code, a PIN, a combination or a place counts only tokens with digits or numbers as words
(:data:`CODE_ONLY`: its value is digits; "source code" sentences are prose). Markdown table rows are left to
:mod:`screening.tables`. The explanations and the threshold were chosen on the corpus and held-out batches 1-6 and the
handbooks, checked on batch 7; the explanations by position were added after batch 8 was measured, from the tier's
false flags on the three handbooks and on the eval answers (docs/explanation/evaluation.md, round 8).

Every unexplained token is a finding (kind ``an unexplained value near a credential``). This tier is on by default:
``scan(text, categories, unexplained=False)``, or the setting ``CHATOPS_SCREEN_UNEXPLAINED=0`` (environment or
``.env``), turns it off (:mod:`screening.scan`). Public: :func:`find_unexplained`, :func:`unexplained_tokens` (the
tokens and why each other one is innocent, for review), :func:`preload` (the word lists, for a long-lived process).
"""

from __future__ import annotations

import re
from collections.abc import Collection

from .findings import Finding
from .linked import _CODE_LIKE as LINKED_CODE_LIKE
from .linked import _CODE_SPAN as LINKED_CODE_SPAN
from .linked import _LOGIN as LOGIN
from .statements import ID_CODES, LOCATOR, NUMBERED, PLACE
from .vocabulary import is_frequent, is_word, load_frequent

__all__ = ["find_unexplained", "unexplained_tokens", "preload", "EVERYDAY_ZIPF", "CUES"]

#: the Zipf frequency (in any of the four languages) from which a word is explained as language.
EVERYDAY_ZIPF = 2.0

# -- cues ------------------------------------------------------------------------------------------------------
_STRONG = (r"pass(?:word|wort|phrase|code|wd)(?:s|e|es|en)?|passw(?:ö|oe)rter|kennw(?:ort|örter|oerter)(?:e|es)?|"
           r"contrase(?:ñ|n)as?|pwd|mdp|geheimzahl(?:en)?|zugangscodes?|digicodes?|passphrasen?")
_WEAK = (r"tokens?|jetons?|secrets?|secretos?|geheimnis(?:se)?|keys?|schl(?:ü|ue)ssel[ns]?|cl(?:é|e)s?|claves?|"
         r"api-?keys?|apikeys?")
_CODE = (r"pins?|codes?|c(?:ó|o)digos?|combinations?|combos?|kombinationen|kombination|combinaisons?|"
         r"combinaci(?:ó|o)n(?:es)?|zahlenkombination(?:en)?")
_MULTI = (r"mots?\s+de\s+passe|phrases?\s+(?:de\s+passe|secr(?:è|e)tes?)|frases?\s+(?:de\s+(?:paso|contrase(?:ñ|n)a)|secretas?)|"
          r"pre-?shared\s+keys?|cl(?:é|e)s?\s+pr(?:é|e)-?partag(?:é|e)es?|claves?\s+precompartidas?")
_LABEL = (r"logins?|zugang|zugangsdaten|anmeldedaten|anmeldung|identifiants?|acc(?:è|e)s|acceso|credentials?|credenciales|"
          r"creds|pw|ssid|wi-?fi|wlan|wpa2?|psk")
#: the credential cues, case-insensitive; groups ``multi``, ``strong``, ``weak``, ``code``, ``label`` say which.
CUES = re.compile(
    rf"(?i)(?<![\w-])(?:(?P<multi>{_MULTI})|(?P<prefix>[\w-]*?)(?:(?P<strong>{_STRONG})|(?P<weak>{_WEAK})|(?P<code>{_CODE})|"
    rf"(?P<label>{_LABEL})))(?![\w-])")
#: whether a bare code, a PIN, a combination or a place counts only tokens with digits (or numbers as words)
CODE_ONLY = True
#: whether places (a door, a keypad, a lock, a safe, an alarm) and verbs of logging in are cues too
PLACE_CUES = True
LOGIN_CUES = True

# a sentence: up to ". ", "! ", "? " or a line end (not ";": "the combination hasn't changed; it's still 18-36-2")
# places and logins beside statements.PLACE and linked's verbs of logging in: plurals and mailboxes, ssh
_MORE_PLACES = re.compile(r"(?i)(?<![\w-])(?:casiers|taquillas|postf(?:ä|ae|a)ch(?:er)?|mailbox(?:es)?|buz(?:ó|o)n(?:es)?|"
                          r"bo(?:î|i)tes?\s+aux\s+lettres|padlocks?|vorh(?:ä|ae)ngeschl(?:o|ö)ss(?:er)?|intercom|sprechanlage|"
                          r"interphone|interfono)(?![\w-])")
_MORE_LOGINS = re.compile(r"(?i)(?<![\w-])(?:ssh(?:\s+in)?|log(?:s|ged)?\s+on|unlock(?:s|ed)?|entsperr\w*|d(?:é|e)verrouill\w*|"
                          r"desbloque\w*)(?![\w-])")
# an escape sequence (CSI, OSC, a C1 CSI) or a control character other than whitespace, a bidirectional override
_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x9b[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b.?|"
                      r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_FENCE = re.compile(r"^[ \t]*(?:```|~~~)", re.M)  # a fenced code block's first and last lines: its lines are code
_SENTENCE = re.compile(r"[^\n]+?(?:[.!?](?=\s|$)|$)", re.M)
_TOKEN = re.compile(r"[^\s\"“”„«»‘’`()\[\]{}<>|,;—]+")  # an em dash joins no word: "enabled—passwords"
_TRAIL = ".,;:!?'’)*_~\\…"
_LEAD = "'’:¿¡(*_~\\…"

_FUNCTION = frozenset("""
a an the this that these those it its my your our their his her one some any no not all each every
in on at to for from by with of as and or but if is are was be
der die das den dem des ein eine einen einem einer im am an auf aus bei mit nach von vor zu zum zur für und oder ist
le la les un une des du de au aux ce à et ou est en l d s j n c qu
el la los las un una lo su del al en y o es a se
""".split())

# a capitalised cue in a title: "Code of Conduct", "Código de Conducta" (not "d'": "Code d'Accès"; not German: "Passwort
# der Woche"), the title not then giving a value ("Code of Practice: 4711", "The Code of Building 7 is 4711", "The Code
# of Conduct is 4711"; a link after it is no value: "37signals Code of Conduct (file:///...)")
_TITLE = re.compile(r"\s+(?:of|de|del|du|des)\s+(?:[A-Z][\w'’-]*+\s*+)++(?![\d:=]|(?:is|ist|est|es|lautet|was)\b)")

# -- numbers -----------------------------------------------------------------------------------------------------
_NUMBER_WORDS = frozenset("""
zero oh one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen
eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred
null eins zwei drei vier fünf sechs sieben acht neun zehn elf zwölf dreizehn vierzehn fünfzehn sechzehn siebzehn
achtzehn neunzehn zwanzig dreißig vierzig fünfzig sechzig siebzig achtzig neunzig hundert
zéro un deux trois quatre cinq six sept huit neuf dix onze douze treize quatorze quinze seize dix-sept dix-huit
dix-neuf vingt trente quarante cinquante soixante cent
cero uno dos tres cuatro cinco seis siete ocho nueve diez once doce trece catorce quince dieciséis diecisiete
dieciocho diecinueve veinte treinta cuarenta cincuenta sesenta setenta ochenta noventa cien
""".split())
# connectors inside a run of numbers: "31, then 8, then 22", "erst 31, dann 8", "puis", "luego", "y"
_RUN_JOINERS = frozenset("then and dann und puis et luego y - – — , / erst first zuerst".split())
_MONTHS = frozenset("""
january february march april may june july august september october november december jan feb mar apr jun jul aug
sep sept oct nov dec januar februar märz april mai juni juli oktober dezember janvier février mars avril mai juin
juillet août septembre octobre novembre décembre enero febrero marzo abril mayo junio julio agosto septiembre
octubre noviembre diciembre
""".split())
# words before a number that make it a place, an identifier or a quantity, beside statements.LOCATOR and ID_CODES
_NUMBERING = frozenset("""
port ports channel kanal canal level stufe niveau nivel step schritt étape paso chapter kapitel chapitre capítulo
section abschnitt article artikel artículo figure table tabelle tableau tabla line zeile ligne línea item punkt
point punto version release v windows iphone ios android macos python node java office model modell modèle modelo
rfc iso pr mr issue issues ticket tickets sprint week woche semaine semana quarter quartal trimestre q day tag jour día
least mindestens moins menos max min maximum minimum every alle tous cada
category categories kategorie kategorien catégorie catégories categoría categorías tier tiers class classes klasse
type types typ option options phase phases stage stages group groups gruppe steps sections chapters items levels
""".split())

_ID_CODES = frozenset(ID_CODES) | {"postleitzahl", "plz", "zip", "iso", "country"}
# a year after these: "since 2019", "seit 2019", "depuis 2019", "desde 2019", "in 2024", "im Jahr 2024"
_YEAR_CONTEXT = frozenset("""since in until by from before after of year the fy q1 q2 q3 q4 seit im jahr bis von ab vor nach
depuis en année avant après de l'an desde en año hasta antes después del""".split())
# nouns (not prepositions) of statements.LOCATOR that make a number a place or a line: "room 4012", "extension 4711"
_PLACE_WORDS = frozenset(LOCATOR) - frozenset("""in until since by from before after bis seit ab im depuis avant après desde hasta
antes después en through may mai""".split())
# right before a value: a copula, an article after one, a colon ("est le 1984", "is 2001")
_GIVING = frozenset("is ist est es lautet le el la : = was war".split())
_URL = re.compile(r"^(?:[a-z][a-z0-9+.-]*://\S+|www\.\S+)$", re.I)
_EMAIL = re.compile(r"^[\w.+-]+@[\w-]+(?:\.[\w-]+)+$")
_HOST = re.compile(r"^(?:[a-z0-9-]+\.)+(?:[a-z]{2,})(?::\d+)?(?:/\S*)?$", re.I)
_IP = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?(?:/\d+)?$")
_PATH = re.compile(r"^(?:[~.]?/)?[\w.-]+(?:/[\w.*<>-]+)+/?$|^[\w-]+\.(?:md|txt|html?|json|ya?ml|toml|py|js|ts|go|rb|sh|"
                   r"env|pdf|png|jpe?g|csv|xlsx?|docx?|zip|gz|conf|cfg|ini|log|sql|xml)$", re.I)
_VERSION = re.compile(r"^v?\d+(?:\.\d+)+[a-z]?$|^v\d+$", re.I)
_TIME = re.compile(r"^\d{1,2}(?::\d{2}){1,2}(?:[+-]\d{2}:?\d{2}|z)?(?:am|pm|h)?$|^\d{1,2}(?:am|pm|h|uhr)$|"
                   r"^\d{4}-\d{2}-\d{2}t\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:z|[+-]\d{2}:?\d{2})?$", re.I)  # 12:00+00:00, ISO
_DATE = re.compile(r"^\d{4}-\d{1,2}(?:-\d{1,2})?$|^\d{1,2}[./-]\d{1,2}(?:[./-]\d{2,4})?$|^\d{1,2}\.$|^\d{1,2}(?:st|nd|rd|th|er|e|º|ª)$")
_YEAR = re.compile(r"^(?:19|20)\d\d(?:s|er)?$")
_PERCENT = re.compile(r"^[<>~≤≥+-]?\d+(?:[.,]\d+)?\s?%$")
_UNIT = re.compile(r"^[<>~+-]?\d+(?:[.,]\d+)?(?:k|m|b|kb|mb|gb|tb|ms|s|sec|h|d|min|px|x|bit|byte|bytes|mbit|gbit|ghz|mhz|"
                   r"kg|km|m2|€|\$|eur|usd|p)$", re.I)
_MEASURE = re.compile(r"^\d+-[^\W\d_]+$")
_REFERENCE = re.compile(r"^[A-Z]{1,6}-\d{1,6}$|^#\d{1,6}$|^[A-Z]{1,4}\d{1,3}$|^\d{1,3}[A-Za-z]{1,3}$|^[A-Z]\d{1,2}[A-Z]?$|"
                        r"^\d{1,3}\+$|^\d+[-–]\d+%?$|^\d+:\d+$|^[≥≤<>=~]+\d+$|^(?:mid|early|late|pre|post)-(?:19|20)\d\d$|"
                        r"^(?:19|20)\d\d['’]s$|^\d{1,3}-(?:to|bis|à|a|au)-\d{1,3}$|^(?:FY|CY)\d{2,4}(?:Q[1-4]|H[12])?$")
# SEC-4471, #86, Q3, 18F, 2FA, 10+, 30–60, 1:1, ≥1, mid-2020, 2-to-3, FY23Q3
_ACRONYM = re.compile(r"^[A-Z]{2,5}s?$|^[A-Z][a-z]?[A-Z]{1,4}s?$")  # VPN, MQTT, APIs, IoT
_NUMBER = re.compile(r"^[+-]?\d+(?:[.,]\d+)?$")
_CHANNEL = re.compile(r"^#[a-z][\w-]*$")
# a command line's parts: a flag ("--project=x", "-o"), a variable ("$TOKEN", "${X}", "SRC_ACCESS_TOKEN"), a key and a
# value of words ("current_step:1"), a home path
_COMMAND = re.compile(r"^--?[a-z][\w-]*(?:=\S*)?$|^\$[\w{(]\S*$|^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$|^[a-z_]+:\w+$|^~?/\S+$")
_PHONE_SHAPE = re.compile(r"^(?:\+?\d{1,3}[-. ])?\(?\d{3}\)?[-. ]\d{3}[-. ]\d{4}$")
# an identifier in camelCase whose parts are words ("privateMetadata", "promptText")
# a name of a command, a field or a resource: letters, dots, dashes and underscores, no digit
_IDENTIFIER = re.compile(r"^[a-z][a-z._-]*[a-z]$|^[a-z]+(?:[A-Z][a-z]+)+$")
_CAMEL = re.compile(r"^[a-z]+(?:[A-Z][a-z]+)+$")
# camelCase with capitals inside ("baseURL", "silentJSONParsing", "chatGPT"): its parts, words or acronyms
_CAMEL_ACRONYM = re.compile(r"^[a-z]+(?:[A-Z]+[a-z]*)+$")
_CAMEL_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")
# a path of names: parts of letters, numbers or versions between "/" (a "::" or a port inside): "actions/checkout@v4",
# "node:internal/process/task_queues:83:21", "@localhost:5433/postgres", "user.profile::write"
_PATH_PART = re.compile(r"^(?:[A-Za-z_-]+|\d+|v\d+)$")
# a variable of a shell with lower-case parts ("TF_TOKEN_app_terraform_io"), a jq field path (".result.ssl.records"),
# an account of a Windows domain ("ENT\\username")
_VARIABLE = re.compile(r"^[A-Z]{2,}(?:_[A-Za-z]+)+$|^\.[A-Za-z_]\w*(?:\.[A-Za-z_]\w*|\[\])+$|^[A-Za-z][\w.-]*\\[A-Za-z][\w.-]*$")
# after a cue, what makes the next word the credential's owner or kind: "les secrets de webhook"
_OF = frozenset("de del des du d' d’ of für von".split())
# a record's number after a name or a preposition: "ServiceNow KB0022142", "see INC0012345"
_RECORD = re.compile(r"^[A-Z]{2,6}\d{4,10}$")
_RECORD_BEFORE = frozenset("at in see under per from via following siehe unter voir dans ver en article ticket kb".split())
# a determiner or a preposition of place before a name that modifies a noun: "on the WorkLife4You Fact Sheet",
# "in our 1Pass vault", "your BENEFEDS account"
_ATTRIBUTIVE = frozenset("the your our their his her my its this that a an in on at from via into within inside".split())
# a possessive before a name ("your yubikey as a ...", "in the Terraform Cloud varset"): what one owns or where it is
_POSSESSIVE = frozenset("""your our their his her my its dein deine deinen deinem ihr ihre ihren ihrem unser unsere unseren
unserem votre vos notre nos ton ta tes tu tus nuestro nuestra nuestros nuestras""".split())
_PLACE_PREPS = frozenset("in on at from into within inside".split())
# a long flag of a command line not named for a credential: its argument is the flag's ("--zone us-central1-f")
_FLAG = re.compile(r"^--?[A-Za-z][\w-]{2,}$")
# a flag's or a field's name that may take a credential though no cue names it: "--pass", "auth=", "--otp"
_CREDENTIAL_NAME = re.compile(r"(?i)pass|pw|auth|cred|otp|pin|sign|secret|token|key")
# the kinds of keys of a database, not credentials: "PRIMARY KEY", "foreign key"
_DB_KEYS = frozenset("primary foreign unique composite partition sort surrogate natural candidate".split())
# "code" as the text of programs: the word after it, the word before it ("code host", "code review", "source code")
_PROGRAM_AFTER = frozenset("""host hosts base bases review reviews reviewer reviewers search searches owner owners ownership
freeze insights intelligence navigation monitoring monitors quality coverage style block blocks snippet snippets span spans
editor editors change changes security scanning generation completion completions sample samples example examples smell
smells comment comments formatting analysis""".split())
_PROGRAM_BEFORE = frozenset("""source sample example legacy production test application app client server frontend backend
generated open python go java javascript typescript rust ruby library boilerplate glue dead unsafe""".split())
# a discount: a code for it is a promotion's ("for 20% off", "$50 off", "Rabattcode", "code promo")
_DISCOUNT = re.compile(r"(?i)\d\s?%\s+(?:off|rabatt|de\s+r(?:é|e)duction|de\s+descuento)\b|[$€£]\s?\d+\s+off\b|"
                       r"\b(?:discount|promo|coupon|voucher|rabatt|gutschein|r(?:é|e)duction|descuento|cup(?:ó|o)n)\w*")
# commands that read or list credentials, not set them: "gcloud container clusters get-credentials cloud"
_READING = frozenset("get list describe show print fetch read delete revoke remove".split())
_HANDLE = re.compile(r"^@[\w.-]+(?:/[\w.-]+)?$")
_MONEY = re.compile(r"^[~≈<>]?(?:[$€£]\d[\d,.]*[kKmM]?(?:/\w+)?|\d[\d,.]*(?:€|\$|£|usd|eur))$", re.I)
_MARKUP = re.compile(r"^(?:\[!\w+\]|!\w+|[-*+>#=]+|\d+[.)]|[a-z][.)]|\^\w{1,4})$", re.I)  # ^1: a footnote
_FILE = re.compile(r"^\.?[\w-]+(?:\.[\w-]+)*\.(?:md|txt|html?|json|ya?ml|toml|py|js|ts|tsx|go|rb|sh|env|pdf|png|jpe?g|gif|svg|csv|"
                   r"xlsx?|docx?|zip|gz|conf|cfg|ini|log|sql|xml|lock|out|tf|tfvars|rs|java|kt|cs|cpp|c|h)$|^\.[a-z][\w-]+$", re.I)
_SETTING = re.compile(r"^(?P<k>[A-Za-z_][\w.-]*)=(?P<v>.*)$")
_PHONE = re.compile(r"^\+?\d[\d -]{5,}\d$|^\d{3}-\d{4}$")
_CALL = frozenset("call calling ring phone anrufen ruf rufen rufe appelez appeler appelle llama llame llamar telefon tel tél".split())
_STREET = frozenset("street st road rd avenue ave lane way straße strasse str platz weg allee rue avenue bd boulevard calle avenida plaza paseo".split())
_NOT_A_VALUE = frozenset("""your-api-key your-token your-password changeme placeholder example""".split())
_PLAIN_DIGITS = re.compile(r"^\d+$")
_SUFFIX = re.compile(r"(?:s|es|en|er|e|n|ed|d|ing|ly|er|ers|ung|ungen|ment|ments|ability|ibility|able|ible|ness|ity|ized|ised|ize|ise|ation|ations)$")
_PREFIX = re.compile(r"^(?:sub|re|un|non|pre|post|multi|inter|co|de|dis|over|under|auto|micro|anti|self|cross|super|mis|"
                     r"out|up|in|im|ir|il)")
# French and Spanish verb endings and clitics: "expirent", "réinitialisez", "réinitialisées", "confirmarla"
_INFLECTION = re.compile(r"(?:ent|ez|ons|ées|és|ée|é|ait|aient|er|ir|ar|la|lo|las|los|le|les|se|nos|te|me|ándo|endo|ando)$")
_STEM_ENDINGS = ("", "e", "er", "ir", "ar", "en")
#: whether a capitalised compound of words counts as language ("Firmenkonto"); a lower-case one stays a value
COMPOUNDS = True
#: whether a capitalised token inside a sentence is explained as a name ("Okta", "Jira", "HashiCorp")
NAMES = True


def preload() -> None:
    """Load the word lists this tier reads (0.2-0.3 s and about 50 MB, once per process; otherwise at the first
    sentence naming a credential)."""
    load_frequent(EVERYDAY_ZIPF)


def _core(raw: str) -> tuple[int, str]:
    lead = len(raw) - len(raw.lstrip(_LEAD))
    return lead, raw[lead:].rstrip(_TRAIL)


def _everyday(word: str) -> bool:
    return is_frequent(word, EVERYDAY_ZIPF)


def _is_language(word: str, *, compound: bool = False) -> bool:
    """A word of everyday prose (or a function word), or one with a common stem (an inflection, a derivation); with
    ``compound``, also a compound of two or three such words ("Firmenkonto", "Schlüsselinhabern")."""
    w = word.lower()
    if w in _FUNCTION or w in _NUMBER_WORDS or _everyday(w):
        return True
    bare = _PREFIX.sub("", w)
    if bare != w and len(bare) >= 4 and (_everyday(bare) or _SUFFIX.sub("", bare) != bare
                                         and _everyday(_SUFFIX.sub("", bare))):
        return True  # "unauthenticated", "deprioritized", "prebuilt", "autoformat"
    for rx in (_SUFFIX, _INFLECTION):
        stem = rx.sub("", w)
        if len(stem) >= 4 and stem != w and any(_everyday(stem + e) for e in _STEM_ENDINGS):
            return True
    return compound and COMPOUNDS and _compound(w, 2)


def _compound(w: str, parts: int) -> bool:
    """``w`` splits into ``parts`` or fewer words of everyday prose, each of four letters or more (the last three),
    with a German linking letter between them ("firmen|konto", "schlüssel|inhabern", "dienst|konten")."""
    if _is_language(w):
        return True
    if parts <= 1:
        return False
    for i in range(4, len(w) - 2):
        head = w[:i]
        if _everyday(head) or head.endswith(("s", "n")) and len(head) > 4 and _everyday(head[:-1]):
            if _compound(w[i:], parts - 1):
                return True
    return False


def _word_parts(token: str) -> list[str] | None:
    """The parts of a token made of letters joined by hyphens, apostrophes, dots or slashes, or None when it holds
    anything else."""
    parts = [p for p in re.split(r"[-'’./&+]", token) if p]
    if not parts or not all(p.isalpha() for p in parts):
        return None
    return parts


def _shape(token: str) -> str | None:
    """A known innocent shape of ``token`` (the explanation), or None."""
    for name, rx in (("url", _URL), ("e-mail", _EMAIL), ("ip", _IP), ("version", _VERSION), ("time", _TIME),
                     ("date", _DATE), ("year", _YEAR), ("percent", _PERCENT), ("unit", _UNIT), ("path", _PATH),
                     ("host", _HOST), ("reference", _REFERENCE), ("acronym", _ACRONYM), ("channel", _CHANNEL),
                     ("handle", _HANDLE), ("money", _MONEY), ("markup", _MARKUP), ("file", _FILE),
                     ("command line", _COMMAND), ("phone", _PHONE_SHAPE)):
        if rx.match(token):
            return name
    m = _MEASURE.match(token)
    if m and _is_language(token.split("-", 1)[1]):
        return "measure"
    if _VARIABLE.match(token):
        return "a variable or a field path"
    if _CAMEL_ACRONYM.match(token) and all(_is_language(p) or p.isupper() and len(p) <= 5
                                           for p in _CAMEL_PARTS.findall(token)):
        return "identifier"
    if "$" in token and all(re.fullmatch(r"\d+|[A-Za-z_-]*|\$\{?[A-Za-z_]\w*\}?", p) for p in re.split(r"[:/@]", token)):
        return "command line"  # "6378:$REDIS_HOST:6378"
    if re.fullmatch(r"[A-Z][A-Z0-9_]*:-[\w.-]*", token):
        return "command line"  # "P4USER:-admin", a variable and its default
    bare = token.lstrip("!@^")
    if ("/" in bare or "::" in bare) and any(c.isalpha() for c in bare) and \
            all(not p or _PATH_PART.match(p) for p in re.split(r"[/:@.]", bare)):
        return "path"
    return None


def _number_words_run(words: list[str], i: int) -> bool:
    """True when token ``i`` is part of a run of three or more numbers (digits or number words) joined only by
    connectors: "seven three one five", "31, then 8, then 22", "5 5 0 2 1 9"."""
    def is_num(w: str) -> bool:
        return bool(_PLAIN_DIGITS.match(w)) or w in _NUMBER_WORDS or all(p in _NUMBER_WORDS for p in w.split("-"))

    if not is_num(words[i]):
        return False
    lo = hi = i
    while lo > 0 and (is_num(words[lo - 1]) or words[lo - 1] in _RUN_JOINERS):
        lo -= 1
    while hi + 1 < len(words) and (is_num(words[hi + 1]) or words[hi + 1] in _RUN_JOINERS):
        hi += 1
    first = next(j for j in range(lo, hi + 1) if is_num(words[j]))
    if first and words[first - 1] in _NUMBERING:
        return False  # a list of numbered things: "(Category 2, 3, 5)", "steps 1, 2 and 4"
    return sum(is_num(w) for w in words[lo:hi + 1]) >= 3


def _after_call(words: list[str], i: int) -> bool:
    """Token ``i`` is a number (or a group of one) within four words after a verb of calling ("call security on 4455",
    "appelez le gardien au 01 23 45 67 89")."""
    while i > 0 and re.fullmatch(r"[\d -]+", words[i - 1]):
        i -= 1
    return any(w in _CALL for w in words[max(0, i - 6):i])


def _explain_number(token: str, words: list[str], i: int) -> str | None:
    digits = token.replace(",", "").replace(".", "")
    prev = words[i - 1] if i else ""
    prev2 = words[i - 2] if i > 1 else ""
    nxt = words[i + 1] if i + 1 < len(words) else ""
    if nxt in _MONTHS or prev in _MONTHS or prev2 in _MONTHS:
        return "date"
    if _YEAR.match(token) and prev not in _GIVING:
        return "year"
    if prev in _PLACE_WORDS or prev in ID_CODES or prev in _NUMBERING or NUMBERED.search(prev + " ") or (
            prev in ("least", "moins", "menos") and prev2 in ("at", "au", "al")):
        return "numbered"
    if _after_call(words, i) or nxt in ("an", "anrufen"):
        return "phone"
    if any(w in _STREET for w in words[i + 1:i + 4]):
        return "address"
    if len(digits) <= 3:
        return "count"  # a keypad code has four digits or more
    if nxt and nxt.isalpha() and nxt not in _FUNCTION and nxt not in _RUN_JOINERS and (
            len(digits) <= 3 or digits.endswith("00")) and _is_language(nxt):
        return "quantity"
    if "." in token or "," in token:
        return "decimal" if re.match(r"^\d+[.,]\d{1,2}$", token) else None
    return None


def unexplained_tokens(sentence: str, known: Collection[str] = (), *, code: bool = False
                       ) -> list[tuple[int, int, str, str | None]]:
    """Every token of ``sentence`` that is not a cue: ``(start, end, token, explanation)``, the explanation None for an
    unexplained one. ``[]`` when the sentence holds no credential cue. ``code``: the sentence is a line of a fenced
    code block."""
    # a terminal's control sequences and control characters are no text anyone types: blanks, offsets kept
    sentence = _CONTROL.sub(lambda m: " " * len(m.group(0)), sentence)
    cues = _cues(sentence)
    if not cues:
        return []
    toks = []
    for m in _TOKEN.finditer(sentence):
        lead, core = _core(m.group(0))
        if core:
            toks.append((m.start() + lead, m.start() + lead + len(core), core))
    words = [t.lower() for _, _, t in toks]
    code_only = all(c for _, _, c in cues)
    code_like = code or bool(LINKED_CODE_LIKE.search(sentence))
    spans = [m.span() for m in LINKED_CODE_SPAN.finditer(sentence)]
    # a command that takes the credential by a flag ("-token <xxxxxxx>", "--password X"): the flag's argument is the
    # value; the command's other arguments are not
    flags = {j + 1 for j, (x, y, t) in enumerate(toks) if t.startswith("-") and _is_cue_token(toks, j, cues)
             and _FLAG.match(t)}
    out = []
    for i, (a, b, tok) in enumerate(toks):
        if any(s <= a < e for s, e, _ in cues):
            continue
        why = "the wiki's vocabulary" if words[i] in known else \
            _explain(tok, words, i, first=i == 0 or toks[i - 1][2].endswith(":"))
        if why is None and code_only and not _digitish(tok, words, i):
            why = "no digits after a code"
        if why is None and (code_like or any(x <= a < y for x, y in spans)) and _IDENTIFIER.match(tok):
            why = "a command's or a field's name"  # in a command line or a code span, tools have no words: "gcloud"
        if why is None and code_like and i and words[i - 1] == "ssh" and _is_cue_token(toks, i - 1, cues):
            why = "the host of ssh"  # "gcloud compute ssh gke-node-1": ssh takes no password on its command line
        if why is None and flags and i not in flags and (code_like or any(x <= a < y for x, y in spans)):
            why = "another argument of a command given the credential by a flag"
        if why is None:
            why = _context(sentence, toks, words, i, cues)
        out.append((a, b, tok, why))
    return out


def _is_cue_token(toks: list[tuple[int, int, str]], j: int, cues: list[tuple[int, int, bool]]) -> bool:
    a, b, _ = toks[j]
    return any(s < b and a < e for s, e, _ in cues)


def _context(sentence: str, toks: list[tuple[int, int, str]], words: list[str], i: int,
             cues: list[tuple[int, int, bool]]) -> str | None:
    """Why token ``i`` is innocent from where it stands, not from its shape: a link's target, a flag's argument, a
    field of a log line, a record's number after a name, a name before a noun; or None."""
    a, _, tok = toks[i]
    cue = CUES.fullmatch(tok)
    if cue and (cue.group("prefix") or "").isdigit():
        return "a product's name"  # "1Password": a credential noun fused to a number names a tool (see _cues)
    if sentence[max(0, a - 2):a] == "](":
        return "a link's target"  # "[2](#2-team-travel)"
    prev = toks[i - 1][2] if i else ""
    if _FLAG.match(prev) and not _CREDENTIAL_NAME.search(prev) and not _is_cue_token(toks, i - 1, cues):
        return "a flag's argument"  # "--zone us-central1-f", "-limit 100000"; not "-p", not "--password"
    setting = _SETTING.match(tok)
    if setting and not _CREDENTIAL_NAME.search(setting.group("k")) and \
            sum(bool(_SETTING.match(t) and not t.startswith("=")) for _, _, t in toks) >= 3:
        return "a field of a log line"  # "lvl=warn duration=979.415µs user=14191"
    if i > 1 and tok.isalpha() and tok.islower() and words[i - 1] in _OF and _is_cue_token(toks, i - 2, cues) and \
            not _break(sentence, toks, i - 2) and not _break(sentence, toks, i - 1):
        return "what the credential is of"  # "les secrets de webhook", "los secretos de webhook"
    if tok.isdigit() and sentence[a - 1:a] == "(" and sentence[toks[i][1]:toks[i][1] + 1] == ")" and \
            all(s >= toks[i][1] for s, _, _ in cues) and i and not _is_cue_token(toks, i - 1, cues) and \
            words[i - 1] not in _GIVING:
        return "a reference in parentheses"  # "Fix (16256): add a token field", before any credential is named
    role = _role(toks, words, i, cues)
    if role:
        return role
    if _RECORD.match(tok) and i and (words[i - 1] in _RECORD_BEFORE or
                                      prev[:1].isupper() and not _is_cue_token(toks, i - 1, cues) and prev.isalpha()):
        return "a record's number"  # "found at ServiceNow KB0022142", not "the password is KB0022142"
    return _attributive(sentence, toks, words, i, cues)


def _role(toks: list[tuple[int, int, str]], words: list[str], i: int, cues: list[tuple[int, int, bool]]) -> str | None:
    """Token ``i`` (with a letter) is set up "as" something that is no credential ("set up yubikey as your MFA",
    "configure your yubikey as a virtual MFA device"); not "use hunter2 as the password"."""
    if not any(c.isalpha() for c in toks[i][2]) or i + 2 >= len(toks) or words[i + 1] not in ("as", "als", "comme",
                                                                                            "como"):
        return None
    if i and (_is_cue_token(toks, i - 1, cues) or words[i - 1] in _GIVING):
        return None
    phrase = range(i + 2, min(len(toks), i + 6))
    if words[i + 2] not in _ATTRIBUTIVE or any(_is_cue_token(toks, j, cues) for j in phrase):
        return None
    return "what is set up as something else"


def _attributive(sentence: str, toks: list[tuple[int, int, str]], words: list[str], i: int,
                 cues: list[tuple[int, int, bool]]) -> str | None:
    """Token ``i`` (holding a letter) names the noun after it, after a determiner or a preposition of place ("on the
    WorkLife4You Fact Sheet", "in the `Marketing-contractors` 1Pass vault", "your BENEFEDS account"): a name; not
    right after a cue ("Kennwort Morgentau"), not before one ("the Sommer2024 password"), not after a copula ("est le
    ...")."""
    tok = toks[i][2]
    last = i + 1 >= len(toks)
    if not any(c.isalpha() for c in tok) or not last and (_is_cue_token(toks, i + 1, cues) or _break(sentence, toks, i)
                                                            or words[i + 1] in _GIVING):
        return None
    before_noun = not last and toks[i + 1][2][:1].isalpha() and words[i + 1] not in _FUNCTION and \
        words[i + 1] not in _RUN_JOINERS and _explain(toks[i + 1][2], words, i + 1, first=False) in (
            "language", "name", "acronym")
    j = i - 1
    while j >= 0 and i - j <= 3:
        if _is_cue_token(toks, j, cues) or _break(sentence, toks, j):
            return None
        if words[j] in _ATTRIBUTIVE:
            if j and (words[j - 1] in _GIVING or words[j - 1].endswith("est")):
                return None
            if before_noun:
                return "a name before a noun"
            if words[j] in _POSSESSIVE or j and words[j - 1] in _PLACE_PREPS:
                return "a name after a possessive or a place"  # "on your yubikey and", "in the Terraform Cloud varset"
            return None
        # between the determiner and the name only modifiers: capitalised names ("the Terraform Cloud varset"), or
        # before a noun words that are no function words ("your local sourcegraph instance"; not "your account with
        # Summer2024 and")
        if words[j] in _FUNCTION or _explain(toks[j][2], words, j, first=False) not in (
                "language", "name", "acronym", "compound") or not before_noun and toks[j][2][:1].islower():
            return None
        j -= 1
    return None


def _break(sentence: str, toks: list[tuple[int, int, str]], j: int) -> bool:
    """Between token ``j`` and the next a clause ends or a value begins (a colon, an equals sign, a comma, a dash, a
    parenthesis): a name does not run across it."""
    gap = sentence[toks[j][1]:toks[j + 1][0]] if j + 1 < len(toks) else ""
    return any(c in gap for c in ":=,;()-–—")


def _digitish(tok: str, words: list[str], i: int) -> bool:
    """What a code, a PIN or a combination can be: a token with a digit, or a number written as words."""
    return any(c.isdigit() for c in tok) or _number_words_run(words, i)


def _explain(tok: str, words: list[str], i: int, *, first: bool) -> str | None:
    """Why token ``i`` of a sentence (``words``: its tokens in lower case) is innocent, or None. ``first``: it begins
    the sentence or a label's value (a capital there says nothing)."""
    low = tok.lower()
    if (_PHONE.match(tok) or _NUMBER.match(tok)) and _after_call(words, i):
        return "phone"
    if _number_words_run(words, i):
        return None
    if not any(c.isalnum() for c in tok):
        return "punctuation"
    if _PHONE.match(tok) and any(w in _CALL for w in words[max(0, i - 4):i]):
        return "phone"
    if _NUMBER.match(tok):
        return _explain_number(tok, words, i)
    shape = _shape(tok)
    if shape:
        return shape
    if low in _NOT_A_VALUE:
        return "placeholder"
    setting = _SETTING.match(tok)
    if setting:
        v = setting.group("v")
        value_parts = _word_parts(v)
        return "setting" if not v or v.startswith(("$", "<", "{")) or v.lower() in _NOT_A_VALUE or (
            value_parts is not None and all(_is_language(p) for p in value_parts)) else None
    if _CAMEL.match(tok) and all(_is_language(p) for p in re.findall(r"[A-Z]?[a-z]+", tok)):
        return "identifier"
    if "_" in tok and re.fullmatch(r"[a-z]+(?:_[a-z]+)+", tok) and all(_is_language(p) for p in tok.split("_")):
        return "field name"
    parts = _word_parts(tok)
    if parts is not None:
        capital = tok[0].isupper() and not tok.isupper()
        if all(_is_language(p, compound=capital) or len(p) <= 2 for p in parts):
            return "language"
        if NAMES and capital:
            return "name"
    elif low in _NUMBER_WORDS:
        return "number word"
    if len(tok) <= 3 and any(c.isalpha() for c in tok):
        return "too short for a secret"  # "p4", "K8s", "mi2": a keypad code is digits, a password longer
    head, _, tail = tok.partition("-")
    if tail and (_REFERENCE.match(head) or _VERSION.match(head)) and tail.isalpha() and _is_language(tail):
        return "compound"  # "SOC2-scoped", "v2-related", "3D-Druckers": a reference or a version made a modifier
    return None


def _cues(s: str) -> list[tuple[int, int, bool]]:
    """The credential cues of sentence ``s``: ``(start, end, code_only)``; code_only for a bare code, a PIN, a
    combination or a place (a door, a keypad, a lock), whose value is digits."""
    out = []
    for m in CUES.finditer(s):
        kind = next(k for k in ("multi", "strong", "weak", "code", "label") if m.group(k))
        stem = m.group(kind)
        prefix = m.group("prefix") or ""
        if prefix and not prefix.endswith("-") and kind != "strong" and not (
                re.match(r"(?i)schl|kombi|zahlen|zugang", stem) or kind == "code" and stem.lower().startswith("code")
                and len(prefix) >= 3 and is_word(prefix.lower())):
            continue  # "decode", "monkeys", "enclaves": no compound of a credential noun
        if prefix.isdigit():
            continue  # "1Password", "1password vaults": a product fused to a number, not a credential
        post = re.match(r"\s+(?:de\s+|d['’]\s*)?([\w-]+)", s[m.end():])
        if kind == "code":
            if re.fullmatch(r"pins?", stem):
                continue  # "pin to a commit": a PIN is written in capitals
            pre = re.findall(r"[\w'’-]+", s[: m.start()])[-1:]
            if {prefix.lower().rstrip("-"), *(w.lower() for w in pre), post.group(1).lower() if post else ""} & _ID_CODES:
                continue  # "error code", "code postal"
        if not prefix and stem.lower() in ("key", "keys") and post and post.group(1).isalpha() and \
                post.group(1).islower() and post.group(1) not in _FUNCTION:
            continue  # "key takeaways": an adjective
        before = re.findall(r"[\w'’-]+", s[: m.start()])[-1:]
        if kind == "code" and _DISCOUNT.search(s):
            continue  # "use code SPRING24 for 20% off": a promotion's code, not a credential
        if kind == "code" and not prefix and stem.lower() in ("code", "codes") and (
                post and post.group(1).lower() in _PROGRAM_AFTER or before and before[0].lower() in _PROGRAM_BEFORE):
            continue  # "code host", "Code security", "source code": the text of programs
        if stem.lower() in ("key", "keys") and not prefix and before and before[0].lower() in _DB_KEYS:
            continue  # "PRIMARY KEY", "a foreign key": a database's
        if prefix.endswith("-") and prefix[:-1].lower() in _READING:
            continue  # "get-credentials": a command that reads them
        if not prefix and kind != "multi" and stem[:1].isupper() and stem[1:].islower() and _TITLE.match(s, m.end()):
            continue  # "Code of Conduct", "Code de Conduite": a title, not a credential
        if re.match(r"\.\w", s[m.end():]):
            continue  # "login.gov": a host
        out.append((*m.span(), kind == "code" and not re.match(r"(?i)zugangs|digi|t(?:ü|ue)r|alarm|tor|safe", prefix + stem)
                    and CODE_ONLY))
    if PLACE_CUES:
        out += [(*m.span(), CODE_ONLY) for m in PLACE.finditer(s) if not (
            m.group(0).lower() == "panel" and not re.search(r"(?i)(?:alarm|control|security|access|entry|door|fire)\W*$",
                                                            s[:m.start()]))]  # a "repo panel" is a screen's
        out += [(*m.span(), CODE_ONLY) for m in _MORE_PLACES.finditer(s)]
    if LOGIN_CUES:
        out += [(*m.span(), False) for m in LOGIN.finditer(s)]
        out += [(*m.span(), False) for m in _MORE_LOGINS.finditer(s)]
    return out


def _names(text: str) -> set[str]:
    """The words ``text`` writes as names, in lower case: with capitals inside ("WebAuthn", anywhere) or capitalised
    inside a sentence ("a Yubikey"); the same word in lower case elsewhere ("using webauthn you can") is that name."""
    out = set()
    for sent in _SENTENCE.finditer(text):
        toks = [_core(m.group(0))[1].rstrip("-") for m in _TOKEN.finditer(sent.group(0))]
        for i, tok in enumerate(toks):
            if not tok.isalpha() or not tok[0].isupper() or tok.isupper():
                continue
            if any(c.isupper() for c in tok[1:]) or i and toks[i - 1] and not toks[i - 1].endswith(":"):
                out.add(tok.lower())
    return out


def find_unexplained(text: str, known: Collection[str] = ()) -> list[Finding]:
    """The tokens of ``text`` that stand in a sentence naming a credential and that nothing explains as language or as
    an innocent shape (findings of kind ``an unexplained value near a credential``, category ``secret``)."""
    found: list[Finding] = []
    known = set(known) | _names(text)
    fences = [m.start() for m in _FENCE.finditer(text)]
    blocks = list(zip(fences[::2], fences[1::2] + [len(text)]))
    for sent in _SENTENCE.finditer(text):
        s = sent.group(0)
        if s.lstrip().startswith("|"):
            continue
        code = any(x < sent.start() < y for x, y in blocks)
        for a, b, _, why in unexplained_tokens(s, known, code=code):
            if why is None:
                found.append(Finding("an unexplained value near a credential", "secret", sent.start() + a,
                                     sent.start() + b))
    return found
