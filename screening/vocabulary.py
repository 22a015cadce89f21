"""Is a token a word of English, German, French or Spanish? Word frequencies from ``wordfreq``'s lists.

A credential's value is recognised by what it is not: ``bluebirdcanyonriver``, ``kirschblütenweg`` or
``factorydefault`` are no words of any language the wiki is written in, while the words around a credential noun
in an innocent sentence ("requirements", "Zeichen", "réinitialisation") are. ``wordfreq`` ships frequency lists
built from subtitles, Wikipedia, books and the web for each language; a word's Zipf frequency is ``log10`` of its
occurrences per billion words (3 = once per million; a typo or a made-up compound is below 1).

The lists are read straight from the files ``wordfreq`` ships, in its documented cBpack format (gzipped msgpack: a
header, then one alphabetical list of words per centibel of frequency, most frequent first), keeping only the
words at or above :data:`WORD_ZIPF`: about 0.1 s and 10-30 MB a language, against 0.4 s to import ``wordfreq``
and 0.5-0.8 s a language through its lookup API. A language loads on the first token that needs it, in the order of
:data:`LANGUAGES`, and a token found in one language reads no further, so a screen that meets no candidate value
loads nothing and one that meets English words loads English only. Public: :func:`is_word`, :func:`is_common`
(a word of everyday prose, at or above :data:`COMMON_ZIPF`: "policy", "manager", "anything", not "lavande" or
"sonnenallee", which a person may choose as a password).
"""

from __future__ import annotations

import gzip
import threading
import unicodedata
from functools import cache
from importlib.util import find_spec
from pathlib import Path

import msgpack

__all__ = ["LANGUAGES", "WORD_ZIPF", "COMMON_ZIPF", "is_word", "is_common", "is_frequent", "load_frequent"]

#: the languages the statement screen reads (ISO 639-1), the likeliest first.
LANGUAGES = ("en", "de", "fr", "es")
#: the Zipf frequency from which a token counts as a word (about once in 30 million words), chosen on the
#: statement corpus and the first two held-out batches (tests/data/credentials/); see bench/credential_screen.py.
WORD_ZIPF = 1.5
#: the Zipf frequency from which a word is one of everyday prose (about once in a million words: "policy", "reset",
#: "expiry", "hunter"), not a rarer word someone picked as a password ("lavande" 3.2, "sonnenallee" 2.6, "pinecone" 2.1);
#: chosen on the statement corpus and held-out batches 1-3 (bench/credential_screen.py).
COMMON_ZIPF = 3.0

_LOCK = threading.Lock()


def _data_dir() -> Path:
    """wordfreq's data folder, found without importing wordfreq (its import takes 0.4 s: regex, ftfy, langcodes).

    Raises:
        ModuleNotFoundError: wordfreq is not installed (a dependency of chatops: reinstall it).
    """
    spec = find_spec("wordfreq")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("wordfreq is not installed; run: pip install 'wordfreq>=3.1,<4'")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


@cache
def _words(lang: str) -> tuple[frozenset[str], frozenset[str]]:
    """The words of ``lang``'s ``large`` list with a Zipf frequency of at least :data:`WORD_ZIPF`, and those of at
    least :data:`COMMON_ZIPF`.

    Raises:
        ValueError: the file is not in the cBpack format this reads (a ``wordfreq`` release that changed it).
    """
    with _LOCK:  # one thread reads a list; the others wait for it rather than read it too
        # decompressed whole: msgpack reading through a GzipFile takes ten times as long
        data = msgpack.unpackb(gzip.decompress((_data_dir() / f"large_{lang}.msgpack.gz").read_bytes()), raw=False)
    header = data[0]
    if not isinstance(header, dict) or header.get("format") != "cB" or header.get("version") != 1:
        raise ValueError(f"wordfreq's large_{lang} list is not in the cBpack format version 1: {header!r}")
    # bucket i (after the header) holds the words of frequency 10 ** (-i / 100), Zipf 9 - i / 100
    last = round((9 - WORD_ZIPF) * 100)
    common = round((9 - COMMON_ZIPF) * 100)
    return (frozenset(w for bucket in data[1:last + 2] for w in bucket),
            frozenset(w for bucket in data[1:common + 2] for w in bucket))


@cache
def is_word(token: str) -> bool:
    """True when ``token`` (one token; case and Unicode composition do not matter) is an ordinary word of one of
    :data:`LANGUAGES`, i.e. its Zipf frequency there is at least :data:`WORD_ZIPF`."""
    word = unicodedata.normalize("NFC", token).casefold()
    return any(word in _words(lang)[0] for lang in LANGUAGES)


@cache
def is_common(token: str) -> bool:
    """True when ``token`` is a word of everyday prose in one of :data:`LANGUAGES` (Zipf frequency at least
    :data:`COMMON_ZIPF`); a rarer word, a made-up one or a passphrase run together is not."""
    word = unicodedata.normalize("NFC", token).casefold()
    return any(word in _words(lang)[1] for lang in LANGUAGES)


@cache
def _frequent(lang: str, zipf: float) -> frozenset[str]:
    """The words of ``lang``'s ``large`` list with a Zipf frequency of at least ``zipf`` (for
    :mod:`screening.unexplained`, which chooses its own threshold)."""
    with _LOCK:
        data = msgpack.unpackb(gzip.decompress((_data_dir() / f"large_{lang}.msgpack.gz").read_bytes()), raw=False)
    header = data[0]
    if not isinstance(header, dict) or header.get("format") != "cB" or header.get("version") != 1:
        raise ValueError(f"wordfreq's large_{lang} list is not in the cBpack format version 1: {header!r}")
    last = round((9 - zipf) * 100)
    return frozenset(w for bucket in data[1:last + 2] for w in bucket)


def load_frequent(zipf: float) -> None:
    """Load every language's list at ``zipf`` now (a long-lived process, before its first question)."""
    for lang in LANGUAGES:
        _frequent(lang, zipf)


def is_frequent(token: str, zipf: float) -> bool:
    """True when ``token`` (case and Unicode composition do not matter) has a Zipf frequency of at least ``zipf`` in
    one of :data:`LANGUAGES` (each threshold's lists load once)."""
    word = unicodedata.normalize("NFC", token).casefold()
    return any(word in _frequent(lang, zipf) for lang in LANGUAGES)
