"""Every user-facing sentence the agent writes, in one place."""

from __future__ import annotations

import re

from tools.actions import ActionWords, Preview
from tools.knowledge_search import Evidence

__all__ = ["refusal", "closest_page", "ACCESS_REFUSAL", "CHITCHAT", "EMPTY", "ACTION_UNAVAILABLE", "truncated_note", "COMPLIANCE_REFUSAL",
           "action_preview", "question_refused_note", "withheld_note", "withheld_refusal"]

CHITCHAT = ("Hi! I answer questions from the company knowledge base, always with links to my sources. "
            "Ask me something like \"how do I declare an incident?\" or \"what's the travel budget?\".")

EMPTY = "Your message was empty. Ask me a question about the company, its policies, processes or tools."

ACTION_UNAVAILABLE = "That looks like a request for an action, but no action tool here can do it, so I did nothing."


#: The refusal of a knowledge question answered where others read it (a channel audience): it names
#: nothing that was found, so it cannot reveal that a restricted page exists (issue 11).
ACCESS_REFUSAL = ("I couldn't find anything you can see about that here. "
                  "Ask me in a DM if it may be in a restricted space.")


_CHANNEL = re.compile(r"(?<![\w&#/])#[a-z][\w-]{2,}")
#: A page's own statement of who owns it: a labelled line ("Owner: Platform team", "**DRI:** Jane Doe",
#: "| Maintainer | @jane |"), the metadata convention of wiki pages and runbook templates. Only names, handles and
#: channels are taken (letters, digits, ``@#.'&(),-``): no markup or Slack mention syntax reaches a reply.
_OWNER = re.compile(r"^[ \t>*_|-]*(?:owners?|maintainers?|maintained by|dri|point of contact|contact)[ \t*_]*[:|]"
                    r"[ \t*_]*([\w@#.'&(), -]{2,80}?)[ \t*_|.]*$", re.IGNORECASE | re.MULTILINE)


def closest_page(evidence: list[Evidence]) -> tuple[str, str, str, str] | None:
    """``(title, url, channel, owner)`` of the first passage of ``evidence`` (searched with the asker's access, so
    a page they may read) for a refusal: the first Slack-style channel (``#name``) and the first owner line
    ("Owner: ...") that the retrieved passages of that page name ("" when none); None when nothing was found."""
    if not evidence:
        return None
    c = evidence[0].chunk
    texts = [e.chunk.text for e in evidence if e.chunk.doc_id == c.doc_id]
    channel = next((m.group() for t in texts for m in [_CHANNEL.search(t)] if m), "")
    owner = next((m.group(1).strip() for t in texts for m in [_OWNER.search(t)] if m), "")
    return c.title, c.url, channel, owner


def refusal(searched: list[str], closest: tuple[str, str, str, str] | None = None) -> str:
    """The plain refusal: nothing found answers it, what was searched, and where to look next.

    ``closest`` is ``(title, url, channel, owner)`` of the closest page the asker may read (the top of a search
    run with their access), ``channel`` a channel the page names and ``owner`` who it names as its owner ("" when
    none). The gate's reasons are not for the employee: they go to the trace and ``--json``.
    """
    queries = "; ".join(f"\u201c{q}\u201d" for q in searched[:2]) or "nothing"
    text = f"I couldn't find anything in the knowledge base that answers this, so I won't guess. I searched for {queries}."
    if closest is None:
        return text + " Try other words, or ask the team that owns the topic."
    title, url, channel, owner = closest
    where = f"{title} ({url})" if url else title
    text += f" The closest page I found is {where}, but it does not say."
    if owner:
        text += f" It names {owner} as its owner: you could ask them"
        return text + (f", or in {channel}." if channel else ".")
    if channel:
        return text + f" It names {channel}: you could ask there."
    return text + " Try other words, or ask the team that owns the topic."


def truncated_note(limit: int) -> str:
    """Note added when a message was cut to ``limit`` characters."""
    return f"Your message was long, so I used only its first {limit:,} characters."

COMPLIANCE_REFUSAL = ("I found sources for this, but my draft answer kept including content I must not share "
                      "(credentials, personal data or unsafe instructions), so I won't post it. Please open the "
                      "cited pages directly or ask the team that owns them.")


def action_preview(preview: Preview, words: ActionWords, excerpt: int = 160) -> str:
    """The reply text of a proposed action: the tool's lead, the preview's title and labelled fields
    (and the start of its details), and that nothing happened yet.

    Adapters with buttons render the pending action themselves; this text is the fallback
    (notifications, the console) and must not contain ``[n]`` markers.
    """
    lines = [preview.title, *(f"{label}: {value}" for label, value in preview.fields)]
    if preview.details:
        flat = " ".join(preview.details.split())
        lines.append("Details: " + (flat if len(flat) <= excerpt else flat[:excerpt - 1].rsplit(" ", 1)[0] + "\u2026"))
    body = "\n".join(f"  {line}" for line in lines)
    return f"{words.lead}\n{body}\nNothing is {words.past} until you confirm; you can also cancel."


def question_refused_note(searched: list[str]) -> str:
    """The answer part of a question-plus-request message when the question found no sources."""
    queries = "; ".join(f"\u201c{q}\u201d" for q in searched[:2]) or "your question"
    return (f"I couldn't find the answer to your question in the knowledge base (I searched for {queries}), "
            "so I won't guess.")


def _withheld_what(categories: set[str]) -> str:
    parts = []
    if categories & {"secret", "personal"}:
        parts.append("looks like a credential or personal data")
    if "injection" in categories:
        parts.append("is addressed to a chatbot rather than to readers")
    return " or ".join(parts) or "I must not share"


def withheld_note(categories: set[str]) -> str:
    """Note on an answer whose sources hold content the screen left out (never the content itself)."""
    if categories <= {"injection"}:
        return "I left out a part of the source that is addressed to a chatbot rather than to readers."
    if "injection" in categories:
        return ("I left out a part of the sources that looks like a credential or personal data, and a part "
                "addressed to a chatbot rather than to readers.")
    return "I left out a part that looks like a credential or personal data."


def withheld_refusal(categories: set[str]) -> str:
    """The refusal when what answers the question is only content the screen must leave out."""
    return (f"I found pages about this, but the part that answers it {_withheld_what(categories)}, and I never "
            "quote that. If you need it, open the page itself (if you have access) or ask the team that owns it.")
