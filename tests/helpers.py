"""Helpers shared by the test modules (paths, the CLI subprocess environment, cache seeding)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
WIKI = EXAMPLES / "wiki"
EVAL_FILE = EXAMPLES / "eval.jsonl"
WIKI_PAGES = 13

#: Settings read from the environment that must not leak from the developer's shell into CLI runs.
_SETTINGS_VARS = {
    "CHATOPS_DATA_DIR", "CHATOPS_LOG_LEVEL", "EMBEDDING_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL",
    "QDRANT_URL", "QDRANT_API_KEY", "MIN_CITATIONS", "RELEVANCE_FLOOR", "SINGLE_SOURCE_MIN_COSINE",
    "RRF_K", "RRF_DENSE_WEIGHT", "RRF_BM25_WEIGHT", "MAX_QUESTION_CHARS",
}


def chatops_command() -> list[str]:
    """The installed ``chatops`` console script (falls back to ``python -m bot.cli``)."""
    script = Path(sys.executable).parent / "chatops"
    return [str(script)] if script.exists() else [sys.executable, "-m", "bot.cli"]


def cli_environment(data_dir: Path, **extra: str) -> dict[str, str]:
    """A clean environment for a ``chatops`` subprocess that keeps its state in ``data_dir``."""
    env = {k: v for k, v in os.environ.items() if k.upper() not in _SETTINGS_VARS}
    env["CHATOPS_DATA_DIR"] = str(data_dir)
    env["EMBEDDING_MODEL"] = "local"
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


def run_chatops(args: list[str], data_dir: Path, cwd: Path, timeout: float = 120, **extra_env: str
                ) -> subprocess.CompletedProcess[str]:
    """Run ``chatops ARGS`` to completion and capture its output."""
    return subprocess.run([*chatops_command(), *args], cwd=cwd, env=cli_environment(data_dir, **extra_env),
                          capture_output=True, text=True, timeout=timeout)


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
    return data_dir
