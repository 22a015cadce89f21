"""Connectors: sources of documents, text conversion, chunking, embeddings and the indexes.

Nothing in this package knows about chat platforms or the agent. The public pieces:

- :mod:`connectors.models`: ``Document``, ``Tombstone`` and ``Chunk``, the contracts between layers.
- :mod:`connectors.folder`: the ``folder:PATH`` source (Markdown and HTML files), reading through
  :mod:`connectors.safe_files` (regular files inside the root only: no links, no FIFOs).
- :mod:`connectors.confluence`, :mod:`connectors.mediawiki`: Confluence Cloud/Data Center and MediaWiki
  sources (with :mod:`connectors.storage_format` and the shared :mod:`connectors.http` client).
- :mod:`connectors.config`: the YAML sources file; :mod:`connectors.sync`: the incremental sync engine.
- :mod:`connectors.sources`: parsing of source spec strings into sources.
- :mod:`connectors.chunker`: the heading-aware chunker.
- :mod:`connectors.embeddings`: the embedder interface, the local ONNX model and the OpenAI API.
- :mod:`connectors.stores`: the Whoosh (BM25F) and Qdrant (dense) chunk stores.
- :mod:`connectors.index`, :mod:`connectors.manifest`: the two stores plus their manifest and journal.
- :mod:`connectors.indexer`: incremental, crash-consistent indexing into both stores.
- :mod:`connectors.reconcile`: the stores made to match the manifest at the start of every run.
- :mod:`connectors.errors`: the exception tree; :mod:`connectors.faults`: disk-full and damaged-file
  failures turned into those errors.
"""
