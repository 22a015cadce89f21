"""A channel's scope (``channels: {C123: {sources: [eng]}}``) inside both stores' retrieval.

The scope rides on the :class:`core.access.Viewer` (:attr:`~core.access.Viewer.sources`) and each
store applies it as one more condition of the access pre-filter, inside the query (Whoosh: a ``Prefix`` on the
``doc_key``; Qdrant: ``MatchAny`` on the payload's ``source``, in local mode a mask of the NumPy mirror), never
as a cut of results already ranked. Run against every store of ``tests/test_contract_stores.py``, the Qdrant
stores on a server (the stand-in) too.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from core.access import Access, Viewer
from core.models import Chunk, content_hash
from index.stores import ChunkStore

from tests.test_contract_stores import KINDS, SERVER_KINDS, StoreKind, store_kind


def chunk(source: str, doc_id: str, ordinal: int, text: str, access: Access | None = None) -> Chunk:
    return Chunk(chunk_id=content_hash(source, doc_id, str(ordinal), text), source=source, doc_id=doc_id,
                 title=doc_id.title(), section_path=("Part",), url=f"https://{source}.example.com/{doc_id}",
                 text=text, ordinal=ordinal, updated_at=datetime(2026, 1, 5, tzinfo=timezone.utc),
                 access=access or Access.everyone())


#: Eight engineering chunks that match the question better than the one handbook chunk.
ENG = [chunk("eng", "deploys", i, f"Deploy freeze rules part {i}: deploy freeze deploy freeze on Fridays.")
       for i in range(8)]
HANDBOOK = [chunk("handbook", "deploys", 0, "The handbook says a deploy freeze applies on public holidays.")]
#: A source whose name is a prefix of another's ("eng" / "eng-private"): the scope must not mix them.
ENG_PRIVATE = [chunk("eng-private", "freeze", 0, "Deploy freeze deploy freeze exceptions for the core team.")]
#: In scope but restricted: the scope never widens access.
ENG_RESTRICTED = [chunk("eng", "oncall", 0, "Deploy freeze deploy freeze pager numbers.",
                        Access.only(["group:eng/oncall"]))]
QUESTION = "deploy freeze fridays holidays"


@pytest.fixture(params=sorted(KINDS) + sorted(SERVER_KINDS))
def kind(request: pytest.FixtureRequest) -> StoreKind:
    return store_kind(request)


@pytest.fixture
def store(kind: StoreKind, tmp_path: Path) -> Iterator[ChunkStore]:
    s = kind.open(tmp_path / "store")
    for chunks in (ENG, HANDBOOK, ENG_PRIVATE, ENG_RESTRICTED):
        kind.write(s, [chunks[0].key], chunks)
    yield s
    s.close()


def sources(hits) -> set[str]:
    return {h.chunk.source for h in hits}


def test_a_scoped_viewer_only_gets_chunks_of_its_sources(kind: StoreKind, store: ChunkStore) -> None:
    q = kind.query(QUESTION)
    assert sources(store.search(q, limit=50, viewer=Viewer.public())) == {"eng", "handbook", "eng-private"}
    assert sources(store.search(q, limit=50, viewer=Viewer.public().scoped(["handbook"]))) == {"handbook"}
    assert sources(store.search(q, limit=50, viewer=Viewer.public().scoped(["eng"]))) == {"eng"}
    both = store.search(q, limit=50, viewer=Viewer.public().scoped(["eng", "handbook"]))
    assert sources(both) == {"eng", "handbook"}


def test_the_scope_runs_inside_the_query_so_limit_in_scope_chunks_come_back(kind: StoreKind,
                                                                            store: ChunkStore) -> None:
    """Nine out-of-scope chunks match better than the one in scope: a top-k cut afterwards would return none."""
    hits = store.search(kind.query(QUESTION), limit=1, viewer=Viewer.public().scoped(["handbook"]))
    assert [h.chunk for h in hits] == HANDBOOK


def test_the_scope_narrows_access_and_never_widens_it(kind: StoreKind, store: ChunkStore) -> None:
    q = kind.query(QUESTION)
    public = store.search(q, limit=50, viewer=Viewer.public().scoped(["eng"]))
    assert "oncall" not in {h.chunk.doc_id for h in public}
    oncall = Viewer.person(["user:ops@example.com", "group:eng/oncall"]).scoped(["eng"])
    assert "oncall" in {h.chunk.doc_id for h in store.search(q, limit=50, viewer=oncall)}
    outside = Viewer.person(["user:ops@example.com", "group:eng/oncall"]).scoped(["handbook"])
    assert sources(store.search(q, limit=50, viewer=outside)) == {"handbook"}


def test_an_empty_or_unknown_scope_finds_nothing(kind: StoreKind, store: ChunkStore) -> None:
    q = kind.query(QUESTION)
    assert store.search(q, limit=50, viewer=Viewer.public().scoped([])) == []
    assert store.search(q, limit=50, viewer=Viewer.public().scoped(["no-such-source"])) == []


def test_the_scope_follows_writes(kind: StoreKind, store: ChunkStore) -> None:
    """What a search remembers (the local mirror of the vectors) keeps each chunk's source through writes."""
    q = kind.query(QUESTION)
    scoped = Viewer.public().scoped(["handbook"])
    assert [h.chunk for h in store.search(q, limit=50, viewer=scoped)] == HANDBOOK  # builds what it caches
    more = [chunk("handbook", "holidays", 0, "Deploy freeze on public holidays and Fridays in December.")]
    kind.write(store, [more[0].key], more)
    assert {h.chunk.doc_id for h in store.search(q, limit=50, viewer=scoped)} == {"deploys", "holidays"}
    store.set_access({HANDBOOK[0].key: Access.only(["group:handbook/hr"])})
    assert [h.chunk.doc_id for h in store.search(q, limit=50, viewer=scoped)] == ["holidays"]
    store.delete([more[0].key])
    assert store.search(q, limit=50, viewer=scoped) == []
    assert sources(store.search(q, limit=50, viewer=Viewer.public().scoped(["eng"]))) == {"eng"}


def test_a_scoped_viewer_has_its_own_cache_key() -> None:
    v = Viewer.public()
    assert v.scoped(None) is v
    assert v.scoped(["eng"]).cache_key() != v.cache_key()
    assert v.scoped(["eng", "hr"]).cache_key() == v.scoped(["hr", "eng"]).cache_key()
    assert v.scoped(["eng", "hr"]).scoped(["hr", "ops"]).sources == frozenset({"hr"})  # a scope only narrows
    assert v.scoped(["eng"]).tokens() == v.tokens()  # the scope is no access right


