"""The Slack hooks of the pending-action service: store a proposal and render its preview, handle a click."""

from __future__ import annotations

import logging
from typing import Any

from agent.models import PendingAction, Turn
from app.actions import ActionOutcome, ActionService

__all__ = ["slack_handlers", "slack_user_details", "use_actions"]

log = logging.getLogger(__name__)


def slack_handlers(service: ActionService, *, default_timezone: str = "UTC"):
    """The two hooks of ``SlackBot.use_pending_actions(propose, on_click)``.

    - ``propose(action, turn) -> blocks`` (async): stores the proposal (:meth:`ActionService.propose`)
      and returns :func:`bot.slack.action_blocks.slack_blocks_for_record` in the requester's zone: the
      preview with Confirm / Cancel, or the settled view when a redelivered message finds the action
      already done (drawn from the record's action tool, :meth:`ActionService.tool`), with the fields the
      service adds from Slack (:meth:`ActionService.preview_fields`: who will get an invitation in a DM).
    - ``on_click(ctx) -> ActionOutcome`` (async): ``ctx`` has ``action`` (``action_id``, ``value``),
      ``user_id``, ``client`` (Slack Web API) and ``respond``. It looks the clicker up with
      ``users.info`` (e-mail with scope ``users:read.email``, and ``tz``), runs
      :meth:`ActionService.handle_button`, then replaces the preview with
      :func:`bot.slack.action_blocks.slack_outcome_blocks` when the outcome is final (done with its links,
      cancelled, expired, failed) or answers only the clicker (someone else's preview, a retry).
    """
    import asyncio

    from .action_blocks import outcome_text, slack_blocks_for_record, slack_outcome_blocks

    async def propose(action: PendingAction, turn: Turn) -> list[dict[str, Any]]:
        rec = await asyncio.to_thread(service.propose, action, turn)
        extra = await asyncio.to_thread(service.preview_fields, rec) if rec.status == "pending" else ()
        return slack_blocks_for_record(rec, service.tool(rec.tool), viewer_tz=turn.timezone or default_timezone,
                                       extra_fields=extra)

    async def on_click(ctx: Any) -> ActionOutcome:
        email, tz = await slack_user_details(ctx.client, ctx.user_id)
        outcome = await asyncio.to_thread(service.handle_button, str(ctx.action.get("action_id") or ""),
                                          str(ctx.action.get("value") or ""), ctx.user_id, user_email=email)
        if outcome.final:
            await ctx.respond(replace_original=True, text=outcome_text(outcome),
                              blocks=slack_outcome_blocks(outcome, viewer_tz=tz or default_timezone))
        else:
            await ctx.respond(replace_original=False, response_type="ephemeral", text=outcome.message)
        return outcome

    return propose, on_click


async def slack_user_details(client: Any, user_id: str) -> tuple[str | None, str | None]:
    """``(email, tz)`` of a Slack user from ``users.info`` (``(None, None)`` when the call fails; the
    e-mail needs the ``users:read.email`` scope)."""
    try:
        resp = await client.users_info(user=user_id)
        user = (resp.get("user") if hasattr(resp, "get") else resp["user"]) or {}
        return (user.get("profile") or {}).get("email") or None, user.get("tz") or None
    except Exception as exc:  # an unknown user, a missing scope, Slack down: act without the details
        log.info("users.info for %s failed: %s", user_id, exc)
        return None, None


# -- wiring --------------------------------------------------------------------------------------


def use_actions(bot: Any, service: ActionService, *, default_timezone: str = "UTC") -> None:
    """Turn on side-effect actions for the Slack bot ``bot`` (:class:`bot.slack.bot.SlackBot`), as ``chatops
    serve`` does: previews and clicks through :func:`slack_handlers`, and invitations delivered as Slack DMs
    (:class:`bot.slack.invites.SlackCourier`, registered with ``service`` for actions asked in Slack)."""
    from .invites import SlackCourier

    bot.use_pending_actions(*slack_handlers(service, default_timezone=default_timezone))
    service.use_courier(SlackCourier(bot.client))
