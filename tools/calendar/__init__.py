"""``calendar.create``: arguments, extraction from a message, the tool and its backends.

- :mod:`.args`: :class:`CalendarCreateArgs` (validated) and :class:`CreatedEvent`.
- :mod:`.extract`: :func:`extract_event`, the rule-based reading of a meeting request.
- :mod:`.series_words`: the words of a request that ask for a series.
- :mod:`.recurrence`: RFC 5545 ``RRULE`` values checked, built, described and expanded (``dateutil``).
- :mod:`.intent`: whether a message asks for a meeting.
- :mod:`.propose`: the request read into arguments or a question; the preview's lines.
- :mod:`.tool`: the :class:`CalendarCreate` side-effect tool (the :mod:`tools.actions` contract).
- :mod:`.factory`: the tool and its backend from plain settings values.
- :mod:`.local`: :class:`LocalCalendar`, events in the state database with an ``.ics`` each.
- :mod:`.google`: :class:`GoogleCalendar` via google-api-python-client.
- :mod:`.microsoft`: :class:`GraphCalendar`, Microsoft 365 through Graph (msal + httpx).
- :mod:`.freebusy`: who is busy at a time and the next common free slots (pure).
- :mod:`.availability`: free/busy applied to a proposal; "find 30 minutes with ..." requests.
"""

import importlib
from typing import Any

__all__ = ["CalendarCreateArgs", "CreatedEvent", "EventDraft", "extract_event", "parse_duration", "at_names",
           "CalendarCreate", "CalendarBackend"]

#: Each name and its module, imported on first use (PEP 562): importing ``tools.calendar.factory`` to wire the
#: tool does not load the request reader (dateparser) until a message is a meeting request.
_HOMES = {"CalendarCreateArgs": ".args", "CreatedEvent": ".args", "EventDraft": ".extract", "at_names": ".extract",
          "extract_event": ".extract", "parse_duration": ".extract", "CalendarBackend": ".tool",
          "CalendarCreate": ".tool"}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
