"""The Qdrant stand-in (``tests/standins/qdrant/``) and the stores' server code path (``QDRANT_URL``) through it.

The stand-in: the real ``QdrantClient(url=...)`` talks to it without a warning (its version check passes);
collection info shows the vectors, sparse vectors and payload indexes a server would; queries with two
prefetches and fusion, and query batches with a dense and a sparse request, answer what local mode answers
for the same calls (the same engine behind Qdrant's wire format); errors come with Qdrant's statuses and
envelope; the API key is enforced as a server does; faults and the request log work in process and in a
separate process, which two client processes share.

The stores on a server: a search sends one ``points/query`` with the access filter inside it; a wrong or
missing API key, an injected 500 and a dropped connection give :class:`IndexUnavailableError` naming the
server and what to check (not a hang, not a traceback, not damage); two stores opening the same new
collection at once both open it (the second create answers 409).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

import httpx
import numpy as np
import pytest
from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import UnexpectedResponse

from core.access import Access, Viewer
from core.errors import IndexError_, IndexUnavailableError
from core.models import Chunk, content_hash
from index.stores import QdrantSparseStore, QdrantStore

from tests.helpers import ROOT, wait_for
from tests.standins.qdrant import QdrantStandIn, QdrantStandInProcess

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

DIM = 4


def chunk(doc_id: str, text: str, access: Access | None = None) -> Chunk:
    return Chunk(chunk_id=content_hash("wiki", doc_id, "0", text), source="wiki", doc_id=doc_id, title=doc_id.title(),
                 section_path=("Part",), url=f"https://wiki.example.com/{doc_id}", text=text, ordinal=0,
                 updated_at=datetime(2026, 1, 5, tzinfo=timezone.utc), access=access or Access.everyone())


BIKES = chunk("bikes", "Bikes are parked in the courtyard rack.")
VECTOR = np.array([[1.0, 0.0, 0.0, 0.0]], dtype=np.float32)


# -- the stand-in speaks Qdrant's REST ------------------------------------------------------------------------
def test_the_real_client_talks_to_it_and_its_version_check_passes_quietly(qdrant_server: QdrantStandIn) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client = QdrantClient(url=qdrant_server.url, timeout=5)
        assert client.collection_exists("nothing") is False
        wait_for(lambda: qdrant_server.count(r"^/$", "GET"), 5, "the client's version check")
        time.sleep(0.05)  # the warning, if any, comes right after the answer
        client.close()
    assert not [w for w in caught if "version" in str(w.message)], [str(w.message) for w in caught]
    assert httpx.get(qdrant_server.url).json()["version"] == importlib.metadata.version("qdrant-client")


def _sparse_collection(client: QdrantClient, name: str = "mixed") -> None:
    client.create_collection(name, vectors_config={"dense": models.VectorParams(size=DIM, distance=models.Distance.COSINE)},
                             sparse_vectors_config={"bm25": models.SparseVectorParams(modifier=models.Modifier.IDF)})


def test_collection_info_shows_vectors_sparse_vectors_and_payload_indexes(tmp_path: Path) -> None:
    with QdrantStandIn(tmp_path / "q") as server:
        client = QdrantClient(url=server.url, timeout=5)
        _sparse_collection(client)
        client.create_payload_index("mixed", "access", models.PayloadSchemaType.KEYWORD)
        client.upsert("mixed", points=[models.PointStruct(id=1, vector={"dense": [1, 0, 0, 0]}, payload={"access": ["a"]}),
                                       models.PointStruct(id=2, vector={"dense": [0, 1, 0, 0]}, payload={})])
        info = client.get_collection("mixed")
        assert info.config.params.vectors["dense"].size == DIM
        assert info.config.params.sparse_vectors["bm25"].modifier == models.Modifier.IDF
        assert {k: (v.data_type, v.points) for k, v in info.payload_schema.items()} == \
            {"access": (models.PayloadSchemaType.KEYWORD, 1)}
        assert info.points_count == 2
        client.close()
    with QdrantStandIn(tmp_path / "q") as again:  # a restarted stand-in on the same folder
        client = QdrantClient(url=again.url, timeout=5)
        assert client.count("mixed").count == 2 and set(client.get_collection("mixed").payload_schema) == {"access"}
        client.delete_collection("mixed")
        assert not client.collection_exists("mixed") and again.payload_indexes("mixed") == {}
        client.close()


def _fill(client: QdrantClient) -> None:
    """The same 24 points in a dense + sparse collection, whatever the client."""
    _sparse_collection(client)
    rng = np.random.default_rng(7)
    points = []
    for i in range(24):
        terms = sorted({int(t) for t in rng.integers(0, 12, size=4)})
        points.append(models.PointStruct(
            id=i + 1, vector={"dense": rng.normal(size=DIM).tolist(),
                              "bm25": models.SparseVector(indices=terms, values=[1.0 + t / 10 for t in terms])},
            payload={"access": ["public"] if i % 3 else ["group:hr"], "n": i, "note": None}))
    client.upsert("mixed", points=points)
    client.delete("mixed", points_selector=models.PointIdsList(points=[5]))  # IDF counts live points in both


PUBLIC = models.Filter(must=[models.FieldCondition(key="access", match=models.MatchAny(any=["public"]))])
DENSE_Q = [0.3, -0.2, 0.9, 0.1]
SPARSE_Q = models.SparseVector(indices=[1, 4, 7], values=[1.0, 0.5, 2.0])


def _answers(client: QdrantClient) -> list:
    fused = [client.query_points("mixed", prefetch=[
        models.Prefetch(query=DENSE_Q, using="dense", filter=PUBLIC, limit=8),
        models.Prefetch(query=SPARSE_Q, using="bm25", filter=PUBLIC, limit=8)],
        query=models.FusionQuery(fusion=fusion), limit=6, with_payload=True).points
        for fusion in (models.Fusion.RRF, models.Fusion.DBSF)]
    batch = client.query_batch_points("mixed", requests=[
        models.QueryRequest(query=DENSE_Q, using="dense", filter=PUBLIC, limit=5, with_payload=True),
        models.QueryRequest(query=SPARSE_Q, using="bm25", limit=5, with_payload=["n"], with_vector=["bm25"]),
        models.QueryRequest(query=DENSE_Q, using="dense", limit=3)])  # REST defaults: no payload, no vector
    named = client.retrieve("mixed", ids=[2, 3, 5], with_vectors=["dense"], with_payload=["n"])
    page, offset = client.scroll("mixed", scroll_filter=PUBLIC, limit=4, with_payload=False)
    return [[(p.id, round(p.score, 9), p.payload, p.vector) for p in points] for points in fused] + \
        [[(p.id, round(p.score, 9), p.payload, p.vector) for p in r.points] for r in batch] + \
        [[(p.id, p.payload, p.vector) for p in named], [(p.id, p.payload) for p in page], offset,
         client.count("mixed", count_filter=PUBLIC).count]


def test_fusion_and_batch_queries_answer_what_local_mode_answers(qdrant_server: QdrantStandIn) -> None:
    local = QdrantClient(":memory:")
    remote = QdrantClient(url=qdrant_server.url, timeout=5)
    _fill(local)
    _fill(remote)
    remote.create_payload_index("mixed", "access", models.PayloadSchemaType.KEYWORD)  # the stand-in is strict
    qdrant_server.requests.clear()
    mine, theirs = _answers(remote), _answers(local)
    assert mine == theirs
    assert mine[0] and mine[1] and all(p[2]["access"] == ["public"] for p in mine[0])  # not vacuous
    assert mine[2][0][2] is not None and mine[4][0][2] is None and mine[3][0][3] is not None
    [batch] = [r for r in qdrant_server.requests if r.path.endswith("/points/query/batch")]
    assert len(batch.body["searches"]) == 3 and qdrant_server.count(r"/points/query/batch$") == 1
    local.close()
    remote.close()


def _raw(server: QdrantStandIn, method: str, path: str, body=None, **headers: str) -> httpx.Response:
    return httpx.request(method, server.url + path, json=body, headers=headers, timeout=5)


def test_errors_come_with_qdrants_statuses_and_envelope(qdrant_server: QdrantStandIn) -> None:
    missing = _raw(qdrant_server, "GET", "/collections/nope")
    assert missing.status_code == 404 and missing.json()["status"] == {"error": "Not found: Collection `nope` doesn't exist!"}
    assert _raw(qdrant_server, "PUT", "/collections/c", {"vectors": {"size": 2, "distance": "Cosine"}}).json()["result"] is True
    again = _raw(qdrant_server, "PUT", "/collections/c", {"vectors": {"size": 2, "distance": "Cosine"}})
    assert again.status_code == 409 and "already exists" in again.json()["status"]["error"]
    unknown = _raw(qdrant_server, "POST", "/collections/c/points/scroll", {"limit": 2, "colour": "red"})
    assert unknown.status_code == 400 and "colour" in unknown.json()["status"]["error"]
    wrong_dim = _raw(qdrant_server, "PUT", "/collections/c/points?wait=true", {"points": [{"id": 1, "vector": [1, 2, 3]}]})
    assert wrong_dim.status_code == 400 and wrong_dim.json()["status"]["error"].startswith("Wrong input")
    ok = _raw(qdrant_server, "PUT", "/collections/c/points", {"points": [{"id": 1, "vector": [1, 2]}]}).json()
    assert ok["status"] == "ok" and ok["result"]["status"] == "acknowledged" and isinstance(ok["time"], float)
    assert _raw(qdrant_server, "POST", "/collections/c/points/count", {}).json()["result"] == {"count": 1}


def test_a_call_it_does_not_implement_is_a_404_and_is_recorded(qdrant_server: QdrantStandIn) -> None:
    assert qdrant_server.unknown == []
    resp = _raw(qdrant_server, "POST", "/collections/c/points/discover", {"limit": 1})
    assert resp.status_code == 404 and "does not implement" in resp.json()["status"]["error"]
    assert qdrant_server.unknown == [("POST", "/collections/c/points/discover")]


def test_strict_mode_refuses_a_filter_on_a_field_without_an_index(qdrant_server: QdrantStandIn) -> None:
    client = QdrantClient(url=qdrant_server.url, timeout=5)
    client.create_collection("c", vectors_config=models.VectorParams(size=2, distance=models.Distance.COSINE))
    by_team = models.Filter(must=[models.FieldCondition(key="team", match=models.MatchValue(value="hr"))])
    with pytest.raises(UnexpectedResponse) as refused:
        client.count("c", count_filter=by_team)
    assert refused.value.status_code == 400
    assert refused.value.structured()["status"]["error"].startswith('Bad request: Index required but not found for "team"')
    client.create_payload_index("c", "team", models.PayloadSchemaType.KEYWORD)
    assert client.count("c", count_filter=by_team).count == 0
    client.close()


def test_the_api_key_is_enforced_as_a_server_does() -> None:
    with QdrantStandIn(api_key="secret-key", read_only_api_key="reader-key") as server:
        assert _raw(server, "GET", "/").status_code == 200 and _raw(server, "GET", "/healthz").status_code == 200
        none = _raw(server, "GET", "/collections")
        assert none.status_code == 401 and none.json()["status"]["error"] == \
            "Must provide an API key or an Authorization bearer token"
        assert _raw(server, "GET", "/collections", **{"api-key": "nope"}).json()["status"]["error"] == \
            "Invalid API key or JWT"
        assert _raw(server, "GET", "/collections", Authorization="Bearer secret-key").status_code == 200
        assert _raw(server, "PUT", "/collections/c", {"vectors": {"size": 2, "distance": "Dot"}},
                    **{"api-key": "secret-key"}).status_code == 200
        assert _raw(server, "POST", "/collections/c/points/scroll", {}, **{"api-key": "reader-key"}).status_code == 200
        write = _raw(server, "PUT", "/collections/c/points", {"points": []}, **{"api-key": "reader-key"})
        assert write.status_code == 403 and write.json()["status"]["error"] == "Write access denied"
        # A facet (the shared index's document frequencies) is a read, as on a server: a web replica may call it.
        assert _raw(server, "PUT", "/collections/c/index", {"field_name": "t", "field_schema": "keyword"},
                    **{"api-key": "secret-key"}).status_code == 200
        assert _raw(server, "POST", "/collections/c/facet", {"key": "t"}, **{"api-key": "reader-key"}).status_code == 200
        # The log says which key each request carried (to tell client processes with their own key apart).
        assert [r.key for r in server.requests] == \
            [None, None, None, "other", "api", "api", "read-only", "read-only", "api", "read-only"]


def test_faults_and_the_log(qdrant_server: QdrantStandIn) -> None:
    client = QdrantClient(url=qdrant_server.url, timeout=5)
    qdrant_server.fail(r"GET /collections/\w+/exists", 503, times=1, skip=1)
    assert client.collection_exists("a") is False
    with pytest.raises(Exception, match="503"):
        client.collection_exists("a")
    assert client.collection_exists("a") is False
    qdrant_server.drop(r"/collections$")
    with pytest.raises(Exception, match="disconnected"):
        client.get_collections()
    assert client.get_collections().collections == []
    assert [(r.method, r.path) for r in qdrant_server.requests if r.path != "/"][-2:] == \
        [("GET", "/collections"), ("GET", "/collections")]
    client.close()


# -- the stores on a server ---------------------------------------------------------------------------------------
def test_a_search_sends_one_query_with_the_access_filter_inside(qdrant_server: QdrantStandIn) -> None:
    store = QdrantStore(DIM, url=qdrant_server.url, collection="chunks")
    store.replace([BIKES.key], [BIKES], VECTOR)
    assert set(qdrant_server.payload_indexes("chunks")) == {"doc_key", "access", "source"}
    before = len(qdrant_server.requests)
    [hit] = store.search(VECTOR[0], limit=5, viewer=Viewer.public().scoped(["wiki"]))
    assert hit.chunk == BIKES
    [query] = [r for r in qdrant_server.requests[before:] if r.path != "/"]
    assert query.path == "/collections/chunks/points/query"
    assert [c["key"] for c in query.body["filter"]["must"]] == ["access", "source"]
    store.close()


@pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")
@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_a_wrong_or_missing_api_key_is_a_clear_store_error(kind: str) -> None:
    open_store = {"dense": lambda url, key: QdrantStore(DIM, url=url, api_key=key),
                  "sparse": lambda url, key: QdrantSparseStore(url=url, api_key=key)}[kind]
    with QdrantStandIn(api_key="right-key") as server:
        for key, said in (("wrong-key", "Invalid API key or JWT"), (None, "Must provide an API key")):
            with pytest.raises(IndexUnavailableError) as err:
                open_store(server.url, key)
            assert f"the Qdrant server at {server.url} refused" in str(err.value)
            assert "HTTP 401" in str(err.value) and said in str(err.value)
            assert str(err.value).endswith("check QDRANT_URL and QDRANT_API_KEY")
        open_store(server.url, "right-key").close()


@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_an_injected_500_or_a_dropped_connection_is_the_stores_error_not_a_hang(qdrant_server: QdrantStandIn,
                                                                                 kind: str) -> None:
    store = QdrantStore(DIM, url=qdrant_server.url) if kind == "dense" else QdrantSparseStore(url=qdrant_server.url)
    store.replace([BIKES.key], [BIKES], VECTOR)
    query = VECTOR[0] if kind == "dense" else "bikes courtyard"
    qdrant_server.fail(r"POST /collections/[\w-]+/points/query")
    started = time.monotonic()
    with pytest.raises(IndexUnavailableError, match=r"answered|failed") as err:
        store.search(query, limit=3, viewer=Viewer.public())
    assert time.monotonic() - started < 2 and isinstance(err.value, IndexError_)  # what the servers' guard catches
    assert "HTTP 500" in str(err.value) and "injected fault" in str(err.value) and qdrant_server.url in str(err.value)
    assert [h.chunk for h in store.search(query, limit=3, viewer=Viewer.public())] == [BIKES]  # once only
    qdrant_server.drop(r"PUT /collections/[\w-]+/points\b")
    with pytest.raises(IndexUnavailableError, match="no answer from the Qdrant server"):
        store.replace([BIKES.key], [BIKES], VECTOR)
    assert store.damage is None  # a server's failure is not damage: readiness recovers with the server
    store.replace([BIKES.key], [BIKES], VECTOR)
    assert store.count == 1
    store.close()


@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_two_stores_creating_one_collection_at_once_both_open_it(qdrant_server: QdrantStandIn, kind: str) -> None:
    """The first one's create is held back until the second has created the collection: it answers 409."""
    open_store = (lambda: QdrantStore(DIM, url=qdrant_server.url, collection="shared")) if kind == "dense" else \
        (lambda: QdrantSparseStore(url=qdrant_server.url, collection="shared"))
    qdrant_server.slow(r"^PUT /collections/shared$", 0.5, times=1)
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(open_store)
        wait_for(lambda: qdrant_server.count(r"^/collections/shared$", "PUT"), 5, "the first store's create")
        second = open_store()
        first_store = first.result(timeout=10)
    assert qdrant_server.count(r"^/collections/shared$", "PUT") == 2
    second.replace([BIKES.key], [BIKES], VECTOR)
    assert first_store.chunk_ids() == {BIKES.chunk_id}
    assert {"access", "source", "doc_key"} <= set(qdrant_server.payload_indexes("shared"))
    first_store.close()
    second.close()


CLIENT = textwrap.dedent("""
    import sys, time
    import numpy as np
    from datetime import datetime, timezone
    from core.access import Access
    from core.models import Chunk
    from index.stores import QdrantStore

    me, other = sys.argv[1:]
    url = sys.stdin.readline().strip()  # sent once the stand-in is up (this process imports meanwhile)
    store = QdrantStore(4, url=url, collection="shared")
    c = Chunk(chunk_id=me * 64, source="wiki", doc_id=me, title=me, section_path=(), url="", text=me, ordinal=0,
              updated_at=datetime(2026, 1, 5, tzinfo=timezone.utc), access=Access.everyone())
    store.replace([c.key], [c], np.ones((1, 4), dtype=np.float32))
    deadline = time.monotonic() + 20
    while other * 64 not in store.chunk_ids() and time.monotonic() < deadline:
        time.sleep(0.05)
    print(sorted(i[0] for i in store.chunk_ids()))
    store.close()
""")


def test_two_client_processes_see_each_others_writes_through_one_standin_process(tmp_path: Path) -> None:
    """Each client opens the same new collection (they may race to create it), writes its chunk, and waits to see the other's."""
    procs = [subprocess.Popen([sys.executable, "-c", CLIENT, me, other], cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for me, other in (("a", "b"), ("b", "a"))]
    try:
        with QdrantStandInProcess(tmp_path / "qdrant", keep_bodies=True) as server:
            assert server.url.startswith("http://127.0.0.1:")
            for p in procs:
                p.stdin.write(server.url + "\n")  # type: ignore[union-attr]
                p.stdin.close()  # type: ignore[union-attr]
            outputs = [p.stdout.read().strip() for p in procs]  # type: ignore[union-attr]
            assert [p.wait(timeout=30) for p in procs] == [0, 0] and outputs == ["['a', 'b']", "['a', 'b']"]
            upserts = [r for r in server.requests if r.method == "PUT" and r.path == "/collections/shared/points"]
            assert sorted(u.body["points"][0]["payload"]["doc_id"] for u in upserts) == ["a", "b"]
            store = QdrantStore(DIM, url=server.url, collection="shared")
            server.fail(r"/points/count", 500)
            with pytest.raises(IndexUnavailableError, match="HTTP 500"):
                store.count  # noqa: B018 - the read is the test
            assert store.count == 2
            store.close()
            server.reset()
            # qdrant-client probes ``GET /`` for the server's version from a daemon thread it starts when a client
            # opens, so that probe may land after the reset; everything else must be gone from the log
            assert [r for r in server.requests if r.path != "/"] == []
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
            p.stdout.close()  # type: ignore[union-attr]
    assert server.proc.returncode == 0
    recorded = json.loads((tmp_path / "qdrant" / "standin-payload-indexes.json").read_text())
    assert recorded["shared"]["access"][0] == "keyword"
