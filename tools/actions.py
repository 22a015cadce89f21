"""The contract of a side-effect tool (an *action tool*) and what it exchanges with the rest of the bot.

A side-effect tool never runs straight from a plan. The way through the bot is the same for every one:

1. **Recognise**: :meth:`ActionTool.intent` scores a message (0.0 - 1.0); the rule-based router and
   planner ask every registered action tool (:func:`recognise`) instead of knowing any phrasing.
2. **Propose**: :meth:`ActionTool.propose` reads an :class:`ActionRequest` (the requester's own
   words, never retrieved text) and returns a :class:`Proposal` (validated ``Args`` and a one-line
   summary) or a :class:`Clarification` (one question). The planner turns a proposal into a
   pending action with a deterministic idempotency key. An LLM planner fills ``Args`` itself (the
   model sees the tool's JSON schema and description) and skips this step.
3. **Preview**: :meth:`ActionTool.preview` describes the arguments platform-neutrally, as a
   :class:`Preview` (a title and labelled fields, in the viewer's time zone); every renderer (Slack
   Block Kit, Teams Adaptive Cards, the terminal) draws that and nothing tool-specific.
4. **Execute**: once the requester confirms, the action service calls :meth:`ActionTool.execute`
   with the validated arguments and the idempotency key, exactly once per key as far as the service
   can tell; the tool makes a repeat with the same key harmless too (the key is the calendar's
   event id, the outbox's message key). It returns an :class:`ActionResult`: ``ok``, ``retryable``
   (a transient failure: the preview can be confirmed again), a user-facing ``message``, links and
   details for the audit log. Only a bug raises.

:class:`ActionWords` are the verbs the service and the renderers use for the tool ("Booked",
"nothing was booked"). Argument models that compare a time with "now" read it from the validation
context (``Args.model_validate(raw, context={"now": aware_datetime})``) and report a time that has
passed with the error type :data:`TIME_PASSED` (a :class:`pydantic_core.PydanticCustomError`), so the
service can say so in the tool's words without matching error text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, ValidationError

from .context import ToolContext

__all__ = ["ActionTool", "ActionToolBase", "ActionRequest", "Proposal", "Clarification", "Preview", "ActionResult", "ActionWords",
           "TIME_PASSED", "CHOICE", "ACTION_METHODS", "INTENT_THRESHOLD", "action_tools", "recognise", "stored_args",
           "fallback_preview"]

#: The pydantic error type of "the time asked for is no longer in the future".
TIME_PASSED = "time_passed"

#: The key in :attr:`tools.context.ToolContext.extra` of the alternative the requester picked (an index into
#: :attr:`Preview.choices`), absent when they confirmed the arguments as proposed.
CHOICE = "choice"

#: What an action tool must provide beyond the :class:`tools.base.Tool` attributes (checked at registration).
ACTION_METHODS = ("intent", "propose", "preview", "execute", "close")

#: :func:`recognise` takes a message as a request for a tool from this intent score on.
INTENT_THRESHOLD = 0.5

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True, slots=True)
class ActionRequest:
    """What a tool reads to propose an action: platform-neutral, the requester's own words only.

    Attributes:
        text: the request (plain text, mentions already resolved to e-mail addresses or ``@Name``);
            when the message completes an earlier incomplete request of the same requester, that
            earlier request comes first and this message's words last.
        sent_at: when the message was sent (aware); relative words ("tomorrow") count from it.
        timezone: the requester's IANA zone (valid; the planner has filled in the default).
        history: the requester's own earlier messages in the thread, oldest first (others' never).
        completion: the part of ``text`` this message added to an earlier request (``"at 3pm"``),
            or "" when the message is a request on its own.
        requester_id: the platform's id of the requester.
        requester_email: their e-mail address, or "" when unknown.
        platform: ``slack``, ``teams``, ``cli``...
        background: context the planner adds for the action (the request quoted, a cited answer and
            its sources); a tool may keep it (a calendar event's description) or ignore it.
        thread_link: the web link of the chat thread the request was made in, from the adapter ("" when
            the platform has none); a tool may record it (a Jira ticket links its thread).
    """

    text: str
    sent_at: datetime
    timezone: str = "UTC"
    history: tuple[str, ...] = ()
    completion: str = ""
    requester_id: str = ""
    requester_email: str = ""
    platform: str = ""
    background: str = ""
    thread_link: str = ""


@dataclass(frozen=True, slots=True)
class Proposal:
    """A complete reading of a request.

    Attributes:
        args: the validated ``Args`` of the tool.
        summary: one line for logs and notifications (``Release review, Thu 13 Mar ... with alice@...``).
        trace: what the tool read, for the turn's trace (JSON-ready).
    """

    args: BaseModel
    summary: str
    trace: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Clarification:
    """One question for the requester: what is missing, vague or wrong (nothing was proposed).

    Attributes:
        question: the question, plain text, ending with one ``?`` and saying nothing happened yet.
        trace: what the tool read, for the turn's trace (JSON-ready).
    """

    question: str
    trace: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Preview:
    """A platform-neutral description of an action's arguments.

    Attributes:
        title: what the action is about (``Release review``, ``Reminder``).
        fields: ``(label, value)`` pairs in display order (``("When", "Thu 13 Mar 2025, 15:00-15:30 ...")``).
        summary: one line (``Release review, Thu 13 Mar 2025, 15:00-15:30 (Europe/Berlin) with alice@...``).
        details: a longer text shown less prominently (an event's description), or "".
        choices: labels of alternatives to the proposed arguments (``Tue 1 Dec 15:30``), each a button that
            confirms the action with that alternative (:data:`CHOICE` in the tool context's ``extra``), or ().
    """

    title: str
    fields: tuple[tuple[str, str], ...] = ()
    summary: str = ""
    details: str = ""
    choices: tuple[str, ...] = ()

    def value(self, label: str) -> str:
        """The value of the field ``label``, or ""."""
        return next((v for k, v in self.fields if k == label), "")


@dataclass(frozen=True, slots=True)
class ActionResult:
    """What :meth:`ActionTool.execute` did.

    Attributes:
        ok: True when the action is done (also when an earlier attempt with the same key had done it).
        message: one or two sentences for the user (``Booked: Release review.``).
        retryable: for a failure, True when trying again may work (a timeout, a 503): the service
            puts the preview back so Confirm can be pressed again.
        links: ``(label, url)`` pairs to offer (``("Open in Google Calendar", "https://...")``); the
            renderers drop ones that are not web links.
        details: JSON-ready facts for the audit log and the stored result (an event id, a backend...).
        notes: sentences the renderers show under a done action (``Alice got the invitation in a DM.``),
            also part of ``message``.
    """

    ok: bool
    message: str
    retryable: bool = False
    links: tuple[tuple[str, str], ...] = ()
    details: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def link(self) -> str:
        """The first link's URL, or ""."""
        return self.links[0][1] if self.links else ""

    def as_dict(self) -> dict[str, Any]:
        """The stored result: ``details`` plus ``link``, ``links``, ``message`` and ``notes``."""
        return {**self.details, "link": self.link, "links": [list(x) for x in self.links], "message": self.message,
                "notes": list(self.notes)}


@dataclass(frozen=True, slots=True)
class ActionWords:
    """The words the service and the renderers use for one tool's actions.

    Attributes:
        verb: what confirming does (``book``): "I couldn't book it".
        past: its past participle (``booked``): "nothing was booked", "It's being booked right now".
        done: the headline of a done action (``Booked``).
        lead: the line above a preview (``I can add this to the calendar:``).
        time_passed: the message when the action's time passed before the click ("" for the generic one).
        undo_hint: what to do instead of cancelling a done action (``delete the event in your calendar``), or "".
    """

    verb: str = "do"
    past: str = "done"
    done: str = "Done"
    lead: str = "I can do this for you:"
    time_passed: str = ""
    undo_hint: str = ""

    def passed(self) -> str:
        """The message for an action whose time passed before it was confirmed."""
        return self.time_passed or f"The time has passed, so I didn't {self.verb} it. Ask me again with a new time."


@runtime_checkable
class ActionTool(Protocol):
    """A side-effect tool (see the module docstring). Registered in :class:`tools.base.ToolRegistry`
    like any tool, with ``side_effect = True``.

    Attributes:
        name: dotted name (``calendar.create``).
        description: what it does, for an LLM planner and the help; say what it cannot do.
        Args: the pydantic argument model (its JSON schema is what an LLM fills).
        side_effect: always True.
        permission: ``"everyone"`` or ``"admin"``.
        words: the verbs for its previews and outcomes.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    side_effect: ClassVar[bool]
    permission: ClassVar[str]
    words: ClassVar[ActionWords]

    @property
    def Args(self) -> type[BaseModel]:  # noqa: N802 - read-only here, so a tool's own model (a subclass) fits
        """The pydantic model of the arguments."""
        ...

    def intent(self, text: str) -> float:
        """How surely ``text`` asks for this action: 0.0 (not at all) to 1.0; from
        :data:`INTENT_THRESHOLD` on it is taken as a request. A question about how to do it by hand
        ("how do I book a room?") scores 0."""
        ...

    def propose(self, request: ActionRequest) -> Proposal | Clarification:
        """Read ``request`` into validated arguments, or one clarifying question. Never raises for odd input."""
        ...

    def preview(self, args: Any, viewer_tz: str | None = None) -> Preview:
        """Describe ``args`` (an instance of the tool's own ``Args``: a subclass, so Any here) for the person who
        will confirm (times in ``viewer_tz`` when given)."""
        ...

    def execute(self, args: Any, key: str, ctx: ToolContext) -> ActionResult:
        """Do the action once for ``key`` with ``args`` (the tool's own ``Args``, as for :meth:`preview`); a repeat
        with the same key does nothing new and returns ok."""
        ...

    def close(self) -> None:
        """Release what :meth:`execute` opened (a database, a client); a no-op otherwise."""
        ...


class ActionToolBase:
    """What every action tool has in common, for it to inherit: it has side effects, everyone may ask for
    it (a tool for admins sets ``permission = "admin"``), and it holds nothing to release unless it
    overrides :meth:`close`. A subclass declares ``name``, ``description``, ``Args`` and ``words`` and the
    methods of :class:`ActionTool`."""

    side_effect: ClassVar[bool] = True
    permission: ClassVar[str] = "everyone"

    def close(self) -> None:
        """Nothing to release."""


class HasActions(Protocol):
    """What :func:`recognise` needs of a registry (:class:`tools.base.ToolRegistry` has it)."""

    def actions(self) -> list[ActionTool]:
        """The registered side-effect tools, in name order."""
        ...


def action_tools(registry: HasActions) -> list[ActionTool]:
    """The registry's side-effect tools, in name order."""
    return registry.actions()


def recognise(registry: HasActions, text: str, threshold: float = INTENT_THRESHOLD) -> ActionTool | None:
    """The action tool ``text`` asks for (the highest intent score at or above ``threshold``), or None."""
    best, score = None, threshold
    for tool in action_tools(registry):
        s = tool.intent(text)
        if s >= score and (best is None or s > score):
            best, score = tool, s
    return best


def stored_args(tool: ActionTool, raw: dict[str, Any]) -> BaseModel | None:
    """A stored action's arguments as the tool's model, without the "still in the future" checks (an
    old preview may lie in the past); None when they no longer parse at all."""
    try:
        return tool.Args.model_validate(raw, context={"now": _EPOCH})
    except ValidationError:
        return None


def fallback_preview(summary: str) -> Preview:
    """The preview of an action whose tool is not registered here (or whose arguments no longer parse)."""
    return Preview(title=summary or "Pending action", summary=summary or "a pending action")
