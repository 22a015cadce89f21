"""The knowledge-gap report as plain text (``chatops report``) and as one self-contained HTML page
(``chatops report --html FILE``): pure functions of a :class:`app.report.GapReport`.

The HTML page is rendered by Jinja2 with autoescaping on (questions and comments are users' words, page
titles are the wiki's: none of them is ever markup), carries its own CSS, loads nothing, and runs no script.
Each table has an ``id`` (``totals``, ``refused``, ``unhelpful``, ``cited-SOURCE``, ``never-SOURCE``,
``stale-SOURCE``) and one ``<tr>`` per row in its ``<tbody>``.
"""

from __future__ import annotations

import re
from datetime import datetime

from jinja2 import Environment, select_autoescape

from .layout import section_path
from .report import GapReport, PageUse

__all__ = ["render_text", "render_html", "summary_markdown", "period_text", "rate_text"]

#: Rows shown per list in the text report (the HTML and JSON reports show every row).
TEXT_ROWS = 10


def _when(dt: datetime | None) -> str:
    return dt.strftime("%Y-%m-%d %H:%M") if dt else "-"


def period_text(report: GapReport) -> str:
    """``2026-11-19 06:40 to 2026-11-26 06:40 UTC``."""
    return f"{_when(report.since)} to {_when(report.until)} UTC"


def rate_text(report: GapReport) -> str:
    """The answer rate as a percentage, or ``n/a`` without questions."""
    rate = report.answer_rate
    return "n/a" if rate is None else f"{rate:.0%}"


def _more(shown: int, total: int, indent: str = "    ") -> list[str]:
    return [f"{indent}... and {total - shown} more (see --html or --json)"] if total > shown else []


def render_text(report: GapReport, rows: int = TEXT_ROWS) -> str:
    """The report for a terminal: totals, refused groups, unhelpful answers, then per source the most
    cited, never cited and stale pages (``rows`` per list; the rest is counted)."""
    out = [f"Knowledge-gap report, {period_text(report)}",
           f"Questions: {report.questions} ({report.answered} answered, {report.refused} refused; answer rate "
           f"{rate_text(report)}); feedback: {report.helpful} helpful, {report.not_helpful} not helpful", ""]
    out.append(f"== Refused questions, grouped by similar wording ({len(report.refused_groups)} groups)")
    if not report.refused_groups:
        out.append("  none")
    for g in report.refused_groups[:rows]:
        out.append(f"  {g.count:>3} x {g.examples[0]}")
        out.extend(f"        also: {e}" for e in g.examples[1:])
        if g.reasons:
            out.append(f"        why refused: {'; '.join(g.reasons[:2])}")
    out.extend(_more(min(rows, len(report.refused_groups)), len(report.refused_groups), "  "))
    if report.ungrouped:
        out.append(f"  ({report.ungrouped} older refused questions were not grouped: narrow --since)")
    out += ["", f"== Answers marked not helpful ({len(report.unhelpful)})"]
    if not report.unhelpful:
        out.append("  none")
    for u in report.unhelpful[:rows]:
        out.append(f"  - {u.question}  ({u.platform}, {_when(u.created_at)}, {u.votes} vote"
                   f"{'s' if u.votes != 1 else ''}; {u.outcome})")
        for c in u.citations:
            out.append(f"      [{c.n}] {section_path(c.title, c.section)} ({c.source}) {c.url}".rstrip())
        out.extend(f"      comment: {comment}" for comment in u.comments)
    out.extend(_more(min(rows, len(report.unhelpful)), len(report.unhelpful), "  "))
    for s in report.sources:
        out += ["", f"== Source {s.source}: {s.pages} pages, {len(s.cited)} cited ({s.citations} citations in "
                f"{s.answers} answers), {len(s.never_cited)} never cited, {len(s.stale)} stale"]
        if s.cited:
            out.append("  most cited:")
            out.extend(f"    {u.citations:>3}  {u.page.title}  {u.page.url}".rstrip() for u in s.cited[:rows])
            out.extend(_more(min(rows, len(s.cited)), len(s.cited)))
        if s.stale:
            out.append(f"  stale (cited, not updated for {report.stale_after_days} days or more):")
            out.extend(f"    {u.page.title}: last updated {u.age_days} days ago  {u.page.url}".rstrip()
                       for u in s.stale[:rows])
            out.extend(_more(min(rows, len(s.stale)), len(s.stale)))
        if s.never_cited:
            out.append("  never cited:")
            out.extend(f"    {p.title}  {p.url}".rstrip() for p in s.never_cited[:rows])
            out.extend(_more(min(rows, len(s.never_cited)), len(s.never_cited)))
    return "\n".join(out)


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+|~!-])")


def _md(text: str) -> str:
    """Users' words and page titles as literal Markdown text (every markup character backslash-escaped)."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(text.split()))


def summary_markdown(report: GapReport, rows: int = 5) -> str:
    """A short Markdown summary for chat (the admins' ``report`` command): totals, the largest refused
    groups, the answers marked not helpful, and one line per source; users' words are escaped."""
    out = [f"**Knowledge-gap report**, {period_text(report)}",
           f"{report.questions} questions: {report.answered} answered, {report.refused} refused (answer rate "
           f"{rate_text(report)}); feedback: {report.helpful} helpful, {report.not_helpful} not helpful", "",
           f"**Refused, by similar wording** ({len(report.refused_groups)} groups)"]
    if not report.refused_groups:
        out.append("- none")
    for g in report.refused_groups[:rows]:
        also = f" (also: {'; '.join(_md(e) for e in g.examples[1:])})" if len(g.examples) > 1 else ""
        out.append(f"- {g.count} × {_md(g.examples[0])}{also}")
    out += ["", f"**Marked not helpful** ({len(report.unhelpful)})"]
    if not report.unhelpful:
        out.append("- none")
    for u in report.unhelpful[:rows]:
        titles = ", ".join(dict.fromkeys(_md(c.title) for c in u.citations)) or "no citations"
        comment = f"; comment: {_md(u.comments[0])}" if u.comments else ""
        out.append(f"- {_md(u.question)} (cited: {titles}{comment})")
    out += ["", "**Sources**"]
    out.extend(f"- {_md(s.source)}: {s.pages} pages, {len(s.cited)} cited, {len(s.never_cited)} never cited, "
               f"{len(s.stale)} stale" for s in report.sources)
    if not report.sources:
        out.append("- nothing indexed")
    out += ["", "The full report: `chatops report --html report.html` on the bot's server."]
    return "\n".join(out)


_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>Knowledge-gap report, {{ period }}</title>
<style>
body { font: 15px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 70rem; padding: 0 1rem; color: #222; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; margin-top: 2rem; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; width: 100%; margin: .5rem 0 1rem; }
th, td { text-align: left; vertical-align: top; padding: .3rem .5rem; border-bottom: 1px solid #eee; }
th { background: #f4f4f4; } td.n { text-align: right; width: 4rem; }
.muted { color: #666; } ul { margin: 0; padding-left: 1.2rem; }
</style>
</head>
<body>
{% macro link(page) %}{% if href(page.url) %}<a href="{{ href(page.url) }}">{{ page.title }}</a>{% else %}{{ page.title }}{% endif %}{% endmacro %}
<h1>Knowledge-gap report</h1>
<p class="muted">{{ period }}; stale means cited and not updated for {{ r.stale_after_days }} days or more.</p>
<table id="totals"><thead><tr><th>Questions</th><th>Answered</th><th>Refused</th><th>Answer rate</th>
<th>Helpful</th><th>Not helpful</th></tr></thead>
<tbody><tr><td>{{ r.questions }}</td><td>{{ r.answered }}</td><td>{{ r.refused }}</td><td>{{ rate }}</td>
<td>{{ r.helpful }}</td><td>{{ r.not_helpful }}</td></tr></tbody></table>

<h2>Refused questions, grouped by similar wording</h2>
<table id="refused"><thead><tr><th>Count</th><th>Wordings</th><th>Why refused</th><th>Last asked</th></tr></thead>
<tbody>
{% for g in r.refused_groups %}<tr><td class="n">{{ g.count }}</td><td><ul>{% for e in g.examples %}<li>{{ e }}</li>{% endfor %}</ul></td>
<td>{{ g.reasons | join("; ") }}</td><td>{{ when(g.last_asked) }}</td></tr>
{% endfor %}</tbody></table>

<h2>Answers marked not helpful</h2>
<table id="unhelpful"><thead><tr><th>Question</th><th>Cited pages</th><th>Comments</th><th>Votes</th><th>Asked</th></tr></thead>
<tbody>
{% for u in r.unhelpful %}<tr><td>{{ u.question }}{% if u.outcome != "answered" %} <span class="muted">({{ u.outcome }})</span>{% endif %}</td>
<td><ul>{% for c in u.citations %}<li>[{{ c.n }}] {{ link(c) }}{% if c.section %} &rsaquo; {{ c.section }}{% endif %} <span class="muted">({{ c.source }})</span></li>{% endfor %}</ul></td>
<td>{% for m in u.comments %}<p>{{ m }}</p>{% endfor %}</td><td class="n">{{ u.votes }}</td><td>{{ when(u.created_at) }} <span class="muted">{{ u.platform }}</span></td></tr>
{% endfor %}</tbody></table>

{% for s in r.sources %}
<h2>Source {{ s.source }}</h2>
<p>{{ s.pages }} pages, {{ s.cited | length }} cited ({{ s.citations }} citations in {{ s.answers }} answers),
{{ s.never_cited | length }} never cited, {{ s.stale | length }} stale.</p>
<h3>Most cited</h3>
<table id="cited-{{ s.source }}"><thead><tr><th>Citations</th><th>Answers</th><th>Page</th><th>Last updated</th></tr></thead>
<tbody>
{% for u in s.cited %}<tr><td class="n">{{ u.citations }}</td><td class="n">{{ u.answers }}</td><td>{{ link(u.page) }}</td><td>{{ age(u) }}</td></tr>
{% endfor %}</tbody></table>
<h3>Stale citations</h3>
<table id="stale-{{ s.source }}"><thead><tr><th>Page</th><th>Last updated</th><th>Citations</th></tr></thead>
<tbody>
{% for u in s.stale %}<tr><td>{{ link(u.page) }}</td><td>{{ age(u) }}</td><td class="n">{{ u.citations }}</td></tr>
{% endfor %}</tbody></table>
<h3>Never cited</h3>
<table id="never-{{ s.source }}"><thead><tr><th>Page</th><th>Last updated</th></tr></thead>
<tbody>
{% for p in s.never_cited %}<tr><td>{{ link(p) }}</td><td>{{ when(p.updated_at) }}</td></tr>
{% endfor %}</tbody></table>
{% endfor %}
</body>
</html>
"""

_ENV = Environment(autoescape=select_autoescape(default=True, default_for_string=True), trim_blocks=False)


def _safe_href(url: str) -> str:
    """Only http(s) and file links are kept as links (a page link is the wiki's, but never a ``javascript:``)."""
    return url if url.lower().startswith(("http://", "https://", "file://")) else ""


def render_html(report: GapReport) -> str:
    """The report as one self-contained HTML page (see the module docstring)."""

    def age(use: PageUse) -> str:
        return "unknown" if use.age_days is None else f"{use.age_days} days ago"

    template = _ENV.from_string(_TEMPLATE)
    return template.render(r=report, period=period_text(report), rate=rate_text(report), when=_when, href=_safe_href,
                           age=age)
