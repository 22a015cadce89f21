"""The platform-neutral turn and reply, citations, pending actions and the trace."""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

__all__ = ["Turn", "Reply", "Citation", "PendingAction", "Trace", "Route"]

Route = Literal["knowledge", "followup", "action", "chitchat", "general", "empty"]


@dataclass(frozen=True, slots=True)
class Turn:
    """One user message, as every adapter hands it to the agent.

    Attributes:
        text: the message with platform mark-up removed (mentions stripped).
        history: earlier user messages of the same thread or conversation, oldest first.
        platform: ``"slack"``, ``"teams"``, ``"cli"``...
        user_id, channel_id, thread_id: platform ids (``thread_id`` is Slack's ``thread_ts``).
        is_admin: whether the user may run admin commands.
        locale, timezone: the user's locale and IANA time zone.
    """

    text: str
    history: tuple[str, ...] = ()
    platform: str = "cli"
    user_id: str = ""
    channel_id: str = ""
    thread_id: str = ""
    is_admin: bool = False
    locale: str = "en"
    timezone: str = "UTC"


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


@dataclass(frozen=True, slots=True)
class PendingAction:
    """A side-effect tool call waiting for the user's confirmation."""

    tool: str
    args: dict[str, Any]
    idempotency_key: str
    summary: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


@dataclass(slots=True)
class Trace:
    """What happened in a turn, step by step, with timings in milliseconds."""

    trace_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    route: str = ""
    queries: list[dict[str, Any]] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    gate: dict[str, Any] = field(default_factory=dict)
    timings_ms: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    _t0: float = field(default_factory=time.perf_counter, repr=False)

    def step(self, name: str, **data: Any) -> None:
        """Record a step with the time since the turn started."""
        self.steps.append({"step": name, "at_ms": round((time.perf_counter() - self._t0) * 1000, 2), **data})

    def add_time(self, stage: str, ms: float) -> None:
        """Accumulate ``ms`` into a stage's timing."""
        self.timings_ms[stage] = round(self.timings_ms.get(stage, 0.0) + ms, 3)

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
