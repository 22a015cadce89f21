"""Block actions (button clicks), routed by ``action_id`` prefix.

Every click is acknowledged at once; the handler registered for the longest matching prefix runs
afterwards with an :class:`ActionContext`. Built in:

- ``feedback:`` (the native ``feedback_buttons`` element, ``feedback:buttons``, value ``helpful:<trace id>``
  or ``not_helpful:<trace id>``; the custom buttons of earlier versions are still understood): the vote
  is stored in the state store under the turn's trace id; "helpful" is thanked ephemerally, "not
  helpful" opens the reason modal (``views.open``, :func:`bot.slack.render.feedback_modal`) whose
  submission (:func:`feedback_submitted`) replaces the vote with its reason and text in ``comment``;
  when the modal cannot open, the user is thanked ephemerally instead;
- ``share:`` (``share:channel``, value: trace id and question): the ephemeral ``/kb`` answer is posted
  in the channel (through the ``response_url``, so the bot need not be a member) and the ephemeral
  copy is deleted, once every citation was re-checked against the channel's audience (the stored
  chunks' access, :meth:`app.wiring.Runtime.unreadable_citations`; ``CHANNEL_ACCESS``): an answer
  citing a page not everyone there may read is not shared, and the user is told why;
- ``action_confirm:`` / ``action_cancel:`` (``action_confirm:<key>``, value: the pending action's
  idempotency key): a placeholder that says actions are not enabled, until the action service is
  plugged in with :meth:`bot.slack.bot.SlackBot.use_pending_actions` (which also makes replies with
  ``Reply.pending_action`` store the proposal and show its preview).

Adding a button: render it with ``action_id="myprefix:name"`` and register an async handler
``async def handler(ctx: ActionContext) -> None`` under ``"myprefix:"``. Nothing else changes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from app.access import AccessPolicy
from app.feedback import record_feedback, record_feedback_reason
from app.inbound import InboundMessage
from app.turns import build_turn
from state import StateStore

from . import render
from .client import api_error_code
from .conversation import AgentRunner, RecentReplies, error_reference, with_members
from .kb import respond_checked
from .mrkdwn import escape, truncate
from .threads import UserProfile

__all__ = ["ActionContext", "ActionHandler", "ActionRegistry", "register_builtin_actions", "feedback_submitted"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ActionContext:
    """One click, as handlers see it.

    Attributes:
        action: the clicked element (``action_id``, ``value``, ``block_id``...).
        body: the whole ``block_actions`` payload.
        user_id, channel_id: who clicked, where (``channel_id`` may be empty, e.g. in App Home).
        message_ts, thread_ts: the message holding the button and its thread (empty for ephemeral messages).
        respond: posts to the payload's ``response_url`` (Bolt's ``respond``).
        client: the Web API client.
        services: what the built-in handlers need (``store``, ``runner``, ``replies``); others may add theirs.
    """

    action: dict[str, Any]
    body: dict[str, Any]
    user_id: str
    channel_id: str
    message_ts: str
    thread_ts: str
    respond: Callable[..., Awaitable[Any]]
    client: AsyncWebClient
    services: dict[str, Any] = field(default_factory=dict)

    @property
    def action_id(self) -> str:
        """The clicked element's ``action_id``."""
        return str(self.action.get("action_id", ""))

    @property
    def value(self) -> str:
        """The clicked button's value (empty when it has none)."""
        return str(self.action.get("value", "") or "")


ActionHandler = Callable[[ActionContext], Awaitable[None]]


class ActionRegistry:
    """Maps ``action_id`` prefixes to handlers; the longest registered prefix wins."""

    def __init__(self) -> None:
        self._handlers: dict[str, ActionHandler] = {}

    def register(self, prefix: str, handler: ActionHandler) -> None:
        """Route clicks whose ``action_id`` starts with ``prefix`` to ``handler`` (replacing any earlier one).

        Raises:
            ValueError: for an empty prefix.
        """
        if not prefix:
            raise ValueError("an action prefix must not be empty")
        self._handlers[prefix] = handler

    def prefixes(self) -> list[str]:
        """The registered prefixes, sorted."""
        return sorted(self._handlers)

    def resolve(self, action_id: str) -> ActionHandler | None:
        """The handler for ``action_id``, or None."""
        best = max((p for p in self._handlers if action_id.startswith(p)), key=len, default=None)
        return self._handlers[best] if best is not None else None

    async def dispatch(self, ctx: ActionContext) -> None:
        """Run the handler for ``ctx.action_id``; an unknown button or a failing handler is told to the user.

        Never raises.
        """
        handler = self.resolve(ctx.action_id)
        try:
            if handler is None:
                log.warning("no handler for button %r", ctx.action_id)
                await respond_checked(ctx.respond, response_type="ephemeral", replace_original=False,
                                      **render.notice("That button doesn't do anything any more; ask me again.",
                                                      ":information_source:"))
                return
            await handler(ctx)
        except Exception:  # noqa: BLE001 - the bot is never silent
            ref = error_reference()
            log.exception("button %s failed (reference %s)", ctx.action_id, ref)
            try:
                await respond_checked(ctx.respond, response_type="ephemeral", replace_original=False,
                                      **render.error_message("Sorry, that didn't work.", ref))
            except Exception as exc:  # noqa: BLE001
                log.error("could not tell %s that button %s failed: %s", ctx.user_id, ctx.action_id, exc)


async def feedback_handler(ctx: ActionContext) -> None:
    """A feedback click: store the vote under the trace id; thank for "helpful", ask why for "not helpful"."""
    store: StateStore = ctx.services["store"]
    vote, trace_id = render.parse_feedback_value(ctx.action_id, ctx.value)
    await asyncio.to_thread(record_feedback, store, trace_id, "slack", ctx.user_id, vote)
    log.info("feedback %s on trace %s from %s", vote, trace_id, ctx.user_id)
    trigger = str(ctx.body.get("trigger_id") or "")
    if vote == "not_helpful" and trigger:
        try:
            await ctx.client.views_open(trigger_id=trigger, view=render.feedback_modal(trace_id))
            return
        except Exception as exc:  # noqa: BLE001 - the vote is stored; the reason is a nicety
            log.warning("could not open the feedback modal for %s: %s", ctx.user_id, api_error_code(exc))
    await respond_checked(ctx.respond, response_type="ephemeral", replace_original=False,
                          **render.feedback_thanks(vote))


async def feedback_submitted(store: StateStore, user_id: str, view: dict[str, Any]) -> None:
    """The "not helpful" modal was sent: store ``not_helpful`` with ``reason[: text]`` as the comment
    (replacing the bare vote of the click). Raises ValueError for a malformed submission."""
    trace_id, comment = render.parse_feedback_modal(view)
    await asyncio.to_thread(record_feedback_reason, store, trace_id, "slack", user_id, comment.split(":", 1)[0],
                            comment)
    log.info("feedback reason on trace %s from %s: %s", trace_id, user_id, comment.split(":", 1)[0])


async def share_handler(ctx: ActionContext) -> None:
    """``share:channel``: post the ephemeral answer in the channel for everyone, then delete the ephemeral copy.

    The answer is the one the user saw (remembered by trace id); if it was forgotten (a restart), the
    question is asked again for the channel's audience. Either way every citation is re-checked against
    the channel's audience first (``services["citations"]``: citations, viewer -> the unreadable ones);
    one that not everyone there may read stops the share with a reason (fail closed: so does a missing
    check).
    """
    replies: RecentReplies = ctx.services["replies"]
    runner: AgentRunner = ctx.services["runner"]
    access: AccessPolicy = ctx.services.get("access") or AccessPolicy()
    users = ctx.services.get("users")
    check = ctx.services.get("citations")
    trace_id, question = render.parse_share_value(ctx.value)
    found = replies.get(trace_id) if trace_id else None
    if found is not None:
        question, _ = found
    elif not question:
        raise ValueError("the share button carries no question")
    prof = await users.profile(ctx.user_id) if users is not None else UserProfile()
    # Whoever can read the channel will see it: a channel audience, never the asker's own access.
    audience = await with_members(InboundMessage(
        platform="slack", text=question, user_id=ctx.user_id, user_email=prof.email, is_guest=prof.is_guest,
        channel_id=ctx.channel_id, channel_kind="channel"), access, ctx.services.get("members"))
    if found is not None:
        reply = found[1]
    else:
        # A re-ask of a knowledge question (not a message of its own: no message id or time).
        reply = await runner.answer(build_turn(audience, access))
        replies.put(question, reply)
    if reply.citations:
        viewer = access.viewer(audience)
        bad = await asyncio.to_thread(check, reply.citations, viewer) if check is not None else reply.citations
        if bad:
            log.info("share refused in %s: %d citation(s) not readable by the channel's audience",
                     ctx.channel_id, len(bad))
            await respond_checked(ctx.respond, response_type="ephemeral", replace_original=False,
                                  **render.notice(share_refusal([c.n for c in bad]), ":lock:"))
            return
    intro = f"<@{ctx.user_id}> asked: “{escape(truncate(question, 300))}”"
    for msg in render.answer_messages(reply, intro=intro):
        await respond_checked(ctx.respond, response_type="in_channel", replace_original=False, **msg)
    await respond_checked(ctx.respond, delete_original=True)


def share_refusal(numbers: list[int]) -> str:
    """Why an answer was not shared: the citations (by number) not everyone in the channel may read."""
    cited = ", ".join(f"[{n}]" for n in sorted(set(numbers)))
    return (f"I didn't share this answer: {cited} comes from a page not everyone in this channel may read. "
            "Only you can see it here; ask me in the channel for an answer from pages everyone there may read.")


async def pending_not_enabled(ctx: ActionContext) -> None:
    """Confirm / Cancel until the action service is plugged in: say nothing was done."""
    await respond_checked(ctx.respond, response_type="ephemeral", replace_original=False,
                          **render.notice("Actions aren't enabled on this bot yet, so I did nothing.",
                                          ":information_source:"))


def register_builtin_actions(registry: ActionRegistry) -> None:
    """Register ``feedback:``, ``share:`` and the Confirm / Cancel placeholders."""
    registry.register("feedback:", feedback_handler)
    registry.register("share:", share_handler)
    registry.register(render.PENDING_CONFIRM, pending_not_enabled)
    registry.register(render.PENDING_CANCEL, pending_not_enabled)
