"""Operability signals every layer may emit: Prometheus metrics (:mod:`.metrics`) and optional
OpenTelemetry spans (:mod:`.tracing`).

This package imports nothing of ours (an import-linter contract), so ``index`` can count syncs and
``bot`` can count Web API errors without reaching up the layers. It holds the metric *objects* and
the functions that move them; what is read at scrape time from the index and the state store lives
in :mod:`app.metrics`, and ``GET /metrics`` in :mod:`bot.server`.
"""
