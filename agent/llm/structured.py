"""Typed outputs of the LLM planner's structured calls, and a tolerant reader of model JSON.

Every structured step (route, rewrite, reflection, claim verdicts, compliance verdict) is validated
into one of the pydantic models below; a reply that does not validate gets one repair round, then
the step's deterministic fallback (the planner records ``invalid_output`` in the trace).

:func:`loads_tolerant` reads what real models write around JSON: code fences, prose before or
after the object, ``<tool_call>...</tool_call>`` chat-template wrappers and trailing commas.
:func:`tool_calls_in_content` reads tool calls written as JSON in the text (chat templates without
native tool support): ``{"name": ..., "arguments": {...}}`` (or ``"parameters"``), a
``{"tool_calls": [...]}`` or ``{"function": {...}}`` wrapper, or a list of those.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

__all__ = ["Route", "Rewrite", "Reflection", "ClaimVerdict", "Claims", "ComplianceVerdict", "ContentToolCall",
           "loads_tolerant", "tool_calls_in_content"]


class _Lenient(BaseModel):
    model_config = {"extra": "ignore"}


class Route(_Lenient):
    """The routing decision when the model cannot call tools: search, answer directly, or propose an action."""

    route: Literal["search", "answer", "action"] = Field(description="what to do with the message")
    query: str = Field("", max_length=1000, description="search query (route=search)")
    answer: str = Field("", max_length=4000, description="the short direct answer (route=answer)")
    tool: str = Field("", max_length=100, description="action tool name (route=action)")
    arguments: dict[str, Any] = Field(default_factory=dict, description="action tool arguments (route=action)")


class Rewrite(_Lenient):
    """The query rewrite: standalone question, sub-queries, expansion keywords, hypothetical answer (HyDE)."""

    standalone: str = Field(min_length=1, max_length=1000)
    sub_queries: list[str] = Field(default_factory=list)
    expansion: list[str] = Field(default_factory=list)
    hypothetical_answer: str = Field("", max_length=1500)

    @field_validator("sub_queries", "expansion")
    @classmethod
    def _clean(cls, v: list[str]) -> list[str]:
        return [str(x).strip() for x in v if str(x).strip()]


class Reflection(_Lenient):
    """Whether the passages answer the question, and what to search next if not."""

    relevant: bool
    sufficient: bool
    missing: str = Field("", max_length=300)
    next_query: str = Field("", max_length=300)


class ClaimVerdict(_Lenient):
    """One claim's verdict: supported by its cited passage or not."""

    claim: int
    supported: bool


class Claims(_Lenient):
    """The claim check's verdicts."""

    verdicts: list[ClaimVerdict]


class ComplianceVerdict(_Lenient):
    """The compliance reviewer's verdict on a draft."""

    ok: bool
    reasons: list[str] = Field(default_factory=list)


class ContentToolCall(_Lenient):
    """A tool call written as JSON in a reply's text."""

    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)


_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.S)
_TOOL_TAG = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


def _candidates(text: str) -> list[str]:
    t = text.strip()
    out = [m.group(1) for m in _TOOL_TAG.finditer(t)] + [m.group(1) for m in _FENCE.finditer(t)]
    if t.startswith("```"):  # an unclosed fence (a cut-off reply)
        out.append(t.split("\n", 1)[1] if "\n" in t else "")
    out.append(t)
    return out


def _decode_from(s: str) -> Any:
    """The first JSON object or array in ``s`` (prose around it ignored), trailing commas forgiven."""
    dec = json.JSONDecoder()
    fixed = _TRAILING_COMMA.sub(r"\1", s)
    for i, ch in enumerate(s):
        if ch not in "{[":
            continue
        for variant, at in ((s, i), (fixed, len(_TRAILING_COMMA.sub(r"\1", s[:i])))):
            try:
                return dec.raw_decode(variant, at)[0]
            except json.JSONDecodeError:
                continue
    raise ValueError("no JSON object in the reply")


def loads_tolerant(text: str) -> Any:
    """The JSON value in a model's reply (see the module docstring).

    Raises:
        ValueError: when the reply holds no JSON object or array.
    """
    for candidate in _candidates(text or ""):
        try:
            return json.loads(candidate.strip())
        except json.JSONDecodeError:
            pass
        try:
            return _decode_from(candidate)
        except ValueError:
            continue
    raise ValueError("no JSON object in the reply")


def _as_call(obj: Any) -> list[ContentToolCall]:
    if isinstance(obj, list):
        return [c for item in obj for c in _as_call(item)]
    if not isinstance(obj, dict):
        return []
    if isinstance(obj.get("tool_calls"), list):
        return _as_call(obj["tool_calls"])
    if isinstance(obj.get("function"), dict):
        return _as_call(obj["function"])
    name = obj.get("name")
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = loads_tolerant(args)
        except ValueError:
            return []
    if not isinstance(name, str) or not name or not isinstance(args, dict):
        return []
    return [ContentToolCall(name=name, arguments=args)]


def tool_calls_in_content(text: str) -> list[ContentToolCall]:
    """Tool calls written as JSON in ``text`` (every ``<tool_call>`` block, else the first JSON value); []
    when there are none."""
    blocks = [m.group(1) for m in _TOOL_TAG.finditer(text or "")]
    calls: list[ContentToolCall] = []
    for block in blocks or [text or ""]:
        try:
            calls += _as_call(loads_tolerant(block))
        except ValueError:
            continue
    return calls
