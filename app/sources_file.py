"""The sources as ``chatops serve`` reads them: the sources file plus the ``CHATOPS_SOURCES`` specs.

Its own module (only :mod:`app.config` and :mod:`connectors` below it) so that :mod:`app.access` (the
``groups:`` and the ``channels:`` of the file) and :mod:`app.jobs` (the sources) read one and the same config
without an import cycle (``app.jobs`` imports ``app.wiring``, which imports ``app.access``).
"""

from __future__ import annotations

from pathlib import Path

from connectors.config_file import ConfigFileError
from connectors.sources import spec_to_config

from .config import DEFAULT_CONFIG_FILE, ChatopsConfig, load_config
from .settings import Settings

__all__ = ["load_sources_config", "split_specs"]


def split_specs(value: str) -> list[str]:
    """Spec strings of ``CHATOPS_SOURCES`` (separated by commas, semicolons or whitespace).

    A comma inside a spec's query (``?space=ENG,OPS``) belongs to the spec.
    """
    out: list[str] = []
    for part in value.replace(";", " ").split():
        for piece in part.split(","):
            if not piece:
                continue
            if out and ":" not in piece.split("?", 1)[0] and "?" in out[-1]:
                out[-1] += "," + piece  # a value list of the previous spec's query
            else:
                out.append(piece)
    return out


def load_sources_config(settings: Settings) -> ChatopsConfig:
    """The sources file (if any) plus ``CHATOPS_SOURCES`` specs, as one validated config.

    ``CHATOPS_CONFIG`` unset reads ``./chatops.yml`` when it exists (no file: no sources from it);
    set, the file must exist.

    Raises:
        ConfigFileError: for a missing (explicitly named) or invalid file, or a name used twice.
        SourceSpecError: for a malformed spec.
    """
    path = getattr(settings, "chatops_config", None)
    extra = [spec_to_config(s) for s in split_specs(getattr(settings, "chatops_sources", "") or "")]
    named = [s.name for s in extra]  # channels: in the file may name them
    if path is not None:
        cfg = load_config(path, extra_sources=named)
    elif Path(DEFAULT_CONFIG_FILE).is_file():
        cfg = load_config(DEFAULT_CONFIG_FILE, extra_sources=named)
    else:
        cfg = ChatopsConfig()
    if not extra:
        return cfg
    names = [s.name for s in [*cfg.sources, *extra]]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigFileError(f"several sources are named {', '.join(dupes)} across the sources file and "
                              "CHATOPS_SOURCES; give each a unique name (?name= in a spec)")
    return ChatopsConfig.model_construct(sources=[*cfg.sources, *extra], scheduler=cfg.scheduler, groups=cfg.groups,
                                         greeting=cfg.greeting, suggested_prompts=cfg.suggested_prompts,
                                         channels=cfg.channels)
