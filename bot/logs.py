"""How chatops logs: one handler on stderr, JSON lines or text, secrets masked, INFO by default (Alembic's own
migration chatter at WARNING unless the level is DEBUG).

``CHATOPS_LOG_FORMAT``: ``json`` (one JSON object per line, through ``python-json-logger``: the
time, level, logger, message and every ``extra`` field, e.g. a turn's ``trace_id``, ``platform``,
``route``, ``outcome`` and ``timings_ms``), ``text`` (one readable line), or ``auto`` (the default:
text on a terminal, JSON otherwise, so a service or a container logs JSON and a person at a shell
reads text). Every record passes :class:`bot.logsafe.RedactingFilter` with the configured secrets
(Slack tokens and signing secret, the OpenAI key, the Teams app password) and any token-shaped text.

APScheduler narrates every run of every job at INFO ("Running job ...", "Job ... executed
successfully": two lines every 5 s from the re-index queue job of an idle server) and each job it adds;
:class:`DemoteFilter` turns its INFO records into DEBUG ones, shown only at ``CHATOPS_LOG_LEVEL=DEBUG``
(its warnings, such as a missed run, stay warnings). chatops logs what a run did itself.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

from .logsafe import RedactingFilter, redact

__all__ = ["configure_logging", "log_handler", "LOG_FORMATS", "DemoteFilter", "DEMOTED_LOGGERS"]

LOG_FORMATS = ("auto", "json", "text")
_TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: Libraries whose INFO records are DEBUG for chatops (see the module docstring).
DEMOTED_LOGGERS = ("apscheduler",)


class DemoteFilter(logging.Filter):
    """A handler filter: INFO records of ``loggers`` (and their children) become DEBUG records, dropped
    unless ``level`` lets DEBUG through.

    Args:
        level: the level the handler logs at (a name or a number).
        loggers: logger names whose INFO is demoted.
    """

    def __init__(self, level: str | int, loggers: tuple[str, ...] = DEMOTED_LOGGERS) -> None:
        super().__init__()
        self.debug = (logging.getLevelName(level) if isinstance(level, str) else level) <= logging.DEBUG
        self.prefixes = tuple(loggers)

    def filter(self, record: logging.LogRecord) -> bool:
        """False for a demoted record the level hides; a kept one is relabelled DEBUG."""
        if record.levelno != logging.INFO or not (record.name in self.prefixes
                                                  or record.name.startswith(tuple(p + "." for p in self.prefixes))):
            return True
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return self.debug


def log_handler(fmt: str = "auto", secrets: tuple[str, ...] = (), stream: TextIO | None = None) -> logging.Handler:
    """The handler :func:`configure_logging` installs: ``fmt`` lines (JSON or text) on ``stream`` (stderr),
    every record passing :class:`bot.logsafe.RedactingFilter` with ``secrets``.

    Raises:
        ValueError: for an unknown format.
    """
    if fmt not in LOG_FORMATS:
        raise ValueError(f"CHATOPS_LOG_FORMAT must be one of {', '.join(LOG_FORMATS)}, not {fmt!r}")
    stream = stream or sys.stderr
    if fmt == "auto":
        fmt = "text" if getattr(stream, "isatty", lambda: False)() else "json"
    handler = logging.StreamHandler(stream)
    if fmt == "json":
        from pythonjsonlogger.json import JsonFormatter

        class RedactingJsonFormatter(JsonFormatter):
            """python-json-logger formats a traceback from ``exc_info`` afresh (not from the filter's
            redacted ``exc_text``): redact it here too."""

            def formatException(self, ei) -> str:  # noqa: N802 - logging's name
                text = super().formatException(ei)  # a list of lines only with exc_info_as_array, not set here
                return redact(text if isinstance(text, str) else "\n".join(text), secrets)

        handler.setFormatter(RedactingJsonFormatter(
            "%(asctime)s %(levelname)s %(name)s %(message)s",
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"}))
    else:
        handler.setFormatter(logging.Formatter(_TEXT))
    handler.addFilter(RedactingFilter(secrets))
    return handler


def configure_logging(level: str, fmt: str = "auto", secrets: tuple[str, ...] = (),
                      stream: TextIO | None = None) -> logging.Handler:
    """Replace the root logger's handlers with one that writes to ``stream`` (stderr) at ``level``.

    Args:
        level: a level name (``INFO``...).
        fmt: ``json``, ``text`` or ``auto`` (see the module docstring).
        secrets: values masked wherever they appear in a record.
        stream: where to write (stderr by default).

    Returns:
        The installed handler.

    Raises:
        ValueError: for an unknown format.
    """
    handler = log_handler(fmt, secrets, stream)
    handler.addFilter(DemoteFilter(level))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    # Alembic narrates every migration step at INFO ("Context impl SQLiteImpl", "Running upgrade ..."); the
    # state store logs one line of its own when it migrates an existing database (state/migrate.py).
    logging.getLogger("alembic").setLevel(logging.DEBUG if logging.getLevelName(level) == logging.DEBUG
                                          else logging.WARNING)
    return handler
