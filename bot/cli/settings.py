"""The CLI's settings: loaded once per command, with logging and tracing configured from them."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError

    from app.settings import Settings

__all__ = ["ConfigError", "load_settings", "settings_errors"]

class ConfigError(Exception):
    """Bad settings; the CLI prints the message and exits with status 2."""


def load_settings(answers_on_stdout: bool = False, terminal: bool = False) -> Settings:
    """The settings, with logging and tracing configured from them.

    ``answers_on_stdout``: a command whose output is the answer itself (``ask``, ``chat``, ``eval``) logs at
    WARNING unless ``CHATOPS_LOG_LEVEL`` is set, so each turn's INFO line does not interleave with the
    answer a person is reading; the server and the worker keep INFO.

    ``terminal``: a command a person runs for themselves (``ask``, ``chat``, ``actions``, ``reminders``)
    reads and shows times in the machine's zone when ``DEFAULT_TIMEZONE`` is not set
    (:func:`app.settings.at_a_terminal`); the servers and ``eval`` keep ``DEFAULT_TIMEZONE``, else UTC.

    Raises:
        ConfigError: when a setting is invalid, or asks for a feature whose extra is not installed
            (:func:`app.extras.missing_extras`); the message says which and what to fix.
    """
    from pydantic import ValidationError

    from app.settings import Settings

    try:
        s = Settings()
    except ValidationError as exc:
        raise ConfigError(settings_errors(exc)) from None
    if terminal:
        from app.settings import at_a_terminal

        s = at_a_terminal(s)
    from app.extras import missing_extras

    if missing := missing_extras(s):  # e.g. CALENDAR_BACKEND=google without the google extra
        raise ConfigError("; ".join(missing))
    if not s.chatops_screen_unexplained or "screening.scan" in sys.modules:
        # the screen reads CHATOPS_SCREEN_UNEXPLAINED from the environment itself; this carries a value from .env
        # too (the environment is left alone: the warm ask worker compares it with its clients')
        from screening.scan import set_unexplained_default

        set_unexplained_default(s.chatops_screen_unexplained)
    from ..logs import configure_logging

    level = s.chatops_log_level
    if answers_on_stdout and "chatops_log_level" not in s.model_fields_set:
        level = "WARNING"
    configure_logging(level, s.chatops_log_format, s.secret_values)
    from telemetry.tracing import configure_tracing  # imports OpenTelemetry only when the endpoint is set

    try:
        configure_tracing(s.otel_exporter_otlp_endpoint, s.otel_service_name)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    return s


def settings_errors(exc: ValidationError) -> str:
    """A pydantic ``ValidationError`` of :class:`Settings` as one line: each variable and what is wrong with it."""
    problems = []
    for err in exc.errors(include_url=False, include_input=False):
        name = str(err["loc"][0]).upper() if err.get("loc") else "a setting"
        msg = str(err.get("msg", "")).removeprefix("Value error, ")
        problems.append(msg if msg.startswith(name) else f"{name}: {msg}")
    return (f"invalid setting{'s' if len(problems) > 1 else ''}: {'; '.join(problems)} "
            "(fix the environment variable or .env file; every setting: docs/reference/settings.md, or make docs)")

