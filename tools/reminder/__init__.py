"""``reminder.create``: a one-off reminder, sent to the requester as a direct message at the time asked.

The second action tool, built only on the contract of :mod:`tools.actions` (nothing outside this
package knows it but its registration line in :func:`app.wiring.register_action_tools`).

- :mod:`.args`: :class:`ReminderCreateArgs` (text, an aware time in the future, the requester's zone).
- :mod:`.read`: :func:`read_reminder`, the rule-based reading of "remind me to ... tomorrow at 9".
- :mod:`.tool`: the :class:`ReminderCreate` tool; it schedules the message through the outbox port
  (:class:`tools.outbox.Outbox`, the state store), which the scheduler delivers when it is due.
"""

from .args import ReminderCreateArgs
from .read import ReminderDraft, read_reminder
from .tool import ReminderCreate

__all__ = ["ReminderCreateArgs", "ReminderDraft", "read_reminder", "ReminderCreate"]
