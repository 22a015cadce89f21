"""Why Slack would refuse a message's blocks or a view: the Block Kit limits the Slack stand-in checks (``invalid_blocks``)."""

from __future__ import annotations

from typing import Any


def _feedback_buttons_problem(e: dict[str, Any]) -> str | None:
    """Why Slack would refuse a ``feedback_buttons`` element, or None."""
    for side in ("positive_button", "negative_button"):
        b = e.get(side)
        if not isinstance(b, dict):
            return f"feedback_buttons needs a {side}"
        text = b.get("text") or {}
        if text.get("type") != "plain_text" or not text.get("text") or len(text["text"]) > 75:
            return f"feedback_buttons {side} text must be plain_text of 1-75 characters"
        if not b.get("value") or len(b["value"]) > 2000:
            return f"feedback_buttons {side} value must be 1-2000 characters"
    return None


def block_problem(blocks: Any, surface: str = "message") -> str | None:
    """Why Slack would refuse these blocks (a subset of its checks), or None. ``surface``: ``message``,
    ``modal`` or ``home`` (input blocks only in views; 100 blocks in views)."""
    if not isinstance(blocks, list):
        return "blocks is not a list"
    if len(blocks) > (50 if surface == "message" else 100):
        return "too many blocks"
    action_ids: set[str] = set()
    markdown_total = 0
    for b in blocks:
        if not isinstance(b, dict) or not isinstance(b.get("type"), str):
            return "a block without a type"
        if len(b.get("block_id", "")) > 255:
            return "block_id too long"
        t = b["type"]
        if t == "section":
            text = (b.get("text") or {}).get("text", "")
            if not text and not b.get("fields"):
                return "section without text"
            if len(text) > 3000:
                return "section text over 3000 characters"
            fields = b.get("fields") or []
            if len(fields) > 10 or any(len(f.get("text", "")) > 2000 for f in fields):
                return "section fields over the limits"
        elif t == "markdown":
            text = b.get("text")
            if not isinstance(text, str) or not text or len(text) > 12000:
                return "markdown text must be 1-12000 characters"
            markdown_total += len(text)
            if markdown_total > 12000:
                return "markdown blocks over 12000 characters together"
        elif t == "context":
            els = b.get("elements") or []
            if not els or len(els) > 10:
                return "context needs 1-10 elements"
            if any(len(e.get("text", "")) > 3000 for e in els):
                return "context element text too long"
        elif t == "context_actions":
            els = b.get("elements") or []
            if not els or len(els) > 5:
                return "context_actions needs 1-5 elements"
            for e in els:
                if e.get("type") not in {"feedback_buttons", "icon_button"}:
                    return f"context_actions cannot hold {e.get('type')}"
                aid = e.get("action_id", "")
                if not aid or len(aid) > 255 or aid in action_ids:
                    return "missing, long or duplicate action_id"
                action_ids.add(aid)
                if e["type"] == "feedback_buttons" and (problem := _feedback_buttons_problem(e)):
                    return problem
        elif t == "actions":
            els = b.get("elements") or []
            if not els or len(els) > 25:
                return "actions needs 1-25 elements"
            for e in els:
                if e.get("type") == "button":
                    label = (e.get("text") or {}).get("text", "")
                    if not label or len(label) > 75 or len(e.get("value", "")) > 2000:
                        return "button label or value over the limits"
                    aid = e.get("action_id", "")
                    if not aid or len(aid) > 255 or aid in action_ids:
                        return "missing, long or duplicate action_id"
                    action_ids.add(aid)
        elif t == "input":
            if surface == "message":
                return "input blocks belong in modals and the Home tab"
            label = b.get("label") or {}
            if label.get("type") != "plain_text" or not label.get("text") or len(label["text"]) > 2000:
                return "input needs a plain_text label"
            if not isinstance(b.get("element"), dict) or not b["element"].get("type"):
                return "input needs an element"
        elif t not in {"divider", "header", "image", "rich_text", "file", "video"}:
            return f"unknown block type {t}"
    return None


def view_problem(view: Any, kind: str) -> str | None:
    """Why Slack would refuse a view (``kind``: ``modal`` or ``home``) with ``invalid_arguments``, or None."""
    if not isinstance(view, dict) or view.get("type") != kind:
        return f"view type must be {kind}"
    if kind == "modal":
        title = view.get("title") or {}
        if title.get("type") != "plain_text" or not title.get("text") or len(title["text"]) > 24:
            return "modal title must be plain_text of 1-24 characters"
        for key in ("submit", "close"):
            if key in view and (not (view[key] or {}).get("text") or len(view[key]["text"]) > 24):
                return f"modal {key} must be plain_text of 1-24 characters"
        if any(b.get("type") == "input" for b in view.get("blocks") or []) and "submit" not in view:
            return "a modal with inputs needs a submit button"
    if len(str(view.get("private_metadata", ""))) > 3000 or len(str(view.get("callback_id", ""))) > 255:
        return "private_metadata or callback_id too long"
    return block_problem(view.get("blocks"), kind)
