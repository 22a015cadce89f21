"""Platform adapters, rendering, the HTTP server, scheduler wiring and the ``chatops`` CLI.

Nothing here knows how retrieval or planning works: it builds the pieces from settings
(:mod:`app.wiring`) and hands turns to the agent.
"""
