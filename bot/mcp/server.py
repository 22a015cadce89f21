"""The MCP server itself: two read-only tools and one resource over :class:`app.assistants.AssistantService`.

- tool ``search(query, limit=5)``: passages with title, section, link, last update and the quoted text;
- tool ``ask(question)``: the bot's cited answer, or its refusal naming the closest page;
- resource ``chatops://sources``: each source and when it was last indexed (JSON).

Who is calling is decided for every request by :class:`CallerMiddleware` (the SDK's server middleware) from a
``caller_of(request_context)`` function: over stdio the one ``--as`` person, over HTTP the person of the
request's bearer token (:mod:`bot.mcp.auth`). A request without a caller never reaches a tool. The service
runs the agent in a worker thread (:func:`anyio.to_thread.run_sync`), at most :data:`CONCURRENT_CALLS` at a time.
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
import logging
from collections.abc import Callable
from typing import Annotated, Any

import anyio
from mcp.server.context import CallNext, HandlerResult
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_REQUEST, ToolAnnotations
from pydantic import BaseModel, Field

from app.assistants import MAX_PASSAGES, AssistantService, Caller, CallerError

__all__ = ["build_server", "CallerMiddleware", "CallerOf", "CONCURRENT_CALLS", "SERVER_NAME", "INSTRUCTIONS"]

log = logging.getLogger(__name__)

SERVER_NAME = "chatops"

CONCURRENT_CALLS = 2
"""Agent or search calls running at once (the rest wait); the machine's cores, not the clients, bound it."""

INSTRUCTIONS = (
    "Company knowledge base (wiki, Confluence, handbook) with the asking person's read access. Use `ask` for a "
    "question: it answers only from the pages, with numbered citations [n] and their verbatim quotes, or says "
    "that the pages do not answer (and names the closest page): relay that, do not guess. Use `search` to read "
    "passages yourself. Cite the links you use. Each call stands alone (no memory of earlier ones): put the whole "
    "question in it. Nothing here changes anything: meetings, reminders and tickets are for Slack or Teams.")

CallerOf = Callable[[Any], Caller | None]
"""``request_context -> Caller`` (None: nobody; the request is refused)."""

_CALLER: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("chatops_mcp_caller", default=None)


class PassageOut(BaseModel):
    """One passage of a search."""

    rank: int = Field(description="1-based position in the results")
    title: str = Field(description="the page title")
    section: str = Field(description="the heading path within the page ('' at the top)")
    url: str = Field(description="link to the page and section ('' when the source has none)")
    updated_at: str | None = Field(description="when the page last changed (ISO 8601, UTC), if known")
    quote: str = Field(description="the passage text, verbatim (cut with an ellipsis when long)")
    source: str = Field(description="the source the page comes from")
    doc_id: str = Field(description="the page's id within its source")
    score: float = Field(description="retrieval score, comparable within one search only")


class SearchOut(BaseModel):
    """The passages of a search, best first (only pages the caller may read)."""

    passages: list[PassageOut]


class CitationOut(BaseModel):
    """A citation of an answer."""

    n: int = Field(description="the marker [n] in the answer text")
    title: str
    section: str
    url: str
    quote: str = Field(description="the verbatim span of the page that supports the cited sentence")
    doc_id: str


class AskOut(BaseModel):
    """The bot's answer, or its refusal."""

    text: str = Field(description="Markdown with [n] citation markers, or the refusal naming the closest page")
    refused: bool = Field(description="true when the pages do not answer the question (nothing was guessed)")
    citations: list[CitationOut]
    route: str = Field(description="how the bot read the message: knowledge, followup, chitchat, action...")
    trace_id: str = Field(description="the turn's id in the bot's logs")


class CallerMiddleware:
    """Server middleware: resolves the caller of every request (``caller_of``) and makes it current for the
    handlers; a request without a caller gets a protocol error (``initialize`` and notifications pass: they
    read nothing)."""

    def __init__(self, caller_of: CallerOf) -> None:
        self.caller_of = caller_of

    async def __call__(self, ctx: Any, call_next: CallNext) -> HandlerResult:
        """Set the caller for ``call_next``; refuse a request that reads something without one."""
        caller = self.caller_of(ctx)
        if caller is None and ctx.request_id is not None and ctx.method not in {"initialize", "ping", "server/discover"}:
            raise MCPError(code=INVALID_REQUEST, message="no authenticated caller")
        token = _CALLER.set(caller)
        try:
            return await call_next(ctx)
        finally:
            _CALLER.reset(token)


def _caller() -> Caller:
    caller = _CALLER.get()
    if caller is None:  # the middleware refuses such requests first; this is the second lock on the door
        raise ToolError("no authenticated caller")
    return caller


def build_server(service: AssistantService, caller_of: CallerOf, token_verifier: Any = None,
                 auth: Any = None) -> MCPServer:
    """The MCP server over ``service``, its callers decided by ``caller_of`` (see the module docstring).

    Args:
        token_verifier, auth: for HTTP, the SDK's ``TokenVerifier`` (:class:`bot.mcp.auth.StoreTokenVerifier`)
            and ``AuthSettings`` (:func:`bot.mcp.http.auth_settings`): every HTTP request then needs a valid
            bearer token (401 otherwise). None for stdio.
    """
    limiter = anyio.CapacityLimiter(CONCURRENT_CALLS)
    server = MCPServer(SERVER_NAME, title="chatops knowledge base", instructions=INSTRUCTIONS, log_level="WARNING",
                       token_verifier=token_verifier, auth=auth, middleware=[CallerMiddleware(caller_of)])
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                                open_world_hint=False)

    async def run(fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return await anyio.to_thread.run_sync(fn, *args, limiter=limiter)
        except (ValueError, CallerError) as exc:  # what the caller can fix: the message says how
            raise ToolError(str(exc)) from None
        except Exception:  # noqa: BLE001 - the trace goes to the log, the caller gets one line
            log.exception("an MCP call failed")
            raise ToolError("the knowledge base could not answer just now; try again later, or tell the bot's "
                            "admin (the server log has the details)") from None

    @server.tool(name="search", title="Search the knowledge base", annotations=read_only)
    async def search(query: Annotated[str, Field(description="what to look for, in words a page would use")],
                     limit: Annotated[int, Field(ge=1, le=MAX_PASSAGES, description="passages to return")] = 5,
                     ) -> SearchOut:
        """Search the company knowledge base with your access: the closest passages, each with its page title,
        section, link, last update and the passage text. Only pages you may read are searched."""
        found = await run(service.search, _caller(), query, limit)
        return SearchOut(passages=[PassageOut(**dataclasses.asdict(p)) for p in found])

    @server.tool(name="ask", title="Ask the knowledge base", annotations=read_only)
    async def ask(question: Annotated[str, Field(description="the question, in plain words")]) -> AskOut:
        """Ask the company knowledge base a question: an answer from the pages you may read, with numbered
        citations and their verbatim quotes, or a refusal when the pages do not answer it (naming the
        closest page). Each call stands alone: write the whole question, not a follow-up. Read-only: actions
        such as meetings or tickets are not taken here."""
        answer = await run(service.ask, _caller(), question)
        return AskOut(text=answer.text, refused=answer.refused, route=answer.route, trace_id=answer.trace_id,
                      citations=[CitationOut(**dataclasses.asdict(c)) for c in answer.citations])

    @server.resource("chatops://sources", name="sources", title="Indexed sources and their freshness",
                     description="Each indexed source and when it was last indexed or synced (JSON).",
                     mime_type="application/json")
    async def sources() -> str:
        try:
            found = await run(service.sources, _caller())
        except ToolError as exc:
            raise ResourceError(str(exc)) from None
        return json.dumps({"sources": [dataclasses.asdict(s) for s in found]}, ensure_ascii=False)

    return server
