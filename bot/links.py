"""Which links may be posted to a chat platform.

A citation or an event link is shown as a link only when it is a web address (``http`` or
``https``). Anything else, above all the ``file://`` path of a folder page indexed without
``url_base`` or of a local calendar's ``.ics`` file, names a path on the server: chat shows the
title alone. The CLI, which runs on the same machine, still prints such paths.
"""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["web_url"]


def web_url(url: str | None) -> str:
    """``url`` when it is an absolute ``http``/``https`` URL with a host, else ``""``.

    >>> web_url("https://wiki.example.com/a"), web_url("file:///srv/wiki/a.md"), web_url("javascript:x")
    ('https://wiki.example.com/a', '', '')
    """
    if not url:
        return ""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return ""
    return url.strip() if parts.scheme.lower() in {"http", "https"} and parts.netloc else ""
