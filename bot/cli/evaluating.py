"""``chatops eval``: one eval file, or several sets each on its own index, scored in one table."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from .indexing import index_sources
from .settings import ConfigError, load_settings

if TYPE_CHECKING:
    from app.settings import Settings

__all__ = ["cmd_eval"]

def cmd_eval(args: argparse.Namespace) -> int:
    """``chatops eval --questions FILE [--source SPEC]... | --set NAME=QUESTIONS::SOURCE... [--retriever R] [--k K]
    [--json]``: one eval (its full table) or several sets, each on its own index (one table, a row per set).

    Raises:
        ConfigError: neither or both of ``--questions`` and ``--set``; ``--set`` with a shared index (``QDRANT_URL``).
        ValueError: a bad ``--set`` or eval file (the message names it), before anything is indexed.
    """
    from app.layout import SectionPrinter

    from ..eval_sets import format_sets_table, parse_set, set_data_dir
    from ..evaluate import format_table, load_questions

    if bool(args.questions) == bool(args.set):
        raise ConfigError("eval needs either --questions FILE (with --source SPEC to index) or one or more "
                          "--set NAME=QUESTIONS::SOURCE, not both; see `chatops eval --help`")
    if args.source and args.set:
        raise ConfigError("--source goes with --questions; a --set names its own sources (NAME=QUESTIONS::SOURCE)")
    settings = load_settings(answers_on_stdout=True)
    out = SectionPrinter()
    if args.questions:
        result = _eval_one(settings, load_questions(args.questions), args.source or [], args, out, "eval")
        result["retriever"] = args.retriever
        if args.json:
            print(json.dumps(result, ensure_ascii=False))
        else:
            out.section(format_table(result, label=f"({args.retriever})"))
        return 0
    sets = [parse_set(spec) for spec in args.set]
    if len({s.name for s in sets}) < len(sets):
        raise ConfigError("each --set needs its own NAME (it names the set's row and its folder under the data dir)")
    if settings.qdrant_url:
        raise ConfigError("--set builds an index per set under the data dir; unset QDRANT_URL (a shared index would "
                          "mix the sets' pages)")
    questions = {s.name: load_questions(s.questions) for s in sets}  # every file checked before any indexing
    results: dict[str, dict] = {}
    for s in sets:
        own = settings.model_copy(update={"chatops_data_dir": set_data_dir(settings.chatops_data_dir, s.name),
                                          "chatops_cache_dir": settings.embedding_cache_path.parent})
        if not args.json:
            out.section(f"set {s.name}: {len(questions[s.name])} questions from {s.questions}, "
                        f"index in {own.chatops_data_dir}")
        results[s.name] = _eval_one(own, questions[s.name], list(s.sources), args, out, f"eval {s.name}")
        results[s.name].update(questions_file=str(s.questions), sources=list(s.sources))
    if args.json:
        print(json.dumps({"retriever": args.retriever, "sets": results}, ensure_ascii=False))
    else:
        out.section(format_sets_table(results, label=f"({args.retriever})"))
    return 0


def _eval_one(settings: Settings, questions: list, sources: list[str], args: argparse.Namespace, out,
              bar_label: str) -> dict:
    """Index ``sources`` (incrementally) into the settings' index, then ask ``questions`` of it: the eval object
    of :func:`bot.evaluate.run_eval` (indexing reports go to ``out`` unless ``--json``)."""
    from app.wiring import build_agent, open_index

    from ..evaluate import doc_chunks, run_eval
    from ..progress import progress_bar

    index = open_index(settings, repair=bool(sources))
    try:
        for spec in sources:
            index_sources(settings, [spec], full=False, index=index, quiet=args.json, out=out)
        rt = build_agent(settings, index=index, retriever=args.retriever)
        with progress_bar(bar_label, "questions", total=len(questions)) as bar:
            return run_eval(rt.agent, questions, lookup=index.dense.get, k=args.k, access=rt.access,
                            doc_chunks=doc_chunks(index), progress=lambda *_: bar.update(1),
                            tools=rt.tools.names())
    finally:
        index.close()

