"""``chatops index`` and ``chatops calibrate``: index sources, then fit the evidence gate."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from .settings import load_settings

if TYPE_CHECKING:
    from app.settings import Settings
    from index.indexer import IndexReport

__all__ = ["cmd_index", "cmd_calibrate", "index_sources", "recalibrate"]

def index_sources(settings: Settings, specs: list[str], full: bool, index=None, quiet: bool = False,
                  out=None) -> int:
    """Index each source spec, recording each run, then refit the gate; reports go to ``out`` (a
    :class:`app.layout.SectionPrinter`, one section) unless ``quiet``."""
    from app.jobs import RunLog
    from app.layout import SectionPrinter
    from app.wiring import open_index
    from connectors.sources import parse_source_spec
    from index.indexer import Indexer

    from ..console import render_report
    from ..progress import progress_bar

    out = out or SectionPrinter()
    sources = [parse_source_spec(s) for s in specs]
    own = index is None
    index = index or open_index(settings, repair=True, full=full)  # an indexing run rebuilds a damaged store
    runs = RunLog.open(settings, index.index_id)  # each run is recorded like a sync, so `chatops status` shows it
    try:
        indexer = Indexer(index)
        for src in sources:
            with runs.run(src.name) as record, progress_bar(f"index {src.name}", "pages") as bar:
                def advance(r: IndexReport, bar: Any = bar) -> None:
                    bar.update(_pages_done(r) - bar.n)

                rep = indexer.run(src, full=full, progress=advance)
                record(rep, pages=len(index.manifest.pages_of(src.name)))
            stats = index.stats()
            if not quiet:
                out(render_report(rep, stats["pages"], stats["chunks"]))
        recalibrate(index, quiet, out=out)
    finally:
        runs.close()
        if own:
            index.close()
    return 0


def _pages_done(rep) -> int:
    """Pages an index run has been through so far (its progress bar's count)."""
    return rep.added + rep.updated + rep.unchanged + rep.skipped


def recalibrate(index, quiet: bool, force: bool = False, out=print) -> dict | None:
    """Refit the evidence gate on the index when it changed substantially (see :mod:`agent.calibration`)."""
    from agent.calibration import calibrate_index, describe

    record = calibrate_index(index, force=force)
    if record and not quiet:
        out(describe(record))
    return record


def cmd_calibrate(args: argparse.Namespace) -> int:
    """``chatops calibrate [--json]``: fit the evidence gate's operating point on the indexed corpus."""
    from agent.calibration import calibrate, describe, store_calibration
    from app.wiring import build_agent

    settings = load_settings()
    rt = build_agent(settings)
    try:
        if rt.index.stats()["chunks"] == 0:
            print("chatops: the index is empty; run `chatops index folder:PATH` first", file=sys.stderr)
            return 2
        record = calibrate(rt.search)
        store_calibration(rt.index, record)
    finally:
        rt.close()
    print(json.dumps(record, ensure_ascii=False) if args.json else describe(record))
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    """``chatops index SOURCE... [--full]``; then, when the warm ask worker is enabled (``ASK_WORKER``: by default at
    a terminal), starts it for this data dir, so the first ``chatops ask`` after indexing finds it warm."""
    from . import warm

    settings = load_settings()
    rc = index_sources(settings, args.sources, args.full)
    warm.warm_up(settings.ask_worker)
    return rc

