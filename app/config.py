"""The sources file (``CHATOPS_CONFIG``, default ``chatops.yml``) as the app reads it: the sources' part
(:class:`connectors.config.SourcesConfig`) and the keys about the app, in one file.

Shape (see the README's "Sources and sync" section for a full example)::

    scheduler:                      # optional
      misfire_grace_seconds: 600    # a run that could not start on time may still start this late
      timezone: UTC                 # for cron schedules
    sources:                        # and groups: the sources' part (connectors.config)
      - {name: eng, type: confluence, base_url: https://acme.atlassian.net/wiki, spaces: [ENG, OPS]}
    greeting: "Hi! Ask me about Acme's engineering handbook."   # optional: the assistant's first message
    suggested_prompts:              # optional, at most 4: offered when an assistant thread opens
      - {title: Declare an incident, message: How do I declare an incident?}
      - What's the on-call rota?    # a plain string: the title is the question itself
    channels:                       # optional: per-conversation scope (Slack channel ids, Teams conversation ids)
      C0123ABCD:
        sources: [eng]              # questions asked there search only these sources (default: every source)
        reply_in_threads: mention_only   # or answered_threads (the default): see ChannelConfig

A file that does not validate raises :class:`connectors.config_file.ConfigFileError` listing every problem
with its place (``sources[1] (eng).auth``, ``channels.C1.sources``) and what to write instead.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from connectors.config import NAME, SourcesConfig, StrictModel, check_timezone
from connectors.config_file import PLACED, read_config, validate_config

__all__ = ["ChatopsConfig", "ChannelConfig", "ConversationId", "SchedulerConfig", "SuggestedPrompt", "MAX_PROMPTS",
           "DEFAULT_CONFIG_FILE", "load_config", "parse_config"]

DEFAULT_CONFIG_FILE = "chatops.yml"


class SchedulerConfig(StrictModel):
    """Scheduler-wide options.

    Attributes:
        misfire_grace_seconds: a run that could not start at its time (the process was busy or
            down) still starts when it is at most this late; later ones are skipped (and coalesced).
        timezone: the time zone cron schedules are read in.
    """

    misfire_grace_seconds: int = Field(600, ge=1, le=7 * 86400)
    timezone: str = "UTC"

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str) -> str:
        return check_timezone(v) or "UTC"


MAX_PROMPTS = 4  # Slack shows at most four suggested prompts


class SuggestedPrompt(StrictModel):
    """A prompt offered when an assistant thread opens: a short ``title`` (1-75 characters) and the
    ``message`` sent when it is clicked (1-1,000). A plain string is both (the title cut to 75)."""

    title: str = Field(min_length=1, max_length=75)
    message: str = Field(min_length=1, max_length=1000)

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, v: Any) -> Any:
        if isinstance(v, str):
            text = v.strip()
            return {"title": text if len(text) <= 75 else text[:74].rstrip() + "…", "message": text}
        return v

    @field_validator("title", "message")
    @classmethod
    def _stripped(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be blank")
        return v.strip()


#: A conversation id: a Slack channel id (``C0123ABCD``, ``G...``, ``D...``) or a Teams conversation id
#: (``19:...@thread.tacv2``, ``a:1...``: anything with a colon and no spaces).
_CONVERSATION_ID = re.compile(r"^(?:[CGD][A-Z0-9]{2,}|[^\s:]+:\S+)$")


def _conversation_id(v: str) -> str:
    if not _CONVERSATION_ID.match(v):
        raise ValueError(f"{v!r} is not a conversation id: key each channel by its Slack channel id (like "
                         "C0123ABCD: channel details, at the bottom) or its Teams conversation id (like "
                         "19:...@thread.tacv2), not by its name")
    return v


#: A key of ``channels:``: a Slack channel id or a Teams conversation id (checked, the place named on error).
ConversationId = Annotated[str, AfterValidator(_conversation_id)]


class ChannelConfig(StrictModel):
    """The scope of one conversation (``channels:`` of the sources file, keyed by its id).

    Attributes:
        sources: the sources a question asked there is searched in (names of configured sources; at
            least one; one name may be written without brackets); None (left out): every source. Applied
            inside retrieval, like the access filter.
        reply_in_threads: ``answered_threads`` (the default): once the bot answered in a thread, later
            replies there are answered without a mention; ``mention_only``: in this channel's threads only
            messages that mention the bot are answered.
    """

    sources: list[str] | None = Field(default=None, min_length=1)
    reply_in_threads: Literal["answered_threads", "mention_only"] = "answered_threads"

    @field_validator("sources", mode="before")
    @classmethod
    def _sources(cls, v: Any) -> Any:
        if isinstance(v, str):
            v = [v]
        if isinstance(v, list):
            if not v:
                raise ValueError("an empty list would answer nothing: list source names, e.g. [eng], or leave "
                                 "sources out to search every source")
            bad = [str(n) for n in v if not isinstance(n, str) or not NAME.match(n)]
            if bad:
                raise ValueError(f"sources lists source names (letters, digits, '.', '_' or '-'), got {bad}")
            return list(dict.fromkeys(v))
        return v


class ChatopsConfig(SourcesConfig):
    """The whole file: ``sources`` (unique names), optional ``scheduler`` options and ``groups``, and what
    the assistant says first: ``greeting`` (1-2,000 characters of Markdown) and ``suggested_prompts`` (at
    most 4); unset, both are built from the indexed sources (:mod:`app.welcome`).

    ``groups`` declares static groups once (``{hr: [a@x.com, b@x.com]}``): a folder's or a wiki's
    ``audience`` may name them, and their members get the principal ``group:chatops/<name>``.

    ``channels`` scopes conversations (:class:`ChannelConfig`, keyed by a Slack channel id or a Teams
    conversation id); each source a channel names must be a source of this file, or one of the names
    given in the validation context's ``extra_sources`` (the ``CHATOPS_SOURCES`` specs, see
    :func:`parse_config`).
    """

    scheduler: SchedulerConfig = SchedulerConfig()
    greeting: str | None = Field(default=None, min_length=1, max_length=2000)
    suggested_prompts: list[SuggestedPrompt] | None = Field(default=None, max_length=MAX_PROMPTS)
    channels: dict[ConversationId, ChannelConfig] = Field(default_factory=dict)

    @field_validator("greeting")
    @classmethod
    def _greeting(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("greeting must not be blank; leave it out for the default built from the sources")
        return v.strip() if v is not None else None

    def _check_references(self, known: set[str]) -> None:
        problems = []
        for cid, ch in self.channels.items():
            unknown = [n for n in ch.sources or () if n not in known]
            if unknown:
                have = f"the sources are: {', '.join(sorted(known))}" if known else "no source is configured"
                problems.append(f"{PLACED}channels.{cid}.sources: names {', '.join(unknown)}, which is not a "
                                f"configured source ({have})")
        if problems:
            raise ValueError("\n".join(problems))

    def channel(self, conversation_id: str) -> ChannelConfig | None:
        """The scope of ``conversation_id`` (None: not listed under ``channels:``, every source)."""
        return self.channels.get(conversation_id) if conversation_id else None


def parse_config(data: Any, origin: str = "the sources file", extra_sources: Iterable[str] = ()) -> ChatopsConfig:
    """Validate already-loaded YAML data as the whole file.

    Args:
        data: the loaded YAML.
        origin: how messages name the file.
        extra_sources: names of sources defined elsewhere (``CHATOPS_SOURCES``) that ``channels:`` may name.

    Raises:
        ConfigFileError: listing every problem with its location.
    """
    return validate_config(data, ChatopsConfig, origin, context={"extra_sources": frozenset(extra_sources)})


def load_config(path: str | os.PathLike[str], extra_sources: Iterable[str] = ()) -> ChatopsConfig:
    """Read and validate the sources file at ``path`` (``extra_sources``: see :func:`parse_config`).

    Raises:
        ConfigFileError: when the file is missing or unreadable, is not YAML, or does not validate.
    """
    return parse_config(read_config(path), origin=f"sources file {Path(path)}", extra_sources=extra_sources)
