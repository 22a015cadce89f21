"""The chunk-store contract (:class:`index.stores.base.ChunkStore`), one suite run against every store.

Stores: :class:`WhooshStore` (BM25, queried with text) and :class:`QdrantStore` in local mode on
disk (queried with a vector). Vectors come from a small hashed bag of words (:func:`embed`), so a
query sharing a chunk's words lands nearest to it: the test is about the store, not the model.
(No test here starts a Qdrant server; ``QDRANT_URL`` is the same client code over HTTP.)

Every store: conforms to the protocol (``isinstance``); after ``replace`` a search finds the chunk,
every field intact; ``replace`` again with the same keys does not duplicate and drops chunks a new
version no longer has; ``delete`` removes a document's chunks (and only those), ``delete_chunks``
single chunks; ``chunk_ids``, ``count`` and ``chunks`` agree; a store reopened from disk holds
what was written; ``clear`` empties it.
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

from connectors.models import Chunk, content_hash
from index.stores import ChunkStore, QdrantStore, WhooshStore

DIM = 64


def embed(text: str) -> np.ndarray:
    """A unit vector of ``text``'s hashed words (``DIM`` buckets)."""
    v = np.zeros(DIM, dtype=np.float32)
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        v[int(hashlib.sha1(word.encode()).hexdigest(), 16) % DIM] += 1.0
    n = float(np.linalg.norm(v))
    return v / n if n else v


def chunk(doc_id: str, ordinal: int, text: str, *, acl: tuple[str, ...] = ()) -> Chunk:
    return Chunk(chunk_id=content_hash("wiki", doc_id, str(ordinal), text), source="wiki", doc_id=doc_id,
                 title=doc_id.title(), section_path=("Policies", f"Part {ordinal}"),
                 url=f"https://wiki.example.com/{doc_id}#part-{ordinal}", text=text, ordinal=ordinal,
                 updated_at=datetime(2026, 1, 5, 10, 30, tzinfo=timezone.utc), acl=acl)


BIKES = [chunk("parking", 0, "Bikes are parked in the courtyard rack between seven and nine."),
         chunk("parking", 1, "Cars need a permit from the facilities desk.", acl=("group:staff",))]
PRINTER = [chunk("printer", 0, "The third floor printer is called Ada and needs a badge.")]


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


KINDS = {
    "whoosh": StoreKind("whoosh", lambda p: WhooshStore(p), lambda text: text, vectors=False),
    "qdrant-local": StoreKind("qdrant-local", lambda p: QdrantStore(DIM, path=p), embed, vectors=True),
}


@pytest.fixture(params=sorted(KINDS))
def kind(request: pytest.FixtureRequest) -> StoreKind:
    return KINDS[request.param]


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


def test_after_replace_a_search_finds_the_chunk_with_every_field(kind: StoreKind, opened) -> None:
    store = opened()
    kind.write(store, ["wiki:parking"], BIKES)
    kind.write(store, ["wiki:printer"], PRINTER)
    hits = store.search(kind.query("where are bikes parked courtyard rack"), limit=3)
    assert hits and hits[0].chunk == BIKES[0], hits
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[0].score > 0
    printer = store.search(kind.query("third floor printer badge"), limit=1)
    assert [h.chunk for h in printer] == PRINTER


def test_replace_again_does_not_duplicate_and_drops_what_the_new_version_lacks(kind: StoreKind, opened) -> None:
    store = opened()
    kind.write(store, ["wiki:parking"], BIKES)
    kind.write(store, ["wiki:printer"], PRINTER)
    kind.write(store, ["wiki:parking"], BIKES)
    assert store.count == 3 and store.chunk_ids() == {c.chunk_id for c in BIKES + PRINTER}
    hits = store.search(kind.query("bikes courtyard rack"), limit=10)
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
    assert all(h.chunk.doc_id != "parking" for h in store.search(kind.query("bikes courtyard rack"), limit=5))
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
    hits = again.search(kind.query("where are bikes parked courtyard rack"), limit=1)
    assert [h.chunk for h in hits] == [BIKES[0]]


def test_clear_empties_the_store(kind: StoreKind, opened) -> None:
    store = opened()
    kind.write(store, ["wiki:parking"], BIKES)
    store.clear()
    assert store.count == 0 and store.chunk_ids() == set()
    assert store.search(kind.query("bikes courtyard"), limit=3) == []


def test_a_vector_store_refuses_chunks_without_vectors(kind: StoreKind, opened) -> None:
    store = opened()
    if kind.vectors:
        with pytest.raises(ValueError, match="vector"):
            store.replace(["wiki:parking"], BIKES, None)
        assert store.count == 0
    else:
        store.replace(["wiki:parking"], BIKES, None)  # BM25 keeps no vectors
        assert store.count == 2
