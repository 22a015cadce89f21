"""The ``/kb`` slash command.

Every invocation is acknowledged at once (within Slack's 3 seconds); slow work runs afterwards and
answers through the command's ``response_url``:

- ``/kb QUESTION``: ack "Searching…", then an ephemeral cited answer with feedback buttons and
  "Share in channel";
- ``/kb help``: answered in the ack;
- ``/kb status`` and ``/kb sources``: read the index and the state store, then answer ephemerally;
- ``/kb reindex [SOURCE] [--full]``: admins only (``ADMIN_USER_IDS``). The ack says it started; the
  job (:class:`app.jobs.IndexJobs`, the same routine as the scheduled sync) runs in a worker thread of
  this process, and a summary follows when it ends (ephemeral via ``response_url``; by DM if that
  fails or expired). A non-admin gets a polite refusal. Requests, refusals and outcomes go to the
  audit log (action ``kb.reindex``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import Executor
from typing import Any, Awaitable, Callable

from slack_sdk.web.async_client import AsyncWebClient

from agent.models import Turn
from state import StateStore

from app.jobs import IndexJobs
from . import render
from .commands import KbCommand, parse_kb
from .conversation import AgentRunner, PendingProposer, RecentReplies, error_reference
from .mrkdwn import escape, truncate
from .tasks import BackgroundTasks
from .threads import UserDirectory

__all__ = ["KbCommands", "AUDIT_ACTION", "respond_checked"]

log = logging.getLogger(__name__)

AUDIT_ACTION = "kb.reindex"
RESPONSE_URL_TTL = 25 * 60  # Slack accepts response_url posts for 30 minutes

Ack = Callable[..., Awaitable[Any]]
Respond = Callable[..., Awaitable[Any]]


class KbCommands:
    """Handles ``/kb`` (see the module docstring).

    Args:
        client: the Web API client (DM fallback for re-index summaries).
        runner: runs the agent.
        jobs: the index jobs (sources from ``CHATOPS_SOURCES``).
        store: the state store (audit log).
        users: user profiles.
        replies: recent replies (for "Share in channel").
        tasks: background tasks.
        admin_ids: who may re-index.
        job_executor: where index jobs run (one worker serialises them with any other job of the process,
            such as ``chatops serve``'s start-up sync); the caller owns it.
    """

    def __init__(self, client: AsyncWebClient, runner: AgentRunner, jobs: IndexJobs, store: StateStore,
                 users: UserDirectory, replies: RecentReplies, tasks: BackgroundTasks,
                 admin_ids: frozenset[str], job_executor: Executor) -> None:
        self.client = client
        self.runner = runner
        self.jobs = jobs
        self.store = store
        self.users = users
        self.replies = replies
        self.tasks = tasks
        self.admin_ids = admin_ids
        self.job_executor = job_executor
        self.propose: PendingProposer | None = None

    async def handle(self, command: dict[str, Any], ack: Ack, respond: Respond) -> None:
        """Acknowledge ``command`` (the slash command payload) and start whatever comes after."""
        cmd = parse_kb(command.get("text"))
        user = str(command.get("user_id", ""))
        if cmd.kind == "help":
            await ack(response_type="ephemeral", **render.help_message())
        elif cmd.kind == "invalid":
            await ack(response_type="ephemeral", **render.notice(cmd.error, ":information_source:"))
        elif cmd.kind == "question":
            await ack(response_type="ephemeral",
                      **render.notice(f"Searching the knowledge base for “{escape(truncate(cmd.question, 200))}”…",
                                      ":mag:"))
            self.tasks.spawn(self._question(command, cmd.question, respond), name=f"kb-question-{user}")
        elif cmd.kind in {"status", "sources"}:
            await ack()
            self.tasks.spawn(self._status(cmd.kind, respond), name=f"kb-{cmd.kind}-{user}")
        elif cmd.kind == "reindex":
            await self._reindex(command, cmd, ack, respond)

    # -- questions ----------------------------------------------------------------------------------
    async def _question(self, command: dict[str, Any], question: str, respond: Respond) -> None:
        user = str(command.get("user_id", ""))
        try:
            profile = await self.users.profile(user)
            turn = Turn(text=question, platform="slack", user_id=user, channel_id=str(command.get("channel_id", "")),
                        is_admin=user in self.admin_ids, locale=profile.locale, timezone=profile.timezone)
            reply = await self.runner.answer(turn)
            self.replies.put(question, reply)
            pending = None
            if reply.pending_action is not None and self.propose is not None:
                pending = await self.propose(reply.pending_action, turn)
            messages = render.answer_messages(reply, share=render.share_value(reply.trace.trace_id, question),
                                              pending_blocks=pending)
            for i, msg in enumerate(messages):
                await respond_checked(respond, response_type="ephemeral", replace_original=(i == 0), **msg)
        except Exception:  # noqa: BLE001 - the bot is never silent
            ref = error_reference()
            log.exception("/kb question failed (reference %s)", ref)
            await _safe_respond(respond, render.error_message("Sorry, something went wrong while I was answering. "
                                                              "Please try again.", ref))

    # -- status and sources ---------------------------------------------------------------------------
    async def _status(self, kind: str, respond: Respond) -> None:
        try:
            rows = await asyncio.to_thread(self.jobs.status)
            msg = render.status_message(rows) if kind == "status" else render.sources_message(self.jobs.names(), rows)
            await respond_checked(respond, response_type="ephemeral", **msg)
        except Exception:  # noqa: BLE001
            ref = error_reference()
            log.exception("/kb %s failed (reference %s)", kind, ref)
            await _safe_respond(respond, render.error_message(f"Sorry, I couldn't read the {kind} right now.", ref))

    # -- reindex --------------------------------------------------------------------------------------
    async def _audit(self, actor: str, target: str, outcome: str, detail: dict[str, Any]) -> None:
        try:
            await asyncio.to_thread(self.store.audit, actor, "slack", AUDIT_ACTION, target, outcome, detail)
        except Exception:  # noqa: BLE001 - an audit failure is logged loudly but does not hide the reply
            log.exception("could not write the audit log entry %s %s %s", actor, AUDIT_ACTION, outcome)

    async def _reindex(self, command: dict[str, Any], cmd: KbCommand, ack: Ack, respond: Respond) -> None:
        user = str(command.get("user_id", ""))
        target = cmd.source or "*"
        detail = {"full": cmd.full, "channel": command.get("channel_id", ""), "text": command.get("text", "")}
        if user not in self.admin_ids:
            await ack(response_type="ephemeral", **render.notice(
                "Sorry, re-indexing is for the knowledge base's admins. Ask one of them, or use `/kb status` to "
                "see when the sources were last synced.", ":lock:"))
            await self._audit(user, target, "denied", detail)
            log.info("denied /kb reindex to %s (not in ADMIN_USER_IDS)", user)
            return
        names = self.jobs.names()
        if not names or (cmd.source and cmd.source not in names):
            known = ", ".join(f"`{escape(n)}`" for n in names) or "none (set `CHATOPS_SOURCES`)"
            what = f"There is no source named `{escape(cmd.source)}`." if cmd.source else "No sources are configured."
            await ack(response_type="ephemeral", **render.notice(f"{what} Known sources: {known}.",
                                                                 ":information_source:"))
            await self._audit(user, target, "invalid", detail)
            return
        await ack(response_type="ephemeral", **render.reindex_started(cmd.source, cmd.full))
        await self._audit(user, target, "started", detail)
        self.tasks.spawn(self._run_reindex(user, cmd, detail, respond), name=f"kb-reindex-{target}")

    async def _run_reindex(self, user: str, cmd: KbCommand, detail: dict[str, Any], respond: Respond) -> None:
        t0 = time.monotonic()
        target = cmd.source or "*"
        try:
            loop = asyncio.get_running_loop()
            results = await loop.run_in_executor(self.job_executor, self.jobs.run, cmd.source, cmd.full)
        except Exception as exc:  # noqa: BLE001 - IndexJobs.run reports source failures itself; this is the rest
            ref = error_reference()
            log.exception("/kb reindex %s failed (reference %s)", target, ref)
            await self._audit(user, target, "failed", {**detail, "error": f"{type(exc).__name__}: {exc}"})
            await self._deliver(user, respond, render.error_message("The re-index failed before it could start.", ref),
                                t0)
            return
        seconds = time.monotonic() - t0
        outcome = "ok" if all(r.status == "ok" for r in results) else "failed"
        await self._audit(user, target, outcome, {**detail, "seconds": round(seconds, 2), "results": [
            r.as_dict() for r in results]})
        log.info("/kb reindex %s by %s: %s in %.1f s", target, user, outcome, seconds)
        await self._deliver(user, respond, render.reindex_summary(results, seconds), t0)

    async def _deliver(self, user: str, respond: Respond, msg: dict[str, Any], t0: float) -> None:
        """Post to the command's response_url while it is valid, else (or if that fails) by DM."""
        if time.monotonic() - t0 < RESPONSE_URL_TTL:
            try:
                await respond_checked(respond, response_type="ephemeral", replace_original=False, **msg)
                return
            except Exception as exc:  # noqa: BLE001
                log.warning("response_url post failed (%s); sending the summary by DM", exc)
        try:
            await self.client.chat_postMessage(channel=user, text=msg["text"], blocks=msg.get("blocks"))
        except Exception as exc:  # noqa: BLE001
            log.error("could not deliver the re-index summary to %s: %s", user, exc)


async def respond_checked(respond: Respond, **message: Any) -> Any:
    """``respond(**message)`` (a post to the ``response_url``) that raises when Slack did not accept it.

    Raises:
        RuntimeError: on a non-200 answer (Bolt's ``respond`` returns it instead of raising).
    """
    resp = await respond(**message)
    status = getattr(resp, "status_code", 200)
    if status != 200:
        raise RuntimeError(f"response_url answered HTTP {status}: {str(getattr(resp, 'body', ''))[:200]}")
    return resp


async def _safe_respond(respond: Respond, msg: dict[str, Any]) -> None:
    try:
        await respond_checked(respond, response_type="ephemeral", replace_original=False, **msg)
    except Exception as exc:  # noqa: BLE001
        log.error("could not tell the user about a failure via response_url: %s", exc)
