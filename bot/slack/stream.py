"""Streamed answers and live status: ``chat.startStream`` / ``appendStream`` / ``stopStream`` and
``assistant.threads.setStatus`` (Slack's AI-app conventions).

- :class:`StatusLine` shows the agent's steps while it works (:func:`app.progress.status_for`: "Checking
  3 sources…") in an assistant thread; the steps arrive from the agent's worker thread and are sent in
  order, each once.
- :class:`AnswerStreamer` streams a finished, validated reply into its thread: the Markdown in pieces cut
  at sentence ends (:func:`stream_pieces`), then, at stop, the sources and the feedback row
  (:func:`bot.slack.render.stream_parts`). Citations are validated by the agent before the first piece is
  sent, so no sentence whose citation failed is ever visible. If Slack refuses the stream before
  anything is shown, the caller posts the answer the usual way; if it fails midway, the partial message
  is deleted first.

Slack needs ``recipient_user_id`` and ``recipient_team_id`` to stream in a channel; they are always sent.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from agent.models import Reply
from app.progress import FIRST_STATUS, status_for

from . import render
from .client import api_error_code

__all__ = ["AnswerStreamer", "StatusLine", "stream_pieces", "STREAM_PIECE"]

log = logging.getLogger(__name__)

#: About how many characters each ``chat.appendStream`` carries (pieces end at a sentence or line end).
STREAM_PIECE = 400
_BREAK = re.compile(r"(?<=[.!?:;\]\n])\s+")


def stream_pieces(text: str, size: int = STREAM_PIECE) -> list[str]:
    """``text`` cut after sentence or line ends into pieces of about ``size`` characters (a sentence longer
    than that stays whole). Joined, the pieces are exactly ``text``; empty text gives ``[]``.

    Raises:
        ValueError: when ``size`` is under 1.
    """
    if size < 1:
        raise ValueError("size must be at least 1")
    pieces: list[str] = []
    start = 0
    for m in _BREAK.finditer(text):
        if m.end() - start >= size:
            pieces.append(text[start:m.end()])
            start = m.end()
    if start < len(text):
        pieces.append(text[start:])
    return pieces


class StatusLine:
    """The assistant thread's status, following the agent's steps (see the module docstring).

    Args:
        client: the Web API client.
        channel, thread_ts: the assistant thread.
        first: the status already shown (not sent again).
    """

    def __init__(self, client: AsyncWebClient, channel: str, thread_ts: str, first: str = FIRST_STATUS) -> None:
        self.client = client
        self.channel = channel
        self.thread_ts = thread_ts
        self.shown = [first]
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._task = self._loop.create_task(self._run(), name="slack-status")

    def on_step(self, name: str, data: dict[str, Any]) -> None:
        """The agent's progress callback (called in its worker thread)."""
        text = status_for(name, data)
        if text:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, text)

    async def _run(self) -> None:
        while (text := await self._queue.get()) is not None:
            if text == self.shown[-1]:
                continue
            try:
                await self.client.assistant_threads_setStatus(channel_id=self.channel, thread_ts=self.thread_ts,
                                                              status=text)
                self.shown.append(text)
            except Exception as exc:  # noqa: BLE001 - a status is a nicety
                log.info("assistant.threads.setStatus failed in %s: %s", self.channel, api_error_code(exc))

    async def close(self) -> None:
        """Send what is queued, then stop (before the answer is shown). Calling it again does nothing."""
        if not self._task.done():
            self._queue.put_nowait(None)
            await self._task


class AnswerStreamer:
    """Streams replies into threads (see the module docstring)."""

    def __init__(self, client: AsyncWebClient, piece: int = STREAM_PIECE) -> None:
        self.client = client
        self.piece = piece

    async def stream(self, channel: str, thread_ts: str, reply: Reply, user_id: str, team_id: str) -> bool:
        """Stream ``reply`` into the thread ``thread_ts`` of ``channel`` for ``user_id`` of ``team_id``.

        Returns:
            True when the whole answer was streamed and stopped with its blocks; False when it was not
            streamed (a pending action, over 12,000 characters, or Slack refused: nothing of it stays
            visible, the caller posts it instead). Never raises.
        """
        parts = render.stream_parts(reply)
        if parts is None:
            return False
        body, blocks = parts
        pieces = stream_pieces(body, self.piece)
        recipient = {k: v for k, v in (("recipient_user_id", user_id), ("recipient_team_id", team_id)) if v}
        try:
            started = await self.client.chat_startStream(channel=channel, thread_ts=thread_ts,
                                                         markdown_text=pieces[0], **recipient)
        except Exception as exc:  # noqa: BLE001 - nothing shown yet: the caller posts instead
            log.info("chat.startStream failed in %s (%s); posting the answer instead", channel, api_error_code(exc))
            return False
        ts = str(started.get("ts") or "")
        try:
            for piece in pieces[1:]:
                await self.client.chat_appendStream(channel=channel, ts=ts, markdown_text=piece)
            await self.client.chat_stopStream(channel=channel, ts=ts, blocks=blocks)
            return True
        except Exception as exc:  # noqa: BLE001
            log.warning("streaming the answer in %s failed midway (%s); replacing it with a posted one", channel,
                        api_error_code(exc))
        try:
            await self.client.chat_delete(channel=channel, ts=ts)
        except Exception as exc:  # noqa: BLE001
            log.warning("could not delete the partial streamed answer %s in %s: %s", ts, channel, api_error_code(exc))
        return False
