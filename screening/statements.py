"""Credentials given in a sentence, whatever the value looks like ("the guest wifi password is bluebird").

Token shapes (:mod:`screening.secrets`) miss a passphrase of plain words. This module reads the
statement instead: a finding is a **credential noun** (password, passphrase, passcode, PIN, door or
alarm code, Wi-Fi key, API key, token, secret, and their German, French and Spanish names), an
**assignment construction** right after it ("is", "was set to", ":", "=", "lautet", "ist", "est",
"es"; an optional "for the guest network" / "du wifi" / "für das WLAN" in between), and a
**value-like token** after that. The value is judged, not listed:

- quoted or back-ticked text, or a token with a digit or a symbol, is a value (``4711``,
  ``"correct horse"``), except a measure ("12 characters", "90 Tage": a short number and a word)
  placeholders and names (``<password>``, ``$DB_PASSWORD``, ``license_key``, ``****``, a URL), times
  and dates, and markdown (a link, emphasis);
- a bare "code" ("the storage room code is 2244") counts only with a value of four or more characters
  holding a digit, and not after a word naming an identifier (status, error, postal, NAICS...);
- a plain word is a value only when it stands alone (the sentence or clause ends after it) and it
  is not an ordinary word of the statement's language: a function word ("the", "in", "sent to
  your phone" runs on), a predicate adjective ("required", "geheim", "obligatoire"), a participle
  ("printed", "gesendet", "envoyé", "enviada") or an instruction ("see", "siehe", "voir");
- "use VALUE to log in" / "mit VALUE anmelden" / "utilisez VALUE pour vous connecter" / "usa VALUE
  para iniciar sesión" needs no noun, but then the value must look like one (a digit or symbol,
  quotes, or a lower-case word of six letters or more that is no ordinary word), so "use Okta to log in"
  and "use SSO" pass;
- after a noun that names a credential only sometimes (secret, token, key, clave), a plain word ending like an
  adjective or an abstract noun ("ephemeral", "consistency", "disponible") is no value; after any noun, a word
  naming where credentials are kept ("1Password", "Vault", "SSO") or a command-line flag is none.

Looser constructions, each with its own guard:

- a bare code, a key, a German compound ("Schließfachcode", "Tresorpasswort") or a combination, read like
  a bare code (a digit, four characters); a bare key on a line about a Wi-Fi network is its password;
- the value first ("quietharbor is the password for the test laptop"), a question answered ("the PIN? It's
  2468"), a change ("changed to 8812", "a été changé en 3317");
- a user and a password side by side after "log in (to the kiosk tablet) with", "connectez-vous ... avec",
  "inicia sesión ... con", "melden Sie sich ... mit" or a label such as "Login:"/"Zugangsdaten:" ("admin /
  Winter2024!"), the password holding a digit or a symbol (a provider, a domain or an e-mail address is not one);
  a Wi-Fi line giving ``NETWORK / PASSWORD``;
- a hyphenated compound noun ("Admin-Passwort", "Einwahl-PIN"), and a role word between noun and qualifier
  ("mot de passe administrateur du routeur");
- digits typed at a door or opening a lock ("punch in 4411 on the keypad", "am Tastenfeld 7391 eingeben",
  "disarm with 1-9-8-4", "s'ouvre avec 7-3-1-9"), or a number after "code"/"PIN" in a sentence about a door, gate, keypad, lock, alarm or safe,
  unless the words before it make it a room, an extension, a page or a date;
- a shell or config variable named for a credential given a value (``ACME_TOKEN=...``), not a placeholder.

Values given without "is" or ":", read from the grammar of the sentence (the value's frequency in everyday prose,
:func:`screening.vocabulary.is_common`, tells a chosen word from the head of a compound: "the password kumquat." is
a value, "the password expiry." and "token scopes" are not):

- apposition: a word right after the noun that ends the clause ("das Passwort sofakissen.", "SSID X, key
  sonnenallee" on a Wi-Fi line), not a common word, a plural of one, an adjective or abstract noun by its ending,
  nor in a question ("Passwort vergessen?"); a typed value set off by commas ("the door code, 4512, also ...");
- an aside between the noun and "is" (", which nobody changed,"), adverbs after it ("is still", "est toujours",
  "ist immer noch"), a copula of staying ("stays", "bleibt", "reste", "sigue siendo");
- the object of a typing verb when a credential is asked for ("type X when it asks for the key", "escribe X
  cuando pida la clave"), a value named as the credential ("with X as the passphrase", "X como contraseña",
  "admin/X as login", "als Passwort haben wir X gewählt"), and a credential set to it ("mis le mot de passe du compte
  à X"): the construction says it is the value, so a common word counts too, but not one after a determiner ("your
  birthday as the PIN") nor, after "to"/"à", a word of everyday prose ("mis à jour");
- a time phrase after the copula ("bleibt bis Freitag X"), "authenticates with X", typing as a gerund ("en tapant",
  "marcando", "by typing"); a number right after a door, a gate or an entrance names which one ("door 2104");
- a value is not given when it is coordinated with another word ("absent ou expiré", "long and random").

A finding covers the value (the agent drops the whole sentence holding it; passages reach a model
with it replaced). Public: :func:`find_statements`.
"""

from __future__ import annotations

import re

from .findings import Finding
from .vocabulary import is_common

__all__ = ["find_statements", "value_span", "NOUN", "CODE_NOUN", "ID_CODES", "PLACE", "LOCATOR", "NUMBERED"]

# -- credential nouns ---------------------------------------------------------------------------
_WIFI = r"(?:wi-?fi|wlan|wpa2?|network|netzwerk|réseau|reseau|red)"
_NOUNS = [
    # English
    r"pass(?:word|phrase|code|wd)s?", r"pass\s+(?:code|phrase)", r"pins?", r"pin\s+(?:code|number)", r"pwd?",
    r"(?:door|alarm|gate|entry|access|keypad|lock|safe|building|garage|locker|unlock)\s+codes?",
    rf"{_WIFI}\s+(?:keys?|passwords?)", r"wi-?fi\s+codes?", r"(?:api|access|secret|license|licence|wpa)[\s_-]?keys?",
    r"(?:auth(?:entication)?|access|api|bearer|bot|personal\s+access)\s+tokens?", r"tokens?", r"secrets?",
    # German
    r"passw(?:ö|oe)rter", r"passwort(?:e)?", r"kennw(?:ort|örter)", r"zugangs(?:code|daten|passwort)", r"pin-?code",
    r"t(?:ü|ue)r-?code", r"alarm-?code", r"tor-?code", r"wlan-?(?:schl(?:ü|ue)ssel|passwort|kennwort|code)",
    r"api-?schl(?:ü|ue)ssel", r"netzwerkschl(?:ü|ue)ssel", r"geheimnis", r"geheimzahl", r"pin-?nummer",
    r"[^\W\d_]{3,}(?:passwort|kennwort|geheimzahl)",  # compounds: "Tresorpasswort", "Routerkennwort"
    # French
    r"mots?\s+de\s+passe", r"phrases?\s+secr(?:è|e)tes?", r"phrase\s+de\s+passe", r"codes?\s+pin",
    r"codes?\s+(?:d['’]acc(?:è|e)s|d['’]entr(?:é|e)e|d['’]alarme|de\s+(?:la\s+)?porte|du\s+portail|wi-?fi)",
    r"digicodes?", r"mdp", r"cl(?:é|e)s?\s+(?:wi-?fi|wpa|api|d['’]acc(?:è|e)s|secr(?:è|e)te|de\s+s(?:é|e)curit(?:é|e)\s+r(?:é|e)seau)",
    r"jetons?(?:\s+d['’]acc(?:è|e)s|\s+api)?",
    # Spanish
    r"contrase(?:ñ|n)as?", r"claves?", r"n(?:ú|u)mero\s+pin", r"frases?\s+de\s+contrase(?:ñ|n)a", r"c(?:ó|o)digos?\s+pin",
    r"c(?:ó|o)digos?\s+(?:de\s+(?:acceso|(?:la\s+)?puerta|(?:la\s+)?alarma|entrada|seguridad)|wi-?fi)",
    r"secretos?",
]
_NOUN = r"(?<![\w-])(?:[^\W\d_]{2,}-)?(?:" + "|".join(_NOUNS) + r")(?![\w-])"
#: the credential nouns (a regular expression, case-insensitive use), for :mod:`screening.tables`.
NOUN = _NOUN
# "for the guest network", "of the admin console", "(building A)", "du wifi invité", "für das WLAN", "de la oficina"
_QUALIFIER = (r"(?:[ \t]+(?:wi-?fi|wlan|vpn|admin|api|invit(?:é|e)s?|administra(?:teur|tor|dor)|root|master|principal|"
              r"partag(?:é|e)e?|compartid[oa]|shared|guest|gast|invitados))?"
              r"(?:[ \t]*\([^()\n]{1,40}\)|[ \t]+(?:for|of|to|on|at|in|für|fürs|zum|zur|des|der|vom|im|am|du|de|des|pour|au|aux|à|a|"
              r"del|al|para|en)(?:[ \t]+[\w'’@./-]+){1,5}?)?"
              # an aside between commas: "the test user's password, which nobody changed, is ..."
              r"(?:[ \t]*,[^,\n]{3,60},)?")
_ASSIGN = (r"[ \t]*(?:\b(?:is|was|has\s+been|were|are)\s+(?:now\s+|still\s+|currently\s+)?(?:set|changed|updated|reset)\s+to\b|\bis\b|\bwas\b|\bare\b|"
           # "changed to 8812", "a été changé en 3317", "ha cambiado a 4321"; "the PIN? It's 2468"; "du wifi, c'est lavande"
           r"\b(?:has\s+|have\s+)?(?:changed|updated|reset|moved|switched)\s+to\b|"
           r"\b(?:a\s+été\s+|est\s+|sera\s+)?(?:chang|modifi)ée?\s+(?:en|à|pour)\b|\b(?:ha\s+|fue\s+)?(?:cambiad[oa]|cambió|modificad[oa])\s+a\b|"
           r"\?[ \t]*(?:it['’]s|it\s+is|that['’]s|c['’]est|es|das\s+ist|sie\s+lautet|er\s+lautet|lautet)\b:?|"
           r",[ \t]*(?:c['’]est|it['’]s|das\s+ist)\b|"
           r"\blautet\b|\blauten\b|\bist\b|\bheißt\b|\bwurde\s+(?:auf|zu)\b|"
           # "the PIN stays 8080", "bleibt", "reste", "sigue siendo": a copula of staying
           r"\b(?:stays|remains|bleibt|reste|demeure|sigue\s+siendo)\b|"
           r"\best\b(?:\s*:)?|\bsont\b|\bc['’]est\b|\bes\b(?:\s*:)?|\bson\b|\bera\b|"
           r":=|=|:(?=\s)|[ \t][-\u2013\u2014][ \t])[ \t]*")
_STATEMENT = re.compile(rf"(?i){_NOUN}{_QUALIFIER}{_ASSIGN}(?P<rest>[^\n]*)")
# "log in with the password X", "the code 4711 opens the door": a noun and the value side by side
_APPOSITION = re.compile(rf"(?i){_NOUN}[ \t]+(?P<rest>[\"'`“‘«»„][^\n]*|\S*(?:\d|[@#$%^&*+=~]|[!?](?=\S))[^\n]*)")
# "the door code, 4512, also opens the shed": a value set off by commas right after its noun
_APPOSITION_COMMA = re.compile(rf"(?i){_NOUN}[ \t]*,[ \t]*(?P<rest>[^,\n]+?)[ \t]*(?:,|$|[.;](?:\s|$))", re.M)
# "das Passwort sofakissen.", "SSID LedgerlyGuest, key sonnenallee": a word right after its noun, ending the clause
_APPOSITION_WORD = re.compile(
    rf"(?i)(?P<noun>{_NOUN}|(?<![\w-])(?:keys?|schl(?:ü|ue)ssel|cl(?:é|e)s?)(?![\w-]))[ \t]+"
    r"(?P<v>[^\W\d_]{4,})(?=[ \t]*(?:$|[.;,!)](?:\s|$)))", re.M)

# -- "use X to log in" without a noun ---------------------------------------------------------------
_USE = re.compile(
    r"(?i)(?:\b(?:use|enter|type|utilisez|utilise|saisissez|saisir|entrez|usa|use|utiliza|introduce|escribe|"
    r"geben\s+sie|gib|verwenden\s+sie|nutzen\s+sie)\s+(?P<v1>\S+)\s+"
    r"(?:to\s+(?:log|sign)\s+in|to\s+(?:connect|unlock|get\s+in)|as\s+(?:the\s+)?password|ein\b|"
    r"pour\s+(?:vous\s+)?(?:connecter|identifier)|para\s+(?:iniciar\s+sesi(?:ó|o)n|entrar|conectarte|acceder))"
    r"|\bmit\s+(?P<v2>\S+)\s+(?:anmelden|einloggen|entsperren)"
    r"|\b(?:log|sign)\s+in\s+with\s+(?P<v3>\S+?)[.!]?[ \t]*$)", re.M)
# a bare "code" ("the storage room code is 2244", "der Code für die Tiefgarage ist 5151"): only a value with a
# digit, and not a code that names or identifies something (a status, an error, a postcode, a cost centre)
# a German compound ("Schließfachcode", "SIM-PIN") and a combination ("the combination for the cabinet is 5-2-9")
# are read like a bare code: the part before "code" must not name an identifier ("Fehlercode", "Barcode")
_CODE_NOUN = (r"(?:(?P<comp>[^\W\d_]{3,}?)(?:code|-pin)|codes?|keys?|schl(?:ü|ue)ssel|cl(?:é|e)s?|c(?:ó|o)digos?|combinations?|combo|(?:zahlen)?kombination|"
              r"combinaisons?|combinaci(?:ó|o)n(?:es)?)")
#: a bare code, a compound code or a combination (group ``comp``: a compound's first part), for :mod:`screening.tables`.
CODE_NOUN = _CODE_NOUN
_CODE = re.compile(rf"(?i)(?:(?P<pre>[\w-]+)\s+)?(?<![\w-])(?P<cn>{_CODE_NOUN})(?![\w-]){_QUALIFIER}{_ASSIGN}(?P<rest>[^\n]*)")
# the word after a code noun, naming what kind of code it is ("código de descuento", "code postal")
_POST = re.compile(r"(?i)\s+(?:de\s+|d['’]\s*)?(?P<w>[\w-]+)")
_ID_CODES = frozenset("""
status error exit response http return result reason source country area zip postal post postcode region language
currency tax cost project product promo promotion discount coupon voucher booking reference tracking order invoice
cost-centre cost-center department office airport class course colour color dress qr bar barcode sample example
naics sic swift bic iban routing sort radford ab employer agency bureau centre center zip bar uni op short geo
source quell quellen fehler länder landes strich maschinen programm html inline pseudo byte trans dienst
unicode shortcode geocode opcode bytecode sourcecode
fehler status länder landes post rabatt gutschein projekt produkt kosten buchungs sprach
d'erreur postal promo projet produit réduction
error postal descuento proyecto producto estado
""".split())
# "log in with password summerbreeze", "mit dem Passwort X anmelden", "avec le mot de passe X", "con la contraseña X"
_WITH = re.compile(rf"(?i)\b(?:with|using|mit|avec|con|use|enter|type|utilisez|saisissez|entrez|usa|utiliza|introduce|"
                   rf"verwenden\s+sie|nutzen\s+sie|geben\s+sie)\s+(?:the\s+|dem\s+|le\s+|la\s+|el\s+)?{_NOUN}\s+(?P<rest>[^\n]*)")

# "quietharbor is the password for the test laptop": the value first, then the noun (and nothing naming a thing
# after it: "1Password is the password manager")
_REVERSE = re.compile(rf"(?i)(?P<v>[^\s|]+)[ \t]+(?:is|ist|est|es)[ \t]+(?:the|our|das|der|die|unser|le|la|notre|el|la|nuestra)[ \t]+"
                      rf"(?:{_WIFI}[ \t]+|(?:guest|gäste|invité|invitados)[ \t]+)?{_NOUN}"
                      r"(?=[ \t]+(?:for|of|to|on|für|des|der|vom|du|de|pour|del|para)\b|[ \t]*(?:$|[.,;:!?)]))", re.M)
# "log in as admin with hunter2!", "sign in with admin / Winter2024!", "Shared Netflix login: a@b.test / popcorn42":
# a user and a password side by side, the password shaped like one
_LOGIN = re.compile(
    r"(?i)(?:\b(?:(?:log|sign)[ \t]*-?[ \t]*in|authenticat(?:es?|ing))(?:[ \t]+(?:to|on|at)[ \t]+[^,.;:\n]{1,40}?)?(?:[ \t]+as[ \t]+\S+)?[ \t]+(?:with|using)|"
    r"\bconnecte[zr]?(?:-vous)?(?:[ \t]+(?:à|au|aux|sur|a)[ \t]+[^,.;:\n]{1,40}?)?(?:[ \t]+en\s+tant\s+que[ \t]+\S+)?[ \t]+avec|"
    r"\binici(?:a|e|ar)[ \t]+sesi(?:ó|o)n(?:[ \t]+en[ \t]+[^,.;:\n]{1,40}?)?(?:[ \t]+como[ \t]+\S+)?[ \t]+con|"
    r"\bmelde[nt]?[ \t]+(?:dich|sie[ \t]+sich|euch)(?:[ \t]+(?:am|an|bei|im)[ \t]+[^,.;:\n]{1,40}?)?[ \t]+mit|"
    r"\b(?:logins?|credentials|creds|zugangsdaten|anmeldedaten|identifiants|credenciales|account)\b(?:[ \t]+[^\s:]+){0,6}?[ \t]*:)"
    r"[ \t]+(?P<rest>[^\n]*)")
# "Wifi for the Lisbon office: LedgerlyLX / pastelnata": a network's name and its password after a Wi-Fi label
_WIFI_PAIR = re.compile(rf"(?im)^[^\n:]*(?<![\w-]){_WIFI}(?![\w-])[^\n:]{{0,40}}:[ \t]*[\"'`]?[^\s/|\"'`]+[\"'`]?[ \t]*/[ \t]*(?P<rest>[^\n]*)")
_PAIR = re.compile(r"^(?P<user>[`'\"]?[^\s/|:`'\"]+[`'\"]?)[ \t]*(?:/|,?[ \t]+(?:with|and|password|pw|mit|avec|con))[ \t]*(?P<rest>[^\n]*)", re.I)

# "with the code 5590", "mit dem Code 5590", "avec le code 5590", "con el código 5590": a code and its digits
_WITH_CODE = re.compile(r"(?i)\b(?:with|using|mit|avec|con)\s+(?:the\s+|dem\s+|den\s+|le\s+|la\s+|el\s+)?(?:code|c(?:ó|o)digo|pin)\s+"
                        r"(?P<v>\d(?:[\d#*]|[ -](?=\d)){3,11})(?![\w-])")
# "export ACME_TOKEN=...", "DB_PASSWORD: hunter2": a variable named for a credential, given a value
# "type orangekettle42 when it asks for the key", "escribe X cuando pida la clave": what is typed when a credential is
# asked for
_TYPE_WHEN = re.compile(
    rf"(?i)\b(?:type|enter|tippen[ \t]+sie|tippe|geben[ \t]+sie|gib|saisissez|tapez|entrez|escribe|introduce|teclea)[ \t]+"
    rf"(?P<v>[^\s,;]+?)[.,;]?[ \t]+(?:when|once|if|whenever|wenn|sobald|falls|quand|lorsque|si|d(?:è|e)s[ \t]+que|cuando)\b"
    rf"[^.\n]{{0,60}}?{_NOUN}")
# "we set the password of the test account to X", "nous avons mis le mot de passe du compte test à X", "setzt das
# Passwort auf X": a verb of setting before the noun, the value after "to"
_SET_TO = re.compile(rf"(?i)\b(?:set|mis|mettez|fixé|réglé|défini|puesto|pon|ponemos|pusimos|setzt|setzen|setze|stellt|stellen)\b"
                     rf"[^.\n]{{0,30}}?{_NOUN}{_QUALIFIER}[ \t]+(?:to|à|sur|auf|a|en)[ \t]+(?P<rest>[^\n]*)")
# "Als Passwort für den Testnutzer haben wir X gewählt": "as the password", the value before the final participle
_AS_FIRST = re.compile(rf"(?i)\b(?:als|comme|como|as)[ \t]+(?:(?:the|das|le|la|l['’]|el)[ \t]*)?{_NOUN}[^.\n]{{0,60}}?[ \t]"
                       r"(?P<v>[^\s,;]+)[ \t]+(?:\w*ge\w+(?:t|en)|chosen|picked|used|choisi|pris|utilisé|elegido|elegida|usado|"
                       r"usada|escogido)[ \t]*(?:$|[.;!?])", re.M)
# "with marigoldsummer as the passphrase", "almendro como contraseña", "admin/cobaltfern as login": a value named
# as the credential
_AS_NOUN = re.compile(rf"(?i)(?P<v>[^\s,;:()]+)[ \t]+(?:as|als|comme|como)[ \t]+(?:(?:the|a|an|das|ein|le|la|l['’]|un|une|el|una)"
                      rf"[ \t]*)?(?:[\w-]+[ \t]+)?(?:{_NOUN}|(?<![\w-])(?:logins?|credentials?)(?![\w-]))")
_VARIABLE = re.compile(r"\b[A-Z][A-Z0-9_]*(?:TOKEN|PASSWORD|PASSWD|PWD|SECRET|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY)[A-Z0-9_]*"
                       r"[ \t]*[=:][ \t]*[\"']?(?P<v>[^\s\"'`]{4,})")
_NOT_GIVEN = re.compile(r"(?i)^(?:[$<{%\[(*]|\.\.\.|x{3,}|your|my[-_]|<|example|placeholder|changeme$|none$|null$|true$|false$)")

# -- a code typed at a door ---------------------------------------------------------------------------
# "punch in 4411 on the keypad", "am Tastenfeld 7391 eingeben", "tapez 1928 sur le digicode", "marca 6543 en el
# teclado": digits typed, in a sentence about a door, gate, keypad, lock, alarm or safe
_KEYED = r"(?P<{}>[\d#*](?:[\d#*]|[ -](?=\d)){{3,11}})(?![\w-])"
_ENTER = re.compile(
    rf"(?i)\b(?:(?:opens?|unlocks?|(?:ö|oe)ffnet[ \t]+sich|(?:ö|oe)ffnet|entsperrt[ \t]+sich|s['’]ouvre|se[ \t]+d(?:é|e)verrouille|"
    rf"se[ \t]+abre|se[ \t]+desbloquea)[ \t]+(?:with|using|mit|avec|con)|"
    rf"(?:disarm|unlock|open|arm|désarmer|désactiver|ouvrir|déverrouiller|desarmar|desactivar|abrir|desbloquear)"
    rf"(?:[ \t]+(?:it|the\s+\w+|l['’]\w+|la\s+\w+|el\s+\w+))?[ \t]+(?:with|using|avec|con)|enter|type|punch(?:[ \t]+in)?|key[ \t]+in|dial|press|tap(?:[ \t]+in)?|input|tippen[ \t]+sie|tippe|geben[ \t]+sie|gib|"
    rf"w(?:ä|ae)hlen[ \t]+sie|tapez|composez|saisissez|entrez|tape|compose|marca|marque|teclea|introduce|introduzca|pulsa|digita|"
    # gerunds: "s'ouvre en tapant 3-8-1-5", "se abre marcando ...", "opens by typing ..."
    rf"(?:en[ \t]+)?(?:tapant|composant|saisissant)|marcando|tecleando|introduciendo|(?:by[ \t]+)?(?:typing|entering|punching(?:[ \t]+in)?|keying[ \t]+in))"
    rf"(?:[ \t]+(?:the[ \t]+code|den[ \t]+code|le[ \t]+code|el[ \t]+c(?:ó|o)digo))?[ \t]+{_KEYED.format('v')}"
    rf"|{_KEYED.format('w')}[ \t]+(?:eingeben|eintippen|tippen|dr(?:ü|ue)cken|w(?:ä|ae)hlen)")
_PLACE = re.compile(
    r"(?i)(?:\b(?:doors?|gates?|keypads?|key[ \t]+pad|(?:pad)?locks?|lockers?|safes?|alarms?|panel|entrance|entry|garage|cage|"
    r"cabinet|turnstile|tastenfeld|tastatur|schloss|schließfach|tresor|eingang|garage|portes?|portail|digicode|clavier|lockbox|"
    r"cadenas|casier|coffre|alarme|alarmanlagen?|entrée|parking|puertas?|port(?:ó|o)n|teclado|candado|taquilla|caja[ \t]+fuerte|"
    r"alarma|entrada|garaje|cerradura)\b|(?:t(?:ü|ue)r|safe|schloss|tresor)\b|\btor\b)")
_CODE_WORD = re.compile(r"(?i)(?:\bcodes?\b|\bc(?:ó|o)digos?\b|digicode|code\b|\bpins?\b|\bcombination|kombination|combinaison|combinaci)")
# a number that says where or when, not what to type: "room 4112", "ext. 4455", "in March 2025", "call 4455"
_LOCATOR = frozenset("""
room rooms raum zimmer salle sala floor etage étage planta building gebäude bâtiment edificio haus house ext ext.
extension extensión durchwahl poste tel tel. phone telefon téléphone teléfono call calling ring anrufen appelez llama llame
llamar number nummer numéro número no no. nr nr. n° suite unit einheit plot page pages seite ticket issue case order version through bus line linie ligne línea
in until since by from before after bis seit ab im depuis avant après desde hasta antes después en
january february march april may june july august september october november december
januar februar märz mai juni juli oktober dezember janvier février mars avril juin juillet août septembre octobre
novembre décembre enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre diciembre
""".split())

# a number right after a door, a gate or an entrance names which one ("next to door 2104", "Tor 3"), unless a colon or
# a verb stands between
_NUMBERED = re.compile(r"(?i)(?<![\w-])(?:doors?|gates?|entrance|entry|t(?:ü|ue)r|tor|eingang|portes?|portail|entr(?:é|e)e|"
                       r"puertas?|port(?:ó|o)n|entrada)[ \t]+$")
#: a number after this names which door or gate it is, for :mod:`screening.linked`.
NUMBERED = _NUMBERED
#: words naming a door, gate, keypad, lock, safe or alarm (a regular expression), for :mod:`screening.linked`.
PLACE = _PLACE
#: words before a number that make it a room, an extension, a page or a date, for :mod:`screening.linked`.
LOCATOR = _LOCATOR
#: words before "code" that make it an identifier ("error code", "postal code"), for :mod:`screening.tables`.
ID_CODES = _ID_CODES

# -- what a value is not ----------------------------------------------------------------------------
_FUNCTION = frozenset("""
a an the this that these those it its my your our their his her one ones some any no not none all each every
same other another only just also still now then there here what which who how where when whatever
in on at to for from by with without of about into onto via per as than under over behind inside near
be being been is are was were will would can could must should may might do does did done has have had
and or but nor so if because until unless while
always never usually often currently automatically only personal
der die das den dem des ein eine einen einem einer eines kein keine mein meine dein deine ihr ihre unser
im in am an auf aus bei mit nach seit von vor zu zum zur für über unter hinter neben per
ist sind war wird werden wurde kann muss soll darf nicht nur auch noch immer nie jetzt dann hier dort
und oder aber sondern weil wenn bis
le la les un une des du de au aux ce cet cette ces mon ma mes ton ta tes votre vos notre nos leur leurs
dans sur sous avec sans pour par chez entre vers
est sont était sera peut doit ne pas plus toujours jamais aussi encore ici là
et ou mais donc car si
el la los las un una unos unas lo su sus mi mis tu tus nuestro nuestra
en sobre bajo con sin para por entre hacia desde hasta del al
es son era será puede debe no nunca siempre también aquí allí
y o pero porque si
""".split())
_PREDICATE = frozenset("""
required optional mandatory needed necessary confidential private secret sensitive personal individual unique
expired invalid incorrect wrong valid correct weak strong long short temporary permanent new old default
case-sensitive compromised encrypted hashed hidden visible available unavailable blank empty missing unknown
important different identical similar random simple complex mandatory free welcome written hidden given broken
forgotten stolen chosen shown known taken sensitive
hinterlegt erhältlich bekannt gesperrt
erforderlich notwendig nötig optional vertraulich geheim privat persönlich individuell abgelaufen ungültig
falsch gültig richtig schwach stark lang kurz vorübergehend temporär neu alt leer unbekannt verschlüsselt
obligatoire facultatif nécessaire confidentiel confidentielle secret secrète privé privée personnel personnelle
expiré expirée invalide incorrect incorrecte valide faible fort forte long longue court courte temporaire nouveau
nouvelle vide inconnu chiffré chiffrée sensible
obligatorio obligatoria opcional necesario necesaria confidencial secreto secreta privado privada personal
caducado caducada inválido inválida incorrecto incorrecta válido válida débil fuerte largo larga corto corta
temporal nuevo nueva vacío vacía desconocido desconocida cifrado cifrada sensible
""".split())
_INSTRUCTION = frozenset("""
see ask contact check call visit request use follow refer consult
siehe fragen frag kontaktieren wenden bitte beim
voir demandez demander contactez consultez voyez
ver pregunta pregunte consulta consulte contacta contacte solicita solicite
""".split())
# English/German/French/Spanish participles and gerunds: "printed", "gesendet", "envoyé", "enviada".
_PARTICIPLE = re.compile(r"(?i)^(?:\w{3,}(?:ed|ing)|(?:ab|an|auf|aus|ein|mit|vor|zu|zurück)?ge\w{3,}(?:t|en)|\w{3,}(?:é|ée|és|ées|ado|ada|ados|adas|ido|ida|idos|idas))$")
# adjectives and abstract nouns by their endings ("ephemeral", "consistency", "verfügbar", "disponible",
# "modificable"): what a statement about a credential says of it, not a value someone chose
_ABSTRACT = re.compile(r"^\w{3,}(?:ness|ity|tion|sion|ment|ance|ence|ency|ancy|ous|ive|ible|able|ical|ful|less|"
                       r"eral|ial|ual|ary|ory|heit|keit|lich|isch|ité|eux|euse|dad|ción|sión|ble|ivo|iva)$")
# where a credential is kept or handed out (a value in a password cell or after "password:" names a place, not a value)
# nouns that name a credential only sometimes ("the secret to ...", "the key is ...", "la clave es ...")
_WEAK = re.compile(r"(?i)^\W*(?:secrets?|tokens?|keys?|claves?|secretos?|geheimnis|jetons?)\b")
_WHERE = frozenset("1password keepass keepassxc bitwarden lastpass vault okta sso ldap n/a tbd tba".split())
_MEASURE = re.compile(r"^\d{1,2}$")
# determiners and possessives: a noun phrase after one names a kind of thing ("your birthday"), not a typed value
_DETERMINER = frozenset("""the a an this that your my our their his her its same any some every each another something
etwas quelque algo such solch solche tel telle tal
der die das den dem ein eine einen dein deine ihr ihre unser unsere sein seine le la les un une votre vos ton ta mon ma
notre son sa el los las una tu su mi nuestro nuestra""".split())
# adverbs between a copula and its value: "is still werkseinstellung", "est toujours azerty", "ist jetzt 2468"
_ADVERB = re.compile(r"(?i)^(?:(?:still|now|simply|just|currently|always|immer[ \t]+noch|noch[ \t]+immer|noch|jetzt|weiterhin|nun|"
                     r"einfach|toujours|encore|désormais|maintenant|simplement|todav(?:í|i)a|a(?:ú|u)n|ahora|simplemente|siempre|"
                     # a time phrase: "bleibt bis Freitag morgenrot", "stays until Monday ..."
                     r"(?:until|till|bis|jusqu['’]à|hasta)[ \t]+[\w.]+)[ \t]+)+")
# a value described, not given: "absent ou expiré", "long and random", "optional or required"
_COORDINATED = re.compile(r"(?i)^\s+(?:or|and|oder|und|ou|et|o|y)\s+[^\W\d_]+\s*(?:$|[.;!?])")
# snake_case that names a field ("license_key", "db_password", "your_token"), not words joined by a typist
# ("tortuga_verde")
_SNAKE = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)+$")
_FIELD_PART = re.compile(r"^(?:pass\w*|pwd?|keys?|tokens?|secrets?|user\w*|names?|ids?|env|var|value|your|my|here|example|"
                         r"placeholder|api|db|auth|client|access|private|public|logins?|account|app|service|host|url|path)$")
# placeholders, variable and field names (``$DB_PASSWORD``, ``<password>``, ``license_key``), times and dates
_PLACEHOLDER = re.compile(r"^(?:[$<{%\[(].*|[A-Z][A-Z0-9]*_[A-Z0-9_]+$|[a-z][a-z0-9]*(?:_[a-z0-9]+)+$|"
                          r"\d{1,2}:\d{2}(?::\d{2})?$|\d{4}-\d{2}-\d{2}$|\*{3,}|[xX•.]{4,}|%\w+%|\{\{.*\}\}|https?://\S*|\.\.\.)$")
_QUOTED = re.compile(r"^[\"'`“‘«„»›]\s*(?P<v>[^\"'`”’»“«‹›\n]{1,80}?)\s*[\"'`”’»“«‹]")
_TOKEN = re.compile(r"^(?P<v>[^\s,;`]+?)(?P<trail>[.,;:!?)`'\"]*)(?=\s|$)")
_SYMBOLS = frozenset("!@#$%^&*+=?~_/\\|")
_RUN = re.compile(r"^(?P<v>[^\W\d_]+(?:\s+[^\W\d_]+){2,5})\s*(?:$|[.;!?])")
# "wurde auf nordlicht geändert": the value, then only the participle ending the sentence
_LAST_PARTICIPLE = re.compile(r"^\s+(?:\w*ge\w+(?:t|en)|\w+(?:ed|é|ado|ida))\s*(?:$|[.;!?])")
# a capital after a lower-case value starts the next sentence (a line's missing full stop, lines joined)
_NEXT_SENTENCE = re.compile(r"^\s+[A-ZÄÖÜÀÂÉÈÊÎÔÛÇÁÍÓÚÑ]")
_CLAUSE_END = re.compile(r"(?i)^(?:$|[ \t]*\n|[.;,!?)]|\s*[-\u2013\u2014(]|\s+(?:and|but|und|aber|et|mais|y|pero|or|oder|ou|o)\b)")


def _placeholder(v: str, *, code: bool = False) -> bool:
    """A placeholder, a variable or field name, a time or a date (``$DB_PASSWORD``, ``<password>``, ``license_key``);
    ``code``: ``v`` is in back-ticks, where any snake_case is a name."""
    if _SNAKE.match(v) and not code:
        return any(_FIELD_PART.match(part) for part in v.split("_"))
    return bool(_PLACEHOLDER.match(v))


def _value_shaped(v: str) -> bool:
    """A digit or a symbol inside, or letters mixed in case past the first (``bLuebird``)."""
    return any(c.isdigit() for c in v) or any(c in _SYMBOLS for c in v) or bool(re.search(r"[a-z][A-Z]", v))


_HANDLE = re.compile(r"@|^[\w-]+(?:\.[\w-]+)+$")


def _typed(v: str) -> bool:
    """A digit or a symbol inside: a value a person types (mixed case alone is a brand: "GitHub", "OneDrive")."""
    return any(c.isdigit() for c in v) or any(c in _SYMBOLS for c in v)


def _ordinary(word: str) -> bool:
    w = word.lower().strip("'’\"")
    return w in _FUNCTION or w in _PREDICATE or w in _INSTRUCTION or w in _WHERE or bool(_PARTICIPLE.match(w))


def _value(rest: str, offset: int, *, strict: bool) -> tuple[int, int] | None:
    """The value's range at the start of ``rest`` (``offset`` is where ``rest`` starts), or None."""
    q = _QUOTED.match(rest)
    if q:
        v = q.group("v")
        if _placeholder(v, code=rest[0] == "`") or v.lower() in _FUNCTION or (  # in code quotes with no noun: `curl` is a tool
                strict and not _value_shaped(v) and (" " in v.strip() or rest[0] == "`")):
            return None
        return offset + q.start("v"), offset + q.end("v")
    m = _TOKEN.match(rest)
    if not m:
        return None
    v = m.group("v")
    if (_placeholder(v) or not any(c.isalnum() for c in v) or v.startswith(("//", "-")) or v.endswith("-")
            or re.search(r"[\[\]()<>{}|]|\*\*|^[_*].*[_*]$", v)):  # markdown links and emphasis, placeholders
        return None
    after = rest[m.end("v"):]
    if _typed(v) if strict else _value_shaped(v):
        if _MEASURE.match(v) and re.match(r"\s+[^\W\d_]", after) and not _CLAUSE_END.match(after):
            return None  # "12 characters", "90 Tage"
        return offset, offset + len(v)
    if strict:  # no credential noun: a shaped value, or a lower-case word that is no ordinary word ("Okta", "SSO" are tools)
        return (offset, offset + len(v)) if (len(v) >= 6 and v.isalpha() and v.islower() and not _ordinary(v)
                                             and not is_common(v)) else None
    run = _RUN.match(rest)
    if run and not any(w.lower() in _FUNCTION or w.lower() in _INSTRUCTION or _PARTICIPLE.match(w) for w in run.group("v").split()):
        return offset, offset + len(run.group("v"))  # "is correct horse battery staple": a passphrase of words
    if _ordinary(v) or not v.replace("-", "").isalpha() and not v.isalnum() or _COORDINATED.match(after):
        return None
    if (not _CLAUSE_END.match(after) and not m.group("trail") and not _LAST_PARTICIPLE.match(after)
            and not _NEXT_SENTENCE.match(after)):
        return None  # runs on as a phrase: "is sent to your phone"
    return offset, offset + len(v)


def value_span(rest: str, offset: int, *, strict: bool) -> tuple[int, int] | None:
    """The range of the value at the start of ``rest`` (a text that starts at ``offset`` of the scanned text),
    judged as after a credential noun (``strict=False``) or with no noun (``strict=True``); None when it is no value."""
    return _value(rest, offset, strict=strict)


def find_statements(text: str) -> list[Finding]:
    """Values given in credential statements in ``text``, as findings of kind ``a credential`` (category ``secret``).

    Args:
        text: plain text (a chunk, a draft answer, a passage before it reaches a model).

    Returns:
        Findings covering the value only (unsorted, may overlap the token-shape findings of
        :func:`screening.secrets.find_secrets`); ``[]`` when no statement gives a value.
    """
    found: list[Finding] = []
    for m in _STATEMENT.finditer(text):
        rest = m.group("rest")
        start = m.start("rest")
        adverb = _ADVERB.match(rest)
        if adverb:
            rest, start = rest[adverb.end():], start + adverb.end()
        # "le code est le 4711", "the PIN is the 4711": an article before a shaped value
        art = re.match(r"(?i)(?:le|la|el|the|die|der|das)\s+(?=\S*\d)", rest)
        if art:
            rest, start = rest[art.end():], start + art.end()
        span = _value(rest, start, strict=False)
        if span and _WEAK.search(text[m.start():m.start("rest")]) and _ABSTRACT.match(text[span[0]:span[1]].lower()):
            continue  # "the secret to good docs is consistency", "the token is ephemeral"
        if span:
            found.append(Finding("a credential", "secret", *span))
    for m in _APPOSITION.finditer(text):
        span = _value(m.group("rest"), m.start("rest"), strict=True)
        if span and not _MEASURE.match(text[span[0]:span[1]]) and (
                _typed(text[span[0]:span[1]]) or text[m.start("rest")] in "\"'`“‘«"):
            found.append(Finding("a credential", "secret", *span))
    found.extend(_appositions(text))
    found.extend(_named_values(text))
    for m in _CODE.finditer(text):
        pre = (m.group("pre") or "").lower()
        comp = (m.group("comp") or "").lower().rstrip("-")
        if comp and (comp in _ID_CODES or comp.removesuffix("s") in _ID_CODES or comp.removesuffix("es") in _ID_CODES):
            continue
        post = _POST.match(text, m.end("cn"))
        if pre in _ID_CODES or post and post.group("w").lower() in _ID_CODES:
            continue
        span = _value(m.group("rest"), m.start("rest"), strict=True)
        value = text[span[0]:span[1]] if span else ""
        if span and any(c.isdigit() for c in value) and len(value) >= 4:
            found.append(Finding("a credential", "secret", *span))
            continue
        # "WLAN: Gast-Netz, Schlüssel: Blumenwiese": a bare key on a line about a Wi-Fi network is its password
        line = text[text.rfind("\n", 0, m.start()) + 1:m.start("rest")]
        if re.search(r"(?i)(?:key|schl(?:ü|ue)ssel|cl(?:é|e)s?)\b", text[m.start():m.start("rest")]) and \
                re.search(rf"(?i)(?<![\w-]){_WIFI}(?![\w-])|\bssid\b", line):
            span = _value(m.group("rest"), m.start("rest"), strict=False)
            if span:
                found.append(Finding("a credential", "secret", *span))
    for m in _WITH.finditer(text):
        span = _value(m.group("rest"), m.start("rest"), strict=False)
        if span:
            found.append(Finding("a credential", "secret", *span))
    for m in _REVERSE.finditer(text):
        span = _value(m.group("v"), m.start("v"), strict=True)
        if span and span[1] == m.end("v"):
            found.append(Finding("a credential", "secret", *span))
    for m in _LOGIN.finditer(text):
        rest, start = m.group("rest"), m.start("rest")
        span = None if text[m.start():m.start("rest")].rstrip().endswith(":") else _value(rest, start, strict=True)
        pair = _PAIR.match(rest)
        if span is None and pair:
            span = _value(pair.group("rest"), start + pair.start("rest"), strict=True)
        # "sign in with GitHub", "with @gsa.gov email", "with jane@acme.test": a provider, a domain or a user
        if span and not _HANDLE.search(text[span[0]:span[1]]) and _typed(text[span[0]:span[1]]):
            found.append(Finding("a credential", "secret", *span))
    found.extend(_keyed_codes(text))
    for m in _WIFI_PAIR.finditer(text):
        span = _value(m.group("rest"), m.start("rest"), strict=False)
        if span:
            found.append(Finding("a credential", "secret", *span))
    found.extend(Finding("a credential", "secret", *m.span("v")) for m in _WITH_CODE.finditer(text))
    found.extend(Finding("a credential", "secret", *m.span("v")) for m in _VARIABLE.finditer(text)
                 if not _NOT_GIVEN.match(m.group("v")) and not _PLACEHOLDER.match(m.group("v")))
    for m in _USE.finditer(text):
        g = next(g for g in ("v1", "v2", "v3") if m.group(g) is not None)
        span = _value(m.group(g), m.start(g), strict=True)
        if span:
            found.append(Finding("a credential", "secret", *span))
    return found


def _appositions(text: str) -> list[Finding]:
    """A value right after its noun: set off by commas and typed ("the door code, 4512, also ..."), or a word that
    ends the clause and is no word of everyday prose ("das Passwort sofakissen.", "SSID X, key sonnenallee")."""
    found: list[Finding] = []
    for m in _APPOSITION_COMMA.finditer(text):
        rest = m.group("rest")
        span = _value(rest, m.start("rest"), strict=True)
        if span and span[1] - span[0] == len(rest.strip(" \t\"'`“”‘’«»")) and not _MEASURE.match(rest) and _typed(rest):
            found.append(Finding("a credential", "secret", *span))
    for m in _APPOSITION_WORD.finditer(text):
        v, noun = m.group("v"), m.group("noun")
        line_start = text.rfind("\n", 0, m.start()) + 1
        line_end = text.find("\n", m.end())
        line = text[line_start:line_end if line_end >= 0 else len(text)]
        sentence_end = re.search(r"[.!?](?=\s|$)|$", text[m.end():line_end if line_end >= 0 else len(text)])
        question = sentence_end is not None and sentence_end.group(0) == "?"
        keyed = bool(re.fullmatch(r"(?i)keys?|schl(?:ü|ue)ssel|cl(?:é|e)s?", noun))
        weak = keyed or bool(_WEAK.match(noun))
        plural = v.lower().endswith("s") and (is_common(v[:-1]) or v.lower().endswith("es") and is_common(v[:-2]))
        if question or _ordinary(v) or _ABSTRACT.match(v.lower()) or is_common(v) or plural or (
                weak and not re.search(rf"(?i)(?<![\w-]){_WIFI}(?![\w-])|\bssid\b", line)):
            continue
        found.append(Finding("a credential", "secret", m.start("v"), m.end("v")))
    return found


def _named_values(text: str) -> list[Finding]:
    """A value typed when a credential is asked for ("type X when it asks for the key"), named as the credential
    ("with X as the passphrase", "X como contraseña", "als Passwort haben wir X gewählt") or a credential set to it
    ("mis le mot de passe ... à X"). The construction says it is the value, so any word is one, but not a word after
    a determiner ("your birthday as the PIN": a kind of value, not one) nor an ordinary word ("the same")."""
    found: list[Finding] = []
    for m in [*_TYPE_WHEN.finditer(text), *_AS_NOUN.finditer(text), *_AS_FIRST.finditer(text)]:
        v, start = m.group("v").rstrip(".,;:!?"), m.start("v")
        if "/" in v.strip("/"):  # "admin/cobaltfern": a user and a password
            cut = v.rstrip("/").rindex("/") + 1
            v, start = v[cut:], start + cut
        before = re.findall(r"[\w'’]+", text[max(0, start - 30):start])
        # "your birthday as the PIN", "such as the master password", "as well as a complex password"
        if v.lower() in _DETERMINER or before and before[-1].lower() in _DETERMINER | {"as", "so", "aussi", "tan"}:
            continue
        span = _value(v, start, strict=True)
        w = v.lower()
        if span is None and v.isalpha() and len(v) >= 4 and not _ABSTRACT.match(w) and not (
                w in _FUNCTION or w in _PREDICATE or w in _INSTRUCTION or w in _WHERE):
            span = start, start + len(v)
        if span:
            found.append(Finding("a credential", "secret", *span))
    for m in _SET_TO.finditer(text):
        span = _value(m.group("rest"), m.start("rest"), strict=False)
        # "mis le mot de passe à jour" (updated): after "to", a word of everyday prose is an idiom, not a value
        if span and not (text[span[0]:span[1]].isalpha() and is_common(text[span[0]:span[1]])):
            found.append(Finding("a credential", "secret", *span))
    return found


_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?](?=\s|$)|\n|$)|[.!?]+")
_NUMBER = re.compile(r"(?<![\w.,/:#-])(?P<v>\d(?:[\d#*]|[ -](?=\d)){3,9}#?)(?![\w/:-]|[.,]\d|\s*(?:%|€|\$|h\b|min\b))")


def _keyed_codes(text: str) -> list[Finding]:
    """Door, gate, alarm and keypad codes given loosely: digits typed at a door ("punch in 4411 on the keypad"), or
    a number after "code"/"PIN"/"combination" in a sentence about a door, gate, lock or alarm ("door codes change
    monthly; this month it's 4477"). A number said to be a room, an extension, a page or a year is not one."""
    found: list[Finding] = []
    for sent in _SENTENCE.finditer(text):
        s = sent.group(0)
        if not _PLACE.search(s):
            continue
        typed = [m.span("v" if m.group("v") else "w") for m in _ENTER.finditer(s)]
        code = _CODE_WORD.search(s)
        said = [m.span("v") for m in _NUMBER.finditer(s, code.end())] if code else []
        said += [m.span("v") for m in _NUMBER.finditer(s) if re.search(r"[:=][ \t]*$", s[:m.start()])]  # "Keypad: 2580#"
        for start, end in typed + said:
            before = [] if (start, end) in typed else re.findall(r"[\w.°]+", s[:start])[-3:]
            if sum(c.isdigit() for c in s[start:end]) < 4 or any(w.lower() in _LOCATOR or w.lower() in _ID_CODES
                                                                  for w in before) or (
                    (start, end) not in typed and _NUMBERED.search(s[:start])):
                continue
            found.append(Finding("a credential", "secret", sent.start() + start, sent.start() + end))
    return found
