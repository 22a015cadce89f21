"""The tool contract and the registry.

A tool is a small object with a ``name`` (dotted, e.g. ``knowledge.search``), a ``description``,
an ``Args`` pydantic model (its JSON schema is what an LLM planner sees), a ``side_effect`` flag
(side-effect tools never run straight from a plan: the agent turns them into pending actions),
a ``permission`` (``"everyone"`` or ``"admin"``) and ``run(args, ctx)``. A side-effect tool follows
the action-tool contract of :mod:`tools.actions` instead of ``run`` (recognise, propose, preview,
execute once per idempotency key); the registry checks that as it registers one.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, ValidationError

from .actions import ACTION_METHODS, ActionTool, ActionWords
from .context import ToolContext
from .errors import ToolArgumentError, ToolPermissionError

__all__ = ["Tool", "ToolContext", "ToolRegistry"]

_NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")


@runtime_checkable
class Tool(Protocol):
    """What every tool provides (a side-effect tool provides :class:`tools.actions.ActionTool` instead of ``run``)."""

    name: ClassVar[str]
    description: ClassVar[str]
    Args: ClassVar[type[BaseModel]]
    side_effect: ClassVar[bool]
    permission: ClassVar[str]

    def run(self, args: Any, ctx: ToolContext) -> Any:
        """Run with validated ``args`` (an instance of the tool's own ``Args``, a subclass: so Any here)."""
        ...


class ToolRegistry:
    """Tools by name, validated as they are registered."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool | ActionTool] = {}

    def register(self, tool: Tool | ActionTool) -> Tool | ActionTool:
        """Add ``tool``.

        Raises:
            ValueError: on a malformed name, a missing ``Args`` model, an unknown permission, a duplicate,
                a tool without ``run`` or a side-effect tool missing a method of the action-tool contract.
        """
        name = getattr(tool, "name", "")
        if not _NAME.match(name):
            raise ValueError(f"tool name {name!r} must be dotted lower-case like 'knowledge.search'")
        if not (isinstance(getattr(tool, "Args", None), type) and issubclass(tool.Args, BaseModel)):
            raise ValueError(f"tool {name} needs an Args pydantic model")
        if getattr(tool, "permission", None) not in {"everyone", "admin"}:
            raise ValueError(f"tool {name} permission must be 'everyone' or 'admin'")
        if not isinstance(getattr(tool, "side_effect", None), bool):
            raise ValueError(f"tool {name} must say whether it has side effects (side_effect: bool)")
        if tool.side_effect:
            missing = [m for m in ACTION_METHODS if not callable(getattr(tool, m, None))]
            if missing or not isinstance(getattr(tool, "words", None), ActionWords):
                raise ValueError(f"side-effect tool {name} must follow tools.actions.ActionTool (missing: "
                                 f"{', '.join(missing) or 'words'})")
        elif not callable(getattr(tool, "run", None)):
            raise ValueError(f"tool {name} needs run(args, ctx)")
        if name in self._tools:
            raise ValueError(f"tool {name} is registered twice")
        self._tools[name] = tool
        return tool

    def get(self, name: str) -> Tool | ActionTool:
        """The tool called ``name``; raises ``KeyError`` listing the known names."""
        try:
            return self._tools[name]
        except KeyError:
            raise KeyError(f"no tool {name!r}; known: {', '.join(sorted(self._tools))}") from None

    def __contains__(self, name: str) -> bool:
        return name in self._tools

    def names(self) -> list[str]:
        """Registered tool names, sorted."""
        return sorted(self._tools)

    def actions(self) -> list[Any]:
        """The side-effect tools (:class:`tools.actions.ActionTool`), in name order."""
        return [self._tools[n] for n in sorted(self._tools) if self._tools[n].side_effect]

    def validate(self, name: str, raw: dict[str, Any] | BaseModel,
                 context: dict[str, Any] | None = None) -> BaseModel:
        """Validate raw arguments against the tool's model (``context`` is pydantic's validation context,
        e.g. ``{"now": aware_datetime}``).

        Raises:
            ToolArgumentError: with pydantic's messages (and their error types in ``kinds``) when they
                do not validate.
        """
        tool = self.get(name)
        if isinstance(raw, tool.Args) and context is None:
            return raw
        try:
            return tool.Args.model_validate(raw if isinstance(raw, dict) else raw.model_dump(), context=context)
        except ValidationError as exc:
            raise ToolArgumentError(f"bad arguments for {name}: {exc}",
                                    kinds=frozenset(str(e.get("type", "")) for e in exc.errors())) from exc

    def call(self, name: str, raw: dict[str, Any] | BaseModel, ctx: ToolContext) -> Any:
        """Validate and run a tool without side effects.

        Raises:
            ToolArgumentError, ToolPermissionError; ``ValueError`` for a side-effect tool (those
            must go through a pending action and its confirmation).
        """
        tool = self.get(name)
        if tool.permission == "admin" and not ctx.is_admin:
            raise ToolPermissionError(f"{name} is for admins only")
        # (an action tool is registered only with side_effect: the isinstance check tells the type checker so)
        if tool.side_effect or isinstance(tool, ActionTool):
            raise ValueError(f"{name} has side effects: propose it as a pending action, never call it directly")
        return tool.run(self.validate(name, raw), ctx)

    def schemas(self) -> list[dict[str, Any]]:
        """JSON schemas of every tool (name, description, parameters), for LLM tool calling."""
        return [{"name": t.name, "description": t.description, "side_effect": t.side_effect,
                 "parameters": t.Args.model_json_schema()} for t in self._tools.values()]
