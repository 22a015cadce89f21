"""Every user-facing sentence the agent writes, in one place."""

from __future__ import annotations

__all__ = ["refusal", "CHITCHAT", "EMPTY", "ACTION_UNAVAILABLE", "truncated_note"]

CHITCHAT = ("Hi! I answer questions from the company knowledge base, always with links to my sources. "
            "Ask me something like \"how do I declare an incident?\" or \"what's the travel budget?\".")

EMPTY = "Your message was empty. Ask me a question about the company, its policies, processes or tools."

ACTION_UNAVAILABLE = ("That looks like a request to create a calendar event. Actions are not enabled on this "
                      "bot yet, so I did nothing.")


def refusal(searched: list[str], reason: str) -> str:
    """The plain refusal: no answer without sources, what was searched, and why."""
    queries = "; ".join(f"\u201c{q}\u201d" for q in searched[:3]) or "nothing"
    return (f"I couldn't find this in the knowledge base, so I won't guess. I searched for {queries} "
            f"({reason}). Try other words, or ask the team that owns the topic.")


def truncated_note(limit: int) -> str:
    """Note added when a message was cut to ``limit`` characters."""
    return f"Your message was long, so I used only its first {limit:,} characters."
