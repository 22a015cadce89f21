"""One streamed reply in a Teams personal chat (Microsoft's "stream bot messages" protocol).

The protocol, as the Bot Connector enforces it (personal chats only):

1. **informative** updates: ``typing`` activities with a ``text`` ("Searching the knowledge base…") and
   the entity ``{"type": "streaminfo", "streamType": "informative", "streamSequence": n}``; the answer
   to the first one is the stream's id, which every later activity carries as ``streamId``;
2. **streaming** updates: ``typing`` activities whose ``text`` is the answer so far (each one starts
   with the previous one's text), ``streamType: "streaming"``;
3. the **final** message: a ``message`` activity with the entity ``streamType: "final"`` (no
   sequence), which replaces the streamed bubble with the finished message (its text, cards,
   entities and ``channelData``).

``streamSequence`` counts every informative and streaming update from 1. The service takes about
one update a second: :class:`TeamsStream` waits out ``min_interval`` seconds between updates (the
final message is not throttled). A stream whose first update got no id is not started (``started``
is False) and the caller answers the ordinary way; an update that fails later ends the streaming
(``broken``) and :meth:`TeamsStream.finish` then sends the final message as an ordinary one.

Each call takes the :class:`~botbuilder.core.TurnContext` to send with, so a stream begun inside the
request can be continued and finished in a proactive turn.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from botbuilder.core import TurnContext
from botbuilder.schema import Activity, ActivityTypes, ResourceResponse

from .entities import SchemaEntity

__all__ = ["TeamsStream", "stream_info"]

log = logging.getLogger(__name__)

Send = Callable[[Callable[[], Awaitable[Any]], str], Awaitable[Any]]


def stream_info(stream_type: str, stream_id: str | None = None, sequence: int | None = None) -> dict[str, Any]:
    """The ``streaminfo`` entity of one stream activity (``streamId`` and ``streamSequence`` when given)."""
    info: dict[str, Any] = {"type": "streaminfo", "streamType": stream_type}
    if stream_id:
        info["streamId"] = stream_id
    if sequence is not None:
        info["streamSequence"] = sequence
    return info


class TeamsStream:
    """See the module docstring.

    Args:
        send: runs a Bot Connector call with retries (:func:`bot.teams.bot.send_with_retry`): takes the
            call and a description, returns the call's result or None after the last failure.
        min_interval: seconds between two updates (the service throttles faster streams).
        clock: monotonic seconds (tests may pass their own).
    """

    def __init__(self, send: Send, min_interval: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.send = send
        self.min_interval = min_interval
        self.clock = clock
        self.stream_id: str | None = None
        self.sequence = 0
        self.text = ""
        self.broken = False
        self.finished = False
        self._last = float("-inf")

    @property
    def started(self) -> bool:
        """True once the service gave the stream an id."""
        return self.stream_id is not None

    @property
    def usable(self) -> bool:
        """True while updates may still be sent."""
        return self.started and not self.broken and not self.finished

    async def inform(self, ctx: TurnContext, text: str) -> bool:
        """Send (or begin the stream with) an informative update; returns whether it was sent."""
        if self.finished or self.broken or self.text:
            return False  # informative updates come before the text
        return await self._update(ctx, "informative", text)

    async def append(self, ctx: TurnContext, more: str) -> bool:
        """Stream ``more`` text after what was streamed so far; returns whether it was sent."""
        if not self.usable or not more:
            return False
        return await self._update(ctx, "streaming", self.text + more)

    async def finish(self, ctx: TurnContext, message: Activity) -> ResourceResponse | None:
        """Send ``message`` as the stream's final message (an ordinary message when the stream is not
        usable); returns the service's answer (its id is the message's), or None after a failure."""
        if self.usable:
            message.entities = [*(message.entities or []), SchemaEntity.of(stream_info("final", self.stream_id))]
        self.finished = True
        return await self.send(lambda: ctx.send_activity(message), "final message")

    async def _update(self, ctx: TurnContext, stream_type: str, text: str) -> bool:
        wait = self._last + self.min_interval - self.clock()
        if wait > 0:
            await asyncio.sleep(wait)
        sequence = self.sequence + 1
        activity = Activity(type=ActivityTypes.typing, text=text,
                            entities=[SchemaEntity.of(stream_info(stream_type, self.stream_id, sequence))])
        sent = await self.send(lambda: ctx.send_activity(activity), f"{stream_type} stream update")
        self._last = self.clock()
        if sent is None or (not self.started and not getattr(sent, "id", None)):
            self.broken = self.started
            log.info("Teams: stream update %d (%s) failed; answering without streaming", sequence, stream_type)
            return False
        if not self.started:
            self.stream_id = sent.id
        self.sequence = sequence
        if stream_type == "streaming":
            self.text = text
        return True
