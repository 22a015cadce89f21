"""Source spec strings for one-off runs and ``CHATOPS_SOURCES``.

- ``folder:PATH[?name=NAME&url_base=URL&url_template=T&exclude=GLOB&audience=A]`` (without ``name=``, the
  folder's own name: two folders are two sources, and indexing one never deletes the other's pages;
  ``exclude`` repeated or ``|``-separated, an empty ``exclude=`` indexes every page, none: the default
  :data:`connectors.folder.DEFAULT_EXCLUDE`)
- ``confluence:URL?space=KEY[&space=KEY2|,KEY2][&name=NAME&deployment=cloud|datacenter&timezone=TZ
  &email_env=VAR&token_env=VAR]`` (credentials by environment variable name; defaults
  ``CONFLUENCE_EMAIL``/``CONFLUENCE_API_TOKEN`` for Cloud, ``CONFLUENCE_TOKEN`` for Data Center)
- ``mediawiki:API_URL[?name=NAME&namespaces=0,4&username_env=VAR&password_env=VAR&audience=A]``

``audience`` (folders and wikis, see :data:`connectors.config.Audience`): ``public`` (the default), or
e-mails and group names separated by ``|`` or given as repeated ``audience=`` options
(``audience=hr|ceo@acme.com``); a group name is one declared under ``groups:`` in ``chatops.yml``.

A spec becomes the same validated config entry as a ``chatops.yml`` source
(:func:`spec_to_config`), then a connector (:func:`parse_source_spec`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from .errors import SourceSpecError

if TYPE_CHECKING:
    from .config import SourceConfig
    from .factory import BuiltSource

__all__ = ["parse_source_spec", "spec_to_config", "default_source_name"]

_EXAMPLES = ("folder:./examples/wiki, confluence:https://acme.atlassian.net/wiki?space=ENG or "
             "mediawiki:https://wiki.acme.com/w/api.php")
_OPTIONS = {
    "folder": {"name", "url_base", "url_template", "exclude", "audience"},
    "confluence": {"name", "space", "deployment", "timezone", "email_env", "token_env"},
    "mediawiki": {"name", "namespaces", "username_env", "password_env", "audience"},
}


def default_source_name(kind: str, location: str) -> str:
    """The name of a spec without ``name=``: a folder's own name (``folder:./docs/handbook`` is
    ``handbook``, characters a source name may not hold become ``-``), else the source type.

    >>> default_source_name("folder", "../shared/corpus/meltano-handbook/"), default_source_name("mediawiki", "x")
    ('meltano-handbook', 'mediawiki')
    """
    if kind != "folder":
        return kind
    from .folder import folder_source_name  # the folder reader (BeautifulSoup, markdownify) only when named

    return folder_source_name(location)


def spec_to_config(spec: str) -> SourceConfig:
    """Turn a spec string into a validated config entry (:data:`connectors.config.SourceConfig`).

    Raises:
        SourceSpecError: for an unknown type, a malformed spec or an invalid option, saying what is accepted.
    """
    from pydantic import TypeAdapter, ValidationError

    from .config import SourceConfig
    from .config_file import format_errors

    kind, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise SourceSpecError(f"source spec {spec!r} is not TYPE:LOCATION; try {_EXAMPLES}")
    location, _, query = rest.partition("?")
    if not location.strip():
        raise SourceSpecError(f"source spec {spec!r} names no location; try {_EXAMPLES}")
    if kind not in _OPTIONS:
        raise SourceSpecError(f"unknown source type {kind!r} in {spec!r}; supported: folder:PATH, "
                              "confluence:URL?space=KEY, mediawiki:API_URL")
    multi = parse_qs(query)
    blank = parse_qs(query, keep_blank_values=True)  # `exclude=` (empty) means "leave nothing out"
    if kind == "folder" and "exclude" in blank:
        multi["exclude"] = blank["exclude"]
    params = {k: v[-1] for k, v in multi.items()}
    unknown = set(params) - _OPTIONS[kind]
    if unknown:
        allowed = ", ".join(f"{o}=" for o in sorted(_OPTIONS[kind]))
        raise SourceSpecError(f"unknown option(s) {', '.join(sorted(unknown))} in {spec!r}; use {allowed}")
    data: dict[str, Any] = {"type": kind, "name": params.get("name") or default_source_name(kind, location)}
    if "audience" in params:
        entries = [e.strip() for v in multi["audience"] for e in v.split("|") if e.strip()]
        data["audience"] = "public" if entries == ["public"] else entries
    if kind == "folder":
        data.update(path=location, url_base=params.get("url_base"), url_template=params.get("url_template"))
        if "exclude" in multi:
            data["exclude"] = [e.strip() for v in multi["exclude"] for e in v.split("|") if e.strip()]
    elif kind == "confluence":
        spaces = [k for v in multi.get("space", []) for k in v.split(",") if k.strip()]
        if not spaces:
            raise SourceSpecError(f"confluence spec {spec!r} names no space; add ?space=KEY (repeat or use commas)")
        data.update(base_url=location, spaces=[s.strip() for s in spaces])
        for opt in ("deployment", "timezone"):
            if opt in params:
                data[opt] = params[opt]
        auth = {k: params[k] for k in ("email_env", "token_env") if k in params}
        if auth:
            data["auth"] = auth
    else:
        data["api_url"] = location
        if "namespaces" in params:
            try:
                data["namespaces"] = [int(n) for n in params["namespaces"].split(",") if n.strip()]
            except ValueError:
                raise SourceSpecError(f"namespaces in {spec!r} must be numbers separated by commas, e.g. 0,4") from None
        if "username_env" in params or "password_env" in params:
            data["auth"] = {"username_env": params.get("username_env", ""), "password_env": params.get("password_env", "")}
    try:
        return TypeAdapter(SourceConfig).validate_python(data)
    except ValidationError as exc:
        raise SourceSpecError(f"source spec {spec!r} is invalid:\n{format_errors(exc, {})}") from None


def parse_source_spec(spec: str) -> BuiltSource:
    """Build a source from a spec string.

    Returns:
        A :class:`FolderSource`, :class:`~connectors.confluence.ConfluenceSource` or
        :class:`~connectors.mediawiki.MediaWikiSource`.

    Raises:
        SourceSpecError: for an unknown type or a malformed spec, saying what is accepted.
        MissingCredentialError: when a Confluence/MediaWiki spec's credential variables are unset.
    """
    from .config import FolderConfig, audience_access
    from .factory import build_source
    from .folder import FolderSource

    cfg = spec_to_config(spec)
    if isinstance(cfg, FolderConfig):  # a folder: spec
        # Kept exactly as before the connectors arrived (messages name name= and url_base=).
        return FolderSource(cfg.path, name=cfg.name, url_base=cfg.url_base, access=audience_access(cfg.audience),
                            url_template=cfg.url_template, exclude=cfg.exclude)
    return build_source(cfg)
