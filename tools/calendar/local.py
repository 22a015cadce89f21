"""The embedded calendar: events in a table of their own in the state database, plus an ``.ics`` per event.

It is the default backend (``CALENDAR_BACKEND=local``), so ``make demo`` and a workspace without
Google can use ``calendar.create``. The table ``calendar_events`` lives next to the state store's
tables (same SQLAlchemy URL: SQLite under the data dir, or PostgreSQL) but is owned here; the
state store knows nothing about it. The event id is the action's idempotency key and the table's
primary key, so a second insert of the same action finds the first event instead of adding one.
Each event is also written to ``ICS_DIR/<event id>.ics`` (RFC 5545, via ``icalendar``), which any
calendar app imports; the event's link is that file's ``file://`` URL. A series keeps its RFC 5545
rule in the ``recurrence`` column and the ``VEVENT``'s ``RRULE`` (the stored start is the first
occurrence); a table made before series existed gains the column when the calendar opens.
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import icalendar
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from tools.errors import ToolUnavailableError

from .args import CalendarCreateArgs, CreatedEvent
from .freebusy import BusyInterval, Schedule
from .recurrence import MAX_COUNT, occurrences

__all__ = ["LocalCalendar", "event_ics"]

PRODID = "-//chatops//calendar.create//EN"


def event_ics(event: dict[str, Any]) -> bytes:
    """An RFC 5545 calendar holding one event.

    Args:
        event: a row of :meth:`LocalCalendar.get` (``id``, ``title``, ``start``/``end`` aware datetimes,
            ``timezone``, ``attendees``, ``description``, ``location``, ``organizer_email``, ``created_at``,
            and ``recurrence``, an ``RRULE`` value or "" for one event).

    Returns:
        the ``.ics`` bytes (``VCALENDAR`` with one ``VEVENT`` whose ``UID`` is ``<id>@chatops``, times in
        the event's zone with its ``VTIMEZONE``; an ``RRULE`` for a series).
    """
    tz = ZoneInfo(event["timezone"])
    cal = icalendar.Calendar()
    cal.add("prodid", PRODID)
    cal.add("version", "2.0")
    cal.add("calscale", "GREGORIAN")
    ev = icalendar.Event()
    ev.add("uid", f"{event['id']}@chatops")
    ev.add("dtstamp", event["created_at"].astimezone(timezone.utc))
    ev.add("dtstart", event["start"].astimezone(tz))
    ev.add("dtend", event["end"].astimezone(tz))
    ev.add("summary", event["title"])
    if event.get("recurrence"):
        ev.add("rrule", icalendar.vRecur.from_ical(event["recurrence"]))
    if event.get("description"):
        ev.add("description", event["description"])
    if event.get("location"):
        ev.add("location", event["location"])
    if event.get("organizer_email"):
        ev.add("organizer", icalendar.vCalAddress(f"mailto:{event['organizer_email']}"))
    for email in event.get("attendees") or []:
        who = icalendar.vCalAddress(f"mailto:{email}")
        who.params["ROLE"] = icalendar.vText("REQ-PARTICIPANT")
        who.params["PARTSTAT"] = icalendar.vText("NEEDS-ACTION")
        who.params["RSVP"] = icalendar.vText("TRUE")
        ev.add("attendee", who, encode=False)
    ev.add("x-chatops-requester", event.get("requester") or "")
    cal.add_component(ev)
    if hasattr(cal, "add_missing_timezones"):
        cal.add_missing_timezones()
    ical: bytes = cal.to_ical()
    return ical


class LocalCalendar:
    """Events in the database at ``url`` and ``.ics`` files in ``ics_dir``.

    Args:
        url: a SQLAlchemy URL (the state store's, e.g. ``sqlite:///.chatops/state.sqlite``).
        ics_dir: where ``<event id>.ics`` files go (created).

    Raises:
        ToolUnavailableError: when the database cannot be opened.
    """

    name = "local"

    def __init__(self, url: str, ics_dir: str | os.PathLike[str]) -> None:
        self.ics_dir = Path(ics_dir)
        kwargs: dict[str, Any] = {"pool_pre_ping": True}
        if url.startswith("sqlite"):
            kwargs["connect_args"] = {"timeout": 30, "check_same_thread": False}
        md = sa.MetaData()
        self.table = sa.Table(
            "calendar_events", md,
            sa.Column("id", sa.String(1024), primary_key=True),
            sa.Column("owner", sa.String(200), nullable=False, index=True),
            sa.Column("organizer_email", sa.String(320), nullable=False, default=""),
            sa.Column("title", sa.String(200), nullable=False),
            sa.Column("start", sa.DateTime(timezone=True), nullable=False, index=True),
            sa.Column("end", sa.DateTime(timezone=True), nullable=False),
            sa.Column("timezone", sa.String(64), nullable=False),
            sa.Column("attendees", sa.Text, nullable=False),
            sa.Column("description", sa.Text, nullable=False, default=""),
            sa.Column("location", sa.String(500), nullable=False, default=""),
            sa.Column("video_conference", sa.Boolean, nullable=False, default=False),
            sa.Column("recurrence", sa.String(300), nullable=False, default=""),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        )
        try:
            self.engine = sa.create_engine(url, **kwargs)
            md.create_all(self.engine)
            _add_missing_columns(self.engine, self.table)
        except (SQLAlchemyError, ImportError, ValueError) as exc:
            raise ToolUnavailableError(f"the local calendar cannot open its database: {exc}") from exc

    def create(self, args: CalendarCreateArgs, *, event_id: str, requester: str = "",
               organizer_email: str | None = None) -> CreatedEvent:
        """Insert the event once; a repeated ``event_id`` returns the stored event with ``created=False``.

        Args:
            args: the validated arguments.
            event_id: the action's idempotency key (primary key).
            requester: the requester's platform user id (the event's owner).
            organizer_email: the requester's e-mail, written as the ``.ics`` organizer when known.

        Returns:
            the event with ``link`` = the ``file://`` URL of its ``.ics``.
        """
        assert args.end is not None
        created = True
        try:
            with self.engine.begin() as conn:
                conn.execute(self.table.insert().values(
                    id=event_id, owner=requester, organizer_email=organizer_email or "", title=args.title,
                    start=args.start.astimezone(timezone.utc), end=args.end.astimezone(timezone.utc),
                    timezone=args.timezone, attendees=json.dumps(args.attendees), description=args.description,
                    location=args.location, video_conference=args.video_conference,
                    recurrence=args.recurrence or "",
                    created_at=datetime.now(timezone.utc)))
        except IntegrityError:
            created = False
        event = self.get(event_id)
        assert event is not None
        path = self.ics_path(event_id)
        if created or not path.exists():
            _write_atomic(path, event_ics(event))
        return CreatedEvent(event_id=event_id, link=path.resolve().as_uri(), backend="local", created=created,
                            calendar=event["owner"], raw={k: v for k, v in event.items() if k != "ics"})

    def ics_path(self, event_id: str) -> Path:
        """Where the event's ``.ics`` file is (or will be)."""
        return self.ics_dir / f"{event_id}.ics"

    def get(self, event_id: str) -> dict[str, Any] | None:
        """The stored event (times aware, attendees a list), or None."""
        t = self.table
        with self.engine.connect() as conn:
            r = conn.execute(sa.select(t).where(t.c.id == event_id)).mappings().first()
        return _row(r) if r else None

    def events(self, owner: str | None = None) -> list[dict[str, Any]]:
        """Stored events by start time (of one owner, or all)."""
        t = self.table
        q = sa.select(t).order_by(t.c.start)
        if owner is not None:
            q = q.where(t.c.owner == owner)
        with self.engine.connect() as conn:
            return [_row(r) for r in conn.execute(q).mappings()]

    def busy(self, emails: list[str], start: datetime, end: datetime, *,
             organizer_email: str | None = None) -> list[Schedule]:
        """Free/busy from this calendar's own events: a person is busy during the events (a series' occurrences
        too) they organise or attend that overlap ``[start, end)``. No working hours are known here."""
        t = self.table
        with self.engine.connect() as conn:
            rows = [_row(r) for r in conn.execute(sa.select(t).where(
                t.c.start < end.astimezone(timezone.utc),
                sa.or_(t.c.recurrence != "", t.c.end > start.astimezone(timezone.utc)))).mappings()]
        spans: dict[str, list[BusyInterval]] = {e.lower(): [] for e in emails}
        for ev in rows:
            length = ev["end"] - ev["start"]
            starts = ([o for o in occurrences(ev["recurrence"], ev["start"].astimezone(ZoneInfo(ev["timezone"])),
                                              n=MAX_COUNT) if o < end] if ev.get("recurrence") else [ev["start"]])
            people = {str(ev.get("organizer_email") or "").lower(), *(a.lower() for a in ev["attendees"])}
            for who in spans.keys() & people:
                spans[who] += [BusyInterval(s, s + length) for s in starts if s < end and s + length > start]
        return [Schedule(e, tuple(sorted(spans[e.lower()], key=lambda b: b.start))) for e in emails]

    def purge_ended_before(self, cutoff: datetime) -> int:
        """Delete the events that ended before ``cutoff`` (aware), rows and ``.ics`` files (retention).

        A series (``recurrence`` set) is kept: its stored end is its first occurrence's. A missing file
        is fine (deleted by hand); the row goes all the same.

        Returns:
            the events deleted.

        Raises:
            ValueError: for a naive ``cutoff``.
        """
        if cutoff.tzinfo is None:
            raise ValueError("the retention cutoff must be an aware datetime")
        t = self.table
        ended = sa.and_(t.c.end < cutoff.astimezone(timezone.utc), t.c.recurrence == "")
        with self.engine.begin() as conn:
            ids = list(conn.execute(sa.select(t.c.id).where(ended)).scalars())
            if ids:
                conn.execute(t.delete().where(t.c.id.in_(ids)))
        for event_id in ids:
            self.ics_path(event_id).unlink(missing_ok=True)
        return len(ids)

    def close(self) -> None:
        """Release connections."""
        self.engine.dispose()


def _add_missing_columns(engine: sa.Engine, table: sa.Table) -> None:
    """Add columns this version has and an older table lacks (``recurrence``), with their defaults."""
    have = {c["name"] for c in sa.inspect(engine).get_columns(table.name)}
    with engine.begin() as conn:
        if "recurrence" not in have:
            conn.execute(sa.text(f"ALTER TABLE {table.name} ADD COLUMN recurrence VARCHAR(300) NOT NULL DEFAULT ''"))


def _row(r: sa.RowMapping) -> dict[str, Any]:
    d = dict(r)
    for k in ("start", "end", "created_at"):
        if d[k] is not None and d[k].tzinfo is None:
            d[k] = d[k].replace(tzinfo=timezone.utc)
    d["attendees"] = json.loads(d["attendees"])
    d["recurrence"] = d.get("recurrence") or ""
    d["requester"] = d["owner"]
    return d


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".ics")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
