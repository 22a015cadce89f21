"""Credentials written in sentences (issue 24 item 1): the statement screen over our corpus, and the shapes it adds.

``tests/data/credentials/statements.jsonl`` holds credential statements and innocent look-alikes in
English, German, French and Spanish (40 + 40 rows, ``"batch": "fresh"``, were written after tuning and
measured once before they joined; the ``"dev2"`` rows were written while adding tables, door codes typed
at a keypad, user/password pairs and German compounds, and are development data, not a held-out figure). Every
row goes through :func:`screening.scan`, the scanner the agent's exit, the passages shown to a model and the
indexer's flag counts all use.

``heldout.jsonl`` (batch 1) was measured once when written (detection 0.750) and its misses then drove the second
round, so it is development data now and held to the same bar here. ``heldout2.jsonl`` (batch 2, written after the
second round was frozen: detection 0.531, false positives 0.016) was development data for the linked values of
:mod:`screening.linked` (0.922 after it); ``heldout3.jsonl`` (batch 3) was written and committed before that module
and measured once after it (0.922, false positives 0.016; 0.781 and 0.016 before). Both were development data for
the fourth round (values given without "is" or ":": apposition, objects, "as the password", asides, adverbs) and are
held to the 0.98 bar with the corpus. ``heldout4.jsonl`` (batch 4) was written and committed before the fourth round
and measured before and after it (detection 0.719 then 0.891, false positives 0.031 both times); it was then
development data for the fifth (0.984, 0.000 after it) and is held to the 0.98 bar too. ``heldout5.jsonl`` (batch 5)
was written and committed before the fifth round and measured before and after it (0.828, false positives 0.000
both times); it was development data for the sixth (a verb of logging in links a value, "no word" reaches 12 words:
0.922 after it) and is held to that figure. ``heldout6.jsonl`` (batch 6) was written and committed before the sixth
round and measured before and after it (0.656 then 0.672, false positives 0.000). ``heldout7.jsonl`` (batch 7) was
written and committed before a seventh round (a cue and a value slot, tried on branch h-sec5 and not kept: 0.656 /
0.031 on it) and measured with this screen at 0.594 / 0.000. ``heldout8.jsonl`` (batch 8) was written and committed before the
fail-closed tier of :mod:`screening.unexplained` and measured once after it: 0.375 / 0.000 by the rules alone, 0.781 /
0.016 with the tier (0.781 / 0.000 after the tier's false flags on real pages were reduced, batch 8 then seen).
``heldout9.jsonl`` (batch 9) was written blind to the screen and the earlier batches after that, and measured once:
0.797 / 0.000 by the rules alone, 0.906 / 0.031 with the tier. The
tier is on by default, so :func:`screening.scan` reads every batch with it; the latest batches are held to the figures
measured with and without it, a floor against regressions, not a target (``bench/credential_screen.py`` prints every batch;
docs/explanation/evaluation.md has the figures).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from screening import mask, scan
from screening.vocabulary import is_word

CORPUS = Path(__file__).parent / "data" / "credentials" / "statements.jsonl"
ROWS = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines()]


def flagged(text: str) -> bool:
    return any(f.category == "secret" for f in scan(text))


def test_the_corpus_has_enough_of_each_kind_in_four_languages() -> None:
    assert sum(r["credential"] for r in ROWS) >= 100 and sum(not r["credential"] for r in ROWS) >= 100
    assert {r["lang"] for r in ROWS} == {"en", "de", "fr", "es"}


@pytest.mark.parametrize("corpus", ["statements.jsonl", "heldout.jsonl", "heldout2.jsonl", "heldout3.jsonl",
                                    "heldout4.jsonl"])
def test_detection_is_at_least_98_percent_and_false_positives_at_most_2_percent(corpus: str) -> None:
    rows = [json.loads(line) for line in (CORPUS.parent / corpus).read_text(encoding="utf-8").splitlines()]
    creds = [r["text"] for r in rows if r["credential"]]
    looks = [r["text"] for r in rows if not r["credential"]]
    missed = [t for t in creds if not flagged(t)]
    false = [t for t in looks if flagged(t)]
    assert 1 - len(missed) / len(creds) >= 0.98, missed
    assert len(false) / len(looks) <= 0.02, false


@pytest.mark.parametrize("corpus, detection, false_positives, tier", [
    ("heldout5.jsonl", 0.92, 0.02, False), ("heldout6.jsonl", 0.67, 0.02, False), ("heldout7.jsonl", 0.59, 0.02, False),
    ("heldout8.jsonl", 0.37, 0.02, False), ("heldout9.jsonl", 0.79, 0.02, False),
    # with the fail-closed tier (the default); batch 9's two false positives are over the 0.02 bar, pinned as measured
    ("heldout5.jsonl", 0.96, 0.02, None), ("heldout6.jsonl", 0.92, 0.02, None), ("heldout7.jsonl", 0.90, 0.02, None),
    ("heldout8.jsonl", 0.78, 0.02, None), ("heldout9.jsonl", 0.90, 0.04, None)])
def test_the_latest_batches_keep_the_figures_measured(corpus: str, detection: float, false_positives: float,
                                                       tier: bool | None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHATOPS_SCREEN_UNEXPLAINED", raising=False)
    rows = [json.loads(line) for line in (CORPUS.parent / corpus).read_text(encoding="utf-8").splitlines()]
    creds = [r["text"] for r in rows if r["credential"]]
    looks = [r["text"] for r in rows if not r["credential"]]
    assert len(creds) >= 60 and len(looks) >= 60 and {r["lang"] for r in rows} == {"en", "de", "fr", "es"}

    def flagged(text: str) -> bool:
        return any(f.category == "secret" for f in scan(text, unexplained=tier))

    missed = [t for t in creds if not flagged(t)]
    false = [t for t in looks if flagged(t)]
    assert 1 - len(missed) / len(creds) >= detection, missed
    assert len(false) / len(looks) <= false_positives, false


@pytest.mark.parametrize("text, value", [
    ("The guest wifi password is bluebirdcanyonriver", "bluebirdcanyonriver"),
    ("Visitors connect to LedgerlyGuest.\nThe guest wifi password is bluebirdcanyonriver\nAsk reception for it.",
     "bluebirdcanyonriver"),
    ("The guest wifi password is bluebirdcanyonriver Ask reception for it.", "bluebirdcanyonriver"),  # lines joined
    ("Das Passwort lautet nordlichtfjord.", "nordlichtfjord"),
    ("Le mot de passe est hirondelle.", "hirondelle"),
    ("La contraseña es golondrina.", "golondrina"),
    ("Publish with the npm token npm_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789 from CI.",
     "npm_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"),
    ("DefaultEndpointsProtocol=https;AccountName=ledgerlyexports;AccountKey=c2VjcmV0a2V5Zm9yYXp1cmVzdG9yYWdl;"
     "EndpointSuffix=core.windows.net", "c2VjcmV0a2V5Zm9yYXp1cmVzdG9yYWdl"),
])
def test_a_value_given_in_a_statement_or_a_known_token_shape_is_left_out(text: str, value: str) -> None:
    assert value not in mask(text)


@pytest.mark.parametrize("text", [
    "The password policy requires 12 characters.",
    "Reset your password at https://id.example.com/reset.",
    "The PIN is sent to your phone.",
    "Ask IT for the wifi password.",
])
def test_innocent_look_alikes_are_left_alone(text: str) -> None:
    assert mask(text) == text


@pytest.mark.parametrize("text, value", [
    ("| System | User | Password |\n| --- | --- | --- |\n| Demo CRM | demo@acme.test | orchardlane |", "orchardlane"),
    ("| Salle | Code d'accès |\n| --- | --- |\n| Archives | 7730 |", "7730"),
    ("| Door | Code |\n| --- | --- |\n| Side door | 4711 |", "4711"),
    ("| Item | Value |\n| --- | --- |\n| Guest network | Acme-Guest |\n| Wi-Fi password | sunnymeadow |", "sunnymeadow"),
    ("To get into the bike cage, punch in 4411 on the keypad.", "4411"),
    ("Am Tastenfeld der Haustür 7391 eingeben.", "7391"),
    ("Door codes change monthly; this month it's 4477.", "4477"),
    ("Der Schließfachcode lautet 7712.", "7712"),
    ("Das Tresorpasswort ist Sonnenblume.", "Sonnenblume"),
    ("Sign in with admin / Winter2024! until SSO is set up.", "Winter2024"),
    ("Shared Netflix login: team@acme.test / popcorn42", "popcorn42"),
    ("quietharbor is the password for the test laptop.", "quietharbor"),
    ("The PIN for the printer? It's 2468.", "2468"),
    ("WLAN: Gast-Netz, Schlüssel: Blumenwiese", "Blumenwiese"),
    ("Export ACME_TOKEN=custom-7781-token before running the script.", "custom-7781-token"),
    # second round (the misses of the first held-out batch)
    ("Le cadenas du local à vélos s'ouvre avec 7-3-1-9.", "7-3-1-9"),
    ("Wifi for the Lisbon office: LedgerlyLX / pastelnata", "pastelnata"),
    ("Inicia sesión en el ordenador de recepción con recepcion99.", "recepcion99"),
    ("Das Admin-Passwort für den Router wurde auf Gartenzaun77 geändert.", "Gartenzaun77"),
    ("Le mot de passe de la boîte partagée est lavandeprovence.", "lavandeprovence"),
    ("Front door keypad: 3-6-9-1, then press the green button.", "3-6-9-1"),
])
def test_tables_keypads_pairs_and_loose_phrasings_are_left_out(text: str, value: str) -> None:
    assert value not in mask(text)


@pytest.mark.parametrize("text", [
    "| Policy | Value |\n| --- | --- |\n| Password length | 12 characters |",
    "| Service | Password |\n| --- | --- |\n| Jira | SSO |\n| Wiki | see 1Password |",
    "For the door code, call security on 4455.",
    "The door code changes on 1 March 2025.",
    "Der Quellcode liegt auf GitHub.",
    "El código de error 4040 indica que la puerta no responde.",
    "Many websites offer the option to \"Sign in with GitHub\".",
    "The secret to good docs is consistency.",
    "Set API_KEY=your-api-key in .env",
    "Register for a MAX.gov account using your GSA email address: https://portal.max.gov/portal/home",
    "export TOKEN=$(gcloud secrets versions access latest --project=acme-secrets --secret=TFC_TEAM_TOKEN)",
    # a bare "Code" heading the first column keys the rows: a runbook's error codes, not a door code
    "| Code | Symptom | Fix |\n|---|---|---|\n| E142 | Agent stopped after an update | Restart the agent service |",
])
def test_look_alikes_of_the_new_constructions_are_left_alone(text: str) -> None:
    assert mask(text) == text


# -- values linked to a credential noun in the same sentence (screening.linked) -------------------------------------
@pytest.mark.parametrize("text, value", [
    # no construction the statement reader knows: a verb of using, "still", "defaults to", a token in snake_case
    ("The lab NAS still uses the root password factorydefault from the installer.", "factorydefault"),
    # the sixth round: a verb of logging in links a value as a noun does; a value that is no word reaches 12 words
    # (a second clause: "... nie geändert und lautet X"); the words before a noun do not name its value ("office")
    ("Sign in to the studio laptop with quillmarrowfen and lock it after.", "quillmarrowfen"),
    ("En la tablet del almacén se entra con grullanevada.", "grullanevada"),
    ("Das Standardpasswort des alten Routers wurde nie geändert und lautet routerfabrikneu.", "routerfabrikneu"),
    ("The vault in the finance office has combination 41-28-17.", "41-28-17"),
    ("The root password on the lab NAS is still factorydefault.", "factorydefault"),
    ("Le mot de passe root du NAS du labo est toujours parametreusine.", "parametreusine"),
    ("The jira-bot service account logs in with the token jbt_8842aa91c7.", "jbt_8842aa91c7"),
    ("For the Local Perforce server, the `admin` password defaults to `pass12349ers`.", "pass12349ers"),
    ("Der Code für den Fahrradkäfig wurde am Montag auf 1815 geändert.", "1815"),
    # a combination in spaced groups by a safe; users and passwords side by side with no credential noun
    ("Safe in the finance office: 12 - 40 - 7", "12 - 40 - 7"),
    ("Test users: qa1@ledgerly.test / QaPass#1 and qa2@ledgerly.test / QaPass#2.", "QaPass#2"),
])
def test_a_value_near_a_credential_noun_is_left_out_whatever_the_phrasing(text: str, value: str) -> None:
    assert value not in mask(text)


@pytest.mark.parametrize("text", [
    # from real handbooks: commands, tools, issues, versions, pods, dates and references near a credential noun
    "Use the fork in GitHub Actions, modify the `setup-mi2` action and pin to a specific commit.",
    "export CF_API_TOKEN=$(gcloud secrets versions access latest --secret CLOUDFLARE_API_TOKEN)",
    "Making dashboards available without requiring site admin access: sourcegraph/sourcegraph#25407",
    "Fix (16256): add a repo panel and a token field.",
    "Name the notes `20222806 - Acme - Code security` and keep the API key out of them.",
    "Run `kubectl describe pod/redis-store-7c5fb8dd89-jzx44` to see which secret the pod mounts.",
    "To set up yubikey as your MFA for the cli session token, configure it in AWS.",
    "The access token is passed to the velero/velero-plugin-for-gcp:v1.4.0 image.",
    "Tokens expire after 3600 seconds; refresh them with the CLI.",
    "Log in to the display in room 4012 with your badge.",
    "Sign in to Grafana and open the troubleshooting dashboards for the kubernetes cluster.",
    "Le code postal de nos bureaux parisiens est 75011.",
    "Use code SPRING24 for 20% off the conference ticket.",
    "The API key is stored in 1Password under the team vault.",
])
def test_technical_text_near_a_credential_noun_is_left_alone(text: str) -> None:
    assert mask(text) == text


# -- values given without "is" or ":" (the fourth round: apposition, objects, "as the password", asides) -------------
@pytest.mark.parametrize("text, value", [
    # a word right after its noun, ending the clause, that is no word of everyday prose
    ("The lobby kiosk has the password kumquat.", "kumquat"),
    ("Gäste-WLAN Köln: SSID LedgerlyGast, Schlüssel holunder.", "holunder"),  # a word, if a rare one
    # a typed value set off by commas; an aside between the noun and "is"; an adverb or a copula of staying
    ("The bike room door code, 5318, also opens the kiosk cabinet.", "5318"),
    ("The staging password, set by the vendor, is kumquat.", "kumquat"),
    ("Le mot de passe est toujours mirabelle.", "mirabelle"),
    ("Die PIN bleibt 8899.", "8899"),
    # typed when a credential is asked for; named as the credential; a user and a password joined by a slash
    ("Type rhubarbfield when the laptop asks for its password.", "rhubarbfield"),
    ("Pick quincejam as the Wi-Fi passphrase.", "quincejam"),
    ("Our old NAS still accepts root/pumpkinpatch as login.", "pumpkinpatch"),
    # German quotes, words joined by an underscore, digits in groups by a safe
    ("Das Kennwort ist »grüne Wiese«.", "grüne Wiese"),
    ("Clave wifi: tortuga_azul", "tortuga_azul"),
    ("The archive safe opens on 31-17-22.", "31-17-22"),
    # the fifth round: authenticating with, a time phrase after a copula, a setting verb, a German verb-final
    # sentence, typing as a gerund, a word the construction names whatever its frequency
    ("The reporting job authenticates with r3portPass! against the warehouse.", "r3portPass"),
    ("Das WLAN-Passwort bleibt bis Montag holunderblüte.", "holunderblüte"),
    ("Nous avons mis le mot de passe du serveur de démo à mirabellier.", "mirabellier"),
    ("Als Kennwort für den Kiosk haben wir pflaumenbaum gewählt.", "pflaumenbaum"),
    ("El candado del archivo se abre tecleando 4-0-7-7.", "4-0-7-7"),
    ("Type limonada when the kiosk asks for its password.", "limonada"),
])
def test_a_value_given_without_is_or_a_colon_is_left_out(text: str, value: str) -> None:
    assert value not in mask(text)


@pytest.mark.parametrize("text", [
    # a common word or a plural after the noun is a compound, not a value; a question asks, it does not give
    "Check the password expiry.",
    "Ensure you grant the below bot token scopes",
    "Passwort vergessen?",
    # described, not given: coordinated adjectives, the object of a participle's preposition, a discount code
    "HTTP 401 means your token is unavailable or revoked.",
    "The alarm code is shared with keyholders only.",
    "El código de descuento para la feria es FERIA25.",
    # a variable then a name, an issue number near "code", a field name in back-ticks, a common word as the PIN
    "mi2 check -src-license-key $LICENSE_KEY siteconfig.license-key",
    "Surface trends in the core workflow of search and code navigation (such as #38440)",
    "Set `target_src_version` as the token field name.",
    "Use your birthday as the PIN.",
    # a number naming which door; "mettre à jour" (update); something, not a value, chosen
    "The alarm keypad hangs beside door 3107 in the east wing.",
    "Nous avons mis le mot de passe à jour.",
    "Als Passwort haben wir etwas Langes gewählt.",
    # from the handbooks: "as" in comparisons and examples
    "Jamf installs a screen lock requirement, as well as a complex password for the device.",
    "You still need to memorize a few unique passwords, such as the master password for your password manager.",
])
def test_look_alikes_of_values_given_without_is_are_left_alone(text: str) -> None:
    assert mask(text) == text


def test_the_vocabulary_knows_words_of_the_four_languages_and_not_run_together_passphrases() -> None:
    assert all(is_word(w) for w in ("requirements", "Zeichen", "réinitialisation", "contraseña", "STRASSE"))
    assert not any(is_word(w) for w in ("bluebirdcanyonriver", "factorydefault", "kirschblütenweg", "xkqzvbnmw"))


def test_the_screen_reads_the_word_lists_without_importing_wordfreq() -> None:
    """wordfreq's import costs 0.4 s (regex, ftfy, langcodes); the screen reads its data files directly."""
    code = ("import sys; from screening import mask; "
            "assert 'factorydefault' not in mask('The lab NAS still uses the root password factorydefault.'); "
            "print('wordfreq' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr[-2000:]


# -- the fail-closed tier (screening.unexplained), on by default ------------------------------------------------------

def secrets_found(text: str, **kwargs: object) -> list[str]:
    return [text[f.start:f.end] for f in scan(text, ("secret",), **kwargs)]  # type: ignore[arg-type]


@pytest.mark.parametrize("text, values", [
    # digits written as words, a combination given as turns, after a cue matched as a stem ("Kennwörter", "clé
    # pré-partagée", "VPN-Schlüssel"), a run of letters after a verb no rule reads
    ("Tell the night guard the key safe code is seven three one five.", ["seven", "three", "one", "five"]),
    ("Spin the archive safe to 31, then 8, then 22; that's the combination.", ["31", "8", "22"]),
    ("Die Kennwörter der Kiosk-Rechner sind zwei vier sechs acht.", ["zwei", "vier", "sechs", "acht"]),
    ("La clé pré-partagée du VPN, on la retrouve sous le nom xqvrtlmb.", ["xqvrtlmb"]),
    ("The VPN-Schlüssel answers to qxvbrtlmw these days.", ["qxvbrtlmw"]),
])
def test_the_unexplained_tier_reads_what_the_rules_miss_by_default(text: str, values: list[str],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHATOPS_SCREEN_UNEXPLAINED", raising=False)
    assert secrets_found(text, unexplained=False) == []  # the rules alone miss these
    assert secrets_found(text) == values  # on by default
    assert all(v not in mask(text) for v in values)
    monkeypatch.setenv("CHATOPS_SCREEN_UNEXPLAINED", "0")  # the setting chatops_screen_unexplained turned off
    assert secrets_found(text) == []
    assert secrets_found(text, unexplained=True) == values


@pytest.mark.parametrize("value, on", [("", True), ("1", True), ("yes", True), ("0", False), ("false", False),
                                       ("OFF", False), ("no", False)])
def test_the_environment_switch_reads_like_a_boolean_setting(value: str, on: bool,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from screening.scan import set_unexplained_default, unexplained_on

    monkeypatch.setenv("CHATOPS_SCREEN_UNEXPLAINED", value)
    assert unexplained_on() is on
    monkeypatch.delenv("CHATOPS_SCREEN_UNEXPLAINED")
    try:
        set_unexplained_default(False)  # a value from .env, carried by the app's settings
        assert unexplained_on() is False
        monkeypatch.setenv("CHATOPS_SCREEN_UNEXPLAINED", "1")  # the environment wins, as for every setting
        assert unexplained_on() is True
    finally:
        set_unexplained_default(True)


@pytest.mark.parametrize("text", [
    "Stripe secret keys belong in Vault, under kv/payments/stripe.",  # a name, a path
    "Call facilities at 555-0142 if the gate code does not work.",  # a phone number
    "The door code for the side entrance changed on 3 March 2025.",  # a date
    "Tokens expire after 3600 seconds; refresh them with the CLI.",  # a quantity, an acronym
    "Rotate the deploy key with `make rotate-keys ENV=prod`.",  # a command line
    "Passwörter von Dienstkonten werden alle 180 Tage gewechselt.",  # a compound of words, a count
    "Les jetons d'accès expirent au bout de 30 jours.",  # an inflected verb
    "The router admin page is at 192.168.1.1 and needs the VPN password.",  # an IP address
    "The postal code of the office is 10115.",  # a code named for an identifier is no cue
    "Key takeaways from the retro are in the doc.",  # "key" before a word: an adjective
])
def test_the_unexplained_tier_leaves_explained_sentences_alone(text: str) -> None:
    assert secrets_found(text, unexplained=True) == []


@pytest.mark.parametrize("text", [
    # innocent sentences a first measure with the tier on withheld from answers and pages, each explained now by where a
    # token stands or what it is, not by a list of these words
    "The closest page I found is 37signals Code of Conduct.",  # a capitalised cue in a title: "Code of ..."
    "The closest page I found is 37signals Code of Conduct (file:///wiki/code-of-conduct.md#37signals-code-of-conduct),"
    " but it does not say.",  # a refusal naming the page, its link after the title
    "More information - including the registration code - is available on the WorkLife4You Fact Sheet.",  # a name
    # before a noun, after "on the"
    "Gas and parking would be considered reimbursable within the applicable budget (Category 2, 3, 5) travel.",  # a
    # list of numbered things
    "Gas and parking are reimbursable (Category [2](#2-team-travel), [3](#3-individual-travel)) travel.",  # link targets
    "Detailed ENT password reset instructions can be found at ServiceNow KB0022142.",  # a record after a name
    "A shared login is stored in the `Marketing-contractors` 1Pass vault.",  # a name before a noun
    "You may change your plan by logging into your BENEFEDS account online.",
    "To setup the key, configure your yubikey as a virtual MFA device in AWS.",  # after a possessive
    "Update the token here and in the Terraform Cloud varset.",  # after a place and capitalised names
    "Run `gcloud container clusters get-credentials main-cluster-5 --zone us-central1-f --project sourcegraph-dev`",
    "ghe-feeder -admin milton -token <xxxxxxx> -limit 100000 -baseURL https://ghe.example.org/api/v3 dir1 file2",  # the
    # other arguments of a command given the credential by a flag
    '"schema_migrations_pkey" PRIMARY KEY, btree (version)',  # a database's key
    "During the code freeze, Renovate is disabled on 2024-05-01 12:00+00:00.",  # code as program text, a time
    "It requires security features enabled—passwords, encryption, lock screens.",  # an em dash joins no word
    "The secret lives in TF_TOKEN_app_terraform_io; read it with jq '.result.ssl.dcv_delegation_records'.",
    "We currently scan Cloud v2-related code through TF Cloud.",  # a version made a modifier
    "Any repository that contains code which processes customer data is categorized as `SOC2-scoped`.",
    "Now, in FY23Q3, build Code Insights features for developers who search and navigate code.",  # a fiscal quarter
    "Set the K8s context before you read the token.",  # too short for a secret
    "Rotate the p4 service token after the audit.",
    "Les secrets de webhook doivent faire au moins 32 caractères.",  # what the credential is of
    "We keep every shared password in 1Password.",  # a credential noun fused to a number names a tool
    "WebAuthn: using webauthn you can register a security key.",  # the page writes it as a name
    "Bikes are parked in the garage, level -1 \x1b]0;pwned\x07\x1b[31;1mred\x1b[0m \x9b2J\rover\u202eevil\x08.",  # a
    # terminal's escape sequences are no text
])
def test_the_unexplained_tier_explains_names_references_and_commands(text: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHATOPS_SCREEN_UNEXPLAINED", raising=False)
    assert secrets_found(text) == []


@pytest.mark.parametrize("text, values", [
    # where those explanations stop: after a copula, a colon or a cue, before a cue, an argument of a short flag
    ("The Code of Building 7 is 4711.", ["4711"]),
    ("The Code of Conduct is 4711.", ["4711"]),
    ("The password is KB0022142.", ["KB0022142"]),
    ("Le code est le 4471 depuis lundi.", ["4471"]),
    ("Log into your account with Summer2024 and change it.", ["Summer2024"]),
    ("In the Summer2024 rotation, the password became Bluefish7.", ["Bluefish7"]),
    ("Das WLAN-Passwort steht auf dem Zettel: Heilbutt42", ["Heilbutt42"]),
    ("Log in with `tool --user admin --pass hunter2`", ["hunter2"]),
    ("sshpass -p hunter2 ssh admin@db.example.com", ["hunter2"]),
    ("Use the Sommer2024 password for the kiosk.", ["Sommer2024"]),
    ("The print server admin passphrase got swapped for \x1b[8mqorvantel\x1b[0m after the audit.", ["qorvantel"]),
])
def test_the_unexplained_tier_still_reads_values_near_those_explanations(text: str, values: list[str],
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHATOPS_SCREEN_UNEXPLAINED", raising=False)
    assert all(v not in mask(text) for v in values), mask(text)


def test_the_unexplained_tier_explains_the_wikis_own_vocabulary() -> None:
    text = "Use gcloud to read the token from the secret manager."
    assert secrets_found(text, unexplained=True) == ["gcloud"]  # a tool's name is no word of any language
    assert secrets_found(text, unexplained=True, known={"gcloud"}) == []  # but the wiki uses it on many pages
