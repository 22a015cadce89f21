"""Optional features (Teams, an LLM, Google Calendar, Microsoft 365 calendars, PostgreSQL, OpenTelemetry, the MCP server) and the extra each one needs:
``pip install 'chatops-bot[EXTRA]'`` (from a checkout, ``make install-extras``). The runtime (``make demo``,
``requirements-runtime.lock``) leaves them out; the container image (``requirements-extras.lock``) and the test
environment (``requirements.lock``) have them all.

:func:`missing_extras` checks the settings against what is installed without importing anything (a module
spec lookup each), so the CLI refuses at startup with one line per missing extra, before a command runs.
:func:`command_needs` does the same for a command that is the feature (``chatops mcp`` needs the mcp extra).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass

from .settings import Settings

__all__ = ["Extra", "EXTRAS", "missing_extras", "extra_installed", "command_needs"]


@dataclass(frozen=True)
class Extra:
    """An optional feature: the extra's name, the modules it installs, when the settings ask for it and
    how the message names that setting."""

    name: str
    modules: tuple[str, ...]
    wanted: Callable[[Settings], bool]
    setting: Callable[[Settings], str]
    feature: str


def _llm_setting(s: Settings) -> str:
    if not s.llm_enabled:
        return f"EMBEDDING_MODEL={s.embedding_model}"
    return next(name for name, value in (("OPENAI_API_KEY", s.openai_api_key), ("OPENAI_BASE_URL", s.openai_base_url),
                                         ("AZURE_OPENAI_ENDPOINT", s.azure_openai_endpoint)) if value)


EXTRAS: tuple[Extra, ...] = (
    Extra("teams", ("botbuilder.core", "botbuilder.integration.aiohttp", "jwt", "cryptography"),
          lambda s: bool(s.microsoft_app_id or s.teams_allow_unauthenticated),
          lambda s: "MicrosoftAppId" if s.microsoft_app_id else "TEAMS_ALLOW_UNAUTHENTICATED",
          "Microsoft Teams"),
    Extra("llm", ("openai",),
          lambda s: s.llm_enabled or s.embedding_model not in ("", "local"), _llm_setting,
          "the LLM and API embeddings"),
    Extra("google", ("googleapiclient", "google.oauth2", "httplib2"),
          lambda s: s.calendar_backend == "google", lambda s: "CALENDAR_BACKEND=google",
          "the Google Calendar backend"),
    Extra("microsoft", ("msal",),
          lambda s: s.calendar_backend == "microsoft", lambda s: "CALENDAR_BACKEND=microsoft",
          "the Microsoft 365 calendar backend"),
    Extra("postgres", ("psycopg",),
          lambda s: (s.database_url or "").lower().startswith("postgresql"),
          lambda s: "DATABASE_URL=" + (s.database_url or "").split(":", 1)[0] + "://...",
          "the PostgreSQL state store"),
    Extra("otel", ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"),
          lambda s: bool((s.otel_exporter_otlp_endpoint or "").strip()), lambda s: "OTEL_EXPORTER_OTLP_ENDPOINT",
          "OpenTelemetry traces"),
    # A command, not a setting, asks for it (command_needs): `chatops mcp` serving an AI assistant.
    Extra("mcp", ("mcp.server", "uvicorn", "starlette"), lambda s: False, lambda s: "chatops mcp",
          "the MCP server for AI assistants"),
)


def extra_installed(extra: Extra) -> bool:
    """Whether every module of ``extra`` can be imported (looked up, not imported)."""
    for name in extra.modules:
        try:
            if importlib.util.find_spec(name) is None:
                return False
        except (ImportError, ValueError):  # a parent package missing, or a module set to None
            return False
    return True


def install_hint(extra: str) -> str:
    """How to install ``extra``: with pip, or from a checkout with the hashed lock."""
    return f"pip install 'chatops-bot[{extra}]' (from a checkout: make install-extras)"


def missing_extras(settings: Settings) -> list[str]:
    """One message per feature the settings ask for whose extra is not installed, e.g.
    ``CALENDAR_BACKEND=google needs the google extra: pip install 'chatops-bot[google]' (...)``."""
    return [f"{e.setting(settings)} needs the {e.name} extra ({e.feature}), which is not installed: "
            f"{install_hint(e.name)}"
            for e in EXTRAS if e.wanted(settings) and not extra_installed(e)]


def command_needs(extra: str, command: str) -> str | None:
    """The one-line message when ``command`` (e.g. ``chatops mcp``) needs ``extra`` and it is not installed,
    else None: ``chatops mcp needs the mcp extra (...), which is not installed: pip install ...``.

    Raises:
        KeyError: ``extra`` is not one of :data:`EXTRAS`.
    """
    e = next((x for x in EXTRAS if x.name == extra), None)
    if e is None:
        raise KeyError(extra)
    if extra_installed(e):
        return None
    return f"{command} needs the {e.name} extra ({e.feature}), which is not installed: {install_hint(e.name)}"
