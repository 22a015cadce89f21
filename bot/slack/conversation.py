"""Conversations: a mention, a DM or a thread reply -> :class:`Turn` -> agent -> reply in the thread.

Which messages are answered:

- ``app_mention`` in a channel: always, in the thread (the thread's ``thread_ts``, or the mention's ``ts``).
- ``message`` in a DM (``channel_type: im``) or a group DM (``mpim``): always, in the thread, like a
  mention (a group DM's answer is for everyone in it: it is read with a channel's audience, not the
  asker's own access).
- ``message`` in a channel or private channel: only a reply in a thread where this bot already posted,
  and only when it does not mention the bot (the ``app_mention`` of the same message answers it); in a
  channel whose ``reply_in_threads`` is ``mention_only`` (``channels:`` of the sources file), never.
- message subtypes other than people's (joins, edits, deletions, bot posts) are never answered.

In an assistant thread the greeting and the suggested prompts come from :mod:`app.welcome` (the sources
file, else the indexed sources), and the first question becomes the thread's title
(``assistant.threads.setTitle``).

While the agent works the user sees progress: in an assistant thread (Slack's AI-app surface) the
assistant status, "Searching the knowledge base…" with rotating ``loading_messages``, then the agent's
steps as they happen ("Checking 3 sources…", :class:`bot.slack.stream.LiveTurn`); elsewhere an :eyes:
reaction on the question that is removed once the answer is shown. The answer is streamed into the thread
(``chat.startStream`` / ``appendStream`` / ``stopStream``, :class:`bot.slack.stream.AnswerStreamer`) once the
agent has validated its citations (with the LLM planner, sentence by sentence as the model writes them,
each once its citations passed), with the sources and the feedback row attached at the stop; an answer
with a pending action, an answer over 12,000 characters, or one Slack refuses to stream is posted
(``chat.postMessage``). Every failure tells the user something (see :class:`Poster`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from cachetools import FIFOCache
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from agent.agent import Agent
from agent.models import PendingAction, Reply, Turn
from app.access import AccessPolicy, ChannelMembersCache
from app.inbound import InboundMessage, utc_from_epoch
from app.progress import FIRST_STATUS, LOADING_MESSAGES
from app.turns import build_turn
from app.welcome import Welcome, default_welcome

from . import render
from .client import CHANNEL_ERRORS, FORMAT_ERRORS, api_error_code, describe_api_error
from .inbound import event_channel_kind, mentioned_users, mentions, to_plain
from .links import thread_link
from .mrkdwn import truncate
from .stream import AnswerStreamer, LiveTurn
from .threads import HUMAN_SUBTYPES, ThreadHistory, ThreadInfo, UserDirectory

__all__ = ["AgentRunner", "Conversations", "Poster", "RecentReplies", "PendingProposer", "STATUS_TEXT", "with_members",
           "PROGRESS_REACTION", "MESSAGE_CHANNEL_TYPES"]

log = logging.getLogger(__name__)

STATUS_TEXT = FIRST_STATUS
PROGRESS_REACTION = "eyes"

#: Stores a proposed side-effect action and returns its Slack blocks (Confirm / Cancel); see
#: :meth:`bot.slack.bot.SlackBot.use_pending_actions`.
PendingProposer = Callable[[PendingAction, Turn], Awaitable[list[dict[str, Any]]]]
#: The greeting and suggested prompts of a new assistant thread (:func:`app.welcome.welcome`).
WelcomeSource = Callable[[], Awaitable[Welcome]]

#: ``message`` events handled per ``channel_type``, with the Events API subscription each needs.
MESSAGE_CHANNEL_TYPES = {"im": "message.im", "mpim": "message.mpim", "channel": "message.channels",
                         "group": "message.groups"}
#: ``channel_type``\ s where every message is for the bot (no mention, no thread needed).
DIRECT_CHANNEL_TYPES = frozenset({"im", "mpim"})


class AgentRunner:
    """Runs the synchronous agent in worker threads (``asyncio.to_thread``), at most ``concurrency`` at once,
    so the event loop never blocks and worker threads stay free for the state store."""

    def __init__(self, agent: Agent, concurrency: int = 2) -> None:
        self.agent = agent
        self._slots = asyncio.Semaphore(max(1, concurrency))

    async def answer(self, turn: Turn, progress: Callable[[str, dict[str, Any]], None] | None = None) -> Reply:
        """The agent's reply to ``turn``; ``progress`` is told each step and each piece of answer text
        released early (in the worker thread). Raises only what the agent raises (it does not for bad
        input)."""
        async with self._slots:
            if progress is None:
                return await asyncio.to_thread(self.agent.answer, turn)
            return await asyncio.to_thread(self.agent.answer, turn, progress)


class RecentReplies:
    """The latest replies by trace id, so "Share in channel" can post the very answer the user saw."""

    def __init__(self, size: int = 1000) -> None:
        self.size = size
        self._items: FIFOCache[str, tuple[str, Reply]] = FIFOCache(maxsize=size)  # the oldest put out first

    def put(self, question: str, reply: Reply) -> None:
        """Remember ``reply`` (to ``question``) under its trace id."""
        self._items[reply.trace.trace_id] = (question, reply)

    def get(self, trace_id: str) -> tuple[str, Reply] | None:
        """``(question, reply)`` for ``trace_id``, or None when forgotten."""
        return self._items.get(trace_id)


async def with_members(msg: InboundMessage, access: AccessPolicy, members: ChannelMembersCache | None) -> InboundMessage:
    """``msg`` with its conversation's members (:attr:`InboundMessage.audience_members`) when the policy
    wants them (``CHANNEL_ACCESS=members`` and an audience other than the asker); else ``msg``."""
    if members is None or not access.wants_members(msg):
        return msg
    return dataclasses.replace(msg, audience_members=await members.members(msg.channel_id))


def error_reference() -> str:
    """A short id to quote in an error message and find in the logs."""
    return uuid.uuid4().hex[:8]


@dataclass(slots=True)
class Poster:
    """Posts in threads and makes sure the user hears about failures.

    - a message Slack refuses for its format (``invalid_blocks``, ``msg_too_long``...) is sent again as
      plain text;
    - when the bot cannot write to the conversation (``not_in_channel``, ``channel_not_found``...) the error
      is logged and the user gets a direct message saying why and what to do;
    - any other failure is logged and a short error message is attempted in the thread, then by DM.
    """

    client: AsyncWebClient

    async def post(self, channel: str, thread_ts: str | None, message: dict[str, Any]) -> dict[str, Any]:
        """``chat.postMessage`` of one rendered message (links not unfurled). Raises :class:`SlackApiError`."""
        kwargs: dict[str, Any] = {"channel": channel, "text": message["text"], "unfurl_links": False,
                                  "unfurl_media": False}
        if message.get("blocks"):
            kwargs["blocks"] = message["blocks"]
        if thread_ts:
            kwargs["thread_ts"] = thread_ts
        # slack_sdk types data as dict or bytes; chat.postMessage answers JSON, a dict
        return (await self.client.chat_postMessage(**kwargs)).data  # type: ignore[return-value]

    async def deliver(self, channel: str, thread_ts: str | None, messages: list[dict[str, Any]], user_id: str) -> bool:
        """Post ``messages`` in order in the thread; on failure apply the fallbacks above. True when all were posted."""
        for msg in messages:
            try:
                await self.post(channel, thread_ts, msg)
                continue
            except SlackApiError as exc:
                code = api_error_code(exc)
            except Exception as exc:  # noqa: BLE001 - network failure after the retries
                code = type(exc).__name__
                log.warning("posting in %s failed: %s", channel, exc)
            if code in FORMAT_ERRORS:
                log.warning("Slack refused a message's format in %s (%s); sending it as plain text", channel, code)
                try:
                    await self.post(channel, thread_ts, {"text": truncate(msg["text"], 3900)})
                    continue
                except SlackApiError as exc:
                    code = api_error_code(exc)
            if code in CHANNEL_ERRORS:
                log.warning("cannot post in channel %s: %s (%s)", channel, code, describe_api_error(code))
                await self.tell_directly(user_id, channel, code)
                return False
            log.error("posting in %s failed: %s", channel, code)
            await self.report(channel, thread_ts, user_id, f"I found an answer but couldn't post it ({code}).")
            return False
        return True

    async def tell_directly(self, user_id: str, channel: str, code: str) -> bool:
        """DM ``user_id`` that the bot could not reply in ``channel`` and why. Never raises."""
        if not user_id or user_id == channel:
            return False
        text = f":warning: I couldn't reply in <#{channel}>: {describe_api_error(code)}"
        try:
            await self.client.chat_postMessage(channel=user_id, text=text)
            return True
        except Exception as exc:  # noqa: BLE001
            log.error("could not DM %s about %s in %s either: %s", user_id, code, channel, api_error_code(exc))
            return False

    async def report(self, channel: str, thread_ts: str | None, user_id: str, text: str) -> None:
        """Tell the user about a failure: in the thread, else by DM. Never raises."""
        ref = error_reference()
        log.error("told user %s in %s: %s (reference %s)", user_id, channel, text, ref)
        msg = render.error_message(text + " Please try again; if it keeps happening, tell the bot's admins.", ref)
        try:
            await self.post(channel, thread_ts, msg)
            return
        except Exception as exc:  # noqa: BLE001
            code = api_error_code(exc)
        await self.tell_directly(user_id, channel, code)


class Conversations:
    """Answers mentions, DMs and thread follow-ups (see the module docstring).

    Args:
        client: the Web API client.
        runner: runs the agent.
        threads: thread history and participation.
        users: user profiles (locale, time zone).
        admin_ids: user ids with admin rights (``Turn.is_admin``).
        access: who sees what (:class:`app.access.AccessPolicy`: ``Turn.viewer``).
        members: the conversation members' port (``CHANNEL_ACCESS=members``); None: never listed.
        welcome: the greeting and prompts of a new assistant thread (None: :func:`app.welcome.default_welcome`
            of an empty catalog).
        stream_answers: stream answers into their thread (``SLACK_STREAM_ANSWERS``); False posts them whole.

    Attributes:
        propose: stores a reply's pending action and renders it (None: the default preview, nothing stored).
    """

    def __init__(self, client: AsyncWebClient, runner: AgentRunner, threads: ThreadHistory, users: UserDirectory,
                 admin_ids: frozenset[str] = frozenset(), access: AccessPolicy | None = None,
                 members: ChannelMembersCache | None = None, welcome: WelcomeSource | None = None,
                 stream_answers: bool = True) -> None:
        self.client = client
        self.welcome = welcome
        self.stream_answers = stream_answers
        self.streamer = AnswerStreamer(client)
        self.runner = runner
        self.threads = threads
        self.users = users
        self.admin_ids = admin_ids
        self.access = access or AccessPolicy()
        self.members = members
        self.poster = Poster(client)
        self.propose: PendingProposer | None = None

    # -- entry points (called after the ack) -----------------------------------------------------
    async def on_mention(self, event: dict[str, Any], bot_user_id: str, bot_id: str = "") -> None:
        """``app_mention``: answer in the thread."""
        if event.get("subtype") not in HUMAN_SUBTYPES:
            return
        await self.answer(event, bot_user_id, bot_id, assistant=False)

    async def on_message(self, event: dict[str, Any], bot_user_id: str, bot_id: str = "") -> str:
        """``message`` (any channel type): answer or ignore per the module docstring.

        Returns:
            What was done (``answered`` or ``ignored: REASON``), for logs and tests.
        """
        if event.get("subtype") not in HUMAN_SUBTYPES:
            return f"ignored: subtype {event.get('subtype')}"
        kind = event.get("channel_type")
        if kind not in MESSAGE_CHANNEL_TYPES:
            return f"ignored: channel type {kind}"
        if kind in DIRECT_CHANNEL_TYPES:
            await self.answer(event, bot_user_id, bot_id, assistant=False)
            return "answered"
        if mentions(event.get("text", ""), bot_user_id):
            return "ignored: mention (answered as app_mention)"
        thread_ts, ts = event.get("thread_ts"), event.get("ts")
        if not thread_ts or thread_ts == ts:
            return "ignored: not in a thread"
        if not self.access.answers_thread_replies(event.get("channel", "")):
            return "ignored: a thread reply without a mention (reply_in_threads: mention_only)"
        # One read per thread at a time: two quick replies in the same thread wait for the first
        # read instead of both calling conversations.replies.
        async with self.threads.lock(event["channel"], thread_ts):
            if self.threads.known_absent(event["channel"], thread_ts):
                return "ignored: a thread the bot is not part of (remembered)"
            info = await self.threads.read(event["channel"], thread_ts, ts or "", bot_user_id, bot_id,
                                           requester=event.get("user", ""))
        if not info.bot_participated:
            return "ignored: a thread the bot is not part of"
        await self.answer(event, bot_user_id, bot_id, assistant=False, info=info)
        return "answered"

    async def on_assistant_message(self, event: dict[str, Any], bot_user_id: str, bot_id: str = "") -> None:
        """A message in an assistant thread (the AI-app surface): answer with the assistant status as progress."""
        if event.get("subtype") not in HUMAN_SUBTYPES:
            return
        await self.answer(event, bot_user_id, bot_id, assistant=True)

    async def on_assistant_thread_started(self, event: dict[str, Any]) -> None:
        """``assistant_thread_started``: offer suggested prompts and greet. Never raises."""
        thread = event.get("assistant_thread") or {}
        channel, thread_ts = thread.get("channel_id"), thread.get("thread_ts")
        if not channel or not thread_ts:
            return
        try:
            hello = await self.welcome() if self.welcome is not None else default_welcome({})
        except Exception:  # noqa: BLE001 - the index could not be read: greet without prompts
            log.exception("building the greeting failed; greeting without suggestions")
            hello = default_welcome({"the knowledge base": []})
        if hello.prompts:
            try:
                await self.client.assistant_threads_setSuggestedPrompts(
                    channel_id=channel, thread_ts=thread_ts, title="Try asking",
                    prompts=render.suggested_prompts(hello.prompts))
            except Exception as exc:  # noqa: BLE001 - prompts are a nicety
                log.warning("assistant.threads.setSuggestedPrompts failed in %s: %s", channel, api_error_code(exc))
        await self.poster.deliver(channel, thread_ts, [render.greeting(hello.text)], thread.get("user_id", ""))

    async def _set_title(self, channel: str, thread_ts: str, question: str) -> None:
        """Title the assistant thread after its first question. Never raises."""
        try:
            await self.client.assistant_threads_setTitle(channel_id=channel, thread_ts=thread_ts,
                                                         title=render.thread_title(question))
        except Exception as exc:  # noqa: BLE001 - a title is a nicety
            log.info("assistant.threads.setTitle failed in %s: %s", channel, api_error_code(exc))

    # -- the answer ------------------------------------------------------------------------------
    async def answer(self, event: dict[str, Any], bot_user_id: str, bot_id: str = "", *, assistant: bool,
                     info: ThreadInfo | None = None) -> Reply | None:
        """Answer ``event`` in its thread with progress shown; returns the reply (None when it failed)."""
        channel, ts, user = event.get("channel", ""), event.get("ts", ""), event.get("user", "")
        thread_ts = event.get("thread_ts") or ts
        if not channel or not ts:
            log.warning("ignored a message event without channel or ts")
            return None
        progress = await self._progress_start(channel, ts, thread_ts, assistant)
        team = str(event.get("user_team") or event.get("team") or "") or await self.users.team_id()
        live = LiveTurn(self.client, channel, thread_ts, user, team, status=progress[0] == "status",
                        stream=self.stream_answers, streamer=self.streamer)
        reply = None
        shown = False
        try:
            if info is None and event.get("thread_ts") and event.get("thread_ts") != ts:
                info = await self.threads.read(channel, thread_ts, ts, bot_user_id, bot_id, requester=user)
            turn = build_turn(await self.inbound(event, bot_user_id, info, private=assistant), self.access)
            if assistant and not (info and info.history):
                await self._set_title(channel, thread_ts, turn.text)
            reply = await self.runner.answer(turn, live.on_step)
            await live.close()  # every step and released sentence shown before the rest
            log.info("answered in %s thread %s: route=%s refused=%s trace=%s", channel, thread_ts, reply.route,
                     reply.refused, reply.trace.trace_id)
            pending = None
            if reply.pending_action is not None and self.propose is not None:
                pending = await self.propose(reply.pending_action, turn)
            if pending is None and self.stream_answers:
                shown = await live.finish(reply)
            else:
                await live.discard()
            if not shown:
                shown = await self.poster.deliver(channel, thread_ts,
                                                  render.answer_messages(reply, pending_blocks=pending), user)
            if shown:
                self.threads.mark_answered(channel, thread_ts)
        except Exception:  # noqa: BLE001 - the bot is never silent
            log.exception("answering in %s thread %s failed", channel, thread_ts)
            if not shown:
                await live.close()
                await live.discard()  # no half answer stays
            await self.poster.report(channel, thread_ts, user, "Sorry, something went wrong while I was answering.")
            reply = None
        finally:
            await live.close()
            await self._progress_stop(progress)
        return reply

    async def inbound(self, event: dict[str, Any], bot_user_id: str, info: ThreadInfo | None = None,
                      private: bool = False) -> InboundMessage:
        """The inbound message of a message event (``app_mention``, ``message``, assistant message).

        ``message_id`` is the event's ``ts`` (the same on a redelivery, whatever its ``event_id``),
        ``sent_at`` that ``ts`` as UTC, the thread the event's ``thread_ts`` (or its ``ts``), the
        requester's e-mail, locale, zone and guest status from ``users.info``, and every ``<@U...>`` but
        the bot's resolved through ``users.info`` (cached): the e-mail when Slack gives it, else
        ``@Display Name``; ``thread_link`` the thread's web link (:func:`bot.slack.links.thread_link`).
        ``private`` (the assistant pane) marks an answer only the requester sees.
        With ``CHANNEL_ACCESS=members`` the conversation's members are listed (cached) for the viewer.
        Never raises for Web API failures (less is known, see :class:`UserDirectory`: public pages only).
        """
        user, ts = str(event.get("user", "")), str(event.get("ts", ""))
        channel, thread_ts = str(event.get("channel", "")), str(event.get("thread_ts") or ts)
        raw = event.get("text", "")
        profile = await self.users.profile(user)
        found = await self.users.mentions(mentioned_users([raw], bot_user_id))
        msg = InboundMessage(
            platform="slack", text=to_plain(raw, bot_user_id, {m.user_id: m.as_text for m in found}),
            user_id=user, user_email=profile.email, channel_id=channel,
            channel_kind=event_channel_kind(event), thread_id=thread_ts, message_id=ts,
            thread_link=thread_link(await self.users.workspace(), channel, thread_ts),
            sent_at=utc_from_epoch(ts), history=info.history if info else (), mentions=found,
            is_admin=user in self.admin_ids, locale=profile.locale, timezone=profile.timezone,
            is_guest=profile.is_guest, private_reply=private)
        return await with_members(msg, self.access, self.members)

    async def _progress_start(self, channel: str, ts: str, thread_ts: str, assistant: bool) -> tuple[str, str, str]:
        if assistant:
            try:
                await self.client.assistant_threads_setStatus(channel_id=channel, thread_ts=thread_ts,
                                                              status=STATUS_TEXT,
                                                              loading_messages=list(LOADING_MESSAGES))
                return ("status", channel, thread_ts)
            except Exception as exc:  # noqa: BLE001 - not an assistant thread: fall back to a reaction
                log.info("assistant status unavailable in %s (%s); using a reaction", channel, api_error_code(exc))
        try:
            await self.client.reactions_add(channel=channel, timestamp=ts, name=PROGRESS_REACTION)
            return ("reaction", channel, ts)
        except Exception as exc:  # noqa: BLE001 - progress is a nicety
            log.info("could not add the progress reaction in %s: %s", channel, api_error_code(exc))
            return ("none", channel, ts)

    async def _progress_stop(self, progress: tuple[str, str, str]) -> None:
        kind, channel, ts = progress
        try:
            if kind == "reaction":
                await self.client.reactions_remove(channel=channel, timestamp=ts, name=PROGRESS_REACTION)
            # the assistant status clears itself when the app posts in the thread
        except Exception as exc:  # noqa: BLE001
            log.info("could not remove the progress reaction in %s: %s", channel, api_error_code(exc))
