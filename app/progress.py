"""What a user is told while a turn runs: the agent's trace steps as short status lines (platform-neutral).

:func:`status_for` maps a step the agent records (:meth:`agent.models.Trace.step`, observed through
``Agent.answer(turn, progress=...)``) to a status line, or None for steps a user need not hear about.
Slack shows them with ``assistant.threads.setStatus`` (and :data:`LOADING_MESSAGES` rotating under it);
another platform may show them its own way (Teams' informative updates).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["status_for", "FIRST_STATUS", "LOADING_MESSAGES"]

FIRST_STATUS = "Searching the knowledge base…"
#: Shown in turn under the status while a step takes long (Slack: ``loading_messages``).
LOADING_MESSAGES = ("Searching the knowledge base…", "Reading the most relevant pages…",
                    "Checking every citation against its page…")


def status_for(step: str, data: Mapping[str, Any]) -> str | None:
    """The status line for the trace step ``step`` with its ``data``, or None (nothing to say).

    Steps of the rule-based planner: ``route``, ``rewrite_followup``, ``gate`` (attempt 0: "Checking N
    sources…", a later attempt: searching again), ``extract_action``, ``answer`` and the agent's
    ``validate_citations``. The LLM planner records ``route`` and ``gate`` too.
    """
    if step == "route":
        route = str(data.get("route") or "")
        if route in {"knowledge", "followup"} or data.get("search"):
            return FIRST_STATUS
        if route in {"action", "calendar", "reminder"} or data.get("actions"):
            return "Reading your request…"
        return None
    if step == "rewrite_followup":
        return "Reading the thread…"
    if step == "gate":
        if int(data.get("attempt") or 0) > 0:
            return "Searching again with other words…"
        n = len(data.get("support") or ())
        return f"Checking {n} source{'s' if n != 1 else ''}…" if n else "Checking what I found…"
    if step == "extract_action":
        return "Preparing the action…"
    if step == "answer":
        return "Writing the answer…"
    if step == "validate_citations":
        return "Verifying the citations…"
    return None
