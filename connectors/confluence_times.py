"""Confluence's times: its ISO-8601 stamps, CQL's minute-precision literals in the site's zone, and the
server's own clock (a response's ``Date``), which a sync's next watermark is taken from."""

from __future__ import annotations

import email.utils
import re
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import httpx

__all__ = ["parse_confluence_time", "cql_time", "server_time", "UNKNOWN_TZ_WIDENING"]

#: Extra width of the CQL window when the site's time zone is unknown (the largest offset west of UTC).
UNKNOWN_TZ_WIDENING = timedelta(hours=12)


def parse_confluence_time(value: str | None) -> datetime | None:
    """Parse Confluence's ISO-8601 times (``2024-03-01T10:00:00.000Z``, ``...+01:00``) to aware UTC.

    Returns ``None`` for an empty or unparseable value.
    """
    if not value:
        return None
    v = value.strip().replace("Z", "+00:00")
    v = re.sub(r"([+-]\d{2})(\d{2})$", r"\1:\2", v)  # +0100 -> +01:00
    try:
        dt = datetime.fromisoformat(v)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc)


def cql_time(moment: datetime, tz: str | None) -> str:
    """A CQL date literal (``"yyyy/MM/dd HH:mm"``, floored to the minute) at or before ``moment``.

    Args:
        moment: an aware time.
        tz: the site's IANA time zone; ``None`` writes UTC after going back :data:`UNKNOWN_TZ_WIDENING`,
            which is early enough whatever the site's zone.
    """
    if tz:
        local = moment.astimezone(ZoneInfo(tz))
    else:
        local = (moment - UNKNOWN_TZ_WIDENING).astimezone(timezone.utc)
    return local.strftime("%Y/%m/%d %H:%M")

def server_time(resp: httpx.Response) -> datetime:
    """The time of the server's ``Date`` header (aware UTC); this machine's clock when it has none."""
    date = resp.headers.get("Date")
    if date:
        try:
            dt = email.utils.parsedate_to_datetime(date)
            return (dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)
        except (TypeError, ValueError, IndexError):
            pass
    return datetime.now(timezone.utc)
