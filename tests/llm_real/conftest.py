"""The real-model tier (``make test-llm``): SmolLM2-135M-Instruct served by llama-cpp-python's
OpenAI-compatible server on 127.0.0.1, and the LLM mode driven through it as production drives any
OpenAI-compatible server (``OPENAI_BASE_URL``, the ``openai`` client).

- ``llm_server``: the server, started once per session from ``$CHATOPS_LLM_PYTHON`` (the ``.venv-llm``
  that ``make test-llm`` builds), ready when ``GET /v1/models`` answers; killed at the end. Without that venv
  the tests skip, except under ``CI=true``, where they fail.
- ``llm_env``: the settings that point the bot at it (``chatops`` subprocesses and ``Settings``).
- ``wiki_data``: a data dir with ``examples/wiki`` indexed by ``chatops index`` (embedding cache seeded).

Every test here carries the ``llm_real`` marker, which ``make test`` deselects (``addopts`` in pyproject.toml).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import WIKI, run_chatops, seed_embedding_cache

from tests.llm_real.realmodel import LLMServer, ServerUnavailable, llm_environment, serve_smollm2


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.llm_real)


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"the real-model tier cannot run under CI: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def llm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LLMServer]:
    """SmolLM2 behind ``python -m llama_cpp.server`` on 127.0.0.1 (a free port), ready; killed at teardown.
    ``$CHATOPS_LLM_BASE_URL``: a server already running instead (its model answering to ``MODEL_ALIAS``)."""
    log_dir = tmp_path_factory.mktemp("llm-server")
    if os.environ.get("CHATOPS_LLM_BASE_URL"):
        yield LLMServer(os.environ["CHATOPS_LLM_BASE_URL"], log_dir / "server.log")
        return
    try:
        with serve_smollm2(log_dir / "server.log") as server:
            yield server
    except ServerUnavailable as exc:
        _unavailable(str(exc))


@pytest.fixture(scope="session")
def llm_env(llm_server: LLMServer) -> dict[str, str]:
    """The environment that points the bot's LLM mode at the server (model names are its alias)."""
    return llm_environment(llm_server)


@pytest.fixture(scope="session")
def wiki_data(tmp_path_factory: pytest.TempPathFactory, embedding_cache_dir: Path, wiki_index) -> Path:
    """A data dir with ``examples/wiki`` indexed through ``chatops index`` (offline: no LLM involved; the
    embedding cache seeded from the session's, which ``wiki_index`` filled)."""
    root = tmp_path_factory.mktemp("llm-wiki")
    data = seed_embedding_cache(root / "data", embedding_cache_dir / "embeddings.sqlite")
    done = run_chatops(["index", f"folder:{WIKI}"], data, cwd=root, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return data
