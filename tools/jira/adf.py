"""Plain text as the Atlassian Document Format (ADF), which Jira Cloud's REST v3 takes for a description.

Blank-line separated blocks become paragraphs, line breaks inside one become ``hardBreak`` nodes, and
``http(s)`` URLs become text with a ``link`` mark, so the chat thread's link is clickable in Jira.
Data Center (REST v2) takes the plain text itself.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["to_adf", "adf_text"]

_URL = re.compile(r"https?://[^\s<>\"]+[^\s<>\".,;:!?)\]]")


def _inline(line: str) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = []
    pos = 0
    for m in _URL.finditer(line):
        if m.start() > pos:
            nodes.append({"type": "text", "text": line[pos:m.start()]})
        nodes.append({"type": "text", "text": m.group(0), "marks": [{"type": "link", "attrs": {"href": m.group(0)}}]})
        pos = m.end()
    if pos < len(line):
        nodes.append({"type": "text", "text": line[pos:]})
    return nodes


def to_adf(text: str) -> dict[str, Any]:
    """``text`` as an ADF document (``{"type": "doc", "version": 1, "content": [paragraphs]}``)."""
    content: list[dict[str, Any]] = []
    for block in re.split(r"\n\s*\n", text.strip()):
        nodes: list[dict[str, Any]] = []
        for i, line in enumerate(block.split("\n")):
            if i:
                nodes.append({"type": "hardBreak"})
            nodes += _inline(line.rstrip())
        if nodes:
            content.append({"type": "paragraph", "content": nodes})
    return {"type": "doc", "version": 1, "content": content}


def adf_text(doc: dict[str, Any]) -> str:
    """The plain text of an ADF document (paragraphs separated by blank lines): for logs and tests."""
    out: list[str] = []
    for para in doc.get("content") or []:
        out.append("".join("\n" if n.get("type") == "hardBreak" else str(n.get("text", ""))
                           for n in para.get("content") or []))
    return "\n\n".join(out)
