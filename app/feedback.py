"""Feedback on answers: the one place a vote is stored and counted.

Every platform's feedback handler (Slack's ``feedback:`` buttons, Teams' card submits) calls
:func:`record_feedback`, so the state store's ``feedback`` table and the ``chatops_feedback_total``
metric never disagree.
"""

from __future__ import annotations

from state import StateStore
from telemetry.metrics import count_feedback, count_feedback_reason

__all__ = ["record_feedback", "record_feedback_reason"]


def record_feedback(store: StateStore, trace_id: str, platform: str, user_id: str, value: str,
                    comment: str = "") -> None:
    """Store (or replace) ``user_id``'s vote on the turn ``trace_id``, then count it.

    Args:
        store: the state store.
        trace_id: the answered turn's trace id.
        platform: ``slack`` or ``teams``.
        user_id: who voted.
        value: ``helpful`` or ``not_helpful``.
        comment: optional free text.

    Raises:
        ValueError: when ``value`` is not ``helpful`` or ``not_helpful`` (nothing stored or counted).
    """
    store.add_feedback(trace_id, platform, user_id, value, comment)
    count_feedback(platform, value)


def record_feedback_reason(store: StateStore, trace_id: str, platform: str, user_id: str, reason: str,
                           comment: str) -> None:
    """Replace ``user_id``'s "not helpful" vote on ``trace_id`` with one carrying its reason (``comment``:
    ``reason`` or ``reason: text``), and count the reason; the vote was counted when it was clicked.

    Raises:
        ValueError: as :meth:`state.StateStore.add_feedback`.
    """
    store.add_feedback(trace_id, platform, user_id, "not_helpful", comment)
    count_feedback_reason(platform, reason)
