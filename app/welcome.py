"""What the assistant says first: the greeting and the suggested prompts (platform-neutral).

Both come from the sources file (``chatops.yml``: ``greeting``, ``suggested_prompts``) when it sets them.
Otherwise they are built from what is indexed, so a company sees its own knowledge base and never
another company's examples: the greeting names the sources, and each prompt asks about one page's
title, a few pages per source in turn. Only pages everyone may read and that the index-time scan did not
flag (secrets, personal data, instructions to the bot) lend their titles: the greeting is shown to
anyone who opens the assistant.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from index.knowledge import KnowledgeIndex

from .config import MAX_PROMPTS, ChatopsConfig

__all__ = ["Prompt", "Welcome", "welcome", "default_welcome", "index_catalog", "TITLES_PER_SOURCE"]

TITLES_PER_SOURCE = 3


@dataclass(frozen=True, slots=True)
class Prompt:
    """A suggested prompt: the short ``title`` shown and the ``message`` sent when it is chosen."""

    title: str
    message: str


@dataclass(frozen=True, slots=True)
class Welcome:
    """The greeting (Markdown) and up to four suggested prompts."""

    text: str
    prompts: tuple[Prompt, ...]


def _names(names: Sequence[str]) -> str:
    quoted = [f"*{n}*" for n in names]
    if len(quoted) <= 1:
        return "".join(quoted)
    return ", ".join(quoted[:-1]) + " and " + quoted[-1]


def default_welcome(catalog: Mapping[str, Sequence[str]]) -> Welcome:
    """The greeting and prompts built from ``catalog`` (source name -> a few page titles, in order).

    The prompts take one title from each source in turn (at most four, no title twice). An empty
    catalog gives a greeting that says nothing is indexed yet, and no prompts.
    """
    names = [n for n in catalog]
    if not names:
        return Welcome("Hi! My knowledge base is empty for now: once an admin indexes the company's sources "
                       "(`/kb reindex`), I answer from them, with links to my sources.", ())
    text = (f"Hi! I answer from {_names(names)}, with links to my sources. Ask me in your own words, "
            "or start with one of the suggestions.")
    prompts: list[Prompt] = []
    seen: set[str] = set()
    columns = [list(catalog[n]) for n in names]
    for row in range(max((len(c) for c in columns), default=0)):
        for col in columns:
            if row < len(col) and len(prompts) < MAX_PROMPTS:
                title = " ".join(col[row].split())
                if title and title.lower() not in seen:
                    seen.add(title.lower())
                    short = title if len(title) <= 75 else title[:74].rstrip() + "…"
                    prompts.append(Prompt(short, f"What does the knowledge base say about {title}?"))
    return Welcome(text, tuple(prompts))


def welcome(config: ChatopsConfig | None, catalog: Mapping[str, Sequence[str]]) -> Welcome:
    """The configured greeting and prompts, each falling back to :func:`default_welcome` when unset
    (``suggested_prompts: []`` means no prompts at all)."""
    default = default_welcome(catalog)
    text = config.greeting if config is not None and config.greeting else default.text
    configured = config.suggested_prompts if config is not None else None
    prompts = (tuple(Prompt(p.title, p.message) for p in configured) if configured is not None
               else default.prompts)
    return Welcome(text, prompts)


def index_catalog(index: KnowledgeIndex, per_source: int = TITLES_PER_SOURCE,
                  names: Sequence[str] = ()) -> dict[str, list[str]]:
    """Source name -> up to ``per_source`` page titles, from the index: pages everyone may read and not
    flagged by the scan, in ``doc_id`` order (stable across calls). ``names`` (the configured sources)
    come first, each listed even without a page; sources only in the index follow. Reads the manifest
    and one chunk per chosen page (BM25 store)."""
    pages = sorted(index.manifest.all_pages(), key=lambda p: (p.source, p.doc_id))
    order = list(dict.fromkeys([*names, *(p.source for p in pages)]))
    chosen: dict[str, list[str]] = {n: [] for n in order}
    for p in pages:
        if len(chosen[p.source]) >= per_source or not p.chunk_ids:
            continue
        if p.access is None or not p.access.public or (p.sensitive_chunks, p.injection_chunks) != (0, 0):
            continue  # not everyone may read it, or it was flagged (or scanned never): its title stays out
        chosen[p.source].append(p.chunk_ids[0])
    found = index.keyword.chunks([cid for ids in chosen.values() for cid in ids])
    return {name: [found[cid].title for cid in ids if cid in found and found[cid].title.strip()]
            for name, ids in chosen.items()}
