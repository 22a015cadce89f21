"""A stand-in OpenAI-compatible server on 127.0.0.1 for the LLM planner's tests.

It speaks the real wire format of ``POST /v1/chat/completions`` (tool calls, ``response_format``
JSON, ``usage``; with ``"stream": true`` the text as server-sent ``chat.completion.chunk`` events, a few
words each, the usage in a last chunk when ``stream_options.include_usage``, then ``data: [DONE]``) and
``POST /v1/embeddings``, records every request, and answers from a script:
a function ``brain(request_json) -> Response`` that tests write per scenario (usually dispatching
on the system prompt: routing, rewriting, reflection, answering, claim check, compliance).
Errors are answered the way OpenAI does: a status code, an ``{"error": {...}}`` body and, for
429, a ``Retry-After`` header.

It can also behave like the limited servers met in the field:

- ``tools="ignored"`` (llama-cpp-python's server): ``tools`` and ``tool_choice`` never reach the
  brain, and native ``tool_calls`` never come back (the model answers in prose);
- ``tools="rejected"`` (a model Ollama marks without tool support): a request with ``tools`` gets a 400;
- ``json_schema_status=500`` (llama-cpp-python 0.3.x): a ``response_format`` of type ``json_schema``
  gets that status, while ``{"type": "json_object", "schema": ...}`` is accepted;
- ``delay`` and ``token_delay``: seconds before each chat completion is answered, plus seconds per
  completion token of the reply (a slow model; ``token_delay=1/21`` is SmolLM2 on 2 cores);
- ``single_slot=True`` (llama.cpp's server with one slot): one completion at a time, the others waiting
  for it, a request the client gave up on still generating to the end; and a reply stops at the request's
  ``max_tokens`` (its usage and its time count at most that many completion tokens).

Every recorded request carries ``_at`` (``time.monotonic()`` when it arrived) and, for chat completions,
``_done`` (when its answer was ready).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from tests.standins.base import Handler, StandIn

__all__ = ["OpenAIStandIn", "Response", "chat", "tool_call", "json_reply", "error"]


@dataclass
class Response:
    """What the stand-in answers: status, JSON body and headers."""

    status: int = 200
    body: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


def chat(content: str | None = None, tool_calls: list[dict] | None = None, prompt_tokens: int = 100,
         completion_tokens: int = 20, model: str = "stand-in") -> Response:
    """A ``chat.completion`` with text and/or tool calls."""
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        msg["tool_calls"] = tool_calls
    return Response(200, {
        "id": "chatcmpl-standin", "object": "chat.completion", "created": 1_700_000_000, "model": model,
        "choices": [{"index": 0, "message": msg, "logprobs": None,
                     "finish_reason": "tool_calls" if tool_calls else "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    })


def tool_call(name: str, arguments: dict | str, call_id: str = "call_1") -> dict:
    """One entry of ``message.tool_calls``."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def json_reply(data: Any, **kw: Any) -> Response:
    """A completion whose content is ``data`` as JSON (structured outputs)."""
    return chat(json.dumps(data), **kw)


def error(status: int, message: str = "error", retry_after: float | None = None) -> Response:
    """An OpenAI-style error response."""
    headers = {"retry-after": str(retry_after)} if retry_after is not None else {}
    kind = {429: "rate_limit_exceeded", 500: "server_error", 503: "server_error"}.get(status, "invalid_request_error")
    return Response(status, {"error": {"message": message, "type": kind, "param": None, "code": kind}}, headers)


class _Handler(Handler):
    standin: OpenAIStandIn

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        stand_in = self.standin
        raw = self.body()
        try:
            req = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send(Response(400, {"error": {"message": "invalid JSON"}}))
            return
        req["_path"] = self.path
        req["_auth"] = self.headers.get("authorization", "")
        req["_at"] = time.monotonic()
        stand_in.record(stand_in.requests, req)
        if self.path.endswith("/embeddings"):
            inputs = req.get("input") or []
            inputs = [inputs] if isinstance(inputs, str) else inputs
            data = [{"object": "embedding", "index": i, "embedding": [float(len(t) % 7), 1.0, 0.5]}
                    for i, t in enumerate(inputs)]
            self._send(Response(200, {"object": "list", "data": data, "model": req.get("model"),
                                      "usage": {"prompt_tokens": 1, "total_tokens": 1}}))
            return
        if not self.path.endswith("/chat/completions"):
            self._send(Response(404, {"error": {"message": f"unknown path {self.path}"}}))
            return
        if stand_in.single_slot:
            with stand_in._slot:
                resp = stand_in._answer(req)
        else:
            resp = stand_in._answer(req)
        req["_done"] = time.monotonic()
        if req.get("stream") and resp.status == 200 and resp.body.get("choices"):
            self._stream(req, resp)
            return
        self._send(resp)

    def _stream(self, req: dict, resp: Response) -> None:
        stand_in = self.standin
        body = resp.body
        content = body["choices"][0]["message"].get("content") or ""
        words = re.findall(r"\S+\s*", content)
        base = {"id": body["id"], "object": "chat.completion.chunk", "created": body["created"],
                "model": body["model"]}
        events = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                        "finish_reason": None}]}]
        events += [{**base, "choices": [{"index": 0, "delta": {"content": "".join(words[i:i + 3])},
                                         "finish_reason": None}]} for i in range(0, len(words), 3)]
        events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        if (req.get("stream_options") or {}).get("include_usage"):
            events.append({**base, "choices": [], "usage": body.get("usage")})
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        for event in events:
            self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
            self.wfile.flush()
            if stand_in.chunk_delay:
                time.sleep(stand_in.chunk_delay)
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True

    def _send(self, resp: Response) -> None:
        self.reply_json(resp.status, resp.body, resp.headers)


class OpenAIStandIn(StandIn):
    """Start with ``with OpenAIStandIn(brain) as s:``; ``s.base_url`` ends in ``/v1``."""

    handler = _Handler
    quiet_disconnects = True  # a client that gave up (its timeout) closes the socket before a slow answer

    def __init__(self, brain: Callable[[dict], Response], chunk_delay: float = 0.0, *,
                 tools: Literal["native", "ignored", "rejected"] = "native", json_schema_status: int | None = None,
                 delay: float = 0.0, token_delay: float = 0.0, single_slot: bool = False) -> None:
        super().__init__()
        self.brain = brain
        self.chunk_delay = chunk_delay  # seconds between streamed chunks (a model that takes its time)
        self.tools = tools
        self.json_schema_status = json_schema_status
        self.delay = delay
        self.token_delay = token_delay
        self.single_slot = single_slot
        self._slot = threading.Lock()
        self.requests: list[dict] = []
        self.bind()
        self.base_url = f"{self.origin}/v1"

    def _answer(self, req: dict) -> Response:
        """The brain's answer, shaped by the server profile (tools, json_schema, delay)."""
        fmt = (req.get("response_format") or {}).get("type")
        if self.json_schema_status is not None and fmt == "json_schema":
            return error(self.json_schema_status, "response_format json_schema is not supported")
        if req.get("tools") and self.tools == "rejected":
            return error(400, f"registry.ollama.ai/library/{req.get('model')} does not support tools")
        if self.tools == "ignored":
            req = {k: v for k, v in req.items() if k not in ("tools", "tool_choice")}
        resp = self.brain(req)
        if self.tools == "ignored" and resp.status == 200 and resp.body.get("choices"):
            msg = resp.body["choices"][0]["message"]
            if msg.pop("tool_calls", None) is not None:
                msg["content"] = msg.get("content") or "I am not able to do that."
                resp.body["choices"][0]["finish_reason"] = "stop"
        usage = resp.body.get("usage") or {}
        if self.single_slot and usage and req.get("max_tokens"):
            usage["completion_tokens"] = min(int(usage.get("completion_tokens") or 0), int(req["max_tokens"]))
            usage["total_tokens"] = int(usage.get("prompt_tokens") or 0) + usage["completion_tokens"]
        wait = self.delay + self.token_delay * int(usage.get("completion_tokens") or 0)
        if wait:
            time.sleep(wait)
        return resp

    def chat_requests(self) -> list[dict]:
        """Recorded chat completion requests."""
        return [r for r in self.requests if r["_path"].endswith("/chat/completions")]
