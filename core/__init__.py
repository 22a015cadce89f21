"""The ground floor: the nouns every layer shares, importing nothing of ours (an import-linter contract).

- :mod:`core.models`: ``Document``, ``Tombstone`` and ``Chunk`` (with :func:`core.models.content_hash`), what
  a source yields and an index stores;
- :mod:`core.access`: who may read a page (``Access``) and who is asking (``Viewer``), principals spelled once;
- :mod:`core.errors`: the index's and the embedding model's errors under ``ChatopsError``.
"""
