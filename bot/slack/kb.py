"""The ``/kb`` slash command.

Every invocation is acknowledged at once (within Slack's 3 seconds); slow work runs afterwards and
answers through the command's ``response_url``:

- ``/kb QUESTION``: ack "Searching…", then an ephemeral cited answer with feedback buttons and
  "Share in channel";
- ``/kb help``: answered in the ack;
- ``/kb status`` and ``/kb sources``: read the index and the state store, then answer ephemerally
  (``/kb sources`` in a channel listed under ``channels:`` of the sources file also says its scope);
- ``/kb reindex [SOURCE] [--full]``: admins only (``ADMIN_USER_IDS``). The ack says it started; the
  job (:class:`app.jobs.IndexJobs`, the same routine as the scheduled sync) runs on the job executor of
  this process, and a summary follows when it ends (ephemeral via ``response_url``; by DM if that
  fails or expired). A non-admin gets a polite refusal.
- ``/kb report [PERIOD]``: admins only. The ack says it is being prepared; the knowledge-gap report
  (:mod:`app.report`) is built off the event loop and its summary follows ephemerally (:mod:`.report`).
  A non-admin gets a polite refusal in the ack.

Status, sources and re-index are :class:`app.admin.AdminService`'s (the same as Teams'): it decides who
may run what and audits every use (``admin.status``, ``admin.sources``, ``admin.reindex``). This module
only acknowledges and renders.

The inbound message of a ``/kb`` question (:meth:`KbCommands.inbound`) has no ``message_id``: a slash
command has no ``ts``, and its ``trigger_id`` is new on every invocation (Slack never redelivers a
command), so it would never match anything. Without one, the agent keys a proposed action on the words
and the arguments, so the same ``/kb`` request typed again finds the first proposal. ``sent_at`` is when
the command arrived.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable

from slack_sdk.web.async_client import AsyncWebClient

from app.access import AccessPolicy
from app.admin import AdminResult, AdminService
from app.inbound import InboundMessage
from app.turns import build_turn

from . import render
from .commands import KbCommand, parse_kb
from .conversation import AgentRunner, PendingProposer, RecentReplies, error_reference
from .inbound import command_channel_kind
from .report import report_message
from .mrkdwn import escape, truncate
from .tasks import BackgroundTasks
from .threads import UserDirectory, UserProfile

__all__ = ["KbCommands", "respond_checked"]

log = logging.getLogger(__name__)

RESPONSE_URL_TTL = 25 * 60  # Slack accepts response_url posts for 30 minutes

Ack = Callable[..., Awaitable[Any]]
Respond = Callable[..., Awaitable[Any]]


class KbCommands:
    """Handles ``/kb`` (see the module docstring).

    Args:
        client: the Web API client (DM fallback for re-index summaries).
        runner: runs the agent.
        admin: status, sources and re-index (permissions and audit included).
        users: user profiles.
        replies: recent replies (for "Share in channel").
        tasks: background tasks.
        admin_ids: ``ADMIN_USER_IDS`` (``InboundMessage.is_admin``).
        access: who sees what (``Turn.viewer``): a ``/kb`` answer is ephemeral, so the asker's own access.
    """

    def __init__(self, client: AsyncWebClient, runner: AgentRunner, admin: AdminService, users: UserDirectory,
                 replies: RecentReplies, tasks: BackgroundTasks, admin_ids: frozenset[str],
                 access: AccessPolicy | None = None) -> None:
        self.client = client
        self.runner = runner
        self.admin = admin
        self.users = users
        self.replies = replies
        self.tasks = tasks
        self.admin_ids = admin_ids
        self.access = access or AccessPolicy()
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
            self.tasks.spawn(self._status(command, cmd.kind, respond), name=f"kb-{cmd.kind}-{user}")
        elif cmd.kind == "reindex":
            await self._reindex(command, cmd, ack, respond)
        elif cmd.kind == "report":
            await self._report(command, cmd, ack, respond)

    async def inbound(self, command: dict[str, Any], text: str, profile: bool = True) -> InboundMessage:
        """The inbound message of a ``/kb`` invocation (``text``: the question or the admin command).

        No ``message_id`` (see the module docstring); ``sent_at`` is now; the requester's e-mail,
        locale, zone and guest status come from ``users.info`` (skipped with ``profile=False``: admin
        commands need none, and are acknowledged before any Web API call). ``/kb`` is registered with
        ``should_escape: false``, so Slack sends mentions in its text as ``@name``: nothing to resolve.
        The answer is ephemeral (``private_reply``): the asker's own access, wherever they typed it;
        "Share in channel" re-checks it against the channel (:mod:`bot.slack.actions`).
        """
        user = str(command.get("user_id", ""))
        prof = await self.users.profile(user) if profile else UserProfile(timezone="")
        return InboundMessage(
            platform="slack", text=text, user_id=user, user_email=prof.email,
            channel_id=str(command.get("channel_id", "")), channel_kind=command_channel_kind(command),
            sent_at=datetime.now(timezone.utc), is_admin=user in self.admin_ids, locale=prof.locale,
            timezone=prof.timezone, is_guest=prof.is_guest, private_reply=True)

    # -- questions ----------------------------------------------------------------------------------
    async def _question(self, command: dict[str, Any], question: str, respond: Respond) -> None:
        try:
            turn = build_turn(await self.inbound(command, question), self.access)
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
    async def _status(self, command: dict[str, Any], kind: str, respond: Respond) -> None:
        try:
            msg = await self.inbound(command, str(command.get("text", "")), profile=False)
            result = await (self.admin.status(msg) if kind == "status" else self.admin.sources(msg))
            if result.outcome == "failed":
                ref = error_reference()
                log.error("/kb %s failed (reference %s): %s", kind, ref, result.error)
                await _safe_respond(respond, render.error_message(f"Sorry, I couldn't read the {kind} right now.",
                                                                  ref))
                return
            out = render.status_message(result.rows) if kind == "status" else render.sources_message(
                result.names, result.rows, scope=self.access.scope(msg.channel_id))
            await respond_checked(respond, response_type="ephemeral", **out)
        except Exception:  # noqa: BLE001
            ref = error_reference()
            log.exception("/kb %s failed (reference %s)", kind, ref)
            await _safe_respond(respond, render.error_message(f"Sorry, I couldn't read the {kind} right now.", ref))

    # -- the knowledge-gap report ------------------------------------------------------------------------
    async def _report(self, command: dict[str, Any], cmd: KbCommand, ack: Ack, respond: Respond) -> None:
        msg = await self.inbound(command, str(command.get("text", "")), profile=False)
        started = await self.admin.request_report(msg, cmd.since)
        if started.outcome == "denied":
            await ack(response_type="ephemeral", **render.notice(escape(started.text), ":lock:"))
            return
        if started.outcome == "invalid":
            await ack(response_type="ephemeral", **render.notice(escape(started.error), ":information_source:"))
            return
        await ack(response_type="ephemeral", **render.notice(escape(started.text), ":hourglass_flowing_sand:"))
        self.tasks.spawn(self._post_report(msg, started, respond), name=f"kb-report-{msg.user_id}")

    async def _post_report(self, msg: InboundMessage, started: AdminResult, respond: Respond) -> None:
        result = await self.admin.run_report(msg, started)
        if result.report is None:
            ref = error_reference()
            log.error("/kb report failed (reference %s): %s", ref, result.error)
            await _safe_respond(respond, render.error_message("Sorry, I couldn't build the report right now.", ref))
            return
        await _safe_respond(respond, report_message(result.report))

    # -- reindex --------------------------------------------------------------------------------------
    async def _reindex(self, command: dict[str, Any], cmd: KbCommand, ack: Ack, respond: Respond) -> None:
        msg = await self.inbound(command, str(command.get("text", "")), profile=False)
        started = await self.admin.request_reindex(msg, cmd.source, cmd.full)
        if started.outcome == "denied":
            await ack(response_type="ephemeral", **render.notice(
                "Sorry, re-indexing is for the knowledge base's admins. Ask one of them, or use `/kb status` to "
                "see when the sources were last synced.", ":lock:"))
            return
        if started.outcome == "invalid":
            known = ", ".join(f"`{escape(n)}`" for n in started.names) or "none (set `CHATOPS_SOURCES`)"
            what = f"There is no source named `{escape(cmd.source)}`." if cmd.source else "No sources are configured."
            await ack(response_type="ephemeral", **render.notice(f"{what} Known sources: {known}.",
                                                                 ":information_source:"))
            return
        await ack(response_type="ephemeral", **render.reindex_started(cmd.source, cmd.full))
        self.tasks.spawn(self._run_reindex(msg, started, respond), name=f"kb-reindex-{cmd.source or '*'}")

    async def _run_reindex(self, msg: InboundMessage, started: AdminResult, respond: Respond) -> None:
        t0 = time.monotonic()
        result = await self.admin.run_reindex(msg, started)
        if not result.results:
            ref = error_reference()
            log.error("/kb reindex %s failed (reference %s): %s", started.source or "*", ref, result.error)
            await self._deliver(msg.user_id, respond,
                                render.error_message("The re-index failed before it could start.", ref), t0)
            return
        await self._deliver(msg.user_id, respond, render.reindex_summary(result.results, result.seconds), t0)

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
