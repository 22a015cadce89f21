"""A credential cue and a filled value slot (:mod:`screening.slots`), through :func:`screening.scan`.

Each value below was missed by the screen before the slot reading (development data from held-out batches 5 and 6,
and sentences written for this test); each look-alike is one the slot reading must leave alone (handbook phrasings
it flagged while it was built: "key takeaways", "Code is sufficiently tested", "the alarm code is reset").
"""

from __future__ import annotations

import pytest

from screening import mask, scan
from screening import vocabulary


def flagged(text: str) -> bool:
    return any(f.category == "secret" for f in scan(text))


@pytest.mark.parametrize("text, value", [
    ("The password to the old Confluence admin account has stayed pelican since 2019.", "pelican"),
    ("Das Passwort des alten Confluence-Admins heißt seit 2019 pelikan.", "pelikan"),
    ("La contraseña de la antigua cuenta de administración de Confluence es pelícano desde 2019.", "pelícano"),
    ("La clé pré-partagée du VPN pour les prestataires est faucondebraise.", "faucondebraise"),
    ("The VPN pre-shared key we hand to contractors is emberfalcon.", "emberfalcon"),
    ("Empfangs-iPad-Code = 240624", "240624"),
    ("Gemeinsamer Canva-Zugang fürs Marketing: marketing@ledgerly.test, kupferweide.", "kupferweide"),
    ("Accès Canva partagé du marketing : marketing@ledgerly.test, saulecuivre.", "saulecuivre"),
    ("WLAN-Direct-Schlüssel des Druckers: 55719038", "55719038"),
    ("Der Türcode vom Hof ist 5512.", "5512"),
    ("Das Kennwort für den Laborrechner ist Bernsteinzimmer.", "Bernsteinzimmer"),
])
def test_a_word_or_a_code_in_the_slot_after_a_credential_cue_is_left_out(text: str, value: str) -> None:
    assert value not in mask(text)


@pytest.mark.parametrize("text", [
    "Key takeaways and feedback",
    "Stay on top of action items and key deliverables, check in on progress.",
    "Code is sufficiently tested.",
    "The alarm code is reset after every incident.",
    "Les clés API sont distinctes par environnement : recette, production et bac à sable.",
    "Les jetons d'accès expirent au bout de 30 jours.",
    "Tokens in our NLP pipeline are lower-cased before indexing.",
    "Executors are early in their lifecycle, and customers have heterogeneous setups.",
    "Transcripts are stored using the keys `promptText` or `responseText`.",
    "The password policy is strict: 12 characters at least.",
    "Der Zugangscode ist derselbe wie im letzten Monat.",
])
def test_prose_after_a_credential_cue_fills_no_slot(text: str) -> None:
    assert not flagged(text), scan(text)


def test_without_its_word_lists_the_screen_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    """wordfreq missing: no token is a word, so an ordinary word after a credential's copula is taken for a value."""
    caches = (vocabulary._words, vocabulary.is_word, vocabulary.is_common, vocabulary.is_everyday)

    def missing() -> None:
        raise ModuleNotFoundError("wordfreq is not installed")

    for c in caches:
        c.cache_clear()
    monkeypatch.setattr(vocabulary, "_data_dir", missing)
    try:
        assert not vocabulary.is_word("policy")
        assert flagged("The password is strict.")
    finally:
        for c in caches:
            c.cache_clear()
