"""The chunk-store contract (:class:`index.stores.base.ChunkStore`), one suite run against every store.

Stores: :class:`WhooshStore` (BM25, queried with text), :class:`QdrantStore` in local mode on
disk (queried with a vector), :class:`QdrantSparseStore` in local mode on disk (BM25 as a sparse
vector in a collection of its own, queried with text) and the shared index's one collection,
:class:`QdrantHybridStore` in local mode on disk, twice: as the dense store (queried with a vector) and as
its keyword view (``store.keyword``, queried with text), written as :class:`~index.knowledge.KnowledgeIndex`
writes it (:class:`KeywordFace`). The Qdrant stores run again with ``url=`` a Qdrant stand-in
(``tests/standins/qdrant/``, strict): the server code path of ``QDRANT_URL``, which creates payload indexes
and filters inside the queries instead of the local NumPy mirror; there a store's "path" names its
collection (a reopen is the same collection). Vectors come from a small hashed bag of words (:func:`embed`),
so a query sharing a chunk's words lands nearest to it: the test is about the store, not the model.

Every store: conforms to the protocol (``isinstance``); after ``replace`` a search finds the chunk,
every field intact; ``replace`` again with the same keys does not duplicate and drops chunks a new
version no longer has; ``delete`` removes a document's chunks (and only those), ``delete_chunks``
single chunks; ``chunk_ids``, ``count`` and ``chunks`` agree; a store reopened from disk holds
what was written; ``clear`` empties it; it has what the retrieval engine needs of its role
(:mod:`index.retrieval.ports`), and a keyword store's document frequencies agree read alone and together.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core.access import Access, Viewer
from core.models import Chunk, content_hash
from index.retrieval import DenseStore, KeywordStore, PairStore
from index.stores import ChunkStore, QdrantHybridStore, QdrantSparseStore, QdrantStore, WhooshStore

DIM = 64


def embed(text: str) -> np.ndarray:
    """A unit vector of ``text``'s hashed words (``DIM`` buckets)."""
    v = np.zeros(DIM, dtype=np.float32)
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        v[int(hashlib.sha1(word.encode()).hexdigest(), 16) % DIM] += 1.0
    n = float(np.linalg.norm(v))
    return v / n if n else v


def chunk(doc_id: str, ordinal: int, text: str, *, access: Access | None = None) -> Chunk:
    return Chunk(chunk_id=content_hash("wiki", doc_id, str(ordinal), text), source="wiki", doc_id=doc_id,
                 title=doc_id.title(), section_path=("Policies", f"Part {ordinal}"),
                 url=f"https://wiki.example.com/{doc_id}#part-{ordinal}", text=text, ordinal=ordinal,
                 updated_at=datetime(2026, 1, 5, 10, 30, tzinfo=timezone.utc), access=access or Access.everyone())


BIKES = [chunk("parking", 0, "Bikes are parked in the courtyard rack between seven and nine."),
         chunk("parking", 1, "Cars need a permit from the facilities desk.", access=Access.only(["group:wiki/staff"]))]
PRINTER = [chunk("printer", 0, "The third floor printer is called Ada and needs a badge.")]


#: A member of ``group:wiki/staff``: reads every chunk above.
STAFF = Viewer.person(["user:sam@example.com", "group:wiki/staff"])


@dataclass
class StoreKind:
    """How to open one kind of store at a path, and how to ask it a question."""

    name: str
    open: Callable[[Path], ChunkStore]
    query: Callable[[str], Any]
    vectors: bool

    def write(self, store: ChunkStore, keys: list[str], chunks: list[Chunk]) -> None:
        vectors = np.stack([embed(c.text) for c in chunks]) if chunks and self.vectors else None
        store.replace(keys, chunks, vectors)


class KeywordFace:
    """A :class:`QdrantHybridStore`'s keyword view as :class:`~index.knowledge.KnowledgeIndex` uses it: every write
    goes to the view (which writes nothing: the store's write holds both vectors) and then to the store, with
    the chunks' vectors; every read goes to the view."""

    def __init__(self, path: Path, url: str | None = None) -> None:
        self.store = QdrantHybridStore(DIM, url=url, collection=path.name) if url else QdrantHybridStore(DIM, path=path)
        self.view = self.store.keyword

    def replace(self, keys, chunks, vectors=None) -> None:
        self.view.replace(keys, chunks, vectors)
        self.store.replace(keys, chunks, np.stack([embed(c.text) for c in chunks]) if chunks else None)

    def delete(self, keys) -> None:
        self.view.delete(keys)
        self.store.delete(keys)

    def delete_chunks(self, ids) -> None:
        ids = list(ids)
        self.view.delete_chunks(ids)
        self.store.delete_chunks(ids)

    def set_access(self, access) -> int:
        n = self.view.set_access(access)
        self.store.set_access(access)
        return n

    def clear(self) -> None:
        self.view.clear()
        self.store.clear()

    def close(self) -> None:
        self.view.close()
        self.store.close()

    def __getattr__(self, name: str):
        return getattr(self.view, name)


KINDS = {
    "whoosh": StoreKind("whoosh", lambda p: WhooshStore(p), lambda text: text, vectors=False),
    "qdrant-local": StoreKind("qdrant-local", lambda p: QdrantStore(DIM, path=p), embed, vectors=True),
    "qdrant-sparse": StoreKind("qdrant-sparse", lambda p: QdrantSparseStore(path=p), lambda text: text, vectors=False),
    "qdrant-hybrid": StoreKind("qdrant-hybrid", lambda p: QdrantHybridStore(DIM, path=p), embed, vectors=True),
    "qdrant-hybrid-keyword": StoreKind("qdrant-hybrid-keyword", KeywordFace, lambda text: text, vectors=False),
}

#: The Qdrant stores on a server (the stand-in at the given URL); a path's last part names the collection.
SERVER_KINDS: dict[str, Callable[[str], StoreKind]] = {
    "qdrant-server": lambda url: StoreKind("qdrant-server", lambda p: QdrantStore(DIM, url=url, collection=p.name),
                                           embed, vectors=True),
    "qdrant-sparse-server": lambda url: StoreKind(
        "qdrant-sparse-server", lambda p: QdrantSparseStore(url=url, collection=p.name), lambda text: text,
        vectors=False),
    "qdrant-hybrid-server": lambda url: StoreKind(
        "qdrant-hybrid-server", lambda p: QdrantHybridStore(DIM, url=url, collection=p.name), embed, vectors=True),
    "qdrant-hybrid-keyword-server": lambda url: StoreKind(
        "qdrant-hybrid-keyword-server", lambda p: KeywordFace(p, url), lambda text: text, vectors=False),
}


def store_kind(request: pytest.FixtureRequest) -> StoreKind:
    """The kind named by ``request.param``; a server kind starts the ``qdrant_server`` stand-in for the test."""
    if request.param in KINDS:
        return KINDS[request.param]
    return SERVER_KINDS[request.param](request.getfixturevalue("qdrant_server").url)


@pytest.fixture(params=sorted(KINDS) + sorted(SERVER_KINDS))
def kind(request: pytest.FixtureRequest) -> StoreKind:
    return store_kind(request)


@pytest.fixture
def opened(kind: StoreKind, tmp_path: Path) -> Iterator[Callable[[], ChunkStore]]:
    """Opens the kind's store at ``tmp_path/store`` (again after a close: a reopen); all closed at teardown."""
    stores: list[ChunkStore] = []

    def open_store() -> ChunkStore:
        store = kind.open(tmp_path / "store")
        stores.append(store)
        return store

    yield open_store
    for store in stores:
        store.close()


def test_a_store_conforms_to_the_protocol(opened) -> None:
    store = opened()
    assert isinstance(store, ChunkStore)
    assert store.count == 0 and store.chunk_ids() == set() and store.damage is None
    if isinstance(store, KeywordFace):
        assert isinstance(store.view, ChunkStore)  # the view itself, not only the test's face of it


def test_after_replace_a_search_finds_the_chunk_with_every_field(kind: StoreKind, opened) -> None:
    store = opened()
    kind.write(store, ["wiki:parking"], BIKES)
    kind.write(store, ["wiki:printer"], PRINTER)
    hits = store.search(kind.query("where are bikes parked courtyard rack"), limit=3, viewer=STAFF)
    assert hits and hits[0].chunk == BIKES[0], hits
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[0].score > 0
    printer = store.search(kind.query("third floor printer badge"), limit=1, viewer=STAFF)
    assert [h.chunk for h in printer] == PRINTER


def test_replace_again_does_not_duplicate_and_drops_what_the_new_version_lacks(kind: StoreKind, opened) -> None:
    store = opened()
    kind.write(store, ["wiki:parking"], BIKES)
    kind.write(store, ["wiki:printer"], PRINTER)
    kind.write(store, ["wiki:parking"], BIKES)
    assert store.count == 3 and store.chunk_ids() == {c.chunk_id for c in BIKES + PRINTER}
    hits = store.search(kind.query("bikes courtyard rack"), limit=10, viewer=STAFF)
    assert [h.chunk.chunk_id for h in hits].count(BIKES[0].chunk_id) == 1
    new = [chunk("parking", 0, "Bikes now go to the basement garage.")]
    kind.write(store, ["wiki:parking"], new)
    assert store.chunk_ids() == {new[0].chunk_id, PRINTER[0].chunk_id} and store.count == 2


def test_delete_removes_a_documents_chunks_and_only_those(kind: StoreKind, opened) -> None:
    store = opened()
    kind.write(store, ["wiki:parking"], BIKES)
    kind.write(store, ["wiki:printer"], PRINTER)
    store.delete(["wiki:parking", "wiki:never-indexed"])
    assert store.chunk_ids() == {PRINTER[0].chunk_id} and store.count == 1
    assert all(h.chunk.doc_id != "parking" for h in store.search(kind.query("bikes courtyard rack"), limit=5, viewer=STAFF))
    store.delete([])
    store.delete_chunks([PRINTER[0].chunk_id, "f" * 64])
    assert store.chunk_ids() == set() and store.count == 0


def test_ids_count_and_chunks_agree(kind: StoreKind, opened) -> None:
    store = opened()
    kind.write(store, ["wiki:parking", "wiki:printer"], BIKES + PRINTER)
    ids = store.chunk_ids()
    assert ids == {c.chunk_id for c in BIKES + PRINTER} and store.count == len(ids) == 3
    got = store.chunks([*sorted(ids), "0" * 64])
    assert got == {c.chunk_id: c for c in BIKES + PRINTER}


def test_a_reopened_store_holds_what_was_written(kind: StoreKind, opened) -> None:
    store = opened()
    kind.write(store, ["wiki:parking"], BIKES)
    kind.write(store, ["wiki:printer"], PRINTER)
    store.delete(["wiki:printer"])
    store.close()
    again = opened()
    assert again.chunk_ids() == {c.chunk_id for c in BIKES} and again.count == 2
    hits = again.search(kind.query("where are bikes parked courtyard rack"), limit=1, viewer=STAFF)
    assert [h.chunk for h in hits] == [BIKES[0]]


def test_clear_empties_the_store(kind: StoreKind, opened) -> None:
    store = opened()
    kind.write(store, ["wiki:parking"], BIKES)
    store.clear()
    assert store.count == 0 and store.chunk_ids() == set()
    assert store.search(kind.query("bikes courtyard"), limit=3, viewer=STAFF) == []


def test_a_vector_store_refuses_chunks_without_vectors(kind: StoreKind, opened) -> None:
    store = opened()
    if kind.vectors:
        with pytest.raises(ValueError, match="vector"):
            store.replace(["wiki:parking"], BIKES, None)
        assert store.count == 0
    else:
        store.replace(["wiki:parking"], BIKES, None)  # BM25 keeps no vectors
        assert store.count == 2



def test_a_store_plays_its_role_in_the_retrieval_engine(kind: StoreKind, opened) -> None:
    store = opened()
    role = DenseStore if kind.vectors else KeywordStore
    assert isinstance(store, role), f"{kind.name} lacks part of {role.__name__}"
    assert isinstance(store, PairStore) == (kind.name.startswith("qdrant-hybrid") and kind.vectors)


def test_a_keyword_store_gives_the_same_document_frequencies_one_by_one_and_together(kind: StoreKind,
                                                                                      opened) -> None:
    if kind.vectors:
        pytest.skip("a vector store keeps no terms")
    store = opened()
    kind.write(store, ["wiki:parking"], BIKES)
    terms = store.analyze("bikes parked in the courtyard need a permit from the printer")
    together = store.doc_frequencies(terms)
    assert together == {t: store.doc_frequency(t) for t in terms}
    (bikes,), (printer,) = store.analyze("bikes"), store.analyze("printer")
    assert together[bikes] == 1 and together[printer] == 0 and store.doc_count == 2
    kind.write(store, ["wiki:printer"], PRINTER)  # a write shows in the next read, together as alone
    assert store.doc_frequencies([printer, bikes]) == {printer: 1, bikes: 1} and store.doc_count == 3


# -- access: a pre-filter inside each store's query (issue 11) ---------------------------------------------
HR = Access.only(["group:wiki/hr team"])  # a group name with a space stays one term
SECRET = [chunk("salaries", i, f"Bikes courtyard rack salary band {i} is confidential.", access=HR) for i in range(12)]
UNRESOLVED = [chunk("mystery", 0, "Bikes courtyard rack notes whose permissions could not be read.",
                    access=Access.nobody("HTTP 403 on the restrictions"))]
OUTSIDERS = [Viewer.public(), Viewer.person(["user:olga@example.com", "group:wiki/staff"]),
             Viewer(frozenset(["group:wiki/hr team"]), public_only=True)]  # HR member, but in a channel
HR_READER = Viewer.person(["user:hana@example.com", "group:wiki/HR Team"])


def test_a_restricted_chunk_is_never_a_candidate_for_a_viewer_outside_its_principals(kind: StoreKind, opened) -> None:
    store = opened()
    kind.write(store, ["wiki:parking"], BIKES)
    kind.write(store, ["wiki:salaries"], SECRET)
    for viewer in OUTSIDERS:
        hits = store.search(kind.query("bikes courtyard rack salary band confidential"), limit=50, viewer=viewer)
        assert hits and not [h for h in hits if h.chunk.doc_id == "salaries"], (viewer, hits)
    mine = store.search(kind.query("bikes courtyard rack salary band confidential"), limit=50, viewer=HR_READER)
    assert {h.chunk.chunk_id for h in mine if h.chunk.doc_id == "salaries"} == {c.chunk_id for c in SECRET}
    assert all(h.chunk.access == HR for h in mine if h.chunk.doc_id == "salaries")


def test_the_filter_runs_inside_the_query_so_limit_readable_chunks_come_back(kind: StoreKind, opened) -> None:
    """Twelve restricted chunks match better than the public one: a top-k cut afterwards would return nothing."""
    store = opened()
    kind.write(store, ["wiki:salaries"], SECRET)
    kind.write(store, ["wiki:parking"], BIKES)
    hits = store.search(kind.query("salary band confidential bikes courtyard rack"), limit=1, viewer=Viewer.public())
    assert [h.chunk for h in hits] == [BIKES[0]]


def test_a_reader_gets_the_same_ranking_and_scores_as_without_the_filter(kind: StoreKind, opened, tmp_path) -> None:
    store = opened()
    kind.write(store, ["wiki:parking"], BIKES)
    kind.write(store, ["wiki:salaries"], SECRET)
    open_all = kind.open(tmp_path / "everything-public")
    try:
        kind.write(open_all, ["wiki:parking"], [chunk(c.doc_id, c.ordinal, c.text) for c in BIKES])
        kind.write(open_all, ["wiki:salaries"], [chunk(c.doc_id, c.ordinal, c.text) for c in SECRET])
        q = kind.query("bikes courtyard rack salary band confidential")
        reader = [(h.chunk.chunk_id, round(h.score, 5)) for h in store.search(q, limit=8, viewer=STAFF_AND_HR)]
        unfiltered = [(h.chunk.chunk_id, round(h.score, 5)) for h in open_all.search(q, limit=8, viewer=Viewer.public())]
        assert reader == unfiltered and any(cid in {c.chunk_id for c in SECRET} for cid, _ in reader)
    finally:
        open_all.close()


STAFF_AND_HR = Viewer.person(["group:wiki/staff", "group:wiki/hr team"])


def test_an_unresolved_chunk_is_readable_by_nobody(kind: StoreKind, opened) -> None:
    store = opened()
    kind.write(store, ["wiki:mystery"], UNRESOLVED)
    kind.write(store, ["wiki:parking"], BIKES)
    everyone = Viewer.person(["group:wiki/staff", "group:wiki/hr team", "user:hana@example.com"])
    for viewer in [*OUTSIDERS, everyone]:
        hits = store.search(kind.query("bikes courtyard rack notes permissions"), limit=50, viewer=viewer)
        assert all(h.chunk.doc_id != "mystery" for h in hits), hits
    assert store.chunks([UNRESOLVED[0].chunk_id])[UNRESOLVED[0].chunk_id].access == UNRESOLVED[0].access


def test_set_access_changes_who_finds_a_chunk_and_nothing_else(kind: StoreKind, opened) -> None:
    store = opened()
    kind.write(store, ["wiki:parking"], BIKES)
    kind.write(store, ["wiki:salaries"], SECRET)
    q = kind.query("salary band confidential")
    assert not [h for h in store.search(q, limit=50, viewer=Viewer.public()) if h.chunk.doc_id == "salaries"]
    before = store.chunks(c.chunk_id for c in SECRET)
    assert store.set_access({"wiki:salaries": Access.everyone(), "wiki:unknown": Access.everyone()}) == len(SECRET)
    public = store.search(q, limit=50, viewer=Viewer.public())
    assert {h.chunk.chunk_id for h in public if h.chunk.doc_id == "salaries"} == {c.chunk_id for c in SECRET}
    after = store.chunks(c.chunk_id for c in SECRET)
    assert {k: (c.text, c.title, c.section_path, c.url) for k, c in after.items()} == \
        {k: (c.text, c.title, c.section_path, c.url) for k, c in before.items()}
    assert all(c.access == Access.everyone() for c in after.values()) and store.count == len(BIKES) + len(SECRET)
    store.set_access({"wiki:salaries": Access.nobody("the restrictions answered 403")})
    assert not [h for h in store.search(q, limit=50, viewer=STAFF_AND_HR) if h.chunk.doc_id == "salaries"]


def test_what_a_search_remembers_about_readable_chunks_follows_every_write(kind: StoreKind, opened) -> None:
    """The access pre-filter's remembered state (Whoosh: the readable documents per token set and
    snapshot; local Qdrant: the NumPy mirror) changes with each write: a viewer who searched before a
    write sees its effect on the very next search, for re-written, re-permissioned and deleted pages."""
    store = opened()
    kind.write(store, ["wiki:parking"], BIKES)
    kind.write(store, ["wiki:salaries"], SECRET)
    q = kind.query("salary band confidential bikes courtyard")
    ids = lambda viewer: {h.chunk.doc_id for h in store.search(q, limit=50, viewer=viewer)}  # noqa: E731
    assert ids(Viewer.public()) == {"parking"} and ids(HR_READER) == {"parking", "salaries"}
    kind.write(store, ["wiki:salaries"], [chunk(c.doc_id, c.ordinal, c.text) for c in SECRET])  # now public
    assert ids(Viewer.public()) == {"parking", "salaries"}
    store.set_access({"wiki:salaries": HR})
    assert ids(Viewer.public()) == {"parking"} and ids(HR_READER) == {"parking", "salaries"}
    store.delete(["wiki:salaries"])
    assert ids(HR_READER) == {"parking"}
    kind.write(store, ["wiki:parking"], [chunk("parking", 0, BIKES[0].text, access=HR)])
    assert ids(Viewer.public()) == set() and ids(HR_READER) == {"parking"}


def test_a_search_without_a_viewer_raises(kind: StoreKind, opened) -> None:
    store = opened()
    kind.write(store, ["wiki:parking"], BIKES)
    with pytest.raises(ValueError, match="access context"):
        store.search(kind.query("bikes"), limit=3, viewer=None)  # type: ignore[arg-type]


def test_a_record_stored_before_access_control_is_readable_by_nobody() -> None:
    from index.stores.records import chunk_from_record, chunk_to_record

    rec = chunk_to_record(BIKES[0])
    legacy = {k: v for k, v in rec.items() if not k.startswith("access")} | {"acl": ""}
    assert chunk_from_record(rec) == BIKES[0]
    assert not chunk_from_record(legacy).access.tokens() and chunk_from_record(legacy).access.unresolved
