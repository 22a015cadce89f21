"""Reading the sources file (YAML) into a pydantic model, with messages that name each problem's place.

Generic over the model: :class:`connectors.config.SourcesConfig` (the sources' part) or the whole file's
:class:`app.config.ChatopsConfig`. A problem reads ``sources[1] (eng).auth: ...``; a cross-check that names
its own places marks each line with :data:`PLACED`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from .errors import SourceSpecError

__all__ = ["ConfigFileError", "PLACED", "format_errors", "validate_config", "read_config"]

M = TypeVar("M", bound=BaseModel)

#: Marks a model-level error message that starts with its own place (``channels.C1.sources: ...``): a
#: cross-check raises one ``ValueError`` whose lines each start with this mark and their place.
PLACED = "\x00"


class ConfigFileError(SourceSpecError):
    """The sources file is missing, not YAML, or does not validate; the message lists every problem."""


def format_errors(exc: ValidationError, data: Any) -> str:
    """One ``  - place: problem`` line per error of ``exc`` (``data``: the validated data, for source names)."""
    lines: list[str] = []
    for err in exc.errors():
        loc = list(err["loc"])
        where = []
        i = 0
        while i < len(loc):
            part = loc[i]
            if part == "sources" and i + 1 < len(loc) and isinstance(loc[i + 1], int):
                idx = loc[i + 1]
                name = ""
                try:
                    name = data["sources"][idx].get("name", "")
                except (KeyError, IndexError, TypeError, AttributeError):
                    pass
                where.append(f"sources[{idx}]" + (f" ({name})" if name else ""))
                i += 2
                if i < len(loc) and loc[i] in {"confluence", "mediawiki", "folder"}:
                    i += 1  # the discriminator's branch name adds nothing
                continue
            where.append(str(part))
            i += 1
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key (check the spelling; see the README's Sources and sync section)"
        elif err["type"] == "union_tag_invalid":
            msg = "type must be confluence, mediawiki or folder"
        elif err["type"] == "union_tag_not_found":
            msg = "every source needs a type: confluence, mediawiki or folder"
        if not where and PLACED in msg:  # a cross-check that names its own places, one per line
            lines.extend(f"  - {line.replace(PLACED, '')}" for line in msg.split("\n"))
            continue
        lines.append(f"  - {'.'.join(where) or '(top level)'}: {msg}")
    return "\n".join(lines)


def validate_config(data: Any, model: type[M], origin: str = "the sources file",
                    context: Mapping[str, Any] | None = None) -> M:
    """Validate already-loaded YAML data as ``model`` (:class:`SourcesConfig`, or the whole file's
    :class:`app.config.ChatopsConfig`).

    Args:
        data: the loaded YAML (``None``, an empty file, is an empty mapping).
        model: the model of the file.
        origin: how messages name the file.
        context: pydantic's validation context (e.g. ``extra_sources``, see :class:`SourcesConfig`).

    Raises:
        ConfigFileError: listing every problem with its location.
    """
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigFileError(f"{origin} must be a mapping with a 'sources' list, got {type(data).__name__}")
    try:
        return model.model_validate(data, context=dict(context or {}))
    except ValidationError as exc:
        raise ConfigFileError(f"{origin} is invalid:\n{format_errors(exc, data)}") from None


def read_config(path: str | os.PathLike[str]) -> Any:
    """The YAML data of the sources file at ``path`` (not validated: see :func:`validate_config`).

    Raises:
        ConfigFileError: when the file is missing or unreadable, or is not YAML.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigFileError(f"sources file {p} not found; create it (see the README's Sources and sync "
                              "section) or point CHATOPS_CONFIG at it") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigFileError(f"cannot read sources file {p}: {exc}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigFileError(f"sources file {p} is not valid YAML: {exc}") from None
