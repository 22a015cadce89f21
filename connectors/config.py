"""The sources' part of the sources file (``chatops.yml``), validated with pydantic.

Shape (see the README's "Sources and sync" section for a full example)::

    sources:
      - name: eng                   # letters, digits, . _ -; unique; stored with every chunk
        type: confluence            # confluence | mediawiki | folder
        base_url: https://acme.atlassian.net/wiki
        deployment: cloud           # cloud (REST v2, email + API token) | datacenter (REST v1, PAT)
        spaces: [ENG, OPS]
        auth: {email_env: CONFLUENCE_EMAIL, token_env: CONFLUENCE_API_TOKEN}
        schedule: {interval: 30m}   # or {cron: "*/30 * * * *"}; none: only `chatops sync` runs it
    groups:                         # optional: static groups an audience may name
      hr: [a@acme.com, b@acme.com]

:class:`SourcesConfig` is this part; the keys about the app (``scheduler``, ``greeting``,
``suggested_prompts``, ``channels``) and the loading of the whole file are :mod:`app.config`'s, the
reading and the error messages :mod:`connectors.config_file`'s. Secrets are never written in the file:
``auth`` names environment variables (``*_env`` keys), which are read when a source is built
(:func:`connectors.factory.build_source`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self, Union
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from core.access import Access, group, normalise, user
from .errors import ConnectorError

if TYPE_CHECKING:  # APScheduler ships no types (Any to mypy); imported when a schedule is built
    from apscheduler.triggers.base import BaseTrigger

__all__ = [
    "SourcesConfig", "SourceConfig", "ConfluenceConfig", "MediaWikiConfig", "FolderConfig", "Schedule",
    "ConfluenceAuth", "MediaWikiAuth", "MissingCredentialError", "StrictModel", "NAME", "check_timezone",
    "require_env", "credential_vars", "parse_interval", "Audience", "audience_access", "STATIC_GROUP_SOURCE",
]

#: A source or group name: letters, digits, ``.``, ``_`` or ``-`` (no spaces), at most 100.
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_INTERVAL = re.compile(r"^\s*(?:(\d+)\s*d)?\s*(?:(\d+)\s*h)?\s*(?:(\d+)\s*m)?\s*(?:(\d+)\s*s)?\s*$", re.I)
_SECRET_KEYS = {"token", "api_token", "password", "pat", "secret", "email", "username", "user", "apikey", "api_key"}


class MissingCredentialError(ConnectorError):
    """A source names a credential environment variable that is not set."""


def parse_interval(text: str) -> timedelta:
    """Parse ``"30m"``, ``"1h30m"``, ``"90s"``, ``"1d"`` (or a bare number of minutes) into a timedelta.

    Raises:
        ValueError: for anything else, or an interval under 10 seconds.
    """
    text = str(text).strip()
    if text.isdigit():
        td = timedelta(minutes=int(text))
    else:
        m = _INTERVAL.match(text)
        if not m or not any(m.groups()):
            raise ValueError(f"interval {text!r} is not like 30m, 1h, 1h30m, 90s or 1d")
        d, h, mi, s = (int(g or 0) for g in m.groups())
        td = timedelta(days=d, hours=h, minutes=mi, seconds=s)
    if td < timedelta(seconds=10):
        raise ValueError(f"interval {text!r} is shorter than 10 seconds")
    return td


class StrictModel(BaseModel):
    """A frozen model that rejects unknown keys: every model of the sources file is one."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Schedule(StrictModel):
    """When a source syncs: exactly one of ``interval`` (``"30m"``) or ``cron`` (5-field crontab).

    ``jitter_seconds`` delays each run by up to that many seconds (spreads sources out).
    """

    interval: str | None = None
    cron: str | None = None
    jitter_seconds: int = Field(0, ge=0, le=3600)

    @model_validator(mode="after")
    def _one(self) -> Schedule:
        if (self.interval is None) == (self.cron is None):
            raise ValueError("give exactly one of interval (e.g. 30m) or cron (e.g. '*/30 * * * *')")
        if self.interval is not None:
            parse_interval(self.interval)
        if self.cron is not None:
            from apscheduler.triggers.cron import CronTrigger

            try:
                CronTrigger.from_crontab(self.cron)
            except ValueError as exc:
                raise ValueError(f"cron {self.cron!r} is not a 5-field crontab (minute hour day month weekday): {exc}")
        return self

    def trigger(self, timezone: str = "UTC") -> BaseTrigger:
        """The APScheduler 3.x trigger (``IntervalTrigger`` or ``CronTrigger``) in ``timezone``."""
        from apscheduler.triggers.cron import CronTrigger
        from apscheduler.triggers.interval import IntervalTrigger

        tz = ZoneInfo(timezone)
        jitter = self.jitter_seconds or None
        if self.interval is not None:
            return IntervalTrigger(seconds=int(parse_interval(self.interval).total_seconds()), timezone=tz, jitter=jitter)
        trig = CronTrigger.from_crontab(self.cron, timezone=tz)
        trig.jitter = jitter
        return trig

    def describe(self) -> str:
        """``"every 30m"`` or ``"cron */30 * * * *"``."""
        return f"every {self.interval}" if self.interval is not None else f"cron {self.cron}"


def _env_name(v: str | None, field: str) -> str | None:
    if v is None:
        return v
    if not _ENV.match(v):
        raise ValueError(f"{field} must be the NAME of an environment variable (like CONFLUENCE_API_TOKEN), "
                         "not the secret itself")
    return v


class _Auth(StrictModel):
    @model_validator(mode="before")
    @classmethod
    def _no_inline_secrets(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            inline = sorted(k for k in data if str(k).lower() in _SECRET_KEYS)
            if inline:
                raise ValueError(
                    f"credentials are never written in the config file (found {', '.join(inline)}): put each "
                    "secret in an environment variable and name it with the matching *_env key, e.g. "
                    "token_env: CONFLUENCE_API_TOKEN")
        return data


class ConfluenceAuth(_Auth):
    """Which environment variables hold Confluence credentials.

    Cloud: ``email_env`` (the Atlassian account e-mail) and ``token_env`` (an API token), sent as
    HTTP basic auth. Data Center: ``token_env`` (a personal access token), sent as
    ``Authorization: Bearer``. Defaults: ``CONFLUENCE_EMAIL`` / ``CONFLUENCE_API_TOKEN`` (cloud),
    ``CONFLUENCE_TOKEN`` (datacenter).
    """

    email_env: str | None = None
    token_env: str | None = None

    @field_validator("email_env", "token_env")
    @classmethod
    def _check(cls, v: str | None, info: ValidationInfo) -> str | None:
        return _env_name(v, info.field_name or "")


class MediaWikiAuth(_Auth):
    """Which environment variables hold a MediaWiki bot password (``Special:BotPasswords``).

    ``username_env`` holds ``User@botname``; ``password_env`` the generated password.
    """

    username_env: str
    password_env: str

    @field_validator("username_env", "password_env")
    @classmethod
    def _check(cls, v: str, info: ValidationInfo) -> str:
        return _env_name(v, info.field_name or "") or v


#: The source part of the principals of the groups declared at the top of the sources file
#: (``groups: {hr: [...]}`` -> ``group:chatops/hr``).
STATIC_GROUP_SOURCE = "chatops"

#: Who may read a folder's or a wiki's pages: ``"public"`` (every employee) or a list of e-mails,
#: group names declared under ``groups:`` and ``group:<source>/<name>`` principals.
Audience = Union[Literal["public"], list[str]]


def _audience_principal(entry: str) -> str:
    """One audience entry as a principal: an e-mail -> ``user:``, ``group:src/name`` kept, a bare
    name -> ``group:chatops/<name>`` (a group of the sources file). Raises ``ValueError`` otherwise."""
    e = str(entry).strip()
    if e.lower().startswith(("user:", "group:")):
        return normalise(e)
    if "@" in e and " " not in e:
        return user(e)
    if NAME.match(e):
        return group(STATIC_GROUP_SOURCE, e)
    raise ValueError(f"audience entry {entry!r} is neither an e-mail, a group name declared under groups: "
                     "nor group:<source>/<name>")


def _check_audience(v: Any) -> Any:
    if isinstance(v, str):
        if v.strip().lower() != "public":
            raise ValueError("audience is public or a list of e-mails and group names, e.g. [hr, a@x.com]")
        return "public"
    if isinstance(v, list):
        if not v:
            raise ValueError("an empty audience would hide every page: write public, or list e-mails and groups")
        for e in v:
            _audience_principal(e)
        return [str(e).strip() for e in v]
    return v


def audience_access(audience: "Audience") -> Access:
    """The :class:`Access` of every page of a source with this ``audience``: public, or only the
    listed principals (see :data:`Audience`).

    Raises:
        ValueError: for an entry that is neither an e-mail nor a group.
    """
    if isinstance(audience, str):
        if audience.strip().lower() == "public":
            return Access.everyone()
        audience = [audience]
    return Access.only(_audience_principal(e) for e in audience)


def audience_groups(audience: "Audience") -> list[str]:
    """The bare group names (groups of the sources file) an audience names."""
    if isinstance(audience, str):
        return []
    return [str(e).strip() for e in audience
            if not str(e).strip().lower().startswith(("user:", "group:")) and "@" not in str(e)]


class _SourceBase(StrictModel):
    name: str
    schedule: Schedule | None = None
    timeout_seconds: float = Field(30.0, gt=0, le=600, description="per-request read timeout")
    retries: int = Field(5, ge=0, le=20, description="retries of one request on 429/5xx/timeouts")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME.match(v):
            raise ValueError(f"source name {v!r} must be letters, digits, '.', '_' or '-' (no spaces) "
                             "(it is stored with every indexed chunk)")
        return v


def _http_url(v: str, field: str) -> str:
    v = v.strip()
    if not re.match(r"^https?://[^/\s]+", v):
        raise ValueError(f"{field} must be an http(s) URL, got {v!r}")
    return v.rstrip("/")


class ConfluenceConfig(_SourceBase):
    """A Confluence source.

    Attributes:
        base_url: the site (Cloud: ``https://acme.atlassian.net/wiki`` or without ``/wiki``; Data
            Center: the base URL with its context path, e.g. ``https://confluence.acme.com/confluence``).
        deployment: ``cloud`` (REST v2) or ``datacenter`` (REST v1 + CQL); default: ``cloud`` for
            ``*.atlassian.net``, else ``datacenter``.
        spaces: space keys to index (at least one).
        timezone: the site's time zone (IANA name) in which Data Center reads CQL dates; unknown
            means the incremental window is widened by 12 hours (the largest offset west of UTC).
        overlap_minutes: how far before the last watermark each incremental listing starts again.
        restrictions: resolve each page's effective read access (space permission, the read
            restrictions of the page and its ancestors, group members) into ``Document.access``;
            ``false`` skips those requests and indexes every page as readable by nobody (fail closed).
        page_size: listing page size (v2 caps it at 250, v1 at 200 without bodies).
        public_groups: groups that mean "every employee" (e.g. ``[confluence-users]``; Cloud: group
            names or ids): a page is public when its space is readable by one of them (or anonymously)
            and no read restriction applies to it or an ancestor. Default none: nothing is public.
        permissions_interval: how often the permission sync re-reads space permissions, every page's
            read restrictions and group members (``"1h"``, like ``schedule.interval``; ``"off"``: never
            scheduled). Default ``1h``.
    """

    type: Literal["confluence"]
    base_url: str
    deployment: Literal["cloud", "datacenter"] | None = None
    spaces: list[str] = Field(min_length=1)
    auth: ConfluenceAuth = ConfluenceAuth()
    timezone: str | None = None
    overlap_minutes: int = Field(10, ge=0, le=24 * 60)
    restrictions: bool = True
    page_size: int = Field(100, ge=1, le=250)
    public_groups: list[str] = Field(default_factory=list)
    permissions_interval: str = "1h"

    @field_validator("public_groups")
    @classmethod
    def _groups(cls, v: list[str]) -> list[str]:
        out = [g.strip() for g in v]
        if any(not g for g in out):
            raise ValueError("public_groups lists group names, e.g. [confluence-users]; an empty name is not one")
        return list(dict.fromkeys(out))

    @field_validator("permissions_interval", mode="before")
    @classmethod
    def _perm_interval(cls, v: Any) -> str:
        text = str(v).strip()
        if text.lower() in {"off", "none", "0", ""}:
            return "off"
        parse_interval(text)
        return text

    def permissions_every(self) -> timedelta | None:
        """The permission sync's interval (``None``: ``off``, not scheduled)."""
        return None if self.permissions_interval == "off" else parse_interval(self.permissions_interval)

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str) -> str:
        return _http_url(v, "base_url")

    @field_validator("spaces")
    @classmethod
    def _spaces(cls, v: list[str]) -> list[str]:
        bad = [k for k in v if not re.match(r"^~?[A-Za-z0-9_]+$", k)]
        if bad:
            raise ValueError(f"space keys look like ENG or ~jdoe, got {bad}")
        return list(dict.fromkeys(v))

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str | None) -> str | None:
        return check_timezone(v)

    @property
    def resolved_deployment(self) -> str:
        """``cloud`` or ``datacenter`` (explicit, else guessed from the host)."""
        if self.deployment:
            return self.deployment
        host = re.sub(r"^https?://", "", self.base_url).split("/", 1)[0].split(":", 1)[0]
        return "cloud" if host.endswith(".atlassian.net") else "datacenter"


class MediaWikiConfig(_SourceBase):
    """A MediaWiki source.

    Attributes:
        api_url: the Action API endpoint (``https://wiki.acme.com/w/api.php``).
        namespaces: namespace numbers to index (default ``[0]``, the main namespace).
        auth: a bot password for private wikis (omit for public wikis).
        overlap_seconds: how far before the last watermark each recent-changes listing starts again
            (timestamps are whole seconds).
        full_sync_after_days: a watermark older than this triggers a full listing instead
            (recent changes expire after ``$wgRCMaxAge``, 90 days by default).
    """

    type: Literal["mediawiki"]
    api_url: str
    namespaces: list[int] = Field(default_factory=lambda: [0])
    auth: MediaWikiAuth | None = None
    overlap_seconds: int = Field(120, ge=0, le=86400)
    full_sync_after_days: int = Field(30, ge=1, le=365)
    audience: Audience = "public"

    @field_validator("audience", mode="before")
    @classmethod
    def _audience(cls, v: Any) -> Any:
        return _check_audience(v)

    @field_validator("api_url")
    @classmethod
    def _url(cls, v: str) -> str:
        v = _http_url(v, "api_url")
        if not v.endswith(".php"):
            raise ValueError(f"api_url must point at the Action API (ending in api.php), got {v!r}")
        return v

    @field_validator("namespaces")
    @classmethod
    def _ns(cls, v: list[int]) -> list[int]:
        if not v or any(n < 0 for n in v):
            raise ValueError("namespaces are non-negative namespace numbers, e.g. [0] or [0, 4]")
        return sorted(set(v))


class FolderConfig(_SourceBase):
    """A folder of Markdown/HTML files (see :class:`connectors.folder.FolderSource`).

    Attributes:
        audience: who may read its pages (:data:`Audience`; ``public`` by default): a folder has no
            per-page read control.
        url_base: the site the pages are published on; links are ``url_base`` + the path without its suffix,
            unless a page's front matter gives a ``permalink``.
        url_template: the link of a page without a permalink, for sites that rewrite paths
            (:data:`connectors.folder.URL_PLACEHOLDERS`, e.g. ``"{url_base}/{jekyll_path}"``).
        exclude: globs of paths relative to the folder left out of the index; unset:
            :data:`connectors.folder.DEFAULT_EXCLUDE` (``README.md``, ``SOURCE.md``, ``LICENSE*``,
            ``CONTRIBUTING.md`` at the root); ``[]`` indexes every page.
    """

    type: Literal["folder"]
    path: str
    url_base: str | None = None
    url_template: str | None = None
    exclude: list[str] | None = None
    audience: Audience = "public"

    @field_validator("audience", mode="before")
    @classmethod
    def _audience(cls, v: Any) -> Any:
        return _check_audience(v)

    @field_validator("exclude", mode="before")
    @classmethod
    def _exclude(cls, v: Any) -> Any:
        if isinstance(v, str):
            v = [v]
        if v is not None and not isinstance(v, list):
            raise ValueError("exclude is a list of globs relative to the folder, e.g. [README.md, drafts/*], "
                             "or [] to index every page")
        from .folder import check_exclude

        return None if v is None else check_exclude(v)

    @model_validator(mode="after")
    def _template(self) -> "FolderConfig":
        if self.url_template is not None:
            from .folder import check_url_template

            check_url_template(self.url_template, self.url_base)
        return self


SourceConfig = Annotated[Union[ConfluenceConfig, MediaWikiConfig, FolderConfig], Field(discriminator="type")]


def check_timezone(v: str | None) -> str | None:
    """``v`` unchanged when it is ``None`` or an IANA time zone name.

    Raises:
        ValueError: for an unknown time zone.
    """
    if v is None:
        return v
    try:
        ZoneInfo(v)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {v!r}; use an IANA name such as Europe/Berlin or UTC")
    return v


class SourcesConfig(StrictModel):
    """The sources' part of the sources file: ``sources`` (unique names) and ``groups``.

    ``groups`` declares static groups once (``{hr: [a@x.com, b@x.com]}``): a folder's or a wiki's
    ``audience`` may name them, and their members get the principal ``group:chatops/<name>``.

    The whole file is :class:`app.config.ChatopsConfig`, which extends this model with the keys about the
    app (``scheduler``, ``greeting``, ``suggested_prompts``, ``channels``); this model alone rejects them
    as unknown keys.
    """

    sources: list[SourceConfig] = Field(default_factory=list)
    groups: dict[str, list[str]] = Field(default_factory=dict)

    @field_validator("groups")
    @classmethod
    def _groups(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        out = {}
        for name, emails in v.items():
            if not NAME.match(str(name)):
                raise ValueError(f"group name {name!r} must be letters, digits, '.', '_' or '-'")
            bad = [e for e in emails if "@" not in str(e) or " " in str(e).strip()]
            if bad:
                raise ValueError(f"group {name!r} lists {bad[:3]}: members are e-mail addresses")
            out[str(name).lower()] = sorted({str(e).strip().lower() for e in emails})
        return out

    @model_validator(mode="after")
    def _unique(self, info: ValidationInfo) -> Self:
        names = [s.name for s in self.sources]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"several sources are named {', '.join(dupes)}; source names must be unique")
        self._check_references(set(names) | set((info.context or {}).get("extra_sources", ())))
        for s in self.sources:
            unknown = [g for g in audience_groups(getattr(s, "audience", "public")) if g.lower() not in self.groups]
            if unknown:
                raise ValueError(f"the audience of source {s.name!r} names {', '.join(unknown)}, not declared under "
                                 "groups: (declare it there, or write an e-mail or group:<source>/<name>)")
        return self

    def _check_references(self, known: set[str]) -> None:
        """A subclass checks here that its keys name only ``known`` sources (this file's, plus the
        validation context's ``extra_sources``), raising ``ValueError`` (each line marked with
        :data:`connectors.config_file.PLACED` and its place)."""

    def static_groups(self) -> dict[str, frozenset[str]]:
        """Group name -> its members' e-mails (lower case), as declared under ``groups:``."""
        return {name: frozenset(emails) for name, emails in self.groups.items()}

    def source(self, name: str) -> SourceConfig:
        """The source called ``name``.

        Raises:
            KeyError: when there is none.
        """
        for s in self.sources:
            if s.name == name:
                return s
        raise KeyError(name)

    def missing_credentials(self, environ: Mapping[str, str] | None = None) -> list[str]:
        """One message per credential variable a source names that is unset (empty when all are set)."""
        env = os.environ if environ is None else environ
        out = []
        for s in self.sources:
            for field, var in credential_vars(s):
                if not env.get(var):
                    out.append(f"source {s.name!r} needs the environment variable {var} ({field}); set it "
                               f"or change auth.{field.split('.')[-1]} in the sources file")
        return out


def credential_vars(s: SourceConfig) -> list[tuple[str, str]]:
    """The environment variables an entry reads its credentials from: ``[(field, VARIABLE), ...]``
    (defaults filled in, e.g. ``("auth.token_env", "CONFLUENCE_API_TOKEN")``); empty for a folder."""
    if isinstance(s, ConfluenceConfig):
        if s.resolved_deployment == "cloud":
            return [("auth.email_env", s.auth.email_env or "CONFLUENCE_EMAIL"),
                    ("auth.token_env", s.auth.token_env or "CONFLUENCE_API_TOKEN")]
        return [("auth.token_env", s.auth.token_env or "CONFLUENCE_TOKEN")]
    if isinstance(s, MediaWikiConfig) and s.auth is not None:
        return [("auth.username_env", s.auth.username_env), ("auth.password_env", s.auth.password_env)]
    return []


def require_env(var: str, source: str, field: str, environ: Mapping[str, str] | None = None) -> str:
    """The value of environment variable ``var``.

    Raises:
        MissingCredentialError: when it is unset or empty, naming the source and the config key.
    """
    env = os.environ if environ is None else environ
    value = env.get(var, "")
    if not value:
        raise MissingCredentialError(
            f"source {source!r} needs the environment variable {var} ({field}) but it is not set; "
            f"export {var}=... before starting chatops, or point {field} at another variable")
    return value
