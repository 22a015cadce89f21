"""A stand-in Qdrant server on 127.0.0.1: Qdrant's REST wire format, executed by qdrant-client's local engine.

No Qdrant server can be installed here, so this one answers the REST requests ``qdrant-client`` (1.20, as
installed) sends with ``QdrantClient(url=...)``: the project's server code path (``QDRANT_URL``). It is a
stand-in, not Qdrant:

- one process, every request executed by qdrant-client's own local-mode engine (``QdrantClient(path=DIR)``,
  or ``":memory:"``) inside the stand-in, one call at a time (a lock);
- scores are exact (local mode is brute force; a server's HNSW is approximate), and with
  ``Modifier.IDF`` local mode counts document frequencies over the live points only, where a server
  still counts deleted points until its optimiser has merged the segments;
- payload indexes are recorded (``GET /collections/{c}`` shows them in ``payload_schema``, with the
  number of points holding the field) but, as in local mode, do not change how a filter runs;
  ``strict=True`` refuses a filter on a field without one (a server in strict mode with
  ``unindexed_filtering_retrieve/update: false`` answers the same 400).

What is faithful: the wire format the real client sends and parses. Request bodies are parsed with the
client's own OpenAPI models (:mod:`qdrant_client.http.models`, ``extra="forbid"``: a field Qdrant does
not know is a 400), the REST defaults of the server apply (``with_payload`` false for queries, true
for retrieve and scroll; ``limit`` 10), and answers use Qdrant's envelope ``{"result": ..., "status":
"ok", "time": <seconds>}``; errors the status Qdrant uses with ``{"status": {"error": "..."}, "time":
...}``: 404 for a missing collection (``Not found: Collection `c` doesn't exist!``), 409 for creating
one that exists, 400 for a body that does not parse or an input the engine refuses (``Wrong input:
...``), 401 without the right API key (``api-key`` header or ``Authorization: Bearer``;
``GET /``, ``/healthz``, ``/livez``, ``/readyz`` need none, as on a server), 403 for a write with the
read-only key (``Write access denied``). ``GET /`` reports the installed client's version, so the
client's compatibility check passes quietly.

Endpoints (``{c}`` a collection): ``GET /``, ``GET /healthz|/livez|/readyz``, ``GET /collections``,
``GET|PUT|DELETE /collections/{c}``, ``GET /collections/{c}/exists``, ``PUT /collections/{c}/index``,
``DELETE /collections/{c}/index/{field}``, ``PUT /collections/{c}/points`` (upsert), ``POST
/collections/{c}/points`` (retrieve), ``GET /collections/{c}/points/{id}``, ``POST .../points/delete``,
``POST|PUT .../points/payload`` (set, overwrite), ``POST .../points/payload/delete|clear``, ``POST
.../points/scroll``, ``POST .../points/count``, ``POST .../points/query`` and ``POST
.../points/query/batch``. Writes take ``?wait=``: the engine always applies them at once; the answer's
status is ``completed`` with ``wait=true``, else ``acknowledged`` (as a server answers). Anything else is
a 404 saying the stand-in does not implement it.

Two ways to run it:

- in process: ``with QdrantStandIn(path) as q: QdrantClient(url=q.url)`` (a daemon thread); faults with
  :meth:`QdrantStandIn.fail` / :meth:`~QdrantStandIn.drop` / :meth:`~QdrantStandIn.slow`, the request
  log in :attr:`QdrantStandIn.requests`;
- as a process, for several client processes: ``python -m tests.standins.qdrant --port 0 [--path DIR]
  [--api-key K] [--read-only-api-key K] [--strict] [--keep-bodies]`` (from the repository root, or with it
  on ``PYTHONPATH``) prints its URL on the first stdout line and serves until SIGTERM or SIGINT (exit 0); :class:`QdrantStandInProcess` starts one and drives its faults and log over
  the control endpoints under ``/__standin/`` (no key needed, never logged; not part of Qdrant's API).
"""

from tests.standins.qdrant.engine import QdrantStandIn
from tests.standins.qdrant.model import READ_POSTS, ApiError, Fault, LoggedRequest
from tests.standins.qdrant.process import QdrantStandInProcess, main

__all__ = ["QdrantStandIn", "QdrantStandInProcess", "LoggedRequest", "Fault", "ApiError", "READ_POSTS", "main"]
