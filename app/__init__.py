"""The application layer: platform-neutral services between the chat adapters (:mod:`bot`) and the agent.

- :mod:`app.settings`: every setting (``pydantic-settings``); :mod:`app.wiring`: the composition root.
- :mod:`app.actions`: the pending-action service (propose, confirm once, cancel, expire, audit).
- :mod:`app.jobs`: index jobs (sync a source, status), shared by the scheduler, the CLI and admins.
- :mod:`app.assistants`: what AI assistants may ask (search, ask, the sources' freshness; read-only, audited),
  for the MCP adapter (:mod:`bot.mcp`); :mod:`app.assistant_tokens`: their bearer tokens (issue, verify, revoke).

Nothing here imports Slack, Teams or an HTTP server (checked by ``import-linter``).
"""
