"""Source spec strings for one-off runs: ``folder:PATH[?name=NAME&url_base=URL]``.

(Confluence and MediaWiki specs arrive with their connectors.)
"""

from __future__ import annotations

from urllib.parse import parse_qs

from .errors import SourceSpecError
from .folder import FolderSource

__all__ = ["parse_source_spec"]


def parse_source_spec(spec: str) -> FolderSource:
    """Build a source from a spec string.

    Raises:
        SourceSpecError: for an unknown type or a malformed spec, saying what is accepted.
    """
    kind, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise SourceSpecError(f"source spec {spec!r} is not TYPE:LOCATION; try folder:./examples/wiki")
    location, _, query = rest.partition("?")
    if not location.strip():
        raise SourceSpecError(f"source spec {spec!r} names no location; try folder:./examples/wiki")
    params = {k: v[-1] for k, v in parse_qs(query).items()}
    unknown = set(params) - {"name", "url_base"}
    if unknown:
        raise SourceSpecError(f"unknown option(s) {', '.join(sorted(unknown))} in {spec!r}; use name= and url_base=")
    if kind == "folder":
        return FolderSource(location, name=params.get("name", "folder"), url_base=params.get("url_base"))
    raise SourceSpecError(f"unknown source type {kind!r} in {spec!r}; supported: folder:PATH")
