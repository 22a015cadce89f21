"""Connectors: sources of documents and their text conversion.

Nothing in this package knows about chat platforms, the agent or the indexes (:mod:`index`). The public pieces:

- :mod:`connectors.base`: the source contract (``Source``, ``IncrementalSource``) every connector satisfies.
- what a source yields (``Document``, ``Tombstone``, ``Chunk``) and who may read it (``Access``) are shared nouns,
  in :mod:`core` below this package.
- :mod:`connectors.folder`: the ``folder:PATH`` source (Markdown and HTML files), reading through
  :mod:`connectors.safe_files` (regular files inside the root only: no links, no FIFOs).
- :mod:`connectors.confluence`, :mod:`connectors.mediawiki`: Confluence Cloud/Data Center and MediaWiki
  sources (with :mod:`connectors.storage_format` and the shared :mod:`connectors.http` client).
- :mod:`connectors.cursor`: what an incremental source's ``sync`` hands back (``CursorUpdate``).
- :mod:`connectors.config`: the sources' part of the YAML sources file (the whole file is :mod:`app.config`'s),
  read by :mod:`connectors.config_file`; :mod:`connectors.sources`: source spec strings.
- :mod:`connectors.text`, :mod:`connectors.templates`: Markdown/HTML clean-up.
- :mod:`connectors.errors`: the sources' exceptions (under :class:`core.errors.ChatopsError`).
"""
