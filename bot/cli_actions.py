"""The pending-action commands of the CLI: propose from ``chatops ask``/``chat``, confirm or cancel by key."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.models import PendingAction, Turn
    from app.settings import Settings
    from tools.base import ToolRegistry

# The action service and the state store (SQLAlchemy) are imported by the functions that use them:
# `chatops ask` needs cli_user() on every question but the rest only for a proposed action.

__all__ = ["cli_user", "cli_propose", "cli_action"]


def cli_user() -> str:
    """The requester id of console turns: the operating-system user name."""
    import getpass

    try:
        return getpass.getuser() or "cli"
    except Exception:  # no user database entry (containers)
        return "cli"


def cli_propose(settings: Settings, tools: ToolRegistry, action: PendingAction, turn: Turn,
                confirm_hint: str | None = None) -> str:
    """Store a proposal made in the console and return how to confirm or cancel it (the reply text
    already shows the preview), with the key and the expiry."""
    from zoneinfo import ZoneInfo

    from app.actions import build_action_service
    from state import StateStore

    store = StateStore(settings.state_url)
    try:
        rec = build_action_service(settings, tools, store).propose(action, turn)
    finally:
        store.close()
    if rec.status != "pending":
        return f"(This request was seen before and is {rec.status}; nothing new was proposed. Key: {rec.key})"
    expires = rec.expires_at.astimezone(ZoneInfo(turn.timezone or settings.default_timezone)).strftime("%H:%M %Z")
    hint = confirm_hint or f"To confirm it: chatops actions confirm {rec.key}   (or: chatops actions cancel {rec.key})"
    return f"{hint}\nThe preview expires at {expires}."


def cli_action(settings: Settings, op: str, key: str, user_id: str | None = None, *, as_json: bool = False) -> int:
    """``chatops actions confirm|cancel|show KEY``: print the outcome; exit 0 when it is settled as
    asked (done / cancelled / shown), 1 otherwise (expired, failed, refused, not found)."""
    import json as _json

    from bot.console_actions import terminal_outcome, terminal_preview

    from app.actions import build_action_service
    from app.wiring import register_action_tools
    from state import StateStore
    from tools.base import ToolRegistry

    tools = register_action_tools(ToolRegistry(), settings)
    store = StateStore(settings.state_url)
    try:
        service = build_action_service(settings, tools, store)
        user = user_id or cli_user()
        if op == "show":
            rec = service.get(key)
            if rec is None:
                print(f"no pending action {key}")
                return 1
            if as_json:
                print(_json.dumps({"key": rec.key, "tool": rec.tool, "status": rec.status, "args": rec.args,
                                   "requester": rec.requester, "result": rec.result,
                                   "expires_at": rec.expires_at.isoformat()}, ensure_ascii=False))
            else:
                print(terminal_preview(rec, service.tool(rec.tool), settings.default_timezone)
                      + f"\n  status     {rec.status}")
            return 0
        outcome = service.confirm(key, user) if op == "confirm" else service.cancel(key, user)
        if as_json:
            print(_json.dumps({"status": outcome.status, "message": outcome.message, "result": outcome.result},
                              ensure_ascii=False))
        else:
            print(terminal_outcome(outcome))
        return 0 if outcome.status in {"done", "already_done", "cancelled", "already_cancelled"} else 1
    finally:
        store.close()
        for tool in tools.actions():
            tool.close()
