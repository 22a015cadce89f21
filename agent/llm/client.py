"""A budgeted, retrying wrapper around the ``openai`` package's chat completions.

Works with OpenAI, Azure OpenAI (``openai.AzureOpenAI``) and any OpenAI-compatible server (vLLM,
Ollama, llama.cpp server). The SDK's own retries are off (``max_retries=0``) so that every request
is counted against the turn's budget, failed and timed-out ones included. Retries go through
``tenacity``: 429 waits for ``Retry-After`` (clamped), 5xx, timeouts and connection errors back off
exponentially, all within the remaining wall time, at most ``max_attempts`` times. Anything else
raises :class:`LLMError`, and the planner falls back to the rule-based answer.

What a server can do is found out on first use and remembered per server and model:

- **Structured output** (``json_schema``: ``auto``/``on``/``off``). ``auto`` asks for
  ``response_format={"type": "json_schema", ...}``; a 400, 422 or 500 to that request (llama.cpp's
  Python server answers 500) switches to ``{"type": "json_object", "schema": ...}``, and a failure
  of that to plain JSON asked for in the prompt, the schema written out. ``on`` always sends
  ``json_schema``; ``off`` never sends a ``response_format``. Replies are read with
  :func:`agent.llm.structured.loads_tolerant` whatever was asked.
- **Tool calling** (``tools``: ``auto``/``on``/``off``). A 400 or 422 to a request with ``tools``
  raises :class:`ToolsUnsupported` and is remembered; :meth:`LLMClient.probe_tools` asks, before the
  first routing call, with a prompt of a few tokens and ``max_tokens`` of :data:`PROBE_TOKENS`, whether the
  model calls tools at all (servers that ignore ``tools``, like llama.cpp's Python server, answer in prose:
  a routing prompt answered in prose costs seconds on a slow model, the probe about one).

What was found out, and the measured latency, is kept per server and model in a
:class:`agent.llm.memory.ServerMemory` (a small file in the data dir), so that the next process starts
from it instead of finding out again.

Every call's wall time is recorded in a :class:`agent.llm.latency.LatencyMeter`, timed-out ones too. A
call's ``max_tokens`` is lowered to what the model writes in :data:`TIME_SHARE` of the turn's time left at
its measured speed (a call that cannot write :data:`MIN_TOKENS` raises :class:`BudgetExceeded` unsent): a
call the client gives up on would otherwise keep a single-slot server (llama.cpp) generating for the
calls queued after it.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import openai
from tenacity import Retrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from telemetry.timing import timed
from telemetry.tracing import span

from .budget import BudgetExceeded, TurnBudget
from .latency import LatencyMeter
from .memory import ServerMemory
from .structured import loads_tolerant, tool_calls_in_content

__all__ = ["LLMClient", "LLMError", "LLMResult", "ToolCall", "ToolsUnsupported", "Mode", "build_openai_client"]

log = logging.getLogger(__name__)

Mode = Literal["auto", "on", "off"]

#: Structured-output request forms, best first.
FORMATS = ("json_schema", "json_object", "prompt")

#: ``max_tokens`` of the tool-calling probe: a call of ``ping`` fits, a prose reply is cut short.
PROBE_TOKENS = 32

#: Share of the turn's time left that one call's ``max_tokens`` may fill at the model's measured speed.
TIME_SHARE = 0.85

#: Fewest completion tokens worth a call: when fewer fit in the time left, the call is not sent.
MIN_TOKENS = 16


class LLMError(Exception):
    """The model could not be reached or kept answering unusably; the caller falls back."""


class ToolsUnsupported(LLMError):
    """The server rejected a request with ``tools`` (400/422): route without tool calling."""


class _StreamBroke(Exception):
    """A streamed completion failed after some text was delivered (its cause is the API error)."""


class _FormatRejected(Exception):
    """The server rejected the ``response_format`` asked for (400/422/500)."""


_TRANSIENT = (openai.RateLimitError, openai.InternalServerError, openai.APITimeoutError, openai.APIConnectionError)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call the model asked for; ``arguments`` is the raw JSON text (validate before use)."""

    id: str
    name: str
    arguments: str
    native: bool = True  # False: read from a JSON object in the reply's text


@dataclass(slots=True)
class LLMResult:
    """One completion: text, tool calls and token usage."""

    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    data: Any = None  # the JSON value read from the reply (structured outputs), None when there was none
    seconds: float = 0.0  # the server's time: request sent to response read (not the client's own start-up)


def build_openai_client(api_key: str | None, base_url: str | None, azure_endpoint: str | None = None,
                        azure_api_version: str | None = None, timeout: float = 30.0) -> openai.OpenAI:
    """An ``openai.OpenAI`` client, or ``openai.AzureOpenAI`` when an Azure endpoint is given."""
    if azure_endpoint:
        return openai.AzureOpenAI(api_key=api_key, azure_endpoint=azure_endpoint,
                                  api_version=azure_api_version or "2024-10-21", max_retries=0, timeout=timeout)
    return openai.OpenAI(api_key=api_key or "unused", base_url=base_url, max_retries=0, timeout=timeout)


class LLMClient:
    """Chat completions under a :class:`TurnBudget` (see the module docstring).

    Args:
        client: an ``openai.OpenAI``-compatible client.
        max_attempts: tries per call, retries included.
        retry_after_cap: longest ``Retry-After`` honoured, in seconds.
        price_in, price_out: USD per 1,000 prompt/completion tokens, for the trace's cost.
        json_schema: ``auto``, ``on`` or ``off`` (structured-output requests).
        tools: ``auto``, ``on`` or ``off`` (tool calling).
        latency: where call latencies are recorded (a new meter by default).
        memory: where capabilities and latencies are kept across processes (this process only by default).
    """

    def __init__(self, client: openai.OpenAI, max_attempts: int = 3, retry_after_cap: float = 10.0,
                 price_in: float = 0.0, price_out: float = 0.0, *, json_schema: Mode = "auto",
                 tools: Mode = "auto", latency: LatencyMeter | None = None,
                 memory: ServerMemory | None = None) -> None:
        self.client = client
        self.max_attempts = max_attempts
        self.retry_after_cap = retry_after_cap
        self.price_in = price_in
        self.price_out = price_out
        self.json_schema = json_schema
        self.tools_mode = tools
        self.latency = latency or LatencyMeter()
        self._formats: dict[tuple[str, str], str] = {}
        self._tools: dict[tuple[str, str], bool] = {}
        self._lock = threading.Lock()
        self.memory = memory or ServerMemory(None)
        self._recalled: set[str] = set()
        # The SDK imports its chat resources and their pydantic types on first use: seconds on a busy machine,
        # which would otherwise be spent inside the first turn's budget.
        _ = getattr(getattr(client, "chat", None), "completions", None)

    # -- capabilities ----------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """The server's base URL (the client's; empty when it has none)."""
        return str(getattr(self.client, "base_url", ""))

    def _key(self, model: str) -> tuple[str, str]:
        self._recall(model)
        return (self.base_url, model)

    def _recall(self, model: str) -> None:
        """Load, once per process, what :attr:`memory` holds for ``model`` on this server."""
        with self._lock:
            if model in self._recalled:
                return
            self._recalled.add(model)
        facts = self.memory.get(self.base_url, model)
        key = (self.base_url, model)
        with self._lock:
            if isinstance(facts.get("tools"), bool):
                self._tools.setdefault(key, facts["tools"])
            if facts.get("json_format") in FORMATS:
                self._formats.setdefault(key, facts["json_format"])
        if isinstance(facts.get("latency"), dict):
            self.latency.seed(model, facts["latency"])

    def tools_supported(self, model: str) -> bool | None:
        """Whether ``model`` calls tools: True/False when set or found out (in this process or one before it,
        see :attr:`memory`), None while unknown."""
        if self.tools_mode != "auto":
            return self.tools_mode == "on"
        key = self._key(model)
        with self._lock:
            return self._tools.get(key)

    def remember_tools(self, model: str, supported: bool) -> None:
        """Record whether ``model`` on this server calls tools (``auto`` mode only), here and in :attr:`memory`."""
        if self.tools_mode == "auto":
            key = self._key(model)
            with self._lock:
                self._tools[key] = supported
            self.memory.update(self.base_url, model, tools=supported)
            log.info("LLM %s %s tool calling", model, "supports" if supported else "does not support")

    def json_format(self, model: str) -> str:
        """The structured-output form used for ``model``: ``json_schema``, ``json_object`` or ``prompt``."""
        if self.json_schema != "auto":
            return "json_schema" if self.json_schema == "on" else "prompt"
        key = self._key(model)
        with self._lock:
            return self._formats.get(key, "json_schema")

    def _downgrade(self, model: str, rejected: str) -> str | None:
        nxt = FORMATS[FORMATS.index(rejected) + 1] if rejected != FORMATS[-1] else None
        if nxt is not None:
            key = self._key(model)
            with self._lock:
                self._formats[key] = nxt
            self.memory.update(self.base_url, model, json_format=nxt)
            log.info("LLM %s rejected response_format %s; using %s", model, rejected, nxt)
        return nxt

    def probe_tools(self, model: str, budget: TurnBudget) -> bool:
        """Ask once whether ``model`` calls tools: a request of a few tokens whose only sensible reply is a
        call of ``ping``, at most :data:`PROBE_TOKENS` tokens long. Remembers and returns the answer (a
        rejected request counts as no).

        Raises:
            LLMError, BudgetExceeded: as :meth:`chat` (nothing is remembered then)."""
        msgs = [{"role": "system", "content": PROBE_SYSTEM}, {"role": "user", "content": "ping"}]
        spec = [{"type": "function", "function": {"name": "ping", "description": "Answer a ping.",
                                                  "parameters": {"type": "object", "properties": {}}}}]
        try:
            res = self.chat(model, msgs, budget, tools=spec, max_tokens=PROBE_TOKENS, tool_choice="required")
            ok = bool(res.tool_calls)
        except ToolsUnsupported:
            ok = False
        self.remember_tools(model, ok)
        return ok

    # -- calls -----------------------------------------------------------------------------------
    def chat(self, model: str, messages: list[dict[str, Any]], budget: TurnBudget, *,
             tools: list[dict[str, Any]] | None = None, schema: dict[str, Any] | None = None,
             schema_name: str = "result", temperature: float = 0.0, max_tokens: int = 800,
             on_delta: Callable[[str], None] | None = None, tool_choice: str = "auto",
             reserve_s: float = 0.0) -> LLMResult:
        """:meth:`_chat` in a ``chatops.llm`` span when tracing is on (model, schema name and tokens as
        attributes, never the messages)."""
        with span("chatops.llm", {"chatops.llm.model": model,
                                  "chatops.llm.kind": schema_name if schema is not None else "text"}) as sp:
            result = self._chat(model, messages, budget, tools=tools, schema=schema, schema_name=schema_name,
                                temperature=temperature, max_tokens=max_tokens, on_delta=on_delta,
                                tool_choice=tool_choice, reserve_s=reserve_s)
            sp.set_attributes({"chatops.llm.prompt_tokens": result.prompt_tokens,
                               "chatops.llm.completion_tokens": result.completion_tokens})
            return result

    def _chat(self, model: str, messages: list[dict[str, Any]], budget: TurnBudget, *,
              tools: list[dict[str, Any]] | None = None, schema: dict[str, Any] | None = None,
              schema_name: str = "result", temperature: float = 0.0, max_tokens: int = 800,
              on_delta: Callable[[str], None] | None = None, tool_choice: str = "auto",
              reserve_s: float = 0.0) -> LLMResult:
        """One completion. With ``schema`` the reply is asked to be JSON matching it and ``data`` holds the
        JSON value read from it (None when there is none: validating is the caller's job). With ``tools``
        the calls are read from ``tool_calls`` and, when there are none, from JSON in the text.

        With ``on_delta`` the completion is streamed (``stream=True``, usage in the last chunk) and
        ``on_delta`` is told each piece of text as it arrives (text only: not with ``tools`` or
        ``schema``). A failure before the first piece is retried like any other; after it, it raises
        :class:`LLMError` (the caller has shown part of a draft and must decide).

        ``max_tokens`` is lowered to what the model writes, at its measured speed, in :data:`TIME_SHARE` of
        the turn's time left minus ``reserve_s`` seconds (kept for the calls that must follow, e.g. the
        answer after a rewrite).

        Raises:
            ToolsUnsupported: the server rejected ``tools``.
            LLMError: after the allowed retries, or on a non-retryable API error.
            BudgetExceeded: when the budget leaves no room for the call.
            ValueError: for ``on_delta`` with ``tools`` or ``schema``.
        """
        if on_delta is not None and (tools or schema is not None):
            raise ValueError("only plain text completions can be streamed (no tools, no schema)")
        base: dict[str, Any] = {"model": model, "messages": messages, "temperature": temperature,
                                "max_tokens": max_tokens}
        if tools:
            base["tools"] = tools
            base["tool_choice"] = tool_choice
        while True:
            form = self.json_format(model) if schema is not None else None
            kwargs = _with_format(base, form, schema, schema_name)
            try:
                result = self._send(kwargs, budget, on_delta, auto_format=form is not None and self.json_schema == "auto"
                                    and form != "prompt", reserve_s=reserve_s)
            except _FormatRejected as exc:
                if self._downgrade(model, form or "prompt") is None:
                    raise LLMError(f"the server rejected every structured-output form: {exc}") from exc
                continue
            if schema is not None:
                try:
                    result.data = loads_tolerant(result.content)
                except ValueError:
                    log.info("no JSON in the model's reply (%d characters)", len(result.content or ""))
            if tools and not result.tool_calls and result.content:
                result.tool_calls = [ToolCall(f"content_{i}", c.name, json.dumps(c.arguments), native=False)
                                     for i, c in enumerate(tool_calls_in_content(result.content))]
            return result

    def _send(self, kwargs: dict[str, Any], budget: TurnBudget, on_delta: Callable[[str], None] | None,
              auto_format: bool, reserve_s: float = 0.0) -> LLMResult:
        """One request under ``tenacity``: transient errors retried within the budget."""
        retrying = Retrying(stop=stop_after_attempt(self.max_attempts), retry=retry_if_exception_type(_TRANSIENT),
                            wait=self._wait, sleep=lambda s: self._sleep(budget, s), reraise=True)
        try:
            return retrying(self._attempt, kwargs, budget, on_delta, auto_format, reserve_s)
        except _StreamBroke as exc:
            raise LLMError(f"the streamed completion broke off: {exc.__cause__}") from exc.__cause__
        except _TRANSIENT as exc:
            raise LLMError(f"the LLM kept failing after {self.max_attempts} attempts: "
                           f"{type(exc).__name__}: {exc}") from exc
        except openai.APIStatusError as exc:
            if "tools" in kwargs and exc.status_code in (400, 422):
                self.remember_tools(kwargs["model"], False)
                raise ToolsUnsupported(f"the server rejected tool calling ({exc.status_code}: {_brief(exc)})") from exc
            raise LLMError(f"the LLM endpoint answered {exc.status_code}: {_brief(exc)}; check OPENAI_API_KEY, "
                           "OPENAI_BASE_URL and the model names") from exc
        except openai.OpenAIError as exc:
            raise LLMError(f"LLM call failed: {type(exc).__name__}: {exc}") from exc

    def _attempt(self, kwargs: dict[str, Any], budget: TurnBudget, on_delta: Callable[[str], None] | None,
                 auto_format: bool, reserve_s: float = 0.0) -> LLMResult:
        """One request: counted in the budget and timed whatever happens."""
        budget.check()
        left_s = budget.remaining_ms / 1000
        timeout = max(1.0, left_s)
        model = kwargs["model"]
        self._recall(model)
        prompt_chars = len(json.dumps(kwargs["messages"])) + len(json.dumps(kwargs.get("tools") or ""))
        fits = self.latency.affordable_tokens(model, TIME_SHARE * (left_s - reserve_s), prompt_chars)
        if fits is not None and fits < kwargs["max_tokens"]:
            if fits < MIN_TOKENS:
                raise BudgetExceeded(f"{model} writes about {fits} tokens in the {left_s:.1f} s left of the turn "
                                     f"({reserve_s:.1f} s kept for later calls) at its measured speed: "
                                     "the call is not sent")
            kwargs = {**kwargs, "max_tokens": fits}
            budget.usage.capped += 1
        with timed("chatops.llm.request", {"chatops.llm.model": model}) as clock:
            try:
                if on_delta is not None:
                    result = self._streamed(kwargs, timeout, budget, on_delta)
                else:
                    result = self._completed(kwargs, timeout, budget)
            except openai.APITimeoutError:
                budget.charge_failed(timed_out=True)
                self.latency.observe(model, clock.elapsed(), kwargs["max_tokens"], timed_out=True)
                raise
            except openai.APIStatusError as exc:
                budget.charge_failed()
                if auto_format and exc.status_code in (400, 422, 500):
                    raise _FormatRejected(f"{exc.status_code}: {_brief(exc)}") from exc
                raise
            except (openai.OpenAIError, _StreamBroke):
                budget.charge_failed()
                raise
        self.latency.observe(model, result.seconds or clock.elapsed(), result.completion_tokens,
                             prompt_tokens=result.prompt_tokens, prompt_chars=prompt_chars)
        self.memory.update(self.base_url, model, latency=self.latency.snapshot(model))
        return result

    def _completed(self, kwargs: dict[str, Any], timeout: float, budget: TurnBudget) -> LLMResult:
        raw = self.client.chat.completions.with_raw_response.create(timeout=timeout, **kwargs)
        resp = raw.parse()
        seconds = raw.elapsed.total_seconds()
        usage = getattr(resp, "usage", None)
        pt = int(getattr(usage, "prompt_tokens", 0) or 0)
        ct = int(getattr(usage, "completion_tokens", 0) or 0)
        budget.charge(pt, ct, self.price_in, self.price_out)
        if not resp.choices:
            return LLMResult(content="", prompt_tokens=pt, completion_tokens=ct, seconds=seconds)
        msg = resp.choices[0].message
        return LLMResult(content=msg.content or "", prompt_tokens=pt, completion_tokens=ct, seconds=seconds,
                         tool_calls=[ToolCall(tc.id, tc.function.name, tc.function.arguments or "")
                                     for tc in (msg.tool_calls or [])])

    def _streamed(self, kwargs: dict[str, Any], timeout: float, budget: TurnBudget,
                  on_delta: Callable[[str], None]) -> LLMResult:
        """One streamed completion: deltas to ``on_delta``; errors before the first delta propagate (and are
        retried by :meth:`chat`), later ones raise :class:`_StreamBroke`."""
        stream = self.client.chat.completions.create(timeout=timeout, stream=True,
                                                     stream_options={"include_usage": True}, **kwargs)
        parts: list[str] = []
        pt = ct = 0
        try:
            for chunk in stream:
                usage = getattr(chunk, "usage", None)
                if usage is not None:
                    pt = int(getattr(usage, "prompt_tokens", 0) or 0)
                    ct = int(getattr(usage, "completion_tokens", 0) or 0)
                for choice in chunk.choices or []:
                    text = getattr(choice.delta, "content", None) or ""
                    if text:
                        parts.append(text)
                        on_delta(text)
        except openai.OpenAIError as exc:
            if not parts:
                raise
            raise _StreamBroke() from exc
        budget.charge(pt, ct, self.price_in, self.price_out)
        return LLMResult(content="".join(parts), prompt_tokens=pt, completion_tokens=ct)

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, openai.RateLimitError):
            return self._retry_after(exc, state.attempt_number)
        return self._backoff(state.attempt_number)

    def _retry_after(self, exc: openai.APIStatusError, attempt: int) -> float:
        header = exc.response.headers.get("retry-after") if exc.response is not None else None
        try:
            return min(max(float(header), 0.0), self.retry_after_cap) if header else self._backoff(attempt)
        except ValueError:
            return self._backoff(attempt)

    @staticmethod
    def _backoff(attempt: int) -> float:
        """Exponential backoff with full jitter: uniform in [0, 0.5 * 2^(attempt-1)] seconds."""
        return random.uniform(0, 0.5 * 2 ** (attempt - 1))

    @staticmethod
    def _sleep(budget: TurnBudget, seconds: float) -> None:
        if seconds * 1000 >= budget.remaining_ms:
            raise BudgetExceeded(f"no time left to wait {seconds:.1f} s before retrying the LLM call")
        log.info("LLM call failed, retrying in %.2f s", seconds)
        time.sleep(seconds)


PROBE_SYSTEM = "Call the function ping. Do not write any text."


#: Schema keywords left out of what servers are sent: llama.cpp turns ``maxLength: 200`` into a grammar rule
#: nested 200 deep, fails to parse it and its Python server then dies (seen with calendar.create's arguments,
#: which took every later turn down with it). Replies are validated against the full model anyway.
_SERVER_OMITS = frozenset({"maxLength", "minLength", "pattern", "format", "maxItems", "minItems", "maximum",
                           "minimum", "exclusiveMaximum", "exclusiveMinimum"})


def server_schema(schema: Any) -> Any:
    """``schema`` without the keywords of :data:`_SERVER_OMITS` (at any depth); property names are kept."""
    if isinstance(schema, dict):
        return {k: (v if k == "required" else {p: server_schema(x) for p, x in v.items()} if k == "properties"
                    and isinstance(v, dict) else server_schema(v))
                for k, v in schema.items() if k not in _SERVER_OMITS}
    if isinstance(schema, list):
        return [server_schema(x) for x in schema]
    return schema


def _with_format(base: dict[str, Any], form: str | None, schema: dict[str, Any] | None, name: str) -> dict[str, Any]:
    """``base`` with the structured-output request of ``form`` (the schema in the prompt for ``prompt``), the
    schema as :func:`server_schema` leaves it."""
    if form is None or schema is None:
        return base
    schema = server_schema(schema)
    if form == "json_schema":
        return {**base, "response_format": {"type": "json_schema",
                                            "json_schema": {"name": name, "schema": schema, "strict": False}}}
    if form == "json_object":
        return {**base, "response_format": {"type": "json_object", "schema": schema}}
    note = ("Reply with one JSON object only, no prose, matching this JSON schema: "
            + json.dumps(schema, separators=(",", ":")))
    return {**base, "messages": [*base["messages"], {"role": "system", "content": note}]}


def _brief(exc: openai.APIStatusError) -> str:
    try:
        body = exc.response.json()
        return str(body.get("error", {}).get("message") or body)[:200]
    except Exception:  # noqa: BLE001 - best effort for a message
        return str(exc)[:200]
