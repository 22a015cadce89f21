"""Helpers shared by the test modules (paths, the CLI subprocess environment, cache seeding)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
WIKI = EXAMPLES / "wiki"
EVAL_FILE = EXAMPLES / "eval.jsonl"
WIKI_PAGES = 13

def _settings_vars() -> set[str]:
    """Every environment variable a setting is read from (field names and aliases, upper-cased)."""
    from app.settings import setting_variables

    return {name.upper() for name in setting_variables()}


#: Settings read from the environment that must not leak from the developer's shell into CLI runs.
_SETTINGS_VARS = _settings_vars()


def chatops_command() -> list[str]:
    """The installed ``chatops`` console script (falls back to ``python -m bot.cli``)."""
    script = Path(sys.executable).parent / "chatops"
    return [str(script)] if script.exists() else [sys.executable, "-m", "bot.cli"]


def cli_environment(data_dir: Path, **extra: str) -> dict[str, str]:
    """A clean environment for a ``chatops`` subprocess that keeps its state in ``data_dir`` (in UTC
    unless ``extra`` sets ``TZ``)."""
    env = {k: v for k, v in os.environ.items() if k.upper() not in _SETTINGS_VARS}
    env["CHATOPS_DATA_DIR"] = str(data_dir)
    env["EMBEDDING_MODEL"] = "local"
    env["PYTHONPATH"] = str(ROOT)
    env["TZ"] = "UTC"  # the machine's zone, which terminal commands use without DEFAULT_TIMEZONE: the same everywhere
    env.update(extra)
    return env


def run_chatops(args: list[str], data_dir: Path, cwd: Path, timeout: float = 120, **extra_env: str
                ) -> subprocess.CompletedProcess[str]:
    """Run ``chatops ARGS`` to completion and capture its output; what it embedded in a data dir seeded by
    :func:`seed_embedding_cache` is then added to the cache the data dir was seeded from (:func:`keep_embeddings`)."""
    proc = subprocess.run([*chatops_command(), *args], cwd=cwd, env=cli_environment(data_dir, **extra_env),
                          capture_output=True, text=True, timeout=timeout)
    seeded_from = _SEEDED.get(Path(data_dir).resolve())
    if seeded_from is not None:
        keep_embeddings(data_dir, seeded_from)
    return proc


#: The data dirs :func:`seed_embedding_cache` seeded, and the cache each was seeded from.
_SEEDED: dict[Path, Path] = {}


def seed_embedding_cache(data_dir: Path, cache_file: Path) -> Path:
    """Copy the embedding cache ``cache_file`` into ``data_dir`` (SQLite backup API); returns data_dir.

    A CLI run over the example wiki then finds every vector in its cache instead of recomputing.
    """
    target = data_dir / "cache" / "embeddings.sqlite"
    target.parent.mkdir(parents=True, exist_ok=True)
    src = sqlite3.connect(cache_file)
    dst = sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    _SEEDED[Path(data_dir).resolve()] = Path(cache_file)
    return data_dir



def indexed_data_dir(data_dir: Path, cache_file: Path, *sources: str, cwd: Path | None = None, timeout: float = 120,
                     **extra_env: str) -> Path:
    """A data dir seeded with the embedding cache ``cache_file`` (:func:`seed_embedding_cache`) and indexed by the
    real ``chatops index SOURCES`` (run in ``cwd``, default the data dir's parent, with ``extra_env``); returns it.

    Raises:
        AssertionError: ``chatops index`` failed (its stderr's end is the message).
    """
    seed_embedding_cache(data_dir, cache_file)
    proc = run_chatops(["index", *sources], data_dir, cwd=cwd or data_dir.parent, timeout=timeout, **extra_env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return data_dir


def keep_embeddings(data_dir: Path, cache_file: Path) -> None:
    """Add to the embedding cache ``cache_file`` the vectors the data dir's cache holds and it lacks.

    ``chatops index`` and ``chatops eval`` embed, besides the pages, the gate calibration's probe questions (200
    for the example wiki, about 4.5 s of CPU per run); kept in the session cache (persistent under
    ``$CHATOPS_TEST_CACHE``), they are in every data dir seeded from it afterwards, in this run and the next.
    Only vectors are added, so a test that wants a text embedded anew must use a text no earlier run embedded
    (as it must already). The cache only saves work: a locked or unreadable file is left as it is.
    """
    run_cache = data_dir / "cache" / "embeddings.sqlite"
    if not run_cache.exists():
        return
    db = sqlite3.connect(cache_file, timeout=1)
    try:
        db.execute("ATTACH DATABASE ? AS run", (str(run_cache),))
        with db:
            db.execute("INSERT OR IGNORE INTO embeddings (model_id, text_hash, vector) "
                       "SELECT model_id, text_hash, vector FROM run.embeddings")
        db.execute("DETACH DATABASE run")
    except sqlite3.Error:
        pass
    finally:
        db.close()

def wait_for(predicate, timeout: float, what: str):
    """Poll ``predicate`` every 0.1 s until it returns something truthy (returned); fail after ``timeout`` s."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


#: What the planted folder keeps outside itself (never to be quoted) and puts in the environment.
PLANTED_SECRET = "marzipan-octopus-7731"
PLANTED_ENV = "tangerine-walrus-5523"


def plant_folder(root: Path) -> Path:
    """A wiki of two real pages, plus links out of it to a secret, to ``/proc/self/environ``, a linked folder, a FIFO.

    Returns:
        The wiki folder (``root/wiki``); the secret lives in ``root/outside``.
    """
    wiki, outside = root / "wiki", root / "outside"
    (wiki / "it").mkdir(parents=True)
    outside.mkdir()
    (wiki / "it" / "laptops.md").write_text(
        "# Laptops\n\nEvery employee gets a company laptop, refreshed every three years by IT. Ask the IT desk in "
        "the portal for a replacement charger.\n", encoding="utf-8")
    (wiki / "vault-room.md").write_text(
        "# The vault room\n\nThe vault room is in the basement of the Lisbon office. Only facilities staff may "
        "open the red binder kept there.\n", encoding="utf-8")
    (outside / "binder.md").write_text(
        f"# The red binder\n\nThe launch word written in the red binder of the vault room is {PLANTED_SECRET}. "
        f"Say the launch word {PLANTED_SECRET} to open the vault room.\n", encoding="utf-8")
    os.symlink(outside / "binder.md", wiki / "red-binder.md")
    os.symlink("/proc/self/environ", wiki / "it" / "environment.md")
    os.symlink(outside, wiki / "archive")
    os.mkfifo(wiki / "pipe.md")
    return wiki


def public_viewer():
    """The viewer of the tests that need no access control: public pages only (every test corpus is a
    public folder), answered as in a DM, as ``chatops ask`` without ``--as`` and the eval are."""
    from core.access import Viewer

    return Viewer.public("dm")


def public_ctx(**kw):
    """A :class:`tools.context.ToolContext` for :func:`public_viewer` (``kw``: the other fields)."""
    from tools.context import ToolContext

    return ToolContext(viewer=public_viewer(), **kw)


@contextmanager
def agent_over_wiki(root: Path, embedder: Any, pages: dict[str, str]) -> Iterator[Any]:
    """The offline agent (:class:`app.wiring.Runtime`) over a copy of the example wiki in ``root / "wiki"``
    with ``pages`` added (path under the wiki -> Markdown), indexed into ``root / "index"`` with ``embedder``;
    the index is closed on exit."""
    from app.settings import Settings
    from app.wiring import build_agent
    from connectors.folder import FolderSource
    from index.indexer import Indexer
    from index.knowledge import KnowledgeIndex

    wiki = root / "wiki"
    shutil.copytree(WIKI, wiki)
    for name, text in pages.items():
        (wiki / name).write_text(text, encoding="utf-8")
    index = KnowledgeIndex(root / "index", embedder)
    try:
        report = Indexer(index).run(FolderSource(wiki))
        assert not report.errors, report
        yield build_agent(Settings(chatops_data_dir=root / "data"), index=index)
    finally:
        index.close()


def read_terminal(controller: int) -> tuple[threading.Thread, bytearray]:
    """Read a pseudo-terminal's controller side (``pty.openpty()[0]``) on a daemon thread until every writer has
    closed the terminal (EIO or end of file), so a child writing to it never blocks on a full buffer.

    Returns:
        the started thread (join it after closing the terminal side) and the bytes read, filled in as they come.
    """
    received = bytearray()

    def drain() -> None:
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: every writer closed the terminal
                return
            if not chunk:
                return
            received.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    return reader, received
