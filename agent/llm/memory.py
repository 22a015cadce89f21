"""What was learned about an OpenAI-compatible server, kept across processes in one small JSON file.

Each ``chatops ask`` is a new process; without this file every one of them would find out again, with
requests that cost seconds on a slow model, whether the server calls tools, which structured-output form it
accepts and how fast it writes. :class:`ServerMemory` keeps, per ``(base URL, model)``:

- ``tools``: whether the model calls tools (``true``/``false``; absent while unknown);
- ``json_format``: the structured-output form that works (``json_schema``, ``json_object`` or ``prompt``);
- ``latency``: the last calls' ``{"calls": [[seconds, completion tokens, prompt tokens], ...], "measured_at": ...}``
  (forgotten 5 minutes after the newest; see
  :class:`agent.llm.latency.LatencyMeter`).

The file (``CHATOPS_DATA_DIR/llm-servers.json`` in production) holds no user text, no key and no prompt.
Writes replace the file atomically (a temporary file, then ``os.replace``) after re-reading it, so
processes sharing a data dir keep each other's entries (the last writer of one entry wins). A missing or
unreadable file is an empty memory: everything is found out again, nothing fails.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

__all__ = ["ServerMemory"]

log = logging.getLogger(__name__)


class ServerMemory:
    """Per ``(base URL, model)`` facts in the JSON file at ``path`` (see the module docstring).

    Args:
        path: the file; None keeps the facts in this process only.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()

    @staticmethod
    def key(base_url: str, model: str) -> str:
        """The entry's key: the base URL without a trailing slash, a space, the model name."""
        return f"{base_url.rstrip('/')} {model}"

    def get(self, base_url: str, model: str) -> dict[str, Any]:
        """The facts kept for ``model`` on ``base_url`` (an empty dict when none)."""
        entry = self._read().get(self.key(base_url, model))
        return dict(entry) if isinstance(entry, dict) else {}

    def update(self, base_url: str, model: str, **facts: Any) -> None:
        """Set ``facts`` (JSON values) of ``model`` on ``base_url``, keeping its other facts and other entries.
        A file that cannot be written is logged and left alone (the facts stay in this process)."""
        if self.path is None:
            return
        key = self.key(base_url, model)
        with self._lock:
            data = self._read()
            entry = data.get(key)
            data[key] = {**(entry if isinstance(entry, dict) else {}), **facts}
            tmp = None
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(prefix=".llm-servers.", dir=self.path.parent)
                with os.fdopen(fd, "w") as f:
                    json.dump(data, f, indent=1, sort_keys=True)
                os.replace(tmp, self.path)
            except OSError as exc:
                if tmp is not None:
                    Path(tmp).unlink(missing_ok=True)
                log.warning("could not write what was learned about the LLM server to %s: %s", self.path, exc)

    def _read(self) -> dict[str, Any]:
        if self.path is None or not self.path.is_file():
            return {}
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError) as exc:
            log.warning("ignoring an unreadable %s (%s): the LLM server's capabilities are found out again",
                        self.path, type(exc).__name__)
            return {}
        return data if isinstance(data, dict) else {}
