"""Meeting details from a chat message, without an LLM.

:func:`extract_event` reads one message (the requester's own words, never retrieved text) and
returns an :class:`EventDraft`: title, start, length, attendees, time zone, video call, location,
and what is missing or ambiguous. The planner turns a complete draft into
:class:`~tools.calendar.args.CalendarCreateArgs`, and an incomplete one into a single clarifying
question (:meth:`EventDraft.clarification`).

What it understands:

- **dates** with ``dateparser`` (``RELATIVE_BASE`` = the message time in the requester's zone,
  ``PREFER_DATES_FROM="future"``): today, tomorrow, the day after tomorrow, ``next tue``,
  ``March 20``, ``20th of March``, ``2025-03-20``, ``3/20``, ``in 2 days``, ``in two weeks``;
  a weekday (``on friday``, ``thursday``) or a day of the month (``on the 14th``) is the *next*
  one whose start, at the time asked, is after the message (today's when it is still ahead; the
  next month's 14th when this month's has passed), and a time alone (``at 3pm``) is today's or
  tomorrow's, whichever comes first; vague ones (``next week``, ``sometime``, ``end of the
  month``) are *ambiguous*, not guessed;
- **series** (:mod:`tools.calendar.series_words`): ``weekly``, ``every other tuesday``, ``every
  weekday``, ``monthly on the 1st``, ``biweekly``, ``each week``, ``for 6 weeks``...; they become an
  RFC 5545 rule (:attr:`EventDraft.recurrence`) and the start is the rule's first occurrence after
  the message (a day named as ``starting dec 1`` or ``from next week`` is the earliest); in the topic
  (``to go over the weekly report``, ``about the daily numbers``) a frequency word that describes a
  noun is part of the title, not a series;
- **times**: ``3pm``, ``3:30 pm``, ``15:00``, ``14h30``, ``noon``, ``at 10`` (a bare hour is read
  in office hours: 1-6 is pm, 7-11 am, unless the message says morning/evening/tonight),
  ranges (``2-3pm``, ``from 10 to 11:30am``, ``between 2 and 3pm``), an end (``until 4pm``),
  relative starts (``in 30 minutes``, ``in two hours``: :func:`tools.dates.relative_time`); a part
  of the day alone (``tomorrow afternoon``) is ambiguous;
- **time zones**: abbreviations (``PT``, ``ET``, ``CET``, ``UTC``...), IANA names
  (``Europe/Berlin``), ``UTC+2``; the requester's zone otherwise;
- **durations**: ``30 min``, ``45-minute``, ``an hour``, ``1.5h``, ``90 mins``, ``half an hour``,
  ``an hour and a half``, ``1h30``, ``hour-long``;
- **attendees**: e-mail addresses. The text is plain: each platform adapter has already turned its
  mentions into the person's e-mail address where it could look it up, and into ``@Name``
  otherwise. An ``@Name`` (and ``@here``, ``@channel``, ``@everyone``) and people named without an
  address (``with bob``, ``with everyone``) make the draft incomplete: the question asks for their
  addresses;
- **title**: a quoted or ``called ...`` title, else the meeting noun phrase (``release review``,
  ``incident retro``, ``Q3 planning session``), else ``about/for X``, else ``Meeting``;
- **video** (``video call``, ``Google Meet``, ``Zoom``, ``with a meet link``) and a room
  (``in room 4B``, ``in the Everest room``).

The parts, one module each: :mod:`.reader` (:func:`extract_event`, the order they are read in),
:mod:`.draft` (:class:`EventDraft` and its question), :mod:`.people`, :mod:`.zones`, :mod:`.place`
(video and room), :mod:`.durations`, :mod:`.clock` (times), :mod:`.days`, :mod:`.series` and
:mod:`.title`; :mod:`.words` holds what they share.
"""

from .draft import EventDraft
from .durations import parse_duration
from .people import AT_NAME, at_names
from .reader import extract_event

__all__ = ["EventDraft", "extract_event", "parse_duration", "at_names", "AT_NAME"]
