"""``/kb report``'s message: the knowledge-gap report's summary as Block Kit (a pure renderer).

Questions and comments are users' words and titles are the wiki's: each is escaped for mrkdwn (``&``, ``<``,
``>``), so nothing in them becomes a link, a mention or a broadcast. Every section stays within Slack's
3,000 characters.
"""

from __future__ import annotations

from typing import Any

from app.report import GapReport
from app.report_render import period_text, rate_text

from .mrkdwn import escape, truncate

__all__ = ["report_message", "ROWS"]

#: Rows per list in the chat summary (the full report is ``chatops report --html FILE``).
ROWS = 5
_SECTION = 3000


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": truncate(text, _SECTION)}}


def _words(text: str, limit: int = 200) -> str:
    return escape(truncate(" ".join(text.split()), limit))


def report_message(report: GapReport, rows: int = ROWS) -> dict[str, Any]:
    """The summary: totals; the largest refused groups; answers marked not helpful with their cited pages and
    a comment; one line per source (pages, cited, never cited, stale); where the full report is."""
    head = (f":bar_chart: *Knowledge-gap report*, {period_text(report)}\n"
            f"{report.questions} questions: {report.answered} answered, {report.refused} refused (answer rate "
            f"{rate_text(report)}); feedback: {report.helpful} helpful, {report.not_helpful} not helpful")
    refused = [f"*Refused, by similar wording* ({len(report.refused_groups)} groups)"]
    for g in report.refused_groups[:rows]:
        also = f" _(also: {'; '.join(_words(e, 120) for e in g.examples[1:])})_" if len(g.examples) > 1 else ""
        refused.append(f"• {g.count} × {_words(g.examples[0])}{also}")
    if not report.refused_groups:
        refused.append("• none")
    unhelpful = [f"*Marked not helpful* ({len(report.unhelpful)})"]
    for u in report.unhelpful[:rows]:
        titles = ", ".join(dict.fromkeys(_words(c.title, 80) for c in u.citations)) or "no citations"
        comment = f"; “{_words(u.comments[0], 200)}”" if u.comments else ""
        unhelpful.append(f"• {_words(u.question)} (cited: {titles}{comment})")
    if not report.unhelpful:
        unhelpful.append("• none")
    sources = ["*Sources*"] + [f"• *{_words(s.source, 80)}*: {s.pages} pages, {len(s.cited)} cited, "
                               f"{len(s.never_cited)} never cited, {len(s.stale)} stale" for s in report.sources]
    if not report.sources:
        sources.append("• nothing indexed")
    blocks = [_section(head), _section("\n".join(refused)), _section("\n".join(unhelpful)),
              _section("\n".join(sources)),
              {"type": "context", "elements": [{"type": "mrkdwn", "text": "The full report, every row: "
                                                "`chatops report --html report.html` on the bot's server."}]}]
    return {"text": f"Knowledge-gap report: {report.questions} questions, {report.refused} refused", "blocks": blocks}
