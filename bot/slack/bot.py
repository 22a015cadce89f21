""":class:`SlackBot`: the Bolt ``AsyncApp`` with its middleware and listeners, and the pieces they use.

Listeners only acknowledge and hand the payload to a background task (:class:`BackgroundTasks`), so
Slack gets its ack at once whatever the agent, the index or the Web API do afterwards. The listeners:

=====================================  =====================================================
``app_mention``                        :meth:`Conversations.on_mention`
``message`` (im, channels, groups)     :meth:`Conversations.on_message`
assistant ``thread_started``           :meth:`Conversations.on_assistant_thread_started`
assistant ``user_message``             :meth:`Conversations.on_assistant_message`
assistant ``thread_context_changed``   ignored (the bot does not use the context)
``app_home_opened`` (tab ``home``)     :meth:`HomeTab.publish`
``/kb``                                :meth:`KbCommands.handle`
block actions (any ``action_id``)      :meth:`ActionRegistry.dispatch`
``view_submission`` of the feedback    :func:`bot.slack.actions.feedback_submitted`
modal (``feedback_reason``)
any other event or command             acknowledged, nothing else
=====================================  =====================================================
"""

from __future__ import annotations

import asyncio
import logging
import re
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any

from slack_bolt.async_app import AsyncApp, AsyncAssistant
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_sdk.web.async_client import AsyncWebClient

from state import StateStore

from app.access import ChannelMembersCache
from app.admin import AdminService
from app.jobs import IndexJobs
from app.welcome import Welcome, index_catalog, welcome
from app.wiring import Runtime
from . import render
from .actions import ActionContext, ActionHandler, ActionRegistry, feedback_submitted, register_builtin_actions
from .client import api_error_code, build_web_client
from .config import COMMAND, SlackConfig
from .conversation import AgentRunner, Conversations, PendingProposer, RecentReplies
from .home import HomeTab
from .kb import KbCommands
from .middleware import DeduplicateEvents, IgnoreBotEvents
from .tasks import BackgroundTasks
from .threads import ThreadHistory, UserDirectory

__all__ = ["SlackBot"]

log = logging.getLogger(__name__)


class _QuietTokenNotice(logging.Filter):
    """Drops Bolt's "`token` will be unused" warning: Bolt reads SLACK_BOT_TOKEN from the environment even
    though the client it is given already carries that very token."""

    def filter(self, record: logging.LogRecord) -> bool:
        return warning_client_prioritized_and_token_skipped() not in str(record.msg)


class SlackBot:
    """Everything Slack-side, built once per process.

    Args:
        config: the validated Slack settings.
        runtime: the index, tools and agent (:func:`app.wiring.build_agent`).
        store: the state store (event ids, feedback, audit log).
        jobs: the index jobs behind ``/kb reindex`` and ``/kb status`` (through :class:`app.admin.AdminService`).
        client: a Web API client (default: :func:`bot.slack.client.build_web_client`).
        job_executor: where ``/kb reindex`` runs index jobs (default: a one-thread executor of its own,
            shut down by :meth:`close`); pass a shared one to serialise them with other jobs.

    Attributes:
        app: the Bolt ``AsyncApp``.
        admin: the admin commands' service (shared vocabulary and permissions with Teams).
        access: who sees what (``runtime.access``); members: the channel members' port (cached).
        actions: the button registry; ``actions.register(prefix, handler)`` adds buttons
            (:meth:`use_pending_actions` registers Confirm / Cancel).
        identity: ``auth.test``'s answer once :meth:`check_auth` succeeded, else None.
    """

    def __init__(self, config: SlackConfig, runtime: Runtime, store: StateStore, jobs: IndexJobs,
                 client: AsyncWebClient | None = None, job_executor: Executor | None = None) -> None:
        self.config = config
        self.runtime = runtime
        self.store = store
        self.jobs = jobs
        self.client = client or build_web_client(config)
        self.tasks = BackgroundTasks()
        self.runner = AgentRunner(runtime.agent, config.agent_concurrency)
        self.users = UserDirectory(self.client)
        self.users.workspace_url = config.workspace_url
        self.threads = ThreadHistory(self.client, config.history_limit, config.history_pages, users=self.users)
        self.replies = RecentReplies()
        self.access = runtime.access
        self.members = ChannelMembersCache(self.users.channel_members, limit=self.access.channel_members_max)
        self.conversations = Conversations(self.client, self.runner, self.threads, self.users, config.admin_ids,
                                           access=self.access, members=self.members, welcome=self.welcome,
                                           stream_answers=config.stream_answers)
        self._own_executor = job_executor is None
        self.job_executor = job_executor or ThreadPoolExecutor(max_workers=1, thread_name_prefix="chatops-jobs")
        self.admin = AdminService(jobs, store, self.job_executor)
        self.kb = KbCommands(self.client, self.runner, self.admin, self.users, self.replies, self.tasks,
                             config.admin_ids, access=self.access)
        self.home = HomeTab(self.client, jobs.status, store)
        self.actions = ActionRegistry()
        register_builtin_actions(self.actions)
        self.services: dict[str, Any] = {"store": store, "runner": self.runner, "replies": self.replies,
                                         "jobs": jobs, "bot": self, "access": self.access, "users": self.users,
                                         "members": self.members, "citations": runtime.unreadable_citations}
        self.identity: dict[str, Any] | None = None
        self._upkeep: asyncio.Task[None] | None = None
        self.app = self._build_app()

    # -- the Bolt app ------------------------------------------------------------------------------
    def _build_app(self) -> AsyncApp:
        bolt_log = logging.getLogger("bot.slack.bolt")
        if not any(isinstance(f, _QuietTokenNotice) for f in bolt_log.filters):
            bolt_log.addFilter(_QuietTokenNotice())
        app = AsyncApp(
            name="chatops",
            client=self.client,
            signing_secret=self.config.signing_secret or None,
            request_verification_enabled=not self.config.socket_mode,
            process_before_response=False,
            logger=bolt_log,
        )
        app.use(IgnoreBotEvents())
        app.use(DeduplicateEvents(self.store))
        tasks, conv = self.tasks, self.conversations

        assistant = AsyncAssistant(logger=logging.getLogger("bot.slack.assistant"))

        @assistant.thread_started
        async def on_assistant_started(event: dict) -> None:
            tasks.spawn(conv.on_assistant_thread_started(event), name="assistant-started")

        @assistant.thread_context_changed
        async def on_assistant_context(event: dict) -> None:
            return None  # the bot does not use the channel context; nothing to store

        @assistant.user_message
        async def on_assistant_message(event: dict, context) -> None:
            tasks.spawn(conv.on_assistant_message(event, context.bot_user_id or "", context.bot_id or ""),
                        name="assistant-message")

        app.assistant(assistant)

        @app.event("app_mention")
        async def on_mention(event: dict, context) -> None:
            tasks.spawn(conv.on_mention(event, context.bot_user_id or "", context.bot_id or ""), name="mention")

        @app.event("message")
        async def on_message(event: dict, context) -> None:
            tasks.spawn(conv.on_message(event, context.bot_user_id or "", context.bot_id or ""), name="message")

        @app.command(COMMAND)
        async def on_kb(command: dict, ack, respond) -> None:
            await self.kb.handle(command, ack, respond)

        @app.command(re.compile(r".*"))
        async def on_other_command(command: dict, ack) -> None:
            await ack(response_type="ephemeral", text=f"I only know {COMMAND}; try `{COMMAND} help`.")

        @app.action(re.compile(r".+"))
        async def on_action(ack, body: dict, action: dict, respond) -> None:
            await ack()
            ctx = ActionContext(
                action=action, body=body, user_id=str((body.get("user") or {}).get("id", "")),
                channel_id=str((body.get("channel") or {}).get("id", "")),
                message_ts=str((body.get("container") or {}).get("message_ts", "")),
                thread_ts=str((body.get("container") or {}).get("thread_ts", "")
                              or (body.get("message") or {}).get("thread_ts", "")),
                respond=respond, client=self.client, services=self.services)
            tasks.spawn(self.actions.dispatch(ctx), name=f"action-{ctx.action_id}")

        @app.event("app_home_opened")
        async def on_home_opened(event: dict) -> None:
            if event.get("tab") == "home":
                tasks.spawn(self.home.publish(str(event.get("user", ""))), name="home")

        @app.view(render.FEEDBACK_MODAL)
        async def on_feedback_reason(ack, body: dict, view: dict) -> None:
            await ack()
            tasks.spawn(feedback_submitted(self.store, str((body.get("user") or {}).get("id", "")), view),
                        name="feedback-reason")

        @app.event(re.compile(r".*"))
        async def on_other_event(event: dict) -> None:
            log.debug("ignored a %s event", event.get("type"))

        return app

    async def welcome(self) -> Welcome:
        """The assistant's greeting and suggested prompts: the sources file's ``greeting`` and
        ``suggested_prompts``, else built from the indexed sources (:mod:`app.welcome`; read each time, so
        a re-index shows at once)."""
        catalog = await asyncio.to_thread(index_catalog, self.runtime.index, names=self.jobs.names())
        return welcome(self.jobs.config, catalog)

    # -- hooks ---------------------------------------------------------------------------------------
    def use_pending_actions(self, propose: PendingProposer, on_click: ActionHandler) -> None:
        """Turn on side-effect actions (calendar events, reminders...) for Slack.

        Args:
            propose: ``async (PendingAction, Turn) -> blocks``: store the proposal (e.g.
                ``ActionService.propose``) and return its preview blocks; called whenever a reply carries
                ``Reply.pending_action``, in threads, DMs and ``/kb``.
            on_click: the handler of the preview's buttons (``action_confirm:<key>`` and
                ``action_cancel:<key>``, value: the key); it gets an :class:`ActionContext` (who clicked,
                where, ``respond`` to replace the preview with the outcome).
        """
        self.conversations.propose = propose
        self.kb.propose = propose
        self.actions.register(render.PENDING_CONFIRM, on_click)
        self.actions.register(render.PENDING_CANCEL, on_click)

    # -- lifecycle -----------------------------------------------------------------------------------
    async def check_auth(self) -> dict[str, Any]:
        """Call ``auth.test`` (who the token belongs to) and remember the answer.

        Raises:
            slack_sdk.errors.SlackApiError: when Slack refuses the token.
        """
        resp = await self.client.auth_test()
        self.identity = {k: resp.get(k) for k in ("team", "team_id", "user", "user_id", "bot_id", "url")}
        self.users.home_team = str(resp.get("team_id") or "")  # users of other teams are guests
        self.users.home_enterprise = str(resp.get("enterprise_id") or "")
        self.users.workspace_url = self.users.workspace_url or str(resp.get("url") or "")
        log.info("connected to Slack as @%s (%s) in %s", self.identity.get("user"), self.identity.get("user_id"),
                 self.identity.get("team"))
        return self.identity

    async def start(self, prune_every: float = 6 * 3600) -> None:
        """Start upkeep: forget claimed event ids older than two days (Slack retries within minutes),
        now and then every ``prune_every`` seconds, until :meth:`close`."""
        if self._upkeep is None or self._upkeep.done():
            self._upkeep = asyncio.get_running_loop().create_task(self._prune_events(prune_every),
                                                                  name="slack-upkeep")

    async def _prune_events(self, every: float) -> None:
        while True:
            try:
                n = await asyncio.to_thread(self.store.prune_events)
                log.info("forgot %d old Slack event ids", n)
            except Exception:  # noqa: BLE001 - upkeep must not die
                log.exception("pruning old Slack event ids failed")
            await asyncio.sleep(every)

    async def ready(self) -> tuple[bool, str]:
        """Readiness: ``auth.test`` succeeded (tried again here while it has not)."""
        identity = self.identity
        if identity is None:
            try:
                identity = await self.check_auth()
            except Exception as exc:  # noqa: BLE001
                return False, f"auth.test failed: {api_error_code(exc)}"
        return True, f"@{identity.get('user')} in {identity.get('team')}"

    async def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no background work is running; False when ``timeout`` passed first."""
        return await self.tasks.wait_idle(timeout)

    async def close(self, timeout: float = 10.0) -> None:
        """Finish (or after ``timeout`` seconds cancel) background work; stop the job executor if it is ours
        (a running index job is waited for: the index must not be closed under it)."""
        if self._upkeep is not None:
            self._upkeep.cancel()
            await asyncio.gather(self._upkeep, return_exceptions=True)
            self._upkeep = None
        await self.tasks.close(timeout)
        if self._own_executor:
            await asyncio.to_thread(self.job_executor.shutdown, True, cancel_futures=True)
