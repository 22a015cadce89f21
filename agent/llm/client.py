"""A budgeted, retrying wrapper around the ``openai`` package's chat completions.

Works with OpenAI, Azure OpenAI (``openai.AzureOpenAI``) and any OpenAI-compatible server (vLLM,
Ollama, llama.cpp server). The SDK's own retries are off (``max_retries=0``) so that every retry
is counted against the turn's budget: 429 waits for ``Retry-After`` (clamped), 5xx, timeouts and
connection errors back off exponentially, malformed JSON for a structured output is asked again;
all within the remaining wall time, at most ``max_attempts`` times. Anything else raises
:class:`LLMError`, and the planner falls back to the rule-based answer.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import openai

from telemetry.tracing import span

from .budget import BudgetExceeded, TurnBudget

__all__ = ["LLMClient", "LLMError", "LLMResult", "ToolCall", "build_openai_client"]

log = logging.getLogger(__name__)


class LLMError(Exception):
    """The model could not be reached or kept answering unusably; the caller falls back."""


class _StreamBroke(Exception):
    """A streamed completion failed after some text was delivered (its cause is the API error)."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call the model asked for; ``arguments`` is the raw JSON text (validate before use)."""

    id: str
    name: str
    arguments: str


@dataclass(slots=True)
class LLMResult:
    """One completion: text, tool calls and token usage."""

    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    data: Any = None  # the parsed JSON for structured outputs


def build_openai_client(api_key: str | None, base_url: str | None, azure_endpoint: str | None = None,
                        azure_api_version: str | None = None, timeout: float = 30.0):
    """An ``openai.OpenAI`` client, or ``openai.AzureOpenAI`` when an Azure endpoint is given."""
    if azure_endpoint:
        return openai.AzureOpenAI(api_key=api_key, azure_endpoint=azure_endpoint,
                                  api_version=azure_api_version or "2024-10-21", max_retries=0, timeout=timeout)
    return openai.OpenAI(api_key=api_key or "unused", base_url=base_url, max_retries=0, timeout=timeout)


class LLMClient:
    """Chat completions under a :class:`TurnBudget`.

    Args:
        client: an ``openai.OpenAI``-compatible client.
        max_attempts: tries per call, retries included.
        retry_after_cap: longest ``Retry-After`` honoured, in seconds.
        price_in, price_out: USD per 1,000 prompt/completion tokens, for the trace's cost.
    """

    def __init__(self, client, max_attempts: int = 3, retry_after_cap: float = 10.0,
                 price_in: float = 0.0, price_out: float = 0.0) -> None:
        self.client = client
        self.max_attempts = max_attempts
        self.retry_after_cap = retry_after_cap
        self.price_in = price_in
        self.price_out = price_out

    def chat(self, model: str, messages: list[dict], budget: TurnBudget, *, tools: list[dict] | None = None,
             schema: dict | None = None, schema_name: str = "result", temperature: float = 0.0,
             max_tokens: int = 800, on_delta: Callable[[str], None] | None = None) -> LLMResult:
        """:meth:`_chat` in a ``chatops.llm`` span when tracing is on (model, schema name and tokens as
        attributes, never the messages)."""
        with span("chatops.llm", {"chatops.llm.model": model,
                                  "chatops.llm.kind": schema_name if schema is not None else "text"}) as sp:
            result = self._chat(model, messages, budget, tools=tools, schema=schema, schema_name=schema_name,
                                temperature=temperature, max_tokens=max_tokens, on_delta=on_delta)
            sp.set_attributes({"chatops.llm.prompt_tokens": result.prompt_tokens,
                               "chatops.llm.completion_tokens": result.completion_tokens})
            return result

    def _chat(self, model: str, messages: list[dict], budget: TurnBudget, *, tools: list[dict] | None = None,
              schema: dict | None = None, schema_name: str = "result", temperature: float = 0.0,
              max_tokens: int = 800, on_delta: Callable[[str], None] | None = None) -> LLMResult:
        """One completion; with ``schema`` the reply must be JSON matching it (``data`` holds it).

        With ``on_delta`` the completion is streamed (``stream=True``, usage in the last chunk) and
        ``on_delta`` is told each piece of text as it arrives (text only: not with ``tools`` or
        ``schema``). A failure before the first piece is retried like any other; after it, it raises
        :class:`LLMError` (the caller has shown part of a draft and must decide).

        Raises:
            LLMError: after the allowed retries, or on a non-retryable API error.
            BudgetExceeded: when the budget leaves no room for the call.
            ValueError: for ``on_delta`` with ``tools`` or ``schema``.
        """
        if on_delta is not None and (tools or schema is not None):
            raise ValueError("only plain text completions can be streamed (no tools, no schema)")
        kwargs: dict[str, Any] = {"model": model, "messages": messages, "temperature": temperature,
                                  "max_tokens": max_tokens}
        if tools:
            kwargs["tools"] = tools
            kwargs["tool_choice"] = "auto"
        if schema is not None:
            kwargs["response_format"] = {"type": "json_schema",
                                         "json_schema": {"name": schema_name, "schema": schema, "strict": False}}
        last: Exception | None = None
        for attempt in range(1, self.max_attempts + 1):
            budget.check()
            timeout = max(1.0, budget.remaining_ms / 1000)
            try:
                if on_delta is not None:
                    return self._streamed(kwargs, timeout, budget, on_delta)
                resp = self.client.chat.completions.create(timeout=timeout, **kwargs)
            except _StreamBroke as exc:
                raise LLMError(f"the streamed completion broke off: {exc.__cause__}") from exc.__cause__
            except openai.RateLimitError as exc:
                last = exc
                self._sleep(budget, self._retry_after(exc, attempt), "429")
                continue
            except openai.InternalServerError as exc:
                last = exc
                self._sleep(budget, self._backoff(attempt), f"{exc.status_code}")
                continue
            except (openai.APITimeoutError, openai.APIConnectionError) as exc:
                last = exc
                self._sleep(budget, self._backoff(attempt), type(exc).__name__)
                continue
            except openai.APIStatusError as exc:
                raise LLMError(f"the LLM endpoint answered {exc.status_code}: {_brief(exc)}; check OPENAI_API_KEY, "
                               "OPENAI_BASE_URL and the model names") from exc
            except openai.OpenAIError as exc:
                raise LLMError(f"LLM call failed: {type(exc).__name__}: {exc}") from exc
            usage = getattr(resp, "usage", None)
            pt = int(getattr(usage, "prompt_tokens", 0) or 0)
            ct = int(getattr(usage, "completion_tokens", 0) or 0)
            budget.charge(pt, ct, self.price_in, self.price_out)
            if not resp.choices:
                last = LLMError("the model returned no choices")
                continue
            msg = resp.choices[0].message
            result = LLMResult(content=msg.content or "", prompt_tokens=pt, completion_tokens=ct,
                               tool_calls=[ToolCall(tc.id, tc.function.name, tc.function.arguments or "")
                                           for tc in (msg.tool_calls or [])])
            if schema is not None:
                try:
                    result.data = json.loads(_strip_fences(result.content))
                except json.JSONDecodeError as exc:
                    last = exc
                    log.info("malformed JSON from the model (attempt %d, %d characters)", attempt,
                             len(result.content or ""))
                    continue
            return result
        raise LLMError(f"the LLM kept failing after {self.max_attempts} attempts: {type(last).__name__}: {last}")

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
    def _sleep(budget: TurnBudget, seconds: float, why: str) -> None:
        if seconds * 1000 >= budget.remaining_ms:
            raise BudgetExceeded(f"no time left to wait {seconds:.1f} s after {why}")
        log.info("LLM call: %s, retrying in %.2f s", why, seconds)
        time.sleep(seconds)


def _strip_fences(text: str) -> str:
    t = text.strip()
    if t.startswith("```"):
        t = t.split("\n", 1)[1] if "\n" in t else ""
        if t.rstrip().endswith("```"):
            t = t.rstrip()[:-3]
    return t.strip()


def _brief(exc: openai.APIStatusError) -> str:
    try:
        body = exc.response.json()
        return str(body.get("error", {}).get("message") or body)[:200]
    except Exception:  # noqa: BLE001 - best effort for a message
        return str(exc)[:200]
