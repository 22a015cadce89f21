"""An action tool's call from the model turned into a pending action: its arguments validated (one repair
round), never run; the confirmation runs it."""

from __future__ import annotations

import json
from typing import Any, cast

from pydantic import BaseModel

from tools.actions import ActionTool
from tools.base import ToolContext, ToolRegistry
from tools.errors import ToolArgumentError

from ..models import PendingAction, Trace, Turn, idempotency_key
from . import prompts
from .budget import TurnBudget
from .client import LLMClient
from .routing import tool_fn_name

__all__ = ["propose_call"]


def propose_call(tools: ToolRegistry, llm: LLMClient, model: str, call: dict[str, Any], turn: Turn, ctx: ToolContext,
                 trace: Trace, budget: TurnBudget) -> PendingAction | None:
    """Validate a side-effect call's arguments and turn it into a pending action (never run it).

    Args:
        tools: the registry holding ``call["tool"]``.
        llm: the client asked once to repair invalid arguments.
        model: the planner model.
        call: ``{"tool": name, "arguments": JSON text}`` from routing.
        turn: the turn (its ids key the action; its text is what the repair sees).
        ctx: the requester's tool context (its zone words the preview's summary).
        trace: records invalid arguments and the pending action.
        budget: the turn's budget (a repair needs one more call).

    Returns:
        the pending action, or None when the arguments stayed invalid after one repair.
    """
    tool = cast(ActionTool, tools.get(call["tool"]))  # routing keeps only calls of side-effect tools
    raw = call["arguments"]
    for attempt in range(2):
        try:
            value = json.loads(raw or "{}")
            if not isinstance(value, dict):  # a repair answered in prose is read as null
                raise ToolArgumentError(f"the arguments must be a JSON object, not {type(value).__name__}")
            args = tools.validate(call["tool"], value)
            break
        except (json.JSONDecodeError, ToolArgumentError) as exc:
            trace.step("tool_arguments_invalid", tool=call["tool"], attempt=attempt, error=str(exc)[:300])
            if attempt or not budget.allows("argument repair"):
                return None
            fix = llm.chat(model, [
                {"role": "system", "content": prompts.REPAIR_SYSTEM},
                {"role": "user", "content": turn.text},
                {"role": "user", "content": f"Your arguments for {tool_fn_name(call['tool'])} were invalid: {exc}. "
                                            "Reply with corrected arguments as a JSON object only."}],
                budget, schema=tool.Args.model_json_schema(), schema_name="arguments")
            raw = json.dumps(fix.data)
    key = idempotency_key(turn.platform, turn.user_id, turn.channel_id, turn.thread_id,
                          turn.message_id or turn.text, call["tool"])
    summary = tool.preview(args, ctx.timezone or None).summary or call["tool"]
    pending = PendingAction(call["tool"], _dump(args), key, summary)
    trace.step("pending_action", tool=call["tool"], key=pending.idempotency_key)
    return pending


def _dump(args: BaseModel) -> dict[str, Any]:
    return args.model_dump(mode="json")
