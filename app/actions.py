"""Pending actions: store the proposal, then confirm (execute exactly once) or cancel it.

The agent only *proposes* a side-effect tool (``Reply.pending_action``). Every adapter (Slack
buttons, Teams cards, the console) hands the proposal to :class:`ActionService`, which works with
any tool through the action-tool contract (:mod:`tools.actions`) and knows none of them:

1. :meth:`ActionService.propose` stores it in the state store under its idempotency key with the
   requester and an expiry (``ACTION_TTL_MINUTES``). The key is deterministic for a redelivered or
   retried message, so the second proposal returns the first record (whatever its status) and
   nothing new is created.
2. :meth:`ActionService.confirm` checks that the clicking user is the requester and that the
   preview has not expired, then moves the record ``pending -> executing`` with one conditional
   UPDATE: of two clicks (or two replicas) only one wins, the other is told it is already being
   done or done. The winner validates the arguments again (a time in them must still be in the
   future), calls the tool's ``execute`` with the key (the tools are idempotent on it too: the
   calendar's event id, the outbox's message key), stores the result (``done``) and writes the
   audit log (who, what, when, key). A failure the tool calls retryable (Google 429/5xx, no
   connection) puts the record back to ``pending`` so Confirm can be pressed again; other failures
   end in ``failed``.
3. :meth:`ActionService.cancel` (requester only) moves ``pending -> cancelled``.

Every outcome is an :class:`ActionOutcome` with a user-facing message in the tool's words
(:class:`tools.actions.ActionWords`: "Booked", "nothing was booked"); each platform renders them in its
own folder (:mod:`bot.slack.action_blocks`, :mod:`bot.teams.action_cards`, :mod:`bot.console_actions`).
Tools that deliver something later (a reminder) get the outbox, by default the state store itself, in
:attr:`tools.base.ToolContext.outbox`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Literal

from agent.models import PendingAction, Turn
from state import PendingRecord, StateStore
from tools.actions import CHOICE, TIME_PASSED, ActionTool, ActionWords
from tools.base import ToolContext, ToolRegistry
from tools.errors import ToolArgumentError
from tools.invites import Courier, InvitingTool
from tools.outbox import Outbox

from .settings import Settings

__all__ = ["ActionService", "ActionOutcome", "build_action_service",
           "CONFIRM_PREFIX", "CANCEL_PREFIX", "CHOICE_SEPARATOR", "parse_action_id"]

log = logging.getLogger(__name__)

#: Slack ``action_id`` prefixes of the preview's buttons (the key follows; it is also the button's ``value``).
CONFIRM_PREFIX = "action_confirm:"
CANCEL_PREFIX = "action_cancel:"
#: Between the key and the picked choice in a choice button's id and value: ``action_confirm:<key>#2``.
CHOICE_SEPARATOR = "#"


def parse_action_id(action_id: str) -> tuple[str, str] | None:
    """``("confirm" | "cancel", key)`` for ``action_confirm:<key>`` / ``action_cancel:<key>``, else None.

    A Teams card's ``data["action"]`` (``action_confirm`` / ``action_cancel``) parses too when given
    with a trailing colon and the key, e.g. ``f"{data['action']}:{data['key']}"``.
    """
    for op, prefix in (("confirm", CONFIRM_PREFIX), ("cancel", CANCEL_PREFIX)):
        if action_id.startswith(prefix) and len(action_id) > len(prefix):
            return op, action_id[len(prefix):]
    return None


Status = Literal["done", "already_done", "cancelled", "already_cancelled", "expired", "not_found", "forbidden",
                 "in_progress", "failed", "retry"]

_GENERIC = ActionWords()


@dataclass(frozen=True, slots=True)
class ActionOutcome:
    """What a confirm or cancel did.

    Attributes:
        status: ``done`` (executed now), ``already_done`` (executed before; nothing new), ``cancelled``,
            ``already_cancelled``, ``expired``, ``not_found``, ``forbidden`` (not the requester),
            ``in_progress`` (another click is executing it), ``failed`` (final), ``retry`` (a
            transient failure; the preview can be confirmed again).
        message: one or two sentences for the user.
        record: the pending action as stored after the operation (None when not found).
        result: the tool's result for ``done``/``already_done`` (:meth:`tools.actions.ActionResult.as_dict`:
            its details, ``link``, ``links``, ``message``).
        tool: the record's action tool (its preview and words, for the renderers); None when the
            record or its tool is unknown here.
    """

    status: Status
    message: str
    record: PendingRecord | None = None
    result: dict[str, Any] = field(default_factory=dict)
    tool: ActionTool | None = None

    @property
    def final(self) -> bool:
        """True when the preview is settled: adapters replace the preview (buttons go away)."""
        return self.status in {"done", "already_done", "cancelled", "already_cancelled", "expired", "failed",
                               "not_found"}

    @property
    def private(self) -> bool:
        """True when only the clicking user should see the message (someone else's preview)."""
        return self.status == "forbidden"

    @property
    def words(self) -> ActionWords:
        """The tool's words (generic ones when the tool is unknown)."""
        return self.tool.words if self.tool is not None else _GENERIC


class ActionService:
    """Stores, confirms and cancels pending actions (see the module docstring).

    Args:
        store: the state store.
        tools: the registry holding the side-effect tools.
        ttl: how long a preview can be confirmed.
        clock: the current time (aware); ``datetime.now(UTC)`` by default.
        resolve_email: platform user id -> e-mail, used when ``confirm`` is not given one (Slack:
            ``users.info``); the Google backend acts as that address.
        stale_after: an ``executing`` record older than this is taken as interrupted (a crash between
            the tool call and the bookkeeping) and may be executed again; the tools' idempotency
            on the key keeps that from doing it twice.
        outbox: where tools schedule messages for later (:class:`tools.outbox.Outbox`); the state
            store when it implements the port, else None (those tools then fail without effects).
    """

    def __init__(self, store: StateStore, tools: ToolRegistry, ttl: timedelta = timedelta(hours=1),
                 clock: Callable[[], datetime] | None = None,
                 resolve_email: Callable[[str], str | None] | None = None,
                 stale_after: timedelta = timedelta(minutes=5), outbox: Outbox | None = None) -> None:
        self.store = store
        self.tools = tools
        self.ttl = ttl
        self.clock = clock or (lambda: datetime.now(timezone.utc))
        self.resolve_email = resolve_email
        self.stale_after = stale_after
        self.outbox = outbox if outbox is not None else (store if isinstance(store, Outbox) else None)
        self.couriers: dict[str, Courier] = {}

    def use_courier(self, courier: Courier) -> None:
        """Deliver invitations of actions asked on ``courier.platform`` through ``courier`` (the adapter's
        :class:`tools.invites.Courier`): tools get it in :attr:`tools.base.ToolContext.courier`."""
        self.couriers[courier.platform] = courier

    def preview_fields(self, rec: PendingRecord) -> tuple[tuple[str, str], ...]:
        """Fields the preview of ``rec`` adds to the tool's own, from the requester's platform: who will get
        an invitation in a DM (:class:`tools.invites.InvitingTool`); none for other tools. Blocks (the
        courier may ask the platform)."""
        from tools.actions import stored_args

        tool = self.tool(rec.tool)
        if tool is None or not isinstance(tool, InvitingTool):
            return ()
        args = stored_args(tool, dict(rec.args))
        field = tool.invitations(args, self.couriers.get(rec.platform), rec.channel_id) if args is not None else None
        return (field,) if field else ()

    def tool(self, name: str) -> ActionTool | None:
        """The registered action tool ``name``, or None (unknown here, or without side effects)."""
        if name not in self.tools:
            return None
        tool = self.tools.get(name)
        # the registry holds both kinds of tool and side_effect marks an ActionTool (tools.base.ToolRegistry)
        return tool if tool.side_effect else None  # type: ignore[return-value]

    def _words(self, name: str) -> ActionWords:
        tool = self.tool(name)
        return tool.words if tool is not None else _GENERIC

    def _with_tool(self, outcome: ActionOutcome) -> ActionOutcome:
        if outcome.record is None or outcome.tool is not None:
            return outcome
        return dataclasses.replace(outcome, tool=self.tool(outcome.record.tool))

    # -- propose -------------------------------------------------------------------------------
    def propose(self, action: PendingAction, turn: Turn) -> PendingRecord:
        """Store ``action`` for ``turn``'s user; the same idempotency key returns the stored record.

        Raises:
            KeyError: the tool is not registered.
            ValueError: the tool has no side effects (those run directly, never through a preview).
        """
        tool = self.tools.get(action.tool)
        if not tool.side_effect:
            raise ValueError(f"{action.tool} has no side effects; it needs no confirmation")
        rec = self.store.create_pending(action.idempotency_key, action.tool, action.args, requester=turn.user_id,
                                        platform=turn.platform, channel_id=turn.channel_id, thread_id=turn.thread_id,
                                        summary=action.summary, ttl=self.ttl)
        if rec.requester != turn.user_id:
            log.warning("pending action %s belongs to %s, proposed again by %s", rec.key, rec.requester, turn.user_id)
        return rec

    def get(self, key: str) -> PendingRecord | None:
        """The stored action, or None."""
        return self.store.get_pending(key)

    def is_expired(self, rec: PendingRecord) -> bool:
        """True when ``rec`` is still pending past its expiry (by this service's clock)."""
        return rec.status in {"pending", "expired"} and (rec.status == "expired" or self.clock() >= rec.expires_at)

    # -- confirm -------------------------------------------------------------------------------
    def confirm(self, key: str, user_id: str, *, user_email: str | None = None,
                choice: int | None = None) -> ActionOutcome:
        """Execute the action ``key`` for ``user_id`` exactly once (whichever of its buttons was pressed).

        Args:
            key: the idempotency key (the Slack button's ``value``).
            user_id: who clicked; only the requester may confirm.
            user_email: the clicker's e-mail (Google and Microsoft 365 book as them); ``resolve_email`` otherwise.
            choice: the alternative picked (an index into the preview's ``choices``), or None for the
                arguments as proposed; the tool reads it from ``ctx.extra[CHOICE]``.

        Returns:
            the outcome; never raises for a tool failure (it is reported and audited).
        """
        return self._with_tool(self._confirm(key, user_id, user_email, choice))

    def _confirm(self, key: str, user_id: str, user_email: str | None, choice: int | None = None) -> ActionOutcome:
        rec = self._own_record(key, user_id, "confirm")
        if isinstance(rec, ActionOutcome):
            return rec
        settled = self._settled(rec)
        if settled:
            return settled
        doing = f"It's being {self._words(rec.tool).past} right now."
        if rec.status == "executing":
            if self.clock() - rec.updated_at < self.stale_after or not self.store.transition_pending(
                    key, "executing", "pending"):
                return ActionOutcome("in_progress", doing, rec)
            log.warning("pending action %s was interrupted while executing; running it again", key)
            rec = self.store.get_pending(key) or rec
        if self.is_expired(rec):
            return self._expire(rec, user_id)
        if not self.store.transition_pending(key, "pending", "executing"):
            now = self.store.get_pending(key)
            return self._settled(now) or ActionOutcome("in_progress", doing, now)
        return self._execute(rec, user_id, user_email, choice)

    def _execute(self, rec: PendingRecord, user_id: str, user_email: str | None,
                 choice: int | None = None) -> ActionOutcome:
        key = rec.key
        tool = self.tool(rec.tool)
        w = tool.words if tool is not None else _GENERIC
        detail: dict[str, Any] = {"key": key, "args": _brief(rec.args)}
        if choice is not None:
            detail["choice"] = choice
        if tool is None:
            return self._fail(rec, user_id, f"I can't {w.verb} this here: the tool {rec.tool} is not available; "
                              f"nothing was {w.past}.", f"no action tool {rec.tool}", detail)
        email = user_email or (self.resolve_email(user_id) if self.resolve_email else None)
        try:
            args = self.tools.validate(rec.tool, rec.args, context={"now": self.clock()})
        except ToolArgumentError as exc:
            msg = (w.passed() if TIME_PASSED in exc.kinds
                   else f"I couldn't {w.verb} it: the details are no longer valid ({exc}).")
            return self._fail(rec, user_id, msg, str(exc), detail)
        ctx = ToolContext(user_id=user_id, timezone=str(rec.args.get("timezone") or "UTC"), platform=rec.platform,
                          channel_id=rec.channel_id, user_email=email or "", outbox=self.outbox,
                          courier=self.couriers.get(rec.platform),
                          extra={"idempotency_key": key, "thread_id": rec.thread_id,
                                 **({CHOICE: choice} if choice is not None else {})})
        try:
            result = tool.execute(args, key, ctx)
        except Exception as exc:  # a bug or an unexpected backend error: record it, never lose the click
            log.exception("pending action %s failed", key)
            return self._fail(rec, user_id, f"I couldn't {w.verb} it because of an internal error; nothing was "
                              f"{w.past}. Please try again later.", f"{exc.__class__.__name__}: {exc}", detail)
        if not result.ok and result.retryable:
            self.store.transition_pending(key, "executing", "pending")
            self.store.audit(user_id, rec.platform, rec.tool, target=key, outcome="retry",
                             detail={**detail, "error": result.message})
            return ActionOutcome("retry", f"{result.message} Nothing was {w.past} yet; press Confirm to try again "
                                 f"(it can't be {w.past} twice).", self.store.get_pending(key))
        if not result.ok:
            return self._fail(rec, user_id, f"I couldn't {w.verb} it. {result.message}", result.message, detail)
        out = result.as_dict()
        self.store.transition_pending(key, "executing", "done", out)
        self.store.audit(user_id, rec.platform, rec.tool, target=key, outcome="ok", detail={**detail, **out})
        return ActionOutcome("done", result.message, self.store.get_pending(key), out)

    def _fail(self, rec: PendingRecord, user_id: str, message: str, error: str, detail: dict[str, Any]) -> ActionOutcome:
        self.store.transition_pending(rec.key, "executing", "failed", {"error": error, "message": message})
        self.store.audit(user_id, rec.platform, rec.tool, target=rec.key, outcome="failed",
                         detail={**detail, "error": error})
        return ActionOutcome("failed", message, self.store.get_pending(rec.key))

    def _expired_message(self, rec: PendingRecord) -> str:
        when = rec.expires_at.astimezone(timezone.utc).strftime("%d %b %H:%M UTC")
        return (f"This preview expired at {when}, so nothing was {self._words(rec.tool).past}. Ask me again for a "
                "fresh one.")

    def _expire(self, rec: PendingRecord, user_id: str) -> ActionOutcome:
        if rec.status == "pending":
            self.store.transition_pending(rec.key, "pending", "expired")
        return ActionOutcome("expired", self._expired_message(rec), self.store.get_pending(rec.key) or rec)

    def _settled(self, rec: PendingRecord | None) -> ActionOutcome | None:
        """The outcome for a record that is already done, cancelled, expired or failed (None otherwise)."""
        if rec is None:
            return ActionOutcome("not_found", "I can't find this request any more. Nothing was done; ask me again.")
        w = self._words(rec.tool)
        if rec.status == "done":
            return ActionOutcome("already_done", f"This is already {w.past}; nothing new was created.", rec,
                                 dict(rec.result or {}))
        if rec.status == "cancelled":
            return ActionOutcome("already_cancelled", f"This was cancelled; nothing was {w.past}.", rec)
        if rec.status == "expired":
            return ActionOutcome("expired", self._expired_message(rec), rec)
        if rec.status == "failed":
            msg = (rec.result or {}).get("message") or f"This request failed earlier; nothing was {w.past}."
            return ActionOutcome("failed", msg, rec)
        return None

    # -- buttons -------------------------------------------------------------------------------
    def handle_button(self, action_id: str, value: str, user_id: str, *,
                      user_email: str | None = None) -> ActionOutcome:
        """What a Confirm / Cancel click does: parse ``action_id`` (``action_confirm:<key>`` or
        ``action_cancel:<key>``), check it agrees with ``value`` (the key), then :meth:`confirm` or
        :meth:`cancel` for ``user_id``.

        Returns:
            the outcome; ``not_found`` for an id that is not one of ours or disagrees with ``value``.
        """
        parsed = parse_action_id(action_id)
        if parsed is None or (value and value != parsed[1]):
            return ActionOutcome("not_found", "That button doesn't belong to a pending action; nothing was done.")
        op, key = parsed
        key, sep, pick = key.partition(CHOICE_SEPARATOR)
        if op == "cancel":
            return self.cancel(key, user_id)
        if sep and not pick.isdigit():
            return ActionOutcome("not_found", "That button doesn't belong to a pending action; nothing was done.")
        return self.confirm(key, user_id, user_email=user_email, choice=int(pick) if sep else None)

    def _own_record(self, key: str, user_id: str, op: str) -> PendingRecord | ActionOutcome:
        """The record ``key`` when ``user_id`` requested it; otherwise the not-found or forbidden outcome
        (a stranger's click is audited as denied)."""
        rec = self.store.get_pending(key)
        if rec is None:
            tail = "; ask me again." if op == "confirm" else "."
            return ActionOutcome("not_found", f"I can't find this request any more. Nothing was done{tail}")
        if rec.requester != user_id:
            self.store.audit(user_id, rec.platform, rec.tool, target=key, outcome="denied",
                             detail={"key": key, "op": op, "requester": rec.requester})
            return ActionOutcome("forbidden", "Only the person who asked for this can confirm or cancel it.", rec)
        return rec

    # -- cancel --------------------------------------------------------------------------------
    def cancel(self, key: str, user_id: str) -> ActionOutcome:
        """Cancel the pending action ``key`` (requester only); a done action stays done."""
        return self._with_tool(self._cancel(key, user_id))

    def _cancel(self, key: str, user_id: str) -> ActionOutcome:
        rec = self._own_record(key, user_id, "cancel")
        if isinstance(rec, ActionOutcome):
            return rec
        w = self._words(rec.tool)
        busy = f"It's being {w.past} right now, so it can't be cancelled."
        if rec.status == "done":
            hint = f"; {w.undo_hint}" if w.undo_hint else ""
            return ActionOutcome("already_done", f"It's already {w.past}, so I can't cancel the preview{hint}.",
                                 rec, dict(rec.result or {}))
        if rec.status == "executing":
            return ActionOutcome("in_progress", busy, rec)
        if rec.status in {"pending", "expired"} and self.store.transition_pending(key, rec.status, "cancelled"):
            self.store.audit(user_id, rec.platform, rec.tool, target=key, outcome="cancelled",
                             detail={"key": key, "args": _brief(rec.args)})
            return ActionOutcome("cancelled", f"Cancelled; nothing was {w.past}.", self.store.get_pending(key))
        now = self.store.get_pending(key)
        settled = self._settled(now)
        if settled and settled.status == "cancelled":
            return settled
        return settled or ActionOutcome("in_progress", busy, now)


def _brief(args: dict[str, Any], limit: int = 200) -> dict[str, Any]:
    """The audit log's view of the arguments: no description, long texts cut to ``limit`` characters."""
    return {k: (v[:limit] + "\u2026" if isinstance(v, str) and len(v) > limit else v)
            for k, v in args.items() if k != "description"}


def build_action_service(settings: Settings, tools: ToolRegistry, store: StateStore | None = None,
                         resolve_email: Callable[[str], str | None] | None = None,
                         outbox: Outbox | None = None) -> ActionService:
    """An :class:`ActionService` over the configured state store (``DATABASE_URL`` or SQLite in the data dir),
    which is also the outbox unless ``outbox`` is given."""
    return ActionService(store or StateStore(settings.state_url), tools,
                         ttl=timedelta(minutes=settings.action_ttl_minutes), resolve_email=resolve_email,
                         outbox=outbox)
