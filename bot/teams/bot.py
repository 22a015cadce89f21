"""The Teams bot: activities in, turns to the agent, Adaptive Cards out.

- ``message`` in a channel (the bot @mentioned: the ``<at>`` text is stripped), a group chat or a
  personal chat becomes an :class:`app.inbound.InboundMessage` (message id: the activity id; time: the
  activity's ``timestamp``; other people's ``<at>`` mentions replaced by their e-mail from the roster,
  else ``@Name``; the requester's e-mail, role and tenant from the roster: a guest or someone of
  another tenant sees public pages only) and so a :class:`~agent.models.Turn`
  (:func:`app.turns.build_turn`); the reply goes to the same reply chain
  (``replyToId``). A typing indicator is sent first. History for follow-ups is the conversation's
  last user messages, kept in the state store with each message's author so a restart loses
  nothing; only the requester's own messages may complete their request (a group chat or channel
  mixes people; rows stored without an author count as someone else's).
- In channels and group chats the answer is one Adaptive Card (no ``text``: the card alone, with the
  answer in the activity's ``summary`` for notifications). In personal chats it is streamed
  (:mod:`bot.teams.streaming`): an informative update ("Searching the knowledge base…") instead of
  the typing indicator, the answer's text, then the final message with that text and the sources
  card. Either way it comes with Teams' own feedback loop (``channelData.feedbackLoopEnabled``)
  and the AI-generated label (:mod:`bot.teams.entities`, on every message). The sent message's id is
  stored with the turn's trace id, so the thumbs up / down (an ``invoke`` named
  ``message/submitAction``, ``actionName: feedback``, naming the message in ``replyToId``) is stored
  with the trace id, the reaction (like: ``helpful``, dislike: ``not_helpful``) and the user's text
  (``actionValue.feedback``, a JSON string ``{"feedbackText": ...}``); the invoke is answered 200.
- Fast turns are answered inside the request. A turn still running after ``inline_reply_seconds``
  (``TEAMS_INLINE_REPLY_SECONDS``; Teams gives a bot 15 s to answer a request) lets the request end,
  keeps the typing indicator (a streamed answer: an informative update) alive, one every
  ``typing_interval`` seconds, and sends the answer with
  ``continue_conversation`` from the conversation reference kept for the turn, to the same reply
  chain.
- A card's ``Action.Submit`` arrives as a ``message`` with a ``value`` and no text; Universal
  Actions arrive as an ``invoke`` named ``adaptiveCard/action``. Both carry either feedback
  (``{"chatops": "feedback", ...}`` from cards sent before the native feedback loop, stored with the
  turn's trace id) or a pending action's
  Confirm / Cancel (``{"action": "action_confirm" | "action_cancel", "key": ...}``), executed at
  most once by :class:`app.actions.ActionService`; the card is then replaced by the outcome.
- ``help`` (in the app's command list, every scope) answers what the bot does. In a personal chat,
  ``status``, ``sources``, ``reindex [SOURCE] [--full]`` and ``report [PERIOD]`` are the admin
  commands of :class:`app.admin.AdminService` (the same as Slack's ``/kb``): everyone may read the status
  and the sources, only the AAD object ids in ``TEAMS_ADMIN_IDS`` may re-index or read the knowledge-gap
  report (it quotes people's questions); every use and refusal is audited (``admin.status``,
  ``admin.sources``, ``admin.reindex``, ``admin.report``).
- A message in a personal chat keeps that chat's conversation reference in the state store (ids and the
  service URL only, :func:`bot.teams.outbox.personal_reference`), where :class:`bot.teams.outbox.TeamsSender`
  delivers the user's reminders.
- Redelivered activities (same activity id) are answered once. Unknown activity types are logged
  and ignored. Sending a reply is retried on 429, 412 and 5xx with exponential backoff and jitter
  (honouring ``Retry-After``), as Microsoft's guidance for the Bot Connector asks, then logged.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import random
import re
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from datetime import datetime, timezone
from typing import Any

from botbuilder.core import ActivityHandler, BotAdapter, InvokeResponse, TurnContext
from botbuilder.schema import (Activity, ActivityTypes, AdaptiveCardInvokeResponse, Attachment, ChannelAccount,
                               ConversationReference)

from agent.agent import Agent
from agent.models import HistoryMessage, Reply, Turn
from app.access import AccessPolicy
from app.admin import AdminService
from app.feedback import record_feedback
from app.report import DEFAULT_SINCE, looks_like_period
from app.inbound import ChannelKind, InboundMessage, Mention
from app.turns import build_turn
from state import StateStore
from telemetry.metrics import count_api_error, count_rate_limited

from . import cards
from .entities import SchemaEntity
from .invites import TeamsCourier
from .members import MemberDirectory, home_tenant
from .errors import status_of
from .links import conversation_link
from .outbox import PLATFORM, personal_reference
from .streaming import TeamsStream

__all__ = ["TeamsBot", "send_with_retry"]

log = logging.getLogger(__name__)

_AT = re.compile(r"<at>[^<]*</at>", re.I)
_RETRYABLE = {412, 429, 500, 502, 503, 504}


def _retry_after(exc: BaseException) -> float | None:
    resp = getattr(exc, "response", None)
    headers = getattr(resp, "headers", None) or {}
    try:
        v = headers.get("Retry-After") or headers.get("retry-after")
        return min(max(float(v), 0.0), 30.0) if v is not None else None
    except (TypeError, ValueError):
        return None


def _method_of(what: str) -> str:
    """A bounded metric label for a send (``"reply to 1234"`` -> ``reply``, ``"feedback ack"`` -> ``feedback_ack``)."""
    return what.split(" to ", 1)[0].strip().replace(" ", "_")[:40] or "send"


async def send_with_retry(op: Callable[[], Awaitable[Any]], what: str, attempts: int = 4,
                          base_delay: float = 0.5) -> Any:
    """Run a Bot Connector call, retrying 412/429/5xx with backoff (full jitter) or ``Retry-After``.

    Returns:
        The call's result, or ``None`` after the last failure (which is logged with ``what``).
    """
    for attempt in range(1, attempts + 1):
        try:
            return await op()
        except Exception as exc:  # noqa: BLE001 - the connector raises several unrelated types
            status = status_of(exc)
            if status == 429:
                count_rate_limited("teams", _method_of(what))
            if status not in _RETRYABLE or attempt == attempts:
                count_api_error("teams", _method_of(what), str(status or type(exc).__name__))
                log.error("Teams: %s failed for good (HTTP %s, %s: %s)", what, status, type(exc).__name__, exc)
                return None
            delay = _retry_after(exc) or random.uniform(0, base_delay * 2 ** (attempt - 1))
            log.warning("Teams: %s got HTTP %s; retry %d in %.2f s", what, status, attempt, delay)
            await asyncio.sleep(delay)
    return None


#: The longest feedback text kept (Teams' dialog has no limit of its own).
MAX_FEEDBACK_TEXT = 2000
#: The informative updates of a streamed answer: the first, then while the turn is still running.
SEARCHING = "Searching the knowledge base\u2026"
STILL_WORKING = "Still working on your answer\u2026"


class TeamsBot(ActivityHandler):
    """See the module docstring.

    Args:
        agent: answers turns (synchronous; run in a worker thread).
        store: state store (de-duplication, feedback, history, audit).
        actions: the pending-action service (Confirm / Cancel), or ``None`` when actions are off.
        jobs: index jobs for ``reindex`` / ``status`` / ``sources`` (``IndexJobs``), or ``None``.
        admin_ids: AAD object ids allowed to run admin commands.
        default_timezone: the requester's zone when Teams does not give one.
        job_executor: where re-index jobs run (``chatops serve`` shares its one job worker with Slack).
        access: who sees what (``Turn.viewer``, :class:`app.access.AccessPolicy`): a personal chat uses
            the asker's own access, a channel or group chat ``CHANNEL_ACCESS``; guests and people of
            another tenant see public pages only.
        app_id: the bot's app id (``MicrosoftAppId``), for proactive sends; empty when unauthenticated.
        inline_reply_seconds: how long a turn may run and still be answered inside the request
            (Teams drops a request after 15 s); a slower one is answered proactively.
        typing_interval: seconds between typing indicators while a proactive answer is being prepared
            (Teams shows one for about 3 s).
        streaming: stream answers in personal chats (:mod:`bot.teams.streaming`); else the typing
            indicator and the card alone, as in channels and group chats.
        stream_interval: seconds between two stream updates (Teams takes about one a second).
    """

    def __init__(self, agent: Agent, store: StateStore, actions=None, jobs=None, admin_ids: frozenset[str] = frozenset(),
                 default_timezone: str = "UTC", history_turns: int = 10, job_executor: Executor | None = None,
                 access: AccessPolicy | None = None, app_id: str = "", inline_reply_seconds: float = 10.0,
                 typing_interval: float = 3.0, streaming: bool = True, stream_interval: float = 1.0) -> None:
        if not 0 < inline_reply_seconds < 15:
            raise ValueError(f"inline_reply_seconds must be above 0 and below Teams' 15 s limit, got "
                             f"{inline_reply_seconds}; set TEAMS_INLINE_REPLY_SECONDS to e.g. 10")
        self.agent = agent
        self.app_id = app_id
        self.inline_reply_seconds = inline_reply_seconds
        self.typing_interval = typing_interval
        self.streaming = streaming
        self.stream_interval = stream_interval
        self.access = access or AccessPolicy()
        self.store = store
        self.actions = actions
        self.jobs = jobs
        self.admin = AdminService(jobs, store, job_executor)
        self.members = MemberDirectory()
        self.admin_ids = admin_ids
        self.default_timezone = default_timezone
        self.history_turns = history_turns
        self.background: set[asyncio.Task] = set()
        #: invitations as file cards (:class:`bot.teams.invites.TeamsCourier`), set by the web adapter
        self.courier: TeamsCourier | None = None

    # -- dispatch --------------------------------------------------------------------------------
    async def on_turn(self, turn_context: TurnContext) -> None:
        """De-duplicate by activity id, then dispatch by type."""
        activity = turn_context.activity
        if self.courier is not None:
            self.courier.remember(activity)
        if activity.id and activity.type in (ActivityTypes.message, ActivityTypes.invoke):
            if not await asyncio.to_thread(self.store.claim_event, f"teams:{activity.id}", "teams"):
                log.info("Teams: activity %s already handled; ignoring the redelivery", activity.id)
                return
        if activity.type not in (ActivityTypes.message, ActivityTypes.invoke, ActivityTypes.conversation_update):
            log.info("Teams: ignoring activity of type %r", activity.type)
            return
        await super().on_turn(turn_context)

    async def on_members_added_activity(self, members_added: list[ChannelAccount], turn_context: TurnContext) -> None:
        """Greet when the bot is added to a conversation."""
        bot_id = turn_context.activity.recipient.id if turn_context.activity.recipient else None
        if any(m.id == bot_id for m in members_added or []):
            await send_with_retry(lambda: turn_context.send_activity(cards.HELP_TEXT), "welcome message")

    async def on_message_activity(self, turn_context: TurnContext) -> None:
        """A question, an admin command or a card submit."""
        activity = turn_context.activity
        await self._remember_personal_chat(activity)
        if isinstance(activity.value, dict) and not (activity.text or "").strip():
            card = await self._submit(turn_context, activity.value)
            if card is not None and activity.reply_to_id:
                update = Activity(type=ActivityTypes.message, id=activity.reply_to_id,
                                  attachments=[Attachment(**_att(cards.card_attachment(card)))])
                await send_with_retry(lambda: turn_context.update_activity(update), "card update")
            return
        msg = await self.inbound(turn_context)
        if msg.text.strip().lower() == "help":  # the app's command list offers it in every scope
            await send_with_retry(lambda: turn_context.send_activity(cards.HELP_TEXT), "help")
            return
        if self._is_personal(activity) and _admin_command(msg.text):
            await self._admin(turn_context, msg)
            return
        await self._answer(turn_context, msg)

    async def on_invoke_activity(self, turn_context: TurnContext) -> InvokeResponse:
        """Universal Actions (``adaptiveCard/action``): handle the data, answer with the new card.
        The feedback loop (``message/submitAction``): store the feedback, answer 200. An invitation's file
        card (``fileConsent/invoke``): :meth:`bot.teams.invites.TeamsCourier.consent`."""
        activity = turn_context.activity
        if activity.name == "message/submitAction":
            await self._feedback(turn_context)
            return InvokeResponse(status=200)
        if activity.name == "fileConsent/invoke" and self.courier is not None:  # an invitation's file card
            return await self.courier.consent(turn_context)
        if activity.name != "adaptiveCard/action":
            log.info("Teams: ignoring invoke %r", activity.name)
            return InvokeResponse(status=200)
        data = ((activity.value or {}).get("action") or {}).get("data") or {}
        card = await self._submit(turn_context, data)
        if card is None:
            return InvokeResponse(status=200, body=AdaptiveCardInvokeResponse(
                status_code=200, type="application/vnd.microsoft.activity.message", value="Done."))
        return InvokeResponse(status=200, body=AdaptiveCardInvokeResponse(
            status_code=200, type="application/vnd.microsoft.card.adaptive", value=card))

    # -- the inbound message -----------------------------------------------------------------------
    async def inbound(self, turn_context: TurnContext, history: tuple[HistoryMessage, ...] = ()) -> InboundMessage:
        """The inbound message of a ``message`` activity (see the module docstring). Never raises for a
        roster failure (the mention then reads ``@Name`` and the e-mail is unknown)."""
        activity = turn_context.activity
        text = TurnContext.remove_recipient_mention(activity) or activity.text or ""
        bot_id = activity.recipient.id if activity.recipient else ""
        found: list[Mention] = []
        for entity in TurnContext.get_mentions(activity):
            props = getattr(entity, "additional_properties", None) or {}
            who = props.get("mentioned") or {}
            uid, name = str(who.get("id") or ""), str(who.get("name") or "")
            if not uid or uid == bot_id:
                continue
            member = await self.members.get(turn_context, uid, name)
            mention = Mention(uid, member.name or name, member.email)
            found.append(mention)
            tag = str(props.get("text") or f"<at>{name}</at>")
            text = text.replace(tag, mention.as_text)
        text = _AT.sub("", text).strip()
        user = self._user(activity)
        sender = activity.from_property
        me = await self.members.get(turn_context, sender.id, sender.name or "") if sender and sender.id else None
        aad = sender.aad_object_id if sender else None
        msg = InboundMessage(
            platform="teams", text=text, user_id=user, user_email=me.email if me else "",
            channel_id=activity.conversation.id, channel_kind=_channel_kind(activity),
            thread_id=activity.conversation.id, message_id=activity.id or "", sent_at=_sent_at(activity),
            thread_link=conversation_link(activity.conversation.id or ""),
            history=history, mentions=tuple(dict((m.user_id, m) for m in found).values()),
            is_admin=bool(aad) and aad in self.admin_ids, locale=activity.locale or "en",
            timezone=_tz(activity) or self.default_timezone,
            is_guest=me.is_guest(home_tenant(turn_context)) if me else False)
        if self.access.wants_members(msg):
            members = await self.members.conversation_members(turn_context, self.access.channel_members_max)
            msg = dataclasses.replace(msg, audience_members=members)
        return msg

    # -- answering -------------------------------------------------------------------------------
    async def _answer(self, turn_context: TurnContext, msg: InboundMessage) -> None:
        activity = turn_context.activity
        stream = TeamsStream(send_with_retry, self.stream_interval) if self.streaming and msg.channel_kind == "dm" \
            else None
        if stream is None or not await stream.inform(turn_context, SEARCHING):
            stream = None
            await send_with_retry(lambda: turn_context.send_activity(Activity(type=ActivityTypes.typing)),
                                  "typing indicator")
        user = msg.user_id
        stored = await asyncio.to_thread(self.store.get_history_entries, _history_key(msg))
        # A message counts as the requester's only when stored with their id (old rows have no author).
        history = tuple(HistoryMessage(m.text, m.author, bool(user) and m.author == user) for m in stored)
        turn = build_turn(dataclasses.replace(msg, history=history), self.access)
        work = asyncio.ensure_future(asyncio.to_thread(self.agent.answer, turn))
        done, _ = await asyncio.wait({work}, timeout=self.inline_reply_seconds)
        if done:
            await self._finish(turn_context, work, msg, turn, stream)
            return
        log.info("Teams: turn %s still running after %.1f s; answering it proactively", activity.id,
                 self.inline_reply_seconds)
        reference = TurnContext.get_conversation_reference(activity)
        task = asyncio.create_task(self._answer_later(turn_context.adapter, reference, work, msg, turn, stream))
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    async def _finish(self, turn_context: TurnContext, work: asyncio.Future, msg: InboundMessage, turn: Turn,
                      stream: TeamsStream | None = None) -> None:
        """Send the finished turn's reply (or say it failed) and store the question in the history."""
        try:
            reply = work.result()
        except Exception:  # noqa: BLE001 - the user is always told something
            log.exception("Teams: the agent failed on a turn")
            sorry = "Sorry, something went wrong while answering. Please try again in a minute."
            if stream is not None:
                await stream.finish(turn_context, Activity(type=ActivityTypes.message, text=sorry))
            else:
                await send_with_retry(lambda: turn_context.send_activity(sorry), "error reply")
            return
        if msg.text:
            await asyncio.to_thread(self.store.append_history, _history_key(msg), msg.text,
                                    self.history_turns, msg.user_id)
        await self._send_reply(turn_context, reply, turn, stream)

    async def _answer_later(self, adapter: BotAdapter, reference: ConversationReference, work: asyncio.Future,
                            msg: InboundMessage, turn: Turn, stream: TeamsStream | None = None) -> None:
        """Keep the typing indicator (or the stream's informative update) alive until ``work`` is done,
        then send its reply proactively."""
        async def typing(ctx: TurnContext) -> None:
            if stream is not None and stream.usable:
                await stream.inform(ctx, STILL_WORKING)
            else:
                await send_with_retry(lambda: ctx.send_activity(Activity(type=ActivityTypes.typing)),
                                      "typing indicator")

        async def finish(ctx: TurnContext) -> None:
            await self._finish(ctx, work, msg, turn, stream)

        while not work.done():
            await asyncio.wait({work}, timeout=self.typing_interval)
            if not work.done():
                await self._proactive(adapter, reference, typing)
        await self._proactive(adapter, reference, finish)

    async def _proactive(self, adapter: BotAdapter, reference: ConversationReference,
                         logic: Callable[[TurnContext], Awaitable[None]]) -> None:
        """Run ``logic`` in a proactive turn of the conversation; its messages reply to the user's message."""
        async def in_reply_chain(ctx: TurnContext) -> None:
            # The continuation activity has an id of its own; replies must name the user's message.
            ctx.activity.id = reference.activity_id
            await logic(ctx)

        try:
            await adapter.continue_conversation(reference, in_reply_chain, self.app_id)
        except Exception:  # noqa: BLE001 - a background task has nobody else to tell
            log.exception("Teams: a proactive send to %s failed", reference.conversation.id if reference.conversation
                          else "?")

    async def _send_reply(self, turn_context: TurnContext, reply: Reply, turn: Turn,
                          stream: TeamsStream | None = None) -> None:
        """The answer: the card alone; streamed (personal chats), the text streamed and then the final
        message with that text and the sources card. Remembers the sent message's trace id."""
        streamed = stream is not None and await stream.append(turn_context, cards.message_text(reply))
        if streamed:
            sources = cards.sources_card(reply)
            attachments = [cards.card_attachment(sources)] if sources else []
        else:
            attachments = [cards.card_attachment(cards.answer_card(reply))]
        if reply.pending_action is not None and self.actions is not None:
            from .action_cards import adaptive_card

            record = await asyncio.to_thread(self.actions.propose, reply.pending_action, turn)
            extra = await asyncio.to_thread(self.actions.preview_fields, record)  # who gets an invitation, if any
            attachments.append(cards.card_attachment(adaptive_card(record, self.actions.tool(record.tool),
                                                                       viewer_tz=turn.timezone, extra_fields=extra)))
            if not reply.citations and not streamed:
                attachments = attachments[1:]
        message = Activity(type=ActivityTypes.message, summary=cards.summary(reply),
                           attachments=[Attachment(**_att(a)) for a in attachments],
                           entities=[SchemaEntity.of(e) for e in cards.citation_entities(reply.citations)],
                           channel_data={"feedbackLoopEnabled": True})
        if streamed:
            message.text, message.text_format = cards.message_text(reply), "markdown"
        if stream is not None:
            sent = await stream.finish(turn_context, message)
        else:
            sent = await send_with_retry(lambda: turn_context.send_activity(message),
                                         f"reply to {turn_context.activity.id}")
        if sent is not None and getattr(sent, "id", None):
            await asyncio.to_thread(self.store.remember_reply, "teams", sent.id, reply.trace.trace_id)

    async def _feedback(self, turn_context: TurnContext) -> None:
        """Store a ``message/submitAction`` feedback invoke under the trace id of the message it names."""
        activity = turn_context.activity
        value = activity.value if isinstance(activity.value, dict) else {}
        raw_action = value.get("actionValue")
        action = raw_action if isinstance(raw_action, dict) else {}
        vote = {"like": "helpful", "dislike": "not_helpful"}.get(str(action.get("reaction")))
        if value.get("actionName") != "feedback" or vote is None:
            log.info("Teams: ignoring a submitAction %r with reaction %r", value.get("actionName"),
                     str(action.get("reaction"))[:20])
            return
        message_id = activity.reply_to_id or ""
        trace_id = await asyncio.to_thread(self.store.trace_of_reply, "teams", message_id) if message_id else None
        if trace_id is None:
            log.warning("Teams: feedback on message %r, which is not a known answer; not stored", message_id[:80])
            return
        user = self._user(activity)
        await asyncio.to_thread(record_feedback, self.store, trace_id, "teams", user, vote,
                                _feedback_text(action.get("feedback")))
        log.info("Teams: feedback %s on trace %s from %s", vote, trace_id, user)

    # -- card submits ----------------------------------------------------------------------------
    async def _submit(self, turn_context: TurnContext, data: dict) -> dict | None:
        activity = turn_context.activity
        user = self._user(activity)
        if data.get("chatops") == "feedback" and data.get("trace_id"):
            value = data.get("value")
            if value in {"helpful", "not_helpful"}:
                await asyncio.to_thread(record_feedback, self.store, str(data["trace_id"]), "teams", user, value)
                await send_with_retry(lambda: turn_context.send_activity("Thanks for the feedback!"), "feedback ack")
            return None
        op = {"action_confirm": "confirm", "action_cancel": "cancel"}.get(str(data.get("action")))
        if op and data.get("key") and self.actions is not None:
            from .action_cards import adaptive_card_outcome

            if op == "confirm":  # the clicker's roster e-mail: a ticket's reporter, an event's organiser
                sender = activity.from_property
                me = (await self.members.get(turn_context, sender.id, sender.name or "")
                      if sender and sender.id else None)
                pick = data.get("choice")
                outcome = await asyncio.to_thread(self.actions.confirm, str(data["key"]), user,
                                                  user_email=(me.email if me else "") or None,
                                                  choice=pick if isinstance(pick, int) else None)
            else:
                outcome = await asyncio.to_thread(self.actions.cancel, str(data["key"]), user)
            if getattr(outcome, "private", False):
                await send_with_retry(lambda: turn_context.send_activity(outcome.message), "action refusal")
                return None
            return adaptive_card_outcome(outcome, viewer_tz=_tz(activity) or self.default_timezone)
        log.info("Teams: ignoring a card submit with unknown data keys %s", sorted(data)[:5])
        return None

    # -- admin -----------------------------------------------------------------------------------
    async def _admin(self, turn_context: TurnContext, msg: InboundMessage) -> None:
        """``status``, ``sources``, ``reindex [SOURCE] [--full]`` or ``report [PERIOD]`` through
        :class:`AdminService`."""
        words = msg.text.split()
        command = words[0].lower()

        async def say(text: str, what: str) -> None:
            await send_with_retry(lambda: turn_context.send_activity(text), what)

        if command in {"status", "sources"}:
            result = await (self.admin.status(msg) if command == "status" else self.admin.sources(msg))
            await say(result.text, f"{command} reply")
            return
        if command == "report":
            started = await self.admin.request_report(msg, words[1] if len(words) > 1 else DEFAULT_SINCE)
            await say(started.text, "report ack" if started.outcome == "started" else "admin refusal")
            if started.outcome == "started":
                await say((await self.admin.run_report(msg, started)).text, "report summary")
            return
        args = [w for w in words[1:] if w != "--full"]
        started = await self.admin.request_reindex(msg, args[0] if args else None, "--full" in words[1:])
        await say(started.text, "reindex ack" if started.outcome == "started" else "admin refusal")
        if started.outcome != "started":
            return
        result = await self.admin.run_reindex(msg, started)
        await say(result.text, "reindex summary")

    # -- helpers ---------------------------------------------------------------------------------
    async def _remember_personal_chat(self, activity: Activity) -> None:
        """Keep the reference of the sender's personal chat, where reminders are delivered
        (:mod:`bot.teams.outbox`); a state store failure is logged, the message still answered."""
        found = personal_reference(activity)
        if found is None:
            return
        user_id, reference = found
        try:
            await asyncio.to_thread(self.store.remember_conversation_reference, PLATFORM, user_id, reference)
        except Exception:  # noqa: BLE001 - the answer matters more than a later reminder
            log.warning("Teams: could not store the personal chat's conversation reference", exc_info=True)

    @staticmethod
    def _user(activity: Activity) -> str:
        f = activity.from_property
        return (f.aad_object_id or f.id or "") if f else ""

    @staticmethod
    def _is_personal(activity: Activity) -> bool:
        return (activity.conversation.conversation_type or "personal") == "personal"


def _history_key(msg: InboundMessage) -> str:
    """The state store's history key of the message's conversation."""
    return f"teams:{msg.channel_id}"


def _feedback_text(raw: Any) -> str:
    """The user's text of a feedback invoke: ``feedbackText`` of the JSON string Teams sends (a dict is
    accepted too; text that is not JSON is kept as it is), at most :data:`MAX_FEEDBACK_TEXT` characters."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return raw.strip()[:MAX_FEEDBACK_TEXT]
    if isinstance(raw, dict):
        raw = raw.get("feedbackText", "")
    return raw.strip()[:MAX_FEEDBACK_TEXT] if isinstance(raw, str) else ""


def _admin_command(text: str) -> bool:
    words = text.split()
    first = words[0].lower() if words else ""
    if first == "sources":  # alone, as in /kb: "sources of the release process" is a question
        return len(words) == 1
    if first == "report":  # alone or with a period, as in /kb: "report phishing" is a question
        return len(words) == 1 or (len(words) == 2 and looks_like_period(words[1]))
    return first in {"reindex", "status"} and len(text) < 200


_KIND_OF_TYPE: dict[str, ChannelKind] = {"personal": "dm", "groupChat": "group", "channel": "channel"}


def _channel_kind(activity: Activity) -> ChannelKind:
    """``dm`` (personal), ``group`` (groupChat) or ``channel``; "" for anything else."""
    kind = (activity.conversation.conversation_type if activity.conversation else None) or "personal"
    return _KIND_OF_TYPE.get(kind, "")


def _sent_at(activity: Activity) -> datetime | None:
    """The activity's ``timestamp`` as an aware datetime (UTC when Teams sent none), or None."""
    ts = activity.timestamp
    if isinstance(ts, str):
        try:
            ts = datetime.fromisoformat(ts.replace("Z", "+00:00"))
        except ValueError:
            return None
    if not isinstance(ts, datetime):
        return None
    return ts if ts.utcoffset() is not None else ts.replace(tzinfo=timezone.utc)


def _tz(activity: Activity) -> str | None:
    tz = getattr(activity, "local_timezone", None)
    return tz or None


def _att(a: dict) -> dict:
    return {"content_type": a["contentType"], "content": a["content"]}
