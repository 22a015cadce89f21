"""The outbox's delivery: send each scheduled message that is due, once, through its platform's sender.

Messages are rows of the state store (:meth:`state.StateStore.schedule_message`; a reminder tool
schedules them). :meth:`Outbox.deliver_due` (run every 30 s by ``chatops serve``'s scheduler,
:func:`bot.scheduler.add_outbox_job`) does, for the platforms it has a sender for:

1. **claim** the due messages (:meth:`~state.StateStore.claim_due_messages`: one conditional
   ``UPDATE`` per row, so two replicas never claim the same message; the claim is a lease);
2. **send** each through ``senders[platform]`` (at most ``send_timeout`` seconds, well within the lease);
3. **finish** it: ``delivered``; ``failed`` for a :class:`PermanentDeliveryError`; ``pending`` again
   (retried later with back-off, ``failed`` after :data:`state.store.MESSAGE_MAX_ATTEMPTS` attempts)
   for a :class:`RetryableDeliveryError`, a time-out or any other exception of the sender.

**Delivery guarantee.** The store's side is exactly once: a message is claimed by one deliverer at a
time and finished once. The transport's side is *at least once*: if the process dies (or stalls past
the lease) after the platform accepted the message but before ``finish`` was recorded, the lease
expires and another run sends it again. The window is the few milliseconds between the platform's
answer and one ``UPDATE``; neither Slack's ``chat.postMessage`` nor the Bot Connector has an idempotency
key that would close it.
A crash never loses a message, and only a crash or such a stall can send one twice.

**Platforms without a sender** (no sender in ``senders``): their messages are not claimed; they stay
``pending`` until a process that has the sender delivers them, and a warning is logged once per
platform and :class:`Outbox`. This covers a ``serve`` that runs only Slack and a reminder made in
Teams (or the reverse), and the terminal platforms :data:`TERMINAL_PLATFORMS` (``cli``, ``console``):
no long-running process can reach a shell, so ``chatops serve`` never delivers those; the CLI shows
them when asked. (``chatops worker`` serves no platform and runs no outbox at all.)

The module is platform-neutral: senders are passed in. Slack's is :class:`bot.slack.outbox.SlackDmSender`
(a DM); Teams' is :class:`bot.teams.outbox.TeamsSender`, a proactive message into the user's personal
chat through the conversation reference the Teams bot stores when the user messages it there; a Teams
user who never did has no such chat, and their message fails at once saying so.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Literal, Protocol

from state import ScheduledMessage, StateStore

__all__ = ["Sender", "DeliveryError", "RetryableDeliveryError", "PermanentDeliveryError", "DeliveryReport",
           "Outbox", "deliver_due", "default_owner", "TERMINAL_PLATFORMS"]

log = logging.getLogger(__name__)

#: Platforms whose user sits at a terminal (``chatops ask``: ``cli``; ``chatops chat``: ``console``).
TERMINAL_PLATFORMS = frozenset({"cli", "console"})


class DeliveryError(Exception):
    """A sender could not deliver a message. The tree (catch at the level you need)::

        DeliveryError
        ├── RetryableDeliveryError   try again later (rate limit, server error, network, time-out)
        └── PermanentDeliveryError   never (no such user or conversation, message refused)

    Args:
        message: what happened, for the log and the message's ``error`` (no secrets, no message text).
        code: the platform's error code when it has one (``ratelimited``, ``user_not_found``...).
    """

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code


class RetryableDeliveryError(DeliveryError):
    """The message may go through later; the outbox retries it with back-off."""


class PermanentDeliveryError(DeliveryError):
    """The message will never go through; the outbox marks it ``failed``."""


class Sender(Protocol):
    """Delivers a message to a user on one platform (asynchronous: senders talk HTTP on the event loop)."""

    async def send(self, user_id: str, channel_id: str, text: str) -> None:
        """Send ``text`` to ``user_id`` (``channel_id``: the conversation the message was scheduled from,
        which a sender may use or ignore; Slack's sends a direct message).

        Raises:
            RetryableDeliveryError: when a later attempt may succeed.
            PermanentDeliveryError: when no attempt will.
        """
        ...


@dataclass
class DeliveryReport:
    """What one :meth:`Outbox.deliver_due` run did, by message key.

    Attributes:
        delivered: sent and recorded ``delivered``.
        retrying: not sent this time; ``pending`` again, retried later.
        failed: recorded ``failed`` (a permanent error, or the last allowed attempt).
        lost: finished too late: the lease had expired and another deliverer claimed the message.
        waiting: due messages left ``pending`` because no sender serves their platform, by platform.
    """

    delivered: list[str] = field(default_factory=list)
    retrying: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    waiting: dict[str, int] = field(default_factory=dict)


def default_owner() -> str:
    """A deliverer id unique to this process: ``host:pid:random``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Outbox:
    """Delivers due scheduled messages (see the module docstring).

    Args:
        store: the state store holding the messages.
        senders: a sender per platform name (``{"slack": SlackDmSender(client), "teams": TeamsSender(...)}``).
        owner: this deliverer's id (default :func:`default_owner`).
        limit: messages claimed per run at most.
        lease: how long a claim holds before another deliverer may take the message over.
        send_timeout: seconds one send may take (must be well below ``lease``).

    Raises:
        ValueError: when ``send_timeout`` is not below the lease.
    """

    def __init__(self, store: StateStore, senders: Mapping[str, Sender], owner: str | None = None, *,
                 limit: int = 50, lease: timedelta = timedelta(minutes=5), send_timeout: float = 60.0) -> None:
        if send_timeout <= 0 or send_timeout >= lease.total_seconds():
            raise ValueError(f"send_timeout ({send_timeout} s) must be positive and below the lease ({lease})")
        self.store = store
        self.senders = dict(senders)
        self.owner = owner or default_owner()
        self.limit = limit
        self.lease = lease
        self.send_timeout = send_timeout
        self._warned: set[str] = set()
        self._runs = 0
        self._idle = asyncio.Event()
        self._idle.set()

    async def deliver_due(self, now: datetime | None = None) -> DeliveryReport:
        """Claim, send and finish the due messages of the platforms with a sender; never raises for a
        message's failure (it is recorded on the message and logged).

        Args:
            now: the current time (aware; default: now). Messages whose ``at`` is later stay pending.

        Raises:
            state.StateStoreError, sqlalchemy.exc.SQLAlchemyError: when the state store fails (the
                scheduler logs it and tries again at the next run).
        """
        now = now or datetime.now(timezone.utc)
        report = DeliveryReport()
        self._runs += 1
        self._idle.clear()
        try:
            await asyncio.to_thread(self._note_unserved, now, report)
            if not self.senders:
                return report
            claimed = await asyncio.to_thread(self.store.claim_due_messages, now, self.owner, self.limit,
                                              self.lease, platforms=sorted(self.senders))
            for msg in claimed:
                await self._deliver(msg, report)
            return report
        finally:
            self._runs -= 1
            if not self._runs:
                self._idle.set()

    async def drain(self, timeout: float = 10.0) -> bool:
        """Wait until no :meth:`deliver_due` run is in flight, so a stopping process records the outcome
        of the messages it already sent (else they would be sent again once their lease expires).

        Args:
            timeout: seconds to wait at most.

        Returns:
            True when idle; False when a run was still going after ``timeout`` (logged: its claimed
            messages are taken over by a deliverer once their lease expires).
        """
        if self._idle.is_set():
            return True
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
            return True
        except asyncio.TimeoutError:
            log.warning("stopping while scheduled messages are being delivered; those not recorded yet are "
                        "delivered again after their lease (%s)", self.lease)
            return False

    def _note_unserved(self, now: datetime, report: DeliveryReport) -> None:
        counts = self.store.due_message_counts(now)
        report.waiting = {p: n for p, n in counts.items() if p not in self.senders}
        for platform, n in sorted(report.waiting.items()):
            if platform in self._warned:
                continue
            self._warned.add(platform)
            where = ("the CLI shows them" if platform in TERMINAL_PLATFORMS
                     else f"a process serving {platform} delivers them")
            log.warning("%d scheduled message(s) for %s are due, but this process has no %s sender; they stay "
                        "pending until %s (logged once)", n, platform, platform, where)

    async def _deliver(self, msg: ScheduledMessage, report: DeliveryReport) -> None:
        sender = self.senders[msg.platform]
        outcome: Literal["delivered", "failed", "pending"] = "delivered"
        error = ""
        try:
            await asyncio.wait_for(sender.send(msg.user_id, msg.channel_id, msg.text), self.send_timeout)
        except PermanentDeliveryError as exc:
            outcome, error = "failed", _describe(exc)
        except RetryableDeliveryError as exc:
            outcome, error = "pending", _describe(exc)
        except asyncio.TimeoutError:
            outcome, error = "pending", f"no answer within {self.send_timeout:g} s"
        except Exception as exc:  # noqa: BLE001 - a sender's bug must not stop the other messages
            log.exception("the %s sender failed on scheduled message %s", msg.platform, msg.key)
            outcome, error = "pending", f"{type(exc).__name__}: {exc}"
        ok = await asyncio.to_thread(self.store.finish_message, msg.key, self.owner, outcome, error)
        if not ok:
            log.warning("scheduled message %s: the lease expired before its outcome (%s) was recorded; another "
                        "deliverer has it", msg.key, outcome)
            report.lost.append(msg.key)
        elif outcome == "delivered":
            log.info("scheduled message %s delivered on %s (attempt %d)", msg.key, msg.platform, msg.attempts)
            report.delivered.append(msg.key)
        else:
            final = await asyncio.to_thread(self.store.scheduled_message, msg.key)
            if final is not None and final.status == "failed":
                log.warning("scheduled message %s failed on %s after %d attempt(s): %s", msg.key, msg.platform,
                            msg.attempts, final.error)
                report.failed.append(msg.key)
            else:
                log.info("scheduled message %s not delivered on %s (attempt %d), will retry: %s", msg.key,
                         msg.platform, msg.attempts, error)
                report.retrying.append(msg.key)


def _describe(exc: DeliveryError) -> str:
    text = str(exc)
    return f"{exc.code}: {text}" if exc.code and exc.code not in text else text


async def deliver_due(store: StateStore, senders: Mapping[str, Sender], now: datetime | None = None,
                      owner: str | None = None) -> DeliveryReport:
    """One delivery run with a one-off :class:`Outbox` (see :meth:`Outbox.deliver_due`); a long-running
    process keeps one :class:`Outbox` instead, so the warnings about platforms without a sender come once."""
    return await Outbox(store, senders, owner).deliver_due(now)
