"""Tools the agent calls. Each has a name, a pydantic argument model, a side-effect flag, a
permission and ``run(args, ctx)``; none knows about chat platforms.

- :mod:`tools.base`: the ``Tool`` protocol, ``ToolContext`` and the ``ToolRegistry``.
- :mod:`tools.knowledge_search`: ``knowledge.search``, hybrid retrieval (BM25 + dense, RRF).
- :mod:`tools.fusion`, :mod:`tools.prf`: reciprocal rank fusion and pseudo-relevance feedback.
- :mod:`tools.calendar`: ``calendar.create`` (a side-effect tool: proposed, confirmed, then run once).
"""
