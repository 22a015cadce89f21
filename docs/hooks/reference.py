"""MkDocs hook: the reference pages are generated from the code at build time, so they cannot drift.

A page holds a marker such as ``<!-- reference:settings -->``; :func:`on_page_markdown` replaces it with
Markdown generated from:

- ``settings``: the pydantic settings model (:class:`app.settings.Settings`): each field's environment
  variable(s), default, allowed values and ``Field(description=...)``. A setting without a description
  fails the build.
- ``chatops-yml``: the sources file's models (:mod:`app.config`, the sources' part in :mod:`connectors.config`),
  walked from :class:`~app.config.ChatopsConfig`: each field's type, default and description (the ``Field``
  description, else the model docstring's ``Attributes:`` entry).
- ``cli``: every command of the real argument parser (:func:`bot.cli.build_parser`): usage, description,
  arguments and options, examples.
- ``metrics``: the Prometheus metrics: the process's counters and histograms (:mod:`telemetry.metrics`) and
  the gauges the web app computes at scrape time (:class:`app.metrics.StoreCollector`).
- ``eval-format``: the fields of one eval-file line (:class:`bot.evaluate.EvalQuestion`).
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import re
import types
import typing
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel

MARKER = re.compile(r"<!--\s*reference:([a-z-]+)\s*-->")


class ReferenceError(RuntimeError):
    """A reference page cannot be generated (e.g. a setting has no description): the build fails."""


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return MARKER.sub(lambda m: GENERATORS[m.group(1)](), markdown)


# --- helpers -----------------------------------------------------------------------------------------------

def _cell(text: Any) -> str:
    """Text safe in one Markdown table cell."""
    text = " ".join(str(text).split()).replace("|", "\\|")
    parts = text.split("`")  # HTML-escape outside code spans only (inside them Markdown shows text as is)
    return "`".join(p if i % 2 else p.replace("<", "&lt;").replace(">", "&gt;") for i, p in enumerate(parts))


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return " or ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args if a is not type(None)) + (
            " (optional)" if type(None) in args else "")
    if origin in (list, tuple, set, frozenset):
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return f"map of {_type_name(args[0])} to {_type_name(args[1])}" if args else "map"
    if isinstance(tp, type):
        if issubclass(tp, BaseModel):
            return f"[{tp.__name__}](#{tp.__name__.lower()})"
        if issubclass(tp, Enum):
            return " or ".join(f"`{m.value}`" for m in tp)
        return {"str": "text", "int": "integer", "float": "number", "bool": "true/false", "Path": "path",
                "SecretStr": "secret"}.get(tp.__name__, tp.__name__)
    return str(tp).replace("typing.", "")


def _default(field: Any) -> str:
    from pydantic_core import PydanticUndefined

    if field.default is PydanticUndefined:
        if field.default_factory is not None:
            value = field.default_factory()
        else:
            return "required"
    else:
        value = field.default
    if value is None:
        return "unset"
    if isinstance(value, BaseModel):
        return "see below"
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, str) and value == "":
        return '`""`'
    return f"`{value!r}`" if isinstance(value, (list, dict)) else f"`{value}`"


def _bounds(field: Any) -> str:
    parts = []
    for m in field.metadata:
        for attr, word in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"), ("min_length", "length ≥"),
                           ("max_length", "length ≤")):
            value = getattr(m, attr, None)
            if value is not None:
                parts.append(f"{word} {value}")
    return ", ".join(parts)


def _docstring_attributes(model: type) -> dict[str, str]:
    """The ``Attributes:`` section of a class docstring (Google style), name -> text."""
    doc = inspect.getdoc(model) or ""
    m = re.search(r"^Attributes:\n((?:[ \t]+.*\n?|\n)+)", doc, flags=re.M)
    if not m:
        return {}
    out: dict[str, str] = {}
    current = None
    for line in m.group(1).splitlines():
        head = re.match(r"^ {4}(\w+):\s*(.*)$", line)
        if head:
            current = head.group(1)
            out[current] = head.group(2)
        elif current and line.strip():
            out[current] += " " + line.strip()
    return out


def _rst(text: str) -> str:
    """reStructuredText roles and double back-quotes of docstrings as Markdown."""
    text = re.sub(r":(?:class|func|data|mod|meth|attr):`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")


# --- settings ----------------------------------------------------------------------------------------------

#: Sections of the settings page, by field-name prefix (first match wins); a new setting that matches none
#: is listed under "Other settings", so it is never left out.
SETTING_GROUPS: list[tuple[str, tuple[str, ...]]] = [
    ("Data, logs and traces", ("chatops_data_dir", "chatops_cache_dir", "chatops_log", "otel_")),
    ("Sources and sync", ("chatops_sources", "chatops_config", "chatops_sync", "stale_after")),
    ("Indexes and storage", ("embedding_", "qdrant_", "keyword_index", "database_url")),
    ("Answers and the evidence gate", ("min_citations", "relevance_floor", "single_source", "rrf_",
                                       "max_question")),
    ("Permissions", ("channel_",)),
    ("LLM", ("openai_", "azure_openai", "planner_model", "answer_model", "turn_budget", "llm_")),
    ("Slack", ("slack_", "admin_user_ids")),
    ("Microsoft Teams", ("microsoft_", "teams_")),
    ("Actions and calendars", ("calendar_", "default_timezone", "action_ttl", "google_")),
    ("Retention", ("retention_",)),
]


def setting_variables(name: str, field: Any) -> list[str]:
    """The environment variables a setting is read from (its aliases, else its name upper-cased)."""
    alias = field.validation_alias
    choices = getattr(alias, "choices", None) or ([alias] if isinstance(alias, str) else [])
    names = [c for c in choices if isinstance(c, str)]
    return names or [name.upper()]


def settings_reference() -> str:
    from app.settings import Settings

    missing = [n for n, f in Settings.model_fields.items() if not (f.description or "").strip()]
    if missing:
        raise ReferenceError(f"settings without a description (add Field(description=...) in app/settings.py): "
                             f"{missing}")
    grouped: dict[str, list[str]] = {title: [] for title, _ in SETTING_GROUPS}
    grouped["Other settings"] = []
    for name, field in Settings.model_fields.items():
        title = next((t for t, prefixes in SETTING_GROUPS if name.startswith(prefixes)), "Other settings")
        grouped[title].append(name)
    out = [f"{len(Settings.model_fields)} settings, read from the environment or a `.env` file in the working "
           "directory (the environment wins). Names are case-insensitive.\n"]
    for title, names in grouped.items():
        if not names:
            continue
        out += [f"## {title}\n", "| Variable | Type | Default | What it does |", "|---|---|---|---|"]
        for name in names:
            field = Settings.model_fields[name]
            variables = " / ".join(f"`{v}`" for v in setting_variables(name, field))
            kind = _type_name(field.annotation)
            bounds = _bounds(field)
            desc = field.description + (f" ({bounds})" if bounds else "")
            out.append(f"| {variables} | {_cell(kind)} | {_cell(_default(field))} | {_cell(desc)} |")
        out.append("")
    return "\n".join(out)


# --- chatops.yml -------------------------------------------------------------------------------------------

def _models_under(root: type[BaseModel]) -> list[type[BaseModel]]:
    seen: list[type[BaseModel]] = []

    def visit(tp: Any) -> None:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            if tp in seen:
                return
            seen.append(tp)
            for f in tp.model_fields.values():
                visit(f.annotation)
            return
        for arg in typing.get_args(tp):
            visit(arg)

    visit(root)
    return seen


def config_reference() -> str:
    from app.config import ChatopsConfig

    out = []
    for model in _models_under(ChatopsConfig):
        doc = _rst((inspect.getdoc(model) or "").split("\n\nAttributes:")[0].split("Attributes:")[0]).strip()
        attrs = _docstring_attributes(model)
        title = "The file (top level)" if model is ChatopsConfig else model.__name__
        anchor = model.__name__.lower()
        out += [f"## {title} {{#{anchor}}}\n", doc + "\n" if doc else "",
                "| Field | Type | Default | What it does |", "|---|---|---|---|"]
        for name, field in model.model_fields.items():
            desc = _rst(field.description or attrs.get(name, ""))
            bounds = _bounds(field)
            if bounds:
                desc = f"{desc} ({bounds})" if desc else bounds
            out.append(f"| `{name}` | {_cell(_type_name(field.annotation))} | {_cell(_default(field))} | "
                       f"{_cell(desc) or '—'} |")
        out.append("")
    return "\n".join(out)


# --- CLI ---------------------------------------------------------------------------------------------------

def cli_commands() -> dict[str, argparse.ArgumentParser]:
    """Each ``chatops`` command's parser, by name, as the real parser has them."""
    from bot.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _arguments(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for a in parser._actions:
        if isinstance(a, argparse._HelpAction):
            continue
        if isinstance(a, argparse._SubParsersAction):
            for name, p in a.choices.items():
                rows.append(f"| `{name}` | {_cell(p.description or '')} |")
            continue
        what = a.help or ""
        if a.choices and not isinstance(a, argparse._SubParsersAction):
            what += f" (one of {', '.join(f'`{c}`' for c in a.choices)})"
        if a.option_strings and a.default not in (None, False, argparse.SUPPRESS) and "default" not in what:
            what += f" (default `{a.default}`)"
        name = ", ".join(f"`{o}`" for o in a.option_strings) or f"`{a.metavar or a.dest}`"
        if a.option_strings and a.nargs != 0:
            name += f" `{a.metavar or a.dest.upper()}`"
        rows.append(f"| {name} | {_cell(what) or '—'} |")
    return rows


def cli_reference() -> str:
    out = []
    for name, parser in cli_commands().items():
        parser.prog = f"chatops {name}"
        out += [f"## chatops {name}\n", "```text", parser.format_usage().strip(), "```\n",
                (parser.description or "") + "\n"]
        rows = _arguments(parser)
        if rows:
            out += ["| Argument or option | What it does |", "|---|---|", *rows, ""]
        if parser.epilog:
            out += ["```text", parser.epilog.strip(), "```\n"]
    return "\n".join(out)


# --- metrics -----------------------------------------------------------------------------------------------

class _EmptyManifest:
    def counts_by_source(self) -> dict:
        return {}


class _EmptyStore:
    def last_successful_runs(self, index_id: Any) -> dict:
        return {}

    def pending_counts(self) -> dict:
        return {}


def metrics_reference() -> str:
    from prometheus_client import metrics as pm

    import telemetry.metrics as tm
    from app.metrics import StoreCollector

    rows = []
    for value in vars(tm).values():
        if isinstance(value, pm.MetricWrapperBase):
            kind = value._type
            suffix = "_total" if kind == "counter" else ""
            labels = ", ".join(f"`{label}`" for label in value._labelnames) or "—"
            rows.append((value._name + suffix, kind, labels, value._documentation, "every process"))
    for family in StoreCollector(_EmptyManifest(), _EmptyStore()).collect():
        labels = ", ".join(f"`{label}`" for label in family._labelnames) or "—"
        rows.append((family.name, family.type, labels, family.documentation, "`chatops serve` (at scrape time)"))
    out = ["| Metric | Type | Labels | What it counts | Where |", "|---|---|---|---|---|"]
    out += [f"| `{n}` | {k} | {lb} | {_cell(d)} | {w} |" for n, k, lb, d, w in rows]
    return "\n".join(out) + "\n"


# --- eval format -------------------------------------------------------------------------------------------

#: What each field of an eval line means; a field of :class:`bot.evaluate.EvalQuestion` missing here fails
#: the build, so a new field is documented when it is added.
EVAL_FIELDS = {
    "id": "A unique id for the question (shown in the per-question rows).",
    "question": "The question, as a user would type it.",
    "kind": "What is being tested: `single`, `multi`, `paraphrase`, `exact_term`, `followup` (answerable "
            "kinds, scored for retrieval), `unanswerable` (should be refused), `general` (answered without "
            "retrieval, LLM only) or `action` (should propose an action).",
    "gold_docs": "The page paths (document ids) that answer it. For `multi` every one is needed; otherwise "
                 "they are alternatives.",
    "answer_contains": "Strings the answer must contain (case-insensitive).",
    "history": "Earlier messages of the same asker in the thread (for `followup`).",
    "expected_tool": "For `action`: the tool the reply should propose (default `calendar.create`; also "
                     "`reminder.create`, `ticket.create`). A question for a tool that is not registered in the run "
                     "(`ticket.create` without `JIRA_URL`) is counted as skipped, not as a failure.",
    "expected_args": "For `action`: arguments the proposal should have (lists compared as sets; `title`, `text` "
                     "and `summary` loosely: case-insensitive, extra words allowed; the rest exactly). Meetings: "
                     "`title`, `attendees`, `duration_minutes`, `video_conference`...; reminders: `text`; Jira "
                     "tickets: `project`, `issue_type`, `summary`.",
    "expected_start": "For `action`: when the proposal should start (an event's `start`, a reminder's `at`), "
                      "counted from when the question is asked: `[DAY ]HH:MM[ ZONE]` with DAY `today`, `tomorrow`, "
                      "`+N` (days), a weekday `mon`..`sun` (the first one ahead) or a day of the month (`14th`); "
                      "ZONE an IANA name (default: the proposal's `timezone`). E.g. `tomorrow 14:00`, "
                      "`fri 09:00 America/Los_Angeles`. Scored as `action_start`.",
    "as_user": "The asker's e-mail; without it the asker sees public pages only.",
    "audience": "`dm` (default: only the asker reads the answer) or `channel` (others do, so "
                "`CHANNEL_ACCESS` applies).",
}


def eval_reference() -> str:
    from bot.evaluate import EvalQuestion

    fields = dataclasses.fields(EvalQuestion)
    undocumented = [f.name for f in fields if f.name not in EVAL_FIELDS]
    if undocumented:
        raise ReferenceError(f"eval fields without a description in docs/hooks/reference.py: {undocumented}")
    out = ["| Field | Required | What it means |", "|---|---|---|"]
    for f in fields:
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if f.name in ("gold_docs", "answer_contains"):
            required = False  # read with .get(): an empty list when left out
        out.append(f"| `{f.name}` | {'yes' if required else 'no'} | {_cell(EVAL_FIELDS[f.name])} |")
    return "\n".join(out) + "\n"


GENERATORS = {
    "settings": settings_reference,
    "chatops-yml": config_reference,
    "cli": cli_reference,
    "metrics": metrics_reference,
    "eval-format": eval_reference,
}
