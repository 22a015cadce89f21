"""Indexing: chunks, embeddings, the two stores and the sync engine that keeps them matching the sources.

Sits above :mod:`connectors` (which only fetch and convert pages) and below :mod:`tools` (whose
``knowledge.search`` queries the index). The public pieces:

- :mod:`index.chunker`: the heading-aware chunker.
- :mod:`index.embeddings`: the embedder interface, the local ONNX model and the OpenAI API, with the cache.
- :mod:`index.stores`: the Whoosh (BM25F) and Qdrant (dense) chunk stores, both a :class:`~index.stores.base.ChunkStore`.
- :mod:`index.knowledge`, :mod:`index.manifest`: the two stores plus their manifest and journal.
- :mod:`index.indexer`: incremental, crash-consistent indexing into both stores.
- :mod:`index.reconcile`: the stores made to match the manifest at the start of every run.
- :mod:`index.sync`: the sync engine (one run per source: scan or incremental sync, index, save the cursor),
  with its state port :mod:`index.ports` (``SyncState``, which :class:`state.StateStore` satisfies) and
  :mod:`index.summary` (``SyncSummary``, what a run did).
- :mod:`index.faults`: disk-full and damaged-file failures turned into :mod:`connectors.errors`.
"""
