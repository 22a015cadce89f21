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
loads nothing and one that meets English words loads English only. Public: :func:`is_word`.
"""

from __future__ import annotations

import gzip
import threading
import unicodedata
from functools import cache
from importlib.util import find_spec
from pathlib import Path

import msgpack

__all__ = ["LANGUAGES", "WORD_ZIPF", "is_word"]

#: the languages the statement screen reads (ISO 639-1), the likeliest first.
LANGUAGES = ("en", "de", "fr", "es")
#: the Zipf frequency from which a token counts as a word (about once in 30 million words), chosen on the
#: statement corpus and the first two held-out batches (tests/data/credentials/); see bench/credential_screen.py.
WORD_ZIPF = 1.5

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
def _words(lang: str) -> frozenset[str]:
    """The words of ``lang``'s ``large`` list with a Zipf frequency of at least :data:`WORD_ZIPF`.

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
    return frozenset(w for bucket in data[1:last + 2] for w in bucket)


@cache
def is_word(token: str) -> bool:
    """True when ``token`` (one token; case and Unicode composition do not matter) is an ordinary word of one of
    :data:`LANGUAGES`, i.e. its Zipf frequency there is at least :data:`WORD_ZIPF`."""
    word = unicodedata.normalize("NFC", token).casefold()
    return any(word in _words(lang) for lang in LANGUAGES)
