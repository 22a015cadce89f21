"""The platform-neutral turn and reply, citations, pending actions and the trace."""

from __future__ import annotations

import base64
import hashlib
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Literal

from core.access import Viewer
from telemetry import timing

log = logging.getLogger(__name__)

__all__ = ["Turn", "HistoryMessage", "Reply", "Citation", "PendingAction", "Trace", "Route", "idempotency_key"]

Route = Literal["knowledge", "followup", "action", "chitchat", "general", "empty"]


@dataclass(frozen=True, slots=True)
class HistoryMessage:
    """One earlier message of the thread or conversation, with who wrote it.

    A shared thread mixes people: only the requester's own messages may complete their request
    (title, attendees, time of a meeting), while anyone's message is fair context for a follow-up
    question. Producers say which is which; when they cannot tell, ``from_requester`` is False
    (fail closed: the message is context, never the requester's words).

    Attributes:
        text: the message as plain text (platform mark-up removed).
        author_id: the platform's id of its author (Slack ``user``, Teams AAD object id); "" when unknown.
        from_requester: True when the author is the user of the turn being answered.
    """

    text: str
    author_id: str = ""
    from_requester: bool = False

    @classmethod
    def own(cls, text: str, author_id: str = "") -> "HistoryMessage":
        """A message of the requester themself (the CLI, the console, eval files)."""
        return cls(text, author_id, True)


@dataclass(frozen=True, slots=True)
class Turn:
    """One user message, as the agent reads it.

    Built in one place only, :func:`app.turns.build_turn`, from the platform-neutral
    :class:`app.inbound.InboundMessage` every adapter produces (``tests/test_turns.py`` checks that no
    other module constructs a ``Turn``; tests may).

    Attributes:
        text: the message as plain text: platform mark-up removed, the bot's own mention dropped, other
            people's mentions already resolved (their e-mail when the platform gives one, else ``@Name``).
        history: earlier messages by people in the same thread or conversation, oldest first, each with
            its author (:class:`HistoryMessage`); a plain string is refused (``TypeError``), so no
            producer can forget to say who wrote what. :attr:`own_history` is the requester's part.
        platform: ``"slack"``, ``"teams"``, ``"cli"``, ``"console"``, ``"eval"``.
        user_id, channel_id, thread_id: platform ids (``thread_id`` is Slack's ``thread_ts``, Teams'
            conversation id).
        user_email: the requester's e-mail when the platform gave it ("" when unknown).
        channel_kind: ``"dm"``, ``"group"`` (a group DM or group chat) or ``"channel"``; "" when unknown.
        viewer: who will see the answer (:class:`core.access.Viewer`: the asker's principals and
            whether only public pages may be used), set by :func:`app.turns.build_turn`; retrieval
            requires it (None is a programming error, never "everyone").
        is_admin: whether the user may run admin commands.
        locale, timezone: the user's locale and IANA time zone (Slack: ``users.info`` ``tz``); an empty
            time zone means unknown, and the planner uses the ``DEFAULT_TIMEZONE`` setting.
        message_id: the platform's id of this message (Slack ``ts``, Teams activity id); a redelivered
            message has the same id, so the pending action it proposes gets the same idempotency key.
        sent_at: when the message was sent (aware); relative dates ("tomorrow") count from it (now when None).
        mention_emails: platform user id -> e-mail of the people mentioned in the message whose e-mail is
            known. The e-mails are already in ``text``; this map is the structured list of the same
            people, and lets a reader that still meets a ``<@U123>`` token (the calendar extraction's
            ``resolve_mention``) resolve it.
        thread_link: the web link of the thread the message is in ("" when the platform gives none).
    """

    text: str
    history: tuple[HistoryMessage, ...] = ()
    platform: str = "cli"
    user_id: str = ""
    channel_id: str = ""
    thread_id: str = ""
    is_admin: bool = False
    locale: str = "en"
    timezone: str = ""
    message_id: str = ""
    sent_at: datetime | None = None
    mention_emails: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    user_email: str = ""
    channel_kind: str = ""
    viewer: Viewer | None = field(default=None, hash=False, compare=False)
    thread_link: str = ""

    def __post_init__(self) -> None:
        bad = [h for h in self.history if not isinstance(h, HistoryMessage)]
        if bad:
            raise TypeError(f"Turn.history takes HistoryMessage entries (who wrote each message), got "
                            f"{type(bad[0]).__name__}; wrap the requester's own text with HistoryMessage.own(text)")
        # a runtime guard: typed callers pass a tuple (kept as is); an untyped caller's list is made one
        object.__setattr__(self, "history", tuple(self.history))

    @property
    def own_history(self) -> tuple[str, ...]:
        """The texts of the requester's own earlier messages, oldest first (what may complete a request)."""
        return tuple(h.text for h in self.history if h.from_requester)


@dataclass(frozen=True, slots=True)
class Citation:
    """A numbered source of the reply.

    Attributes:
        n: the marker number used in the text as ``[n]``.
        chunk_id, doc_id, title, url, section: where the quote comes from.
        quote: the verbatim span of the chunk's text that supports the cited sentence.
    """

    n: int
    chunk_id: str
    doc_id: str
    title: str
    url: str
    section: str
    quote: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


def idempotency_key(*parts: str) -> str:
    """A deterministic key for a proposed action: base32hex (``[0-9a-v]``) of a SHA-256 of ``parts``.

    32 characters, so it is also a valid Google Calendar event id (base32hex, 5-1024 characters) and
    fits the state store's key column. Same parts, same key: a redelivered or retried message proposes
    the same pending action, and a retried insert cannot double-book.
    """
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).digest()[:20]
    return base64.b32hexencode(digest).decode("ascii").lower()


@dataclass(frozen=True, slots=True)
class PendingAction:
    """A side-effect tool call waiting for the user's confirmation.

    Attributes:
        tool: the tool's name (``calendar.create``).
        args: the tool's validated arguments as JSON-ready values (times as ISO 8601 strings).
        idempotency_key: :func:`idempotency_key` of the request; the state store's key and the event id.
        summary: one line describing the action, for previews and logs.
    """

    tool: str
    args: dict[str, Any]
    idempotency_key: str
    summary: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


@dataclass(slots=True)
class Trace:
    """What happened in a turn, step by step, with timings in milliseconds.

    ``listener``, when set, is called with each step's name and data as it is recorded (progress shown to
    the user while the turn runs); it runs in the agent's thread, and whatever it raises is ignored.
    """

    trace_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    route: str = ""
    queries: list[dict[str, Any]] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    gate: dict[str, Any] = field(default_factory=dict)
    timings_ms: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    _t0: float = field(default_factory=time.perf_counter, repr=False)
    listener: Callable[[str, dict[str, Any]], None] | None = field(default=None, repr=False, compare=False)

    def step(self, name: str, /, **data: Any) -> None:
        """Record a step with the time since the turn started (and tell the listener). ``name`` is
        positional-only, so a step's data may carry a ``name`` field of its own."""
        self.steps.append({"step": name, "at_ms": round((time.perf_counter() - self._t0) * 1000, 2), **data})
        if self.listener is not None:
            try:
                self.listener(name, data)
            except Exception:  # noqa: BLE001 - progress must never break a turn
                log.debug("a trace listener failed on step %s", name, exc_info=True)

    def emit_text(self, text: str) -> None:
        """Tell the listener (step ``answer_text``, data ``{"text": text}``) a piece of the answer released
        early (:mod:`agent.llm.release`); not recorded: the trace never holds the answer. Never raises."""
        if self.listener is not None and text:
            try:
                self.listener("answer_text", {"text": text})
            except Exception:  # noqa: BLE001 - progress must never break a turn
                log.debug("a trace listener failed on answer text", exc_info=True)

    def add_time(self, stage: str, ms: float) -> None:
        """Accumulate ``ms`` into a stage's timing."""
        self.timings_ms[stage] = round(self.timings_ms.get(stage, 0.0) + ms, 3)

    @contextmanager
    def timed(self, stage: str) -> Iterator[timing.Timed]:
        """Time the block as ``stage``: a ``chatops.<stage>`` span (:func:`telemetry.timing.timed`), its
        milliseconds added to :attr:`timings_ms` (:meth:`add_time`), also when it raises."""
        clock: timing.Timed | None = None
        try:
            with timing.timed(f"chatops.{stage}") as clock:
                yield clock
        finally:
            if clock is not None:
                self.add_time(stage, clock.ms)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"trace_id": self.trace_id, "route": self.route, "queries": self.queries, "steps": self.steps,
                "gate": self.gate, "timings_ms": self.timings_ms, "notes": self.notes}


@dataclass(slots=True)
class Reply:
    """The agent's answer to a turn, rendered by each adapter its own way.

    Attributes:
        text: Markdown with ``[n]`` markers (no source list: adapters render ``citations``).
        citations: the numbered sources, each validated.
        refused: True when the agent declined for lack of evidence.
        route: the route taken.
        pending_action: a side-effect action waiting for confirmation, if any.
        searched: the queries searched (shown in refusals).
        trace: the turn's trace.
    """

    text: str
    citations: list[Citation] = field(default_factory=list)
    refused: bool = False
    route: str = ""
    pending_action: PendingAction | None = None
    searched: list[str] = field(default_factory=list)
    trace: Trace = field(default_factory=Trace)

    def as_dict(self) -> dict[str, Any]:
        """The ``chatops ask --json`` object."""
        return {
            "route": self.route, "text": self.text, "refused": self.refused,
            "citations": [c.as_dict() for c in self.citations],
            "pending_action": self.pending_action.as_dict() if self.pending_action else None,
            "trace": self.trace.as_dict(), "timings_ms": self.trace.timings_ms,
        }
