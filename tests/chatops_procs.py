"""``chatops`` console-script subprocesses for the multi-process tests and benchmarks (issue 12).

Used by ``tests/test_replicas.py`` (two ``serve`` replicas, each with its own embedded index),
``tests/test_shared_replicas.py`` (a ``worker`` and two ``serve --role web`` replicas on one shared index)
and the benchmarks ``bench/replica_sync.py`` and ``bench/shared_replicas.py``:

- :class:`ChatopsProcess`: ``chatops ARGS...`` with its own data dir, its output in ``<root>/<name>.log``;
- :class:`Replica`: ``chatops serve --port 0 [...]``, its URL read from the "serving on" line;
- :func:`content_runs`: the finished content syncs of a source into one index, from the state store;
- :func:`page_bodies`: the page bodies the Confluence stand-in served since a point in its log;
- :func:`ask`: a signed Slack mention to a replica, and the reply its user sees.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
from pathlib import Path

from index.manifest import Manifest
from state import StateStore

from tests.standins.confluence import ConfluenceStandIn
from tests.helpers import chatops_command, cli_environment
from tests.standins.slack import BOT_USER_ID, SIGNING_SECRET, SlackSender, SlackStandin

__all__ = ["ChatopsProcess", "Replica", "content_runs", "page_bodies", "ask"]


def page_bodies(s: ConfluenceStandIn, since: int) -> list[str]:
    """Ids of the single-page GETs (REST v2 ``/pages/{id}``: a page's body) since request number ``since``."""
    with s.lock:
        paths = [path for _, path, _ in s.requests[since:]]
    return [p.rsplit("/", 1)[-1] for p in paths if p.startswith("/wiki/api/v2/pages/") and p.rsplit("/", 1)[-1].isdigit()]


def content_runs(store: StateStore, index_id: str, source: str = "eng") -> list:
    """The finished content syncs (not permission syncs) of ``source`` into index ``index_id``, oldest first."""
    runs = store.last_runs(source, limit=50, index_id=index_id)
    return [r for r in reversed(runs) if r.status != "running" and r.summary.get("mode") != "permissions"]


class ChatopsProcess:
    """``chatops ARGS...`` in a subprocess, cwd ``root``, data dir ``root/name``, output in ``root/name.log``.

    Args:
        name: the process's name (its data dir and log file).
        root: the folder holding both.
        env: settings for :func:`helpers.cli_environment` (``DATABASE_URL``, ``QDRANT_URL``...).
        args: the command line after ``chatops``.
    """

    def __init__(self, name: str, root: Path, env: dict[str, str], args: list[str]) -> None:
        self.name = name
        self.data = root / name
        self.log_path = root / f"{name}.log"
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen([*chatops_command(), *args], cwd=root, env=cli_environment(self.data, **env),
                                         stdout=log, stderr=subprocess.STDOUT)

    def log(self) -> str:
        """Everything the process printed so far."""
        return self.log_path.read_text()

    def alive(self) -> bool:
        """True while it runs (else AssertionError with the end of its log)."""
        assert self.proc.poll() is None, f"{self.name} exited: {self.log()[-3000:]}"
        return True

    def stop(self) -> int:
        """SIGTERM, then its exit status (within 30 s)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)


class Replica(ChatopsProcess):
    """One ``chatops serve`` subprocess on 127.0.0.1 (a free port), ``extra`` arguments after ``serve``."""

    def __init__(self, name: str, root: Path, env: dict[str, str], extra: tuple[str, ...] = ()) -> None:
        super().__init__(name, root, env, ["serve", "--host", "127.0.0.1", "--port", "0", *extra])
        self.url = ""

    def listening(self) -> bool:
        """True once it serves (sets :attr:`url`); AssertionError if it exited."""
        m = re.search(r"serving on http://127\.0\.0\.1:(\d+)", self.log())
        self.alive()
        if m:
            self.url = f"http://127.0.0.1:{m.group(1)}"
        return bool(m)

    def index_id(self) -> str:
        """The id of its embedded index (from its manifest file)."""
        manifest = Manifest(self.data / "index" / "manifest.sqlite")
        try:
            value = manifest.get("index_id")
        finally:
            manifest.close()
        assert value, f"{self.name}'s index has no id"
        return value

    def content_runs(self, store: StateStore) -> list:
        """This replica's finished content syncs of ``eng`` into its embedded index, oldest first."""
        return content_runs(store, self.index_id())


def ask(replica: Replica, slack: SlackStandin, question: str, user: str, channel: str = "C0REPLICA") -> str:
    """Mention the bot on ``replica`` through a signed Slack event from ``user`` in ``channel``; the reply as
    the user sees it (JSON of its text and blocks)."""
    msg = slack.user_message(channel, user, f"<@{BOT_USER_ID}> {question}")
    sender = SlackSender(replica.url, SIGNING_SECRET)
    try:
        resp, _ = sender.event({"type": "app_mention", "user": user, "text": msg["text"], "ts": msg["ts"],
                                "channel": channel, "event_ts": msg["ts"]})
    finally:
        sender.close()
    assert resp.status_code == 200
    [post] = slack.wait_for(lambda s: s.answers(channel, msg["ts"]), timeout=30)
    return json.dumps({"text": post.params.get("text"), "blocks": post.params.get("blocks")})
