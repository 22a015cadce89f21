"""``ticket.create``: Jira tickets filed from chat after the requester confirms.

- :mod:`.args`: :class:`TicketCreateArgs` (validated).
- :mod:`.intent`: whether a message asks for a ticket.
- :mod:`.read`: the request read into project, issue type and summary.
- :mod:`.client`: :class:`JiraClient`, Jira Cloud (REST v3) and Data Center (REST v2) over ``httpx`` + ``tenacity``.
- :mod:`.adf`: plain text as the Atlassian Document Format (Cloud's descriptions).
- :mod:`.tool`: the :class:`TicketCreate` side-effect tool and its exactly-once decision.
- :mod:`.factory`: the tool from plain settings values.
"""

from .args import TicketCreateArgs
from .tool import TicketCreate, label_for

__all__ = ["TicketCreateArgs", "TicketCreate", "label_for"]
