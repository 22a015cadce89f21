"""Which links may be posted to a chat platform, and links that do not lie about where they go.

A citation or an event link is shown as a link only when it is a web address (``http`` or
``https``). Anything else, above all the ``file://`` path of a folder page indexed without
``url_base`` or of a local calendar's ``.ics`` file, names a path on the server: chat shows the
title alone. The CLI, which runs on the same machine, still prints such paths.

A Markdown link in an answer comes from a page, and a page can write ``[https://intranet](https://evil)``:
a label that reads as one address over a link to another. :func:`honest_links` shows such a link's real
target as its label; a link labelled with words, or with its own address, is left as written.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

__all__ = ["web_url", "honest_links"]

_MD_LINK = re.compile(r"(!?)\[([^\]\n]+)\]\(([^)\s]+)((?:\s+\"[^\"\n]*\")?)\)")
# a label that reads as an address: a scheme, "www.", "mailto:", or a host name ending in a TLD
_ADDRESS = re.compile(r"(?:[a-z][a-z0-9+.-]*:/*|www\.)\S+|[\w-]+(?:\.[\w-]+)*\.[a-z]{2,}(?:[/:?#]\S*)?", re.I)


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


def _same_address(label: str, target: str) -> bool:
    """Whether ``label`` names ``target`` (scheme, ``www.``, letter case of the host, a trailing ``/`` aside)."""
    def norm(u: str) -> str:
        u = re.sub(r"^[a-z][a-z0-9+.-]*:/*", "", u.strip().strip("<>"), flags=re.I)
        u = re.sub(r"^www\.", "", u, flags=re.I).rstrip("/")
        host, _, rest = u.partition("/")
        return host.lower() + ("/" + rest if rest else "")
    return norm(label) == norm(target)


def honest_links(markdown: str) -> str:
    """``markdown`` with every link whose label reads as an address other than its target relabelled with
    the target (``[https://intranet](https://evil)`` becomes ``[https://evil](https://evil)``).

    >>> honest_links("See [https://intranet.example.com](https://evil.example.net/x) or [the wiki](https://w.example.com).")
    'See [https://evil.example.net/x](https://evil.example.net/x) or [the wiki](https://w.example.com).'
    """
    def fix(m: re.Match[str]) -> str:
        bang, label, target, title = m.groups()
        if bang or not _ADDRESS.fullmatch(label.strip()) or _same_address(label, target):
            return m.group(0)
        shown = target.replace("[", "%5B").replace("]", "%5D")
        return f"[{shown}]({target}{title})"

    return _MD_LINK.sub(fix, markdown) if "](" in markdown else markdown
