"""Benchmark: the MCP server (``chatops mcp``, issue 28) as an assistant sees it, with the SDK's own client.

Indexes a folder (default ``examples/wiki``) into a fresh data dir with the real ``chatops index``, issues a
token (``chatops mcp token create``), starts ``chatops mcp --http --port 0`` and, in one session of the SDK's
client over Streamable HTTP, calls ``search`` and then ``ask`` for each question ``--rounds`` times; then
starts ``chatops mcp --as EMAIL`` over stdio the way an assistant does and times the session's start (process
start to the tool list) and the same calls. Prints median, p95 and best per call kind, in milliseconds,
beside the load average (a shared machine: compare best-of-N figures).

Usage: ``.venv/bin/python bench/mcp_latency.py [--rounds 3] [--corpus examples/wiki]`` (the embedding cache
starts as a copy of ``$CHATOPS_TEST_CACHE/embeddings.sqlite`` or ``~/.cache/chatops-bench`` when it exists).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[1]
CHATOPS = str(Path(sys.executable).parent / "chatops")
QUESTIONS = ["how do i declare an incident?", "hey, how much is the home office budget for new joiners?",
             "whats the deadline for submitting expenses?", "who approves a laptop upgrade?",
             "can i work from another country for a month?", "what is the office wifi password?"]


def _env(data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHATOPS_", "OPENAI_", "QDRANT_", "DATABASE_"))}
    env.update(CHATOPS_DATA_DIR=str(data), CHATOPS_LOG_LEVEL="WARNING", EMBEDDING_MODEL="local", TZ="UTC")
    return env


def _row(name: str, ms: list[float]) -> str:
    ms = sorted(ms)
    p95 = ms[min(len(ms) - 1, int(round(0.95 * (len(ms) - 1))))]
    return f"{name:<28} n={len(ms):<3} median {statistics.median(ms):8.1f}  p95 {p95:8.1f}  best {ms[0]:8.1f}"


async def _calls(client: Client, rounds: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"search": [], "ask": []}
    for _ in range(rounds):
        for q in QUESTIONS:
            for tool, args in (("search", {"query": q, "limit": 5}), ("ask", {"question": q})):
                t = time.perf_counter()
                result = await client.call_tool(tool, args)
                out[tool].append((time.perf_counter() - t) * 1000)
                assert not result.is_error, result
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--corpus", default=str(ROOT / "examples" / "wiki"))
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="chatops-mcp-bench-"))
    data = tmp / "data"
    for cache in (Path(os.environ.get("CHATOPS_TEST_CACHE", "/nonexistent")) / "embeddings.sqlite",
                  Path.home() / ".cache" / "chatops-bench" / "embeddings.sqlite"):
        if cache.is_file():
            (data / "cache").mkdir(parents=True, exist_ok=True)
            shutil.copy(cache, data / "cache" / "embeddings.sqlite")
            break
    env = _env(data)
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}; corpus {args.corpus}; "
          f"{len(QUESTIONS)} questions x {args.rounds} rounds")
    subprocess.run([CHATOPS, "index", f"folder:{args.corpus}"], env=env, check=True, capture_output=True)
    token = json.loads(subprocess.run([CHATOPS, "mcp", "token", "create", "--user", "bench@example.com", "--json"],
                                      env=env, check=True, capture_output=True, text=True).stdout)["token"]
    log = open(tmp / "server.log", "w+")
    server = subprocess.Popen([CHATOPS, "mcp", "--http", "--port", "0"], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while not (m := re.search(r"on (http://127\.0\.0\.1:\d+/mcp)", (tmp / "server.log").read_text())):
            assert server.poll() is None and time.monotonic() < deadline, (tmp / "server.log").read_text()
            time.sleep(0.1)
        url = m.group(1)

        async def over_http() -> dict[str, list[float]]:
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120) as http:
                async with Client(streamable_http_client(url, http_client=http)) as client:
                    return await _calls(client, args.rounds)

        http = asyncio.run(over_http())
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(60)
    for name, ms in http.items():
        print(_row(f"http {name}", ms))

    params = StdioServerParameters(command=CHATOPS, args=["mcp", "--as", "bench@example.com"], env=env)

    async def over_stdio() -> tuple[float, dict[str, list[float]]]:
        t = time.perf_counter()
        async with Client(params, read_timeout_seconds=120) as client:
            await client.list_tools()
            start = (time.perf_counter() - t) * 1000
            return start, await _calls(client, 1)

    start, stdio = asyncio.run(over_stdio())
    print(_row("stdio session start", [start]))
    for name, ms in stdio.items():
        print(_row(f"stdio {name}", ms))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
