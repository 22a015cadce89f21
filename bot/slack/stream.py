"""Streamed answers and live status: ``chat.startStream`` / ``appendStream`` / ``stopStream`` and
``assistant.threads.setStatus`` (Slack's AI-app conventions).

- :class:`LiveTurn` shows the agent's steps while it works (:func:`app.progress.status_for`: "Checking
  3 sources…") in an assistant thread, and streams the answer text the LLM planner releases sentence by
  sentence as the model writes it (only sentences whose citations passed, :mod:`agent.llm.release`); the
  steps arrive from the agent's worker thread and are sent in order, each once. When the final answer
  does not continue what was streamed (a later check removed a sentence, or the renderer set a list or a
  table in its shape, :func:`bot.markdown_blocks.chat_markdown`), the message is rewritten.
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
from .mrkdwn import markdown_piece

__all__ = ["AnswerStreamer", "LiveTurn", "stream_pieces", "STREAM_PIECE"]

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


class LiveTurn:
    """What the user sees while the agent works, fed from its worker thread (:meth:`on_step`), sent in order.

    - Status lines (assistant threads only, ``status=True``): each new one through
      ``assistant.threads.setStatus``; none once answer text is showing.
    - Answer text released early by the LLM planner (step ``answer_text``; sentences whose citations
      already passed, :mod:`agent.llm.release`), when ``stream=True``: the first piece starts the stream
      (``chat.startStream``), the next are appended.

    After the agent returns, :meth:`close` sends what is queued and :meth:`finish` completes the answer.

    Args:
        client: the Web API client.
        channel, thread_ts: the thread answered in.
        user_id, team_id: who the answer is for (``recipient_user_id`` / ``recipient_team_id``).
        status: show status lines (an assistant thread; the first, :data:`FIRST_STATUS`, is already shown).
        stream: stream answer text as it is released.
        streamer: streams or posts the final answer (:class:`AnswerStreamer`).
    """

    def __init__(self, client: AsyncWebClient, channel: str, thread_ts: str, user_id: str, team_id: str, *,
                 status: bool, stream: bool, streamer: "AnswerStreamer") -> None:
        self.client = client
        self.channel = channel
        self.thread_ts = thread_ts
        self.user_id = user_id
        self.team_id = team_id
        self.status = status
        self.stream = stream
        self.streamer = streamer
        self.shown = [FIRST_STATUS]
        self.ts = ""  # the streamed message, once started
        self.streamed = ""  # its text so far
        self.broken = False  # Slack refused the live stream: the answer is posted at the end
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[tuple[str, str] | None] = asyncio.Queue()
        self._task = self._loop.create_task(self._run(), name="slack-live-turn")

    def on_step(self, name: str, data: dict[str, Any]) -> None:
        """The agent's progress callback (called in its worker thread)."""
        if name == "answer_text":
            if self.stream and data.get("text"):
                # text from pages, as the posted answer: Slack's links and mentions neutralised
                piece = markdown_piece(str(data["text"]))
                self._loop.call_soon_threadsafe(self._queue.put_nowait, ("text", piece))
            return
        text = status_for(name, data)
        if text and self.status:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, ("status", text))

    async def _run(self) -> None:
        while (item := await self._queue.get()) is not None:
            kind, value = item
            if kind == "status":
                await self._status(value)
            elif not self.broken:
                await self._text(value)

    async def _status(self, text: str) -> None:
        if text == self.shown[-1] or self.ts:
            return
        try:
            await self.client.assistant_threads_setStatus(channel_id=self.channel, thread_ts=self.thread_ts,
                                                          status=text)
            self.shown.append(text)
        except Exception as exc:  # noqa: BLE001 - a status is a nicety
            log.info("assistant.threads.setStatus failed in %s: %s", self.channel, api_error_code(exc))

    async def _text(self, piece: str) -> None:
        try:
            if not self.ts:
                started = await self.client.chat_startStream(
                    channel=self.channel, thread_ts=self.thread_ts, markdown_text=piece,
                    recipient_user_id=self.user_id or None, recipient_team_id=self.team_id or None)
                self.ts = str(started.get("ts") or "")
            else:
                await self.client.chat_appendStream(channel=self.channel, ts=self.ts, markdown_text=piece)
            self.streamed += piece
        except Exception as exc:  # noqa: BLE001 - the answer is posted at the end instead
            log.info("streaming early answer text in %s failed (%s)", self.channel, api_error_code(exc))
            self.broken = True

    async def close(self) -> None:
        """Send what is queued, then stop listening. Calling it again does nothing."""
        if not self._task.done():
            self._queue.put_nowait(None)
            await self._task

    async def finish(self, reply: Reply) -> bool:
        """Complete the answer once the agent returned (after :meth:`close`).

        Nothing streamed yet: :meth:`AnswerStreamer.stream`. Streamed text that the final answer continues
        (nothing released was removed): the rest is appended and the stream stopped with the sources and
        the feedback row. Otherwise (a sentence was dropped by a later check, a list or a table released as
        written and rendered otherwise, a refusal, a pending action, a broken stream) the streamed message is stopped and rewritten to the final answer
        (``chat.update``), or deleted when the answer cannot be one message (the caller then posts it).

        Returns:
            True when the answer is shown; False when the caller must post it. Never raises.
        """
        if not self.ts:
            return False if self.broken else await self.streamer.stream(self.channel, self.thread_ts, reply,
                                                                        self.user_id, self.team_id)
        parts = render.stream_parts(reply)
        if parts is not None and not self.broken and parts[0].startswith(self.streamed):
            body, blocks = parts
            try:
                for piece in stream_pieces(body[len(self.streamed):], self.streamer.piece):
                    await self.client.chat_appendStream(channel=self.channel, ts=self.ts, markdown_text=piece)
                await self.client.chat_stopStream(channel=self.channel, ts=self.ts, blocks=blocks)
                return True
            except Exception as exc:  # noqa: BLE001
                log.warning("finishing the streamed answer in %s failed (%s); rewriting it", self.channel,
                            api_error_code(exc))
        return await self._rewrite(reply)

    async def discard(self) -> None:
        """Remove the streamed text (the answer is shown another way, e.g. an action preview). Never raises."""
        if self.ts:
            await self._stop_quietly()
            await self._delete()

    async def _rewrite(self, reply: Reply) -> bool:
        await self._stop_quietly()
        messages = render.answer_messages(reply)
        if len(messages) == 1 and reply.pending_action is None:
            try:
                await self.client.chat_update(channel=self.channel, ts=self.ts, text=messages[0]["text"],
                                              blocks=messages[0]["blocks"])
                log.info("rewrote the streamed answer in %s to the final one", self.channel)
                return True
            except Exception as exc:  # noqa: BLE001
                log.warning("rewriting the streamed answer in %s failed (%s); posting it", self.channel,
                            api_error_code(exc))
        await self._delete()
        return False

    async def _stop_quietly(self) -> None:
        try:
            await self.client.chat_stopStream(channel=self.channel, ts=self.ts)
        except Exception as exc:  # noqa: BLE001 - already stopped, or gone
            log.info("chat.stopStream failed in %s: %s", self.channel, api_error_code(exc))

    async def _delete(self) -> None:
        try:
            await self.client.chat_delete(channel=self.channel, ts=self.ts)
        except Exception as exc:  # noqa: BLE001
            log.warning("could not delete the streamed answer %s in %s: %s", self.ts, self.channel,
                        api_error_code(exc))


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
        try:  # (slack_sdk leaves out the arguments that are None: an empty recipient is not sent)
            started = await self.client.chat_startStream(channel=channel, thread_ts=thread_ts, markdown_text=pieces[0],
                                                         recipient_user_id=user_id or None,
                                                         recipient_team_id=team_id or None)
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
