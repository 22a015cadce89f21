"""The Slack how-to (docs/how-to/slack.md), followed step by step against the Slack stand-in, ends with an
answered mention.

The steps a machine can take are read from the guide itself, so a change to the guide that breaks them
fails here: the app is created from ``manifest.yml`` (the stand-in grants exactly its scopes, and events go
to the path the guide names); the ``.env`` block is written as the guide shows it, with the tokens the
stand-in issued in place of the placeholders; the ``chatops serve`` command is run as shown (on a free
port of 127.0.0.1); the bot is invited to a channel and mentioned, and the answer arrives in the thread
with numbered sources. The only addition is ``SLACK_API_URL``, pointing the bot at the stand-in instead of
slack.com.
"""

from __future__ import annotations

import re
import shlex
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

import httpx
import yaml

from tests.helpers import ROOT, WIKI, chatops_command, cli_environment, seed_embedding_cache, wait_for
from tests.standins.slack import BOT_TOKEN, BOT_USER_ID, SIGNING_SECRET, SlackSender, SlackStandin, manifest_scopes

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

GUIDE = ROOT / "docs" / "how-to" / "slack.md"
USER = "UDOCS0001"
CHANNEL = "C0DOCS001"


def _steps() -> list[str]:
    """The guide's numbered steps, in order (each with its indented blocks)."""
    text = GUIDE.read_text(encoding="utf-8")
    section = text.split("\n## Steps\n", 1)[1].split("\n## ", 1)[0]
    steps = re.split(r"^(?=\d+\. )", section, flags=re.M)
    numbered = [s for s in steps if re.match(r"\d+\. ", s)]
    assert [int(s.split(".", 1)[0]) for s in numbered] == list(range(1, len(numbered) + 1))
    return numbered


def _block(step: str, language: str) -> str:
    m = re.search(rf"```{language}\n(.*?)```", step, flags=re.S)
    assert m, f"no {language} block in step: {step[:80]}"
    return "\n".join(line.strip() for line in m.group(1).splitlines())


def test_following_the_slack_how_to_ends_with_an_answered_mention(tmp_path: Path, embedding_cache_dir: Path) -> None:
    steps = _steps()
    create, connect, install, settings, serve, check = steps[:6]

    # 1. Create the app from manifest.yml: the stand-in grants the manifest's scopes; events go to the path named.
    assert "manifest.yml" in create
    manifest = yaml.safe_load((ROOT / "manifest.yml").read_text(encoding="utf-8"))
    assert manifest["settings"]["event_subscriptions"]["request_url"].endswith("/slack/events")
    assert "/slack/events" in create
    # 2. HTTP events (the default): nothing to do. 3. Install: Slack issues the bot token and signing secret.
    assert "HTTP events" in connect and "Socket Mode" in connect
    assert "xoxb-" in install and "Signing Secret" in install
    standin = SlackStandin(BOT_TOKEN, scopes=manifest_scopes()).start()
    standin.add_user(USER)
    proc = None
    log_path = tmp_path / "serve.log"
    try:
        # 4. The .env file, as the guide shows it, with the tokens Slack (the stand-in) issued.
        issued = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET, "ADMIN_USER_IDS": USER}
        lines = []
        for line in _block(settings, "dotenv").splitlines():
            name, _, value = line.partition("=")
            lines.append(f"{name}={issued.get(name, value)}")
        assert {"SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "CHATOPS_SOURCES"} <= {ln.split("=")[0] for ln in lines}
        (tmp_path / ".env").write_text("\n".join(lines) + "\n", encoding="utf-8")
        shutil.copytree(WIKI, tmp_path / "examples" / "wiki")  # the guide's source: the example wiki
        data = seed_embedding_cache(tmp_path / ".chatops", embedding_cache_dir / "embeddings.sqlite")

        # 5. Start the server with the command shown (on a free local port).
        [command] = [ln[2:] for ln in _block(serve, "console").splitlines() if ln.startswith("$ chatops serve")]
        args = shlex.split(command)[2:]
        args = [a for a in args if a not in ("--port", "3000")] + ["--host", "127.0.0.1", "--port", "0"]
        env = cli_environment(data, SLACK_API_URL=standin.api_url)
        with open(log_path, "w") as log:
            proc = subprocess.Popen([*chatops_command(), "serve", *args], cwd=tmp_path, env=env, stdout=log,
                                    stderr=subprocess.STDOUT)
        m = wait_for(lambda: re.search(r"serving on http://127\.0\.0\.1:(\d+)", log_path.read_text()), 90,
                     "the server to listen")
        url = f"http://127.0.0.1:{m.group(1)}"
        wait_for(lambda: httpx.get(url + "/readyz").status_code == 200, 120, "readiness (the first sync)")

        # 6. Check that it works: invite the bot to a channel, mention it, the answer arrives in the thread.
        assert "/invite @chatops" in check and "@chatops how do I declare an incident?" in check
        question = re.search(r"`@chatops ([^`]+)`", check).group(1)
        standin.add_conversation(CHANNEL)
        msg = standin.user_message(CHANNEL, USER, f"<@{BOT_USER_ID}> {question}")
        sender = SlackSender(url, SIGNING_SECRET)
        try:
            resp, _ = sender.event({"type": "app_mention", "user": USER, "text": msg["text"], "ts": msg["ts"],
                                    "channel": CHANNEL, "event_ts": msg["ts"]})
        finally:
            sender.close()
        assert resp.status_code == 200
        [post] = standin.wait_for(lambda s: s.answers(CHANNEL, msg["ts"]), timeout=60)
        sources = [e["text"] for b in post.params["blocks"] if b["type"] == "context" for e in b["elements"]]
        assert sources and sources[0].startswith("*[1]*"), post.params
        assert "incident" in sources[0].lower()
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
        standin.stop()
