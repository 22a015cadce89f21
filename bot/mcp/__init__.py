"""The MCP adapter (issue 28): the knowledge base for AI assistants over the Model Context Protocol.

It translates protocol calls into :class:`app.assistants.AssistantService` calls and their results back; it
knows nothing of retrieval, the agent or the tools (an import-linter contract keeps it so). Modules, one job
each:

- :mod:`.server`: the SDK's ``MCPServer`` with the ``search`` and ``ask`` tools and the ``chatops://sources``
  resource, and the middleware that decides who is calling;
- :mod:`.auth`: the caller over stdio (``--as``) and over HTTP (bearer tokens; why not OAuth);
- :mod:`.http`: the Streamable HTTP app (``/mcp``, ``/healthz``, ``/metrics``) and its uvicorn server;
- :mod:`.command`: ``chatops mcp`` and ``chatops mcp token create|list|revoke``.

Importing this package imports nothing of the SDK; :mod:`.server`, :mod:`.auth` and :mod:`.http` need the mcp
extra.
"""
