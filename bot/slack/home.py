"""The app's Home tab: ``app_home_opened`` -> ``views.publish`` of :func:`home_view` for that user.

The tab shows what the bot can do (where to ask, ``/kb``), the sources with their size and freshness
(``/kb status``'s rows: pages, last sync and its outcome, next sync), and the user's own actions still
waiting for a confirmation (:meth:`state.StateStore.open_pending_for`), each with where it was asked. It
is rebuilt every time the user opens the tab, so it is never staler than that. Publishing never raises:
a failure is logged (the tab keeps its previous content).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from state import PendingRecord, StateStore

from .client import api_error_code
from .config import COMMAND
from .mrkdwn import escape, truncate
from .render import MAX_SECTION, date_token

__all__ = ["home_view", "HomeTab", "MAX_HOME_SOURCES", "MAX_HOME_PENDING"]

log = logging.getLogger(__name__)

MAX_HOME_SOURCES = 20
MAX_HOME_PENDING = 10

CAPABILITIES = (
    "*Ask me about the company's knowledge base*; I answer with numbered links to my sources, and say so "
    "plainly when the sources don't cover a question.\n"
    "• *Messages tab* or the *assistant pane*: ask privately\n"
    "• *Mention me* in a channel: I answer in the thread; follow-ups there need no mention\n"
    f"• `{COMMAND} QUESTION`: an answer only you see, with a button to share it\n"
    "• Ask me to book a meeting or set a reminder: I show what I'll do and wait for your *Confirm*\n"
    f"• `{COMMAND} help` for everything else"
)


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": truncate(text, MAX_SECTION)}}


def _header(text: str) -> dict[str, Any]:
    return {"type": "header", "text": {"type": "plain_text", "text": text}}


def _source_line(row: dict[str, Any]) -> str:
    line = f"*{escape(str(row.get('source', '?')))}*: {row.get('pages', 0)} pages, last synced {date_token(row.get('last_run'))}"
    if row.get("last_status") and row.get("last_status") != "ok":
        line += f" ({escape(str(row['last_status']))})"
    if row.get("next_run"):
        line += f", next {date_token(row['next_run'])}"
    return line


def _pending_line(rec: PendingRecord) -> str:
    what = escape(truncate(rec.summary or rec.tool, 300))
    where = f" in <#{rec.channel_id}>" if rec.channel_id and rec.channel_id[:1] in {"C", "G"} else ""
    return f":hourglass: {what}{where}; waiting for your confirmation until {date_token(rec.expires_at.isoformat())}"


def home_view(sources: Sequence[dict[str, Any]], pending: Sequence[PendingRecord]) -> dict[str, Any]:
    """The Home tab (a ``home`` view, pure).

    Args:
        sources: ``/kb status`` rows (:meth:`app.jobs.IndexJobs.status`): ``source``, ``pages``,
            ``last_run``, ``last_status``, ``next_run``; the first 20 are shown.
        pending: the user's actions waiting for a confirmation; the first 10 are shown.
    """
    blocks: list[dict[str, Any]] = [_header("What I can do"), _section(CAPABILITIES), {"type": "divider"},
                                    _header("Sources")]
    if sources:
        lines = [_source_line(r) for r in sources[:MAX_HOME_SOURCES]]
        if len(sources) > MAX_HOME_SOURCES:
            lines.append(f"…and {len(sources) - MAX_HOME_SOURCES} more (`{COMMAND} status` lists all)")
        blocks.append(_section("\n".join(lines)))
    else:
        blocks.append(_section("No sources are indexed yet; an admin adds them to `chatops.yml` and runs "
                               f"`{COMMAND} reindex`."))
    blocks += [{"type": "divider"}, _header("Waiting for your confirmation")]
    if pending:
        blocks += [_section(_pending_line(p)) for p in pending[:MAX_HOME_PENDING]]
    else:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": "Nothing is waiting for you."}]})
    return {"type": "home", "callback_id": "home", "blocks": blocks}


class HomeTab:
    """Publishes :func:`home_view` for a user.

    Args:
        client: the Web API client.
        status: the sources' rows (``IndexJobs.status``; synchronous, run in a worker thread).
        store: the state store (the user's pending actions).
    """

    def __init__(self, client: AsyncWebClient, status: Callable[[], list[dict[str, Any]]], store: StateStore) -> None:
        self.client = client
        self.status = status
        self.store = store

    async def publish(self, user_id: str) -> bool:
        """Build and publish ``user_id``'s Home tab; True when Slack took it. Never raises."""
        if not user_id:
            return False
        try:
            rows, pending = await asyncio.gather(asyncio.to_thread(self.status),
                                                 asyncio.to_thread(self.store.open_pending_for, user_id, "slack",
                                                                   MAX_HOME_PENDING))
            await self.client.views_publish(user_id=user_id, view=home_view(rows, pending))
            return True
        except Exception as exc:  # noqa: BLE001 - the tab keeps its previous content
            log.warning("publishing the Home tab of %s failed: %s", user_id, api_error_code(exc))
            return False
