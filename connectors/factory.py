"""A validated source entry (``chatops.yml`` or a spec string) made into its connector, credentials read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias

import httpx

from .config import (
    ConfluenceConfig, FolderConfig, MediaWikiConfig, SourceConfig, audience_access, credential_vars, require_env,
)
from .config_file import ConfigFileError
from .confluence import ConfluenceSource
from .folder import FolderSource
from .http import RetryPolicy
from .mediawiki import MediaWikiSource

__all__ = ["build_source", "BuiltSource"]

#: What :func:`build_source` returns: the connector of one config entry.
BuiltSource: TypeAlias = FolderSource | ConfluenceSource | MediaWikiSource


def build_source(cfg: SourceConfig, *, environ: Mapping[str, str] | None = None, client: httpx.Client | None = None,
                 policy: RetryPolicy | None = None) -> BuiltSource:
    """Build the connector a config entry describes.

    Args:
        cfg: a validated entry.
        environ: where credentials are read (default ``os.environ``).
        client: an ``httpx.Client`` to share (tests); by default each connector owns one.
        policy: a :class:`connectors.http.RetryPolicy` overriding the one from ``retries``.

    Returns:
        A :class:`~connectors.folder.FolderSource`, :class:`~connectors.confluence.ConfluenceSource`
        or :class:`~connectors.mediawiki.MediaWikiSource`.

    Raises:
        MissingCredentialError: when a credential variable the entry names is unset.
    """
    pol = policy or RetryPolicy(attempts=cfg.retries + 1)
    if isinstance(cfg, FolderConfig):
        return FolderSource(cfg.path, name=cfg.name, url_base=cfg.url_base, access=audience_access(cfg.audience),
                            url_template=cfg.url_template, exclude=cfg.exclude)
    if isinstance(cfg, ConfluenceConfig):
        vars_ = dict(credential_vars(cfg))
        token = require_env(vars_["auth.token_env"], cfg.name, "auth.token_env", environ)
        email = require_env(vars_["auth.email_env"], cfg.name, "auth.email_env", environ) \
            if "auth.email_env" in vars_ else None
        return ConfluenceSource(cfg, token=token, email=email, client=client, policy=pol)
    if isinstance(cfg, MediaWikiConfig):
        user = password = None
        if cfg.auth is not None:
            user = require_env(cfg.auth.username_env, cfg.name, "auth.username_env", environ)
            password = require_env(cfg.auth.password_env, cfg.name, "auth.password_env", environ)
        return MediaWikiSource(cfg, username=user, password=password, client=client, policy=pol)
    raise ConfigFileError(f"unsupported source type in {cfg!r}")  # pragma: no cover - union is closed
