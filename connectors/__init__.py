"""Connectors: sources of documents, text conversion, chunking, embeddings and the indexes.

Nothing in this package knows about chat platforms or the agent. The public pieces:

- :mod:`connectors.models`: ``Document``, ``Tombstone`` and ``Chunk``, the contracts between layers.
- :mod:`connectors.folder`: the ``folder:PATH`` source (Markdown and HTML files).
- :mod:`connectors.sources`: parsing of source spec strings into sources.
- :mod:`connectors.chunker`: the heading-aware chunker.
- :mod:`connectors.embeddings`: the embedder interface, the local ONNX model and the OpenAI API.
- :mod:`connectors.stores`: the Whoosh (BM25F) and Qdrant (dense) chunk stores.
- :mod:`connectors.indexer`: incremental, crash-consistent indexing into both stores.
"""
