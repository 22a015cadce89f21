"""What an AI assistant (Claude, Copilot, Cursor... through ``chatops mcp``) may ask of the bot: read-only.

:class:`AssistantService` is the platform-neutral side of the MCP server (issue 28); the adapter
(:mod:`bot.mcp`) only translates protocol calls into these methods and their results back:

- :meth:`~AssistantService.search`: the passages for a query, each with title, section, link, last update and
  the quoted text, retrieved for the caller exactly as in a DM (the turn's viewer from
  :func:`app.turns.build_turn`, applied inside the stores before ranking);
- :meth:`~AssistantService.ask`: the agent's answer with its citations, or its refusal naming the closest page
  the caller may read: the same agent, gate and citation check as chat. A request for an action (a meeting, a
  reminder, a ticket) is not proposed: actions stay behind Confirm in Slack and Teams;
- :meth:`~AssistantService.sources`: each indexed source and when it was last indexed or synced (no page
  counts: they would describe spaces the caller may not read).

Every call is audited (``mcp.search``, ``mcp.ask``, ``mcp.sources``; the caller as ``mcp:<email>``, the
transport and the token's id, never the question) and counted in the Prometheus metrics as a turn of platform ``mcp``
(``ask`` through the agent's observers like a chat turn; ``search`` with route ``search``). ``ask`` turns go
to the turn log like chat questions (the knowledge-gap report).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from agent.models import Reply
from state import StateStore
from telemetry.metrics import count_turn
from telemetry.timing import timed
from tools.base import ToolContext
from tools.knowledge_search import KnowledgeSearchArgs

from .inbound import InboundMessage
from .settings import Settings
from .turns import build_turn
from .wiring import Runtime

__all__ = ["AssistantService", "Caller", "Passage", "Answer", "CitedSource", "SourceFreshness", "CallerError",
           "open_assistant_service", "PLATFORM", "READ_ONLY", "MAX_PASSAGES", "QUOTE_CHARS"]

log = logging.getLogger(__name__)

PLATFORM = "mcp"
"""The platform name of assistant calls (turn log, audit log, metrics)."""

MAX_PASSAGES = 20
"""The most passages one search returns."""

QUOTE_CHARS = 1200
"""A passage's quoted text is cut to this many characters (on a word boundary, with an ellipsis)."""

READ_ONLY = ("This connection is read-only: I search and answer from the knowledge base here, but meetings, "
             "reminders and tickets are proposed and confirmed in Slack or Teams. Ask me there.")
"""The reply to a request for an action (nothing is proposed or stored)."""


class CallerError(ValueError):
    """The caller cannot be identified (no e-mail, or a malformed one); the message says what to fix."""


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is calling, as the adapter established it.

    Attributes:
        email: the person's e-mail (``--as EMAIL`` over stdio, the token's person over HTTP).
        transport: ``stdio`` or ``http`` (audited).
        token_id: the bearer token's id over HTTP ("" over stdio; audited).
    """

    email: str
    transport: str = "stdio"
    token_id: str = ""

    @property
    def user_id(self) -> str:
        """The caller's id on platform ``mcp``: ``mcp:<email>`` (the turn log, the audit log, ``chatops forget``)."""
        return f"{PLATFORM}:{self.email}"

    def __post_init__(self) -> None:
        e = (self.email or "").strip()
        if "@" not in e or any(c.isspace() for c in e) or e.startswith("@") or e.endswith("@"):
            raise CallerError(f"an assistant caller needs an e-mail address, got {self.email!r}")
        object.__setattr__(self, "email", e.lower())


@dataclass(frozen=True, slots=True)
class Passage:
    """One retrieved passage.

    Attributes:
        rank: 1-based position in the results.
        title: the page title.
        section: the heading path (``"Travel > Hotels"``; "" at the top of a page).
        url: the page link with the section's anchor ("" when the source has none).
        updated_at: when the page last changed (ISO 8601, UTC), or None when the source did not say.
        quote: the passage's text, verbatim (cut to :data:`QUOTE_CHARS`, with an ellipsis when cut).
        source: the source's name; doc_id: the page's id within it.
        score: the fused retrieval score (higher is closer; comparable within one search only).
    """

    rank: int
    title: str
    section: str
    url: str
    updated_at: str | None
    quote: str
    source: str
    doc_id: str
    score: float


@dataclass(frozen=True, slots=True)
class CitedSource:
    """A citation of an answer: marker ``[n]`` in the text, the page and the verbatim quote that supports it."""

    n: int
    title: str
    section: str
    url: str
    quote: str
    doc_id: str


@dataclass(frozen=True, slots=True)
class Answer:
    """The agent's reply to an assistant's question.

    Attributes:
        text: Markdown with ``[n]`` markers, or the refusal (naming the closest page the caller may read).
        refused: whether the bot declined for lack of evidence.
        citations: the numbered sources (each validated by the agent: its quote is a span of the passage).
        route: the agent's route (``knowledge``, ``followup``, ``chitchat``, ``action``...).
        trace_id: the turn's trace id (the turn log and feedback use it).
    """

    text: str
    refused: bool
    citations: tuple[CitedSource, ...]
    route: str
    trace_id: str


@dataclass(frozen=True, slots=True)
class SourceFreshness:
    """An indexed source and how fresh it is.

    Attributes:
        name: the source's name (``chatops sources list``).
        last_indexed_at: when its latest successful index or sync run finished (ISO 8601, UTC), or None.
        age_seconds: seconds since then (None when never).
    """

    name: str
    last_indexed_at: str | None
    age_seconds: float | None


def _iso(dt: datetime | None) -> str | None:
    if dt is None:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc).isoformat(timespec="seconds")


def _cut(text: str, limit: int = QUOTE_CHARS) -> str:
    if len(text) <= limit:
        return text
    head = text[:limit].rsplit(" ", 1)[0] or text[:limit]
    return head.rstrip() + "\u2026"


class AssistantService:
    """Search, ask and the sources' freshness for assistant callers (see the module docstring).

    Args:
        runtime: the index, search tool, agent and access policy (:func:`app.wiring.build_agent`); its
            ``access`` should read the state store's groups (as :func:`open_assistant_service` sets it).
        store: the state store (audit log; the turn log through the agent's observers).
        clock: seconds since the epoch (tests may pass their own).
    """

    def __init__(self, runtime: Runtime, store: StateStore, clock: Callable[[], float] = time.time) -> None:
        self.runtime = runtime
        self.store = store
        self.clock = clock

    # -- the caller's turn ------------------------------------------------------------------------
    def _message(self, caller: Caller, text: str) -> InboundMessage:
        """A DM from ``caller``: the answer is theirs alone, so their own access applies."""
        return InboundMessage(platform=PLATFORM, text=text, user_id=caller.user_id,
                              user_email=caller.email, channel_kind="dm")

    def _audit(self, caller: Caller, action: str, outcome: str, detail: dict[str, Any]) -> None:
        try:
            self.store.audit(caller.user_id, PLATFORM, action, "", outcome,
                             {"transport": caller.transport, **({"token": caller.token_id} if caller.token_id else {}),
                              **detail})
        except Exception:  # noqa: BLE001 - the audit failing is logged loudly; the caller still gets the answer
            log.exception("could not write the audit log entry %s %s", action, outcome)

    # -- search ---------------------------------------------------------------------------------
    def search(self, caller: Caller, query: str, limit: int = 5) -> list[Passage]:
        """The ``limit`` passages closest to ``query`` that ``caller`` may read, best first.

        Raises:
            ValueError: an empty query, one longer than ``MAX_QUESTION_CHARS``, or ``limit`` outside
                1..:data:`MAX_PASSAGES` (audited as ``invalid``; the message says what to fix).
        """
        max_chars = self.runtime.settings.max_question_chars
        text = (query or "").strip()
        problem = ("the query is empty: say what to look for" if not text else
                   f"the query is {len(text):,} characters long; shorten it to {max_chars:,} or fewer"
                   if len(text) > max_chars else
                   f"limit must be between 1 and {MAX_PASSAGES}, got {limit}" if not 1 <= limit <= MAX_PASSAGES else "")
        if problem:
            self._audit(caller, "mcp.search", "invalid", {})
            raise ValueError(problem)
        with timed("chatops.mcp.search") as clock:
            turn = build_turn(self._message(caller, text), self.runtime.access)
            ctx = ToolContext(user_id=turn.user_id, platform=PLATFORM, user_email=caller.email, viewer=turn.viewer)
            result = self.runtime.search.run(KnowledgeSearchArgs(query=text, k=limit), ctx)
            passages = []
            for i, ev in enumerate(result.evidence[:limit], 1):
                c = ev.chunk
                passages.append(Passage(rank=i, title=c.title, section=c.section, url=c.url,
                                        updated_at=_iso(c.updated_at), quote=_cut(c.text), source=c.source,
                                        doc_id=c.doc_id, score=round(ev.score, 6)))
        seconds = clock.elapsed()
        outcome = "answered" if passages else "refused"
        count_turn(PLATFORM, "search", outcome, seconds, citations=len(passages),
                   refusal_reason=None if passages else "no_close_passage")
        self._audit(caller, "mcp.search", "ok", {"results": len(passages), "ms": round(seconds * 1000, 1)})
        return passages

    # -- ask --------------------------------------------------------------------------------------
    def ask(self, caller: Caller, question: str) -> Answer:
        """The agent's answer to ``question`` for ``caller`` (a DM turn: their own access), or its refusal.

        A request for an action gets :data:`READ_ONLY` and nothing is proposed. The agent itself cuts a long
        question to ``MAX_QUESTION_CHARS`` and says so; an empty one gets its usual reply.
        """
        turn = build_turn(self._message(caller, question or ""), self.runtime.access)
        reply: Reply = self.runtime.agent.answer(turn)
        if reply.pending_action is not None:  # proposed actions are never stored from here
            answer = Answer(READ_ONLY, False, (), reply.route or "action", reply.trace.trace_id)
        else:
            cites = tuple(CitedSource(c.n, c.title, c.section, c.url, c.quote, c.doc_id) for c in reply.citations)
            answer = Answer(reply.text, reply.refused, cites, reply.route, reply.trace.trace_id)
        outcome = "refused" if answer.refused else "action" if reply.pending_action else "ok"
        self._audit(caller, "mcp.ask", outcome, {"trace_id": answer.trace_id, "route": answer.route,
                                                  "citations": len(answer.citations)})
        return answer

    # -- sources ----------------------------------------------------------------------------------
    def sources(self, caller: Caller) -> list[SourceFreshness]:
        """Every source in the index, with its latest successful run (index or sync); sorted by name."""
        names = set(self.runtime.index.manifest.counts_by_source())
        last = self.store.last_successful_runs(self.runtime.index.index_id)
        now = self.clock()
        out = [SourceFreshness(n, _iso(last.get(n)),
                               round(max(0.0, now - last[n].timestamp()), 1) if n in last else None)
               for n in sorted(names)]
        self._audit(caller, "mcp.sources", "ok", {"sources": len(out)})
        return out

    def close(self) -> None:
        """Close the index, the action tools and the state store."""
        try:
            self.runtime.close()
        finally:
            self.store.close()


def open_assistant_service(settings: Settings) -> AssistantService:
    """Everything an assistant server needs, wired as ``chatops serve`` wires chat: the index and agent
    (:func:`app.wiring.build_agent`), the state store's groups in the access policy, and the turn log and the
    metrics as the agent's observers.

    Raises:
        StateStoreError: the state database cannot be reached or migrated.
        ChatopsError: a locked or corrupt index, or a bad sources file.
    """
    from .metrics import TurnMetrics
    from .turnlog import TurnJournal
    from .wiring import build_agent

    store = StateStore(settings.state_url)
    try:
        runtime = build_agent(settings)
    except Exception:
        store.close()
        raise
    runtime.access = dataclasses.replace(runtime.access, groups_of=store.groups_of)
    runtime.agent.observe(TurnJournal(store))
    runtime.agent.observe(TurnMetrics())
    return AssistantService(runtime, store)
