"""Tools the agent calls. Each has a name, a pydantic argument model, a side-effect flag, a
permission and ``run(args, ctx)``; none knows about chat platforms.

- :mod:`tools.base`: the ``Tool`` protocol, ``ToolContext`` and the ``ToolRegistry``.
- :mod:`tools.knowledge_search`: ``knowledge.search``, the tool over the retrieval engine (:mod:`index.retrieval`).
- :mod:`tools.fusion`, :mod:`tools.identifiers`: re-exports of :mod:`index.retrieval` (fusion, identifiers) for the agent.
- :mod:`tools.calendar`: ``calendar.create`` (a side-effect tool: proposed, confirmed, then run once).
"""
