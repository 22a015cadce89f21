"""Connectors: sources of documents and their text conversion.

Nothing in this package knows about chat platforms, the agent or the indexes (:mod:`index`). The public pieces:

- :mod:`connectors.base`: the source contract (``Source``, ``IncrementalSource``) every connector satisfies.
- :mod:`connectors.models`: ``Document``, ``Tombstone`` and ``Chunk``, the contracts between layers.
- :mod:`connectors.folder`: the ``folder:PATH`` source (Markdown and HTML files), reading through
  :mod:`connectors.safe_files` (regular files inside the root only: no links, no FIFOs).
- :mod:`connectors.confluence`, :mod:`connectors.mediawiki`: Confluence Cloud/Data Center and MediaWiki
  sources (with :mod:`connectors.storage_format` and the shared :mod:`connectors.http` client).
- :mod:`connectors.cursor`: what an incremental source's ``sync`` hands back (``CursorUpdate``).
- :mod:`connectors.config`: the YAML sources file; :mod:`connectors.sources`: source spec strings.
- :mod:`connectors.text`, :mod:`connectors.templates`: Markdown/HTML clean-up.
- :mod:`connectors.errors`: the exception tree.
"""
