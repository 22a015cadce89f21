"""Shared fixtures for the chatops test suite.

- ``embedder``: the real ONNX all-MiniLM-L6-v2 embedder, loaded once per session, behind the
  on-disk embedding cache (``$CHATOPS_TEST_CACHE/embeddings.sqlite`` when that variable is set,
  so later runs skip the model; a session temporary folder otherwise).
- ``session_wiki`` / ``wiki_index``: one copy of ``examples/wiki`` and one real index of it
  (Whoosh + local-mode Qdrant + manifest), built once and shared by read-only tests.
- ``wiki_copy`` / ``index_factory``: per-test copies of the wiki and indexes in ``tmp_path`` for
  tests that change pages; every index opened through the factory is closed at teardown.
- ``qdrant_server``: a Qdrant stand-in (``tests/qdrant_standin.py``) in memory and strict (a filter on a
  field without a payload index is refused), for the stores' server code path (``QDRANT_URL``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from index.embeddings import CachedEmbedder, EmbeddingCache, OnnxMiniLMEmbedder
from connectors.folder import FolderSource
from index.knowledge import KnowledgeIndex
from index.indexer import Indexer

from helpers import WIKI, WIKI_PAGES
from qdrant_standin import QdrantStandIn


@pytest.fixture(scope="session")
def embedding_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the session's embedding cache lives (``$CHATOPS_TEST_CACHE`` or a session tmp dir)."""
    configured = os.environ.get("CHATOPS_TEST_CACHE")
    if configured:
        path = Path(configured).expanduser()
        path.mkdir(parents=True, exist_ok=True)
        return path
    return tmp_path_factory.mktemp("embedding-cache")


@pytest.fixture(scope="session")
def embedder(embedding_cache_dir: Path) -> Iterator[CachedEmbedder]:
    """The real ONNX embedder, loaded once, with the persistent embedding cache."""
    emb = CachedEmbedder(OnnxMiniLMEmbedder(), EmbeddingCache(embedding_cache_dir / "embeddings.sqlite"))
    yield emb
    emb.cache.close()


@pytest.fixture(scope="session")
def session_wiki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One read-only copy of examples/wiki for the whole session."""
    dest = tmp_path_factory.mktemp("session") / "wiki"
    shutil.copytree(WIKI, dest)
    return dest


@pytest.fixture(scope="session")
def wiki_index(tmp_path_factory: pytest.TempPathFactory, session_wiki: Path,
               embedder: CachedEmbedder) -> Iterator[KnowledgeIndex]:
    """ONE index of the session wiki copy, shared by read-only tests (agent, search, cli)."""
    index = KnowledgeIndex(tmp_path_factory.mktemp("session-index") / "index", embedder)
    report = Indexer(index).run(FolderSource(session_wiki))
    assert report.added == WIKI_PAGES and not report.errors, report
    yield index
    index.close()


@pytest.fixture
def wiki_copy(tmp_path: Path) -> Path:
    """A private copy of examples/wiki that the test may change."""
    dest = tmp_path / "wiki"
    shutil.copytree(WIKI, dest)
    return dest


@pytest.fixture
def index_factory(tmp_path: Path, embedder: CachedEmbedder) -> Iterator[Callable[..., KnowledgeIndex]]:
    """Open a :class:`KnowledgeIndex` (default ``tmp_path/index``); all are closed at teardown."""
    opened: list[KnowledgeIndex] = []

    def open_index(path: Path | None = None) -> KnowledgeIndex:
        index = KnowledgeIndex(path or tmp_path / "index", embedder)
        opened.append(index)
        return index

    yield open_index
    for index in opened:
        index.close()


@pytest.fixture
def qdrant_server() -> Iterator[QdrantStandIn]:
    """A Qdrant stand-in for the test: in memory, strict; its ``url`` is what ``QDRANT_URL`` would be."""
    with QdrantStandIn(strict=True) as server:
        yield server
