"""JSON from the network, parsed with bounds: UTF-8 only, and nested at most :data:`MAX_DEPTH` levels.

Python's ``json`` has no depth limit of its own: a body nested a few thousand levels deep raises
``RecursionError`` (not ``ValueError``), and one a few hundred deep parses but can break the code that
walks it later. Every web adapter parses request bodies through :func:`parse_json`, which turns all of
that into one :class:`JsonBodyError` with a message fit for a 400 answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

__all__ = ["parse_json", "JsonBodyError", "MAX_DEPTH"]

#: Deepest nesting accepted (objects and arrays); Slack and Teams payloads stay well under 20.
MAX_DEPTH = 64


class JsonBodyError(ValueError):
    """The body is not UTF-8 JSON within the limits; the message says which (safe to show the sender)."""


def _depth_ok(value: Any, max_depth: int) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[Any] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > max_depth:
            return False
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return True


def parse_json(data: str | bytes, max_depth: int = MAX_DEPTH) -> Any:
    """Parse ``data`` (bytes must be UTF-8) as JSON nested at most ``max_depth`` levels.

    Returns:
        The parsed value (any JSON type).

    Raises:
        JsonBodyError: for bytes that are not UTF-8, invalid JSON, or nesting deeper than ``max_depth``.
    """
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JsonBodyError(f"the body is not UTF-8 (byte {exc.start})") from None
    try:
        value = json.loads(data)
    except RecursionError:
        raise JsonBodyError(f"JSON nested deeper than {max_depth} levels") from None
    except json.JSONDecodeError as exc:
        raise JsonBodyError(f"invalid JSON: {exc.msg}") from None
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        raise JsonBodyError(f"invalid JSON: {exc}"[:200]) from None
    if not _depth_ok(value, max_depth):
        raise JsonBodyError(f"JSON nested deeper than {max_depth} levels")
    return value
