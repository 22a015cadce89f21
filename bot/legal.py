"""The privacy statement and terms of use: ``GET /privacy`` and ``GET /terms`` of ``chatops serve``, and
the links the Teams app package gives (``developer.privacyUrl``, ``developer.termsOfUseUrl``).

For each page (:data:`PAGES`), from the settings:

- ``PRIVACY_URL`` / ``TERMS_URL`` set: the organisation publishes its own page; the package links it,
  and the server's path redirects there (302), so a link made earlier keeps working;
- else ``PRIVACY_TEXT_FILE`` / ``TERMS_TEXT_FILE``: that file's text is served (UTF-8; ``.html`` or
  ``.htm`` files as HTML, any other as plain text), and the package links ``https://TEAMS_BOT_DOMAIN/privacy``;
- else a short default text (:data:`DEFAULT_PRIVACY`, :data:`DEFAULT_TERMS`) filled with the app's name
  and the retention settings, so what it says is what this deployment does.

A file that cannot be read raises :class:`LegalPageError` (``chatops serve`` exits 2 naming it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

__all__ = ["LegalPage", "LegalPageError", "PAGES", "DEFAULT_PRIVACY", "DEFAULT_TERMS", "legal_pages", "legal_routes"]

#: Each page: its path on the server, and the settings of its URL and text file.
PAGES = {"privacy": ("/privacy", "privacy_url", "privacy_text_file"),
         "terms": ("/terms", "terms_url", "terms_text_file")}

DEFAULT_PRIVACY = """{name}: privacy

{name} answers questions from your organisation's wiki and knowledge base. To do that it receives the
messages you send it (direct messages, mentions of it and its commands) and the name and e-mail address
of your chat account, which decide which pages it may quote to you.

What it keeps:
- your questions, its answers and the pages it cited: {conversations} days;
- feedback you give on answers: {feedback} days;
- actions you confirmed (such as meetings it booked) and its audit log: {audit} days.

It uses what it keeps to answer follow-up questions and to show the wiki's owners which questions the wiki
does not answer yet. It does not sell or share it. When the operator has set up a language model service,
the question and the passages used to answer it are sent to that service.

To see or delete what it keeps about you, ask the team that runs {name} (they can run `chatops forget`).
"""

DEFAULT_TERMS = """{name}: terms of use

{name} is an internal assistant of your organisation. Its answers quote the organisation's own wiki and
link the pages they come from; read the page before you rely on an answer, and tell the page's owners
when it is wrong or out of date. It books nothing without your confirmation.

Use it as you would use the wiki itself: your organisation's policies on acceptable use and confidential
information apply to what you ask and to what it answers. Questions go to the team that runs it.
"""


class LegalPageError(ValueError):
    """A page's text file cannot be read (the message names the setting and the file)."""


@dataclass(frozen=True, slots=True)
class LegalPage:
    """One page as the server gives it: a redirect to ``url``, or ``text`` with its ``content_type``."""

    path: str
    url: str | None = None
    text: str = ""
    content_type: str = "text/plain"


def _text_file(setting: str, path: Path) -> tuple[str, str]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise LegalPageError(f"{setting.upper()} names {path}, which cannot be read ({why}); point it at a UTF-8 "
                             "text or .html file, or unset it to serve the default text") from None
    if not text.strip():
        raise LegalPageError(f"{setting.upper()} names {path}, which is empty; write the page's text in it, or unset "
                             "it to serve the default text")
    return text, "text/html" if path.suffix.lower() in {".html", ".htm"} else "text/plain"


def legal_pages(settings: Any) -> list[LegalPage]:
    """The pages :data:`PAGES` from ``settings`` (:class:`app.settings.Settings`), see the module docstring.

    Raises:
        LegalPageError: a text file cannot be read or is empty.
    """
    values = {"name": settings.teams_app_name, "conversations": settings.retention_days_conversations,
              "feedback": settings.retention_days_feedback, "audit": settings.retention_days_audit}
    defaults = {"privacy": DEFAULT_PRIVACY, "terms": DEFAULT_TERMS}
    pages = []
    for key, (path, url_setting, file_setting) in PAGES.items():
        url, file = getattr(settings, url_setting), getattr(settings, file_setting)
        if url:
            pages.append(LegalPage(path, url=url))
        elif file is not None:
            text, kind = _text_file(file_setting, Path(file))
            pages.append(LegalPage(path, text=text, content_type=kind))
        else:
            pages.append(LegalPage(path, text=defaults[key].format(**values)))
    return pages


def legal_routes(pages: list[LegalPage]) -> list[web.RouteDef]:
    """``GET`` routes serving ``pages``."""

    def handler(page: LegalPage):
        async def respond(_request: web.Request) -> web.StreamResponse:
            if page.url:
                raise web.HTTPFound(page.url)
            return web.Response(text=page.text, content_type=page.content_type, charset="utf-8")
        return respond

    return [web.get(p.path, handler(p)) for p in pages]
