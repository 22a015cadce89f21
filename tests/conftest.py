"""Shared fixtures for the chatops test suite.

- ``embedder``: the real ONNX all-MiniLM-L6-v2 embedder, loaded once per session, behind the
  on-disk embedding cache (``$CHATOPS_TEST_CACHE/embeddings.sqlite`` when that variable is set,
  so later runs skip the model; a session temporary folder otherwise).
- ``session_wiki`` / ``wiki_index``: one copy of ``examples/wiki`` and one real index of it
  (Whoosh + local-mode Qdrant + manifest), built once and shared by read-only tests.
- ``wiki_copy`` / ``index_factory``: per-test copies of the wiki and indexes in ``tmp_path`` for
  tests that change pages; every index opened through the factory is closed at teardown.
- ``qdrant_server``: a Qdrant stand-in (``tests/standins/qdrant/``) in memory and strict (a filter on a
  field without a payload index is refused), for the stores' server code path (``QDRANT_URL``).

Running in parallel (``make test`` runs ``pytest -n 2 --dist loadfile``, pytest-xdist; modules ordered as
:func:`pytest_collection_modifyitems` says): every worker is its
own process with its own session fixtures, ``tmp_path`` and PostgreSQL databases (random names); servers
listen on ports the system picks; a module's tests all run on one worker, so what a module builds once
(a server, an index, a CLI data dir) is built once. Each worker keeps its embedding cache in a folder of
its own (``$CHATOPS_TEST_CACHE/gw0``...), so no two processes write one SQLite file (a locked write would be
skipped, a locked read computed again). (``--dist loadgroup`` would deal out single tests, but it cannot
group them on pytest 9.2: pytest-xdist issue 1386.)

The ``server`` marker (``make test-fast`` leaves these tests out) is put on every test that uses one of
:data:`SERVER_FIXTURES`; modules whose tests start processes or servers carry it in ``pytestmark``, and
the PostgreSQL cases of parametrized fixtures in their ``pytest.param`` marks.
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

from tests.helpers import WIKI, WIKI_PAGES
from tests.standins.qdrant import QdrantStandIn


#: Fixtures that start or reach a server outside the test process; a test using one is marked ``server``.
SERVER_FIXTURES = frozenset({"pg_url"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``server`` every test that uses one of :data:`SERVER_FIXTURES` (directly or through a fixture),
    then run the modules with ``corpus`` tests first, those with ``server`` tests next, the rest after
    (stable: each module's tests keep their order).

    The order is for ``make test``'s workers (``--dist loadfile --no-loadscope-reorder`` deals out whole
    modules in this order): the long modules start first, so no worker is left with one at the end while
    the other idles.
    """
    for item in items:
        if SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.server)
    rank: dict[str, int] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        kind = 0 if item.get_closest_marker("corpus") else 1 if item.get_closest_marker("server") else 2
        rank[module] = min(rank.get(module, 2), kind)
    items.sort(key=lambda item: rank[item.nodeid.split("::", 1)[0]])


@pytest.fixture(scope="session")
def embedding_cache_dir(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """Where this process's embedding cache lives: ``$CHATOPS_TEST_CACHE`` (its subfolder named after the
    xdist worker, ``gw0``..., when running in parallel) or a session tmp dir."""
    configured = os.environ.get("CHATOPS_TEST_CACHE")
    if configured:
        path = Path(configured).expanduser()
        if worker_id != "master":
            path = path / worker_id
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
