"""Block Kit renderers: pure functions from replies and job reports to Slack messages.

Every function returns message dicts ``{"text": str, "blocks": list}`` ready for ``chat.postMessage``,
``chat.postEphemeral`` or a ``response_url``; none calls Slack. Slack's limits are respected: section
text at most 3,000 characters, a ``markdown`` block (and all of a message's ``markdown`` blocks together)
at most 12,000, 50 blocks a message, 10 elements a context block, 75-character button labels,
2,000-character button values; a longer answer becomes several messages (the sources and the buttons go
with the last one).

Answer text goes out as standard Markdown in a ``markdown`` block (Slack renders it; the ``text`` field is
the plain-text fallback for notifications and clients without the block), lists and tables first put in the
shape Slack shows (:func:`bot.markdown_blocks.chat_markdown`): a list as a Markdown list set off from its
lead-in line (the block renders it as one), a table, which neither the block nor mrkdwn renders, as a code
block aligned by column, or as "Header: value" lines when it is too wide for that or holds links. Streamed
answers (:func:`stream_parts`) carry the same text. Feedback is Slack's native
``feedback_buttons`` element in a ``context_actions`` block (thumbs up / down under the answer); "not
helpful" opens :func:`feedback_modal` for the reason.

Button ``action_id``\\ s are ``PREFIX:NAME``; :mod:`bot.slack.actions` routes clicks by prefix.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from agent.models import Citation, PendingAction, Reply
from app.config import ChannelConfig

from ..links import web_url
from ..markdown_blocks import chat_markdown
from .commands import HELP_LINES
from .mrkdwn import escape, markdown_safe, split_text, truncate

__all__ = [
    "answer_messages", "stream_parts", "sources_context", "feedback_actions", "feedback_row", "feedback_modal", "parse_feedback_value",
    "parse_feedback_modal", "FEEDBACK", "FEEDBACK_MODAL", "FEEDBACK_REASONS", "MAX_MARKDOWN", "pending_action_blocks", "share_value",
    "parse_share_value", "error_message", "notice", "help_message", "sources_message", "status_message",
    "reindex_started", "reindex_summary", "date_token", "feedback_thanks", "greeting", "suggested_prompts", "thread_title",
    "FEEDBACK_HELPFUL", "FEEDBACK_NOT_HELPFUL", "SHARE", "PENDING_CONFIRM", "PENDING_CANCEL",
    "MAX_SECTION", "MAX_BLOCKS", "MAX_TEXT",
]

MAX_SECTION = 3000
MAX_BLOCKS = 50
MAX_CONTEXT_ELEMENTS = 10
MAX_TEXT = 3000  # the notification / fallback text (Slack allows more, but truncates display)
MAX_BUTTON_VALUE = 2000
MAX_MARKDOWN = 12000  # a markdown block, and all markdown blocks of one message together
MAX_COMMENT = 500  # the free text of the "not helpful" modal

#: The native feedback element's ``action_id`` (value: ``helpful:<trace id>`` / ``not_helpful:<trace id>``).
FEEDBACK = "feedback:buttons"
#: The "not helpful" modal's ``callback_id`` (its ``private_metadata``: the trace id).
FEEDBACK_MODAL = "feedback_reason"
#: The reasons offered in the modal: ``(value, label)``.
FEEDBACK_REASONS = (("wrong", "It's wrong"), ("outdated", "It's outdated"), ("incomplete", "It's incomplete"),
                    ("other", "Something else"))

#: The custom buttons of earlier versions: still understood when clicked on old messages, no longer rendered.
FEEDBACK_HELPFUL = "feedback:helpful"
FEEDBACK_NOT_HELPFUL = "feedback:not_helpful"
SHARE = "share:channel"
#: Prefixes of a pending action's buttons (``action_confirm:<key>``; the key is also the value), the scheme of
#: :mod:`app.actions`.
PENDING_CONFIRM = "action_confirm:"
PENDING_CANCEL = "action_cancel:"

def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _context(texts: Iterable[str]) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": t} for t in texts]}


def _button(label: str, action_id: str, value: str, style: str | None = None) -> dict[str, Any]:
    b: dict[str, Any] = {"type": "button", "text": {"type": "plain_text", "text": truncate(label, 75), "emoji": True},
                         "action_id": action_id, "value": value[:MAX_BUTTON_VALUE]}
    if style:
        b["style"] = style
    return b


def _link(url: str, label: str) -> str:
    label = escape(label).replace("|", "∣")
    url = web_url(url)
    if not url:  # no link, or a server path (file://): the title alone
        return label
    safe = url.replace("|", "%7C").replace(">", "%3E").replace("<", "%3C").replace(" ", "%20")
    return f"<{safe}|{label}>"


def _sources(citations: Sequence[Citation]) -> list[Citation]:
    """One citation per marker number, in number order."""
    seen: dict[int, Citation] = {}
    for c in citations:
        seen.setdefault(c.n, c)
    return [seen[n] for n in sorted(seen)]


def sources_context(citations: Sequence[Citation]) -> list[dict[str, Any]]:
    """Context blocks listing the numbered sources: ``[n] <link|title> › section`` (10 a block)."""
    lines = []
    for c in _sources(citations):
        title = truncate(c.title or c.doc_id or "source", 150)
        line = f"*[{c.n}]* {_link(c.url, title)}"
        if c.section and c.section.strip() and c.section.strip() != (c.title or "").strip():
            line += f" › {escape(truncate(c.section.strip(), 150))}"
        lines.append(line)
    return [_context(lines[i:i + MAX_CONTEXT_ELEMENTS]) for i in range(0, len(lines), MAX_CONTEXT_ELEMENTS)]


def share_value(trace_id: str, question: str) -> str:
    """The "Share in channel" button value: the turn's trace id and the question, at most 2,000 characters."""
    q = question
    while True:
        value = json.dumps({"t": trace_id, "q": q}, ensure_ascii=False)
        if len(value) <= MAX_BUTTON_VALUE:
            return value
        q = q[: max(0, len(q) - (len(value) - MAX_BUTTON_VALUE) - 8)]


def parse_share_value(value: str) -> tuple[str, str]:
    """``(trace_id, question)`` from :func:`share_value`; ``("", "")`` for anything else."""
    try:
        data = json.loads(value)
        return str(data.get("t", "")), str(data.get("q", ""))
    except (ValueError, AttributeError, TypeError):
        return "", ""


def feedback_row(trace_id: str) -> dict[str, Any]:
    """The native feedback row: a ``context_actions`` block with one ``feedback_buttons`` element whose
    values are ``helpful:<trace id>`` and ``not_helpful:<trace id>`` (see :func:`parse_feedback_value`)."""
    def button(label: str, value: str, spoken: str) -> dict[str, Any]:
        return {"text": {"type": "plain_text", "text": label}, "accessibility_label": spoken,
                "value": f"{value}:{trace_id}"[:MAX_BUTTON_VALUE]}

    return {"type": "context_actions", "block_id": f"feedback:{trace_id}"[:255],
            "elements": [{"type": "feedback_buttons", "action_id": FEEDBACK,
                          "positive_button": button("Good response", "helpful", "Mark this answer as helpful"),
                          "negative_button": button("Bad response", "not_helpful",
                                                    "Mark this answer as not helpful")}]}


def parse_feedback_value(action_id: str, value: str) -> tuple[str, str]:
    """``(vote, trace_id)`` of a feedback click: the native element (``value`` ``helpful:<trace>``) or the
    custom buttons of earlier versions (``action_id`` ``feedback:helpful``, ``value`` the trace id).

    Raises:
        ValueError: for anything else (an unknown vote, no trace id, a trace id over 64 characters).
    """
    if action_id == FEEDBACK:
        vote, _, trace_id = value.partition(":")
    else:
        vote, trace_id = action_id.split(":", 1)[1], value
    trace_id = trace_id.strip()
    if vote not in {"helpful", "not_helpful"} or not trace_id or len(trace_id) > 64:
        raise ValueError(f"malformed feedback click {action_id!r} / {value[:80]!r}")
    return vote, trace_id


def feedback_actions(trace_id: str, share: str | None = None) -> list[dict[str, Any]]:
    """The blocks under an answer: :func:`feedback_row`, and a "Share in channel" button when given."""
    blocks = [feedback_row(trace_id)]
    if share is not None:
        blocks.append({"type": "actions", "block_id": f"share:{trace_id}"[:255],
                       "elements": [_button("Share in channel", SHARE, share, style="primary")]})
    return blocks


def feedback_modal(trace_id: str) -> dict[str, Any]:
    """The "not helpful" modal (``views.open``): a required reason (:data:`FEEDBACK_REASONS`) and optional
    free text; ``private_metadata`` carries the trace id back in the ``view_submission``."""
    options = [{"text": {"type": "plain_text", "text": label}, "value": value} for value, label in FEEDBACK_REASONS]
    return {
        "type": "modal", "callback_id": FEEDBACK_MODAL, "private_metadata": trace_id[:3000],
        "title": {"type": "plain_text", "text": "What went wrong?"},
        "submit": {"type": "plain_text", "text": "Send"},
        "close": {"type": "plain_text", "text": "Skip"},
        "blocks": [
            {"type": "input", "block_id": "reason", "label": {"type": "plain_text", "text": "The answer…"},
             "element": {"type": "radio_buttons", "action_id": "value", "options": options}},
            {"type": "input", "block_id": "detail", "optional": True,
             "label": {"type": "plain_text", "text": "Tell us more (optional)"},
             "element": {"type": "plain_text_input", "action_id": "value", "multiline": True,
                         "max_length": MAX_COMMENT}},
        ],
    }


def parse_feedback_modal(view: dict[str, Any]) -> tuple[str, str]:
    """``(trace_id, comment)`` of a submitted :func:`feedback_modal`: ``comment`` is ``reason`` or
    ``reason: text`` (the text stripped, at most 500 characters).

    Raises:
        ValueError: when the trace id or the reason is missing or not one of :data:`FEEDBACK_REASONS`.
    """
    trace_id = str(view.get("private_metadata") or "").strip()
    values = (view.get("state") or {}).get("values") or {}
    reason = (((values.get("reason") or {}).get("value") or {}).get("selected_option") or {}).get("value")
    text = str(((values.get("detail") or {}).get("value") or {}).get("value") or "").strip()[:MAX_COMMENT]
    if not trace_id or len(trace_id) > 64 or reason not in {v for v, _ in FEEDBACK_REASONS}:
        raise ValueError(f"malformed feedback submission (trace {trace_id[:80]!r}, reason {reason!r})")
    return trace_id, f"{reason}: {text}" if text else str(reason)


def pending_action_blocks(action: PendingAction) -> list[dict[str, Any]]:
    """The preview of a pending side-effect action when no action service renders its own (see
    :meth:`bot.slack.bot.SlackBot.use_pending_actions`): :func:`bot.slack.action_blocks.slack_preview_blocks`
    of its summary, with the same Confirm / Cancel buttons (``action_confirm:<key>`` /
    ``action_cancel:<key>``, value: the idempotency key)."""
    from .action_blocks import slack_preview_blocks  # the action service's renderer, loaded only when needed

    return slack_preview_blocks(action, None)


def _fallback(text: str) -> str:
    return truncate(text.strip() or "(no text)", MAX_TEXT)


def answer_messages(reply: Reply, *, share: str | None = None, intro: str | None = None,
                    feedback: bool = True, pending_blocks: list[dict[str, Any]] | None = None
                    ) -> list[dict[str, Any]]:
    """The agent's reply as one or more messages.

    Args:
        reply: the agent's reply (answer or refusal).
        share: the value of a "Share in channel" button (ephemeral ``/kb`` answers), or None.
        intro: mrkdwn shown first in a context block (e.g. who asked what, when shared).
        feedback: whether to add the native feedback row (:func:`feedback_row`).
        pending_blocks: the preview of ``reply.pending_action`` as the action service rendered it (its
            own Confirm / Cancel); it then stands for the whole answer (``reply.text`` is only the
            notification text), without sources, feedback or share buttons. Without it a pending action
            gets :func:`pending_action_blocks` under the text.

    Returns:
        Messages in posting order; the last one carries the sources and the buttons.
    """
    if pending_blocks:
        head = [_context([truncate(intro, MAX_SECTION)])] if intro else []
        return [{"text": _fallback(reply.text), "blocks": (head + list(pending_blocks))[:MAX_BLOCKS]}]
    body = _answer_body(reply)
    head = [_context([truncate(intro, MAX_SECTION)])] if intro else []
    tail = _answer_tail(reply, share, feedback)
    # One markdown block a message (Slack caps all of a message's markdown blocks at 12,000 characters
    # together); the sources and the buttons go with the last part.
    parts = split_text(body, MAX_MARKDOWN)
    messages: list[dict[str, Any]] = []
    for i, part in enumerate(parts):
        blocks = (head if i == 0 else []) + [{"type": "markdown", "text": part}]
        last = i == len(parts) - 1
        if last:
            blocks.extend(tail[: MAX_BLOCKS - len(blocks)])
        text = reply.text if i == 0 else ("Sources for the answer above" if last else part)
        messages.append({"text": _fallback(text), "blocks": blocks})
    return messages


def _answer_body(reply: Reply) -> str:
    body = markdown_safe(chat_markdown(reply.text)) or "_(empty answer)_"
    return f":mag: {body}" if reply.refused else body


def _answer_tail(reply: Reply, share: str | None, feedback: bool) -> list[dict[str, Any]]:
    tail: list[dict[str, Any]] = []
    if not reply.refused and reply.citations:
        tail.extend(sources_context(reply.citations))
    if reply.pending_action is not None:
        tail.extend(pending_action_blocks(reply.pending_action))
    if feedback:
        tail.extend(feedback_actions(reply.trace.trace_id, share))
    elif share is not None:
        tail.append({"type": "actions", "elements": [_button("Share in channel", SHARE, share, "primary")]})
    return tail


def stream_parts(reply: Reply) -> tuple[str, list[dict[str, Any]]] | None:
    """What a streamed answer is made of: the Markdown streamed (``chat.startStream`` /
    ``chat.appendStream``) and the blocks attached when the stream stops (``chat.stopStream``: the
    sources, then the feedback row). None when the reply is not streamed: it carries a pending action
    (its preview is posted whole) or its text is over 12,000 characters (posted as several messages)."""
    if reply.pending_action is not None:
        return None
    body = _answer_body(reply)
    if len(body) > MAX_MARKDOWN:
        return None
    return body, _answer_tail(reply, None, True)[:MAX_BLOCKS]


def notice(text: str, emoji: str = "") -> dict[str, Any]:
    """A one-section message (``text`` is mrkdwn)."""
    full = f"{emoji} {text}".strip()
    return {"text": _fallback(full), "blocks": [_section(truncate(full, MAX_SECTION))]}


def error_message(text: str, reference: str = "") -> dict[str, Any]:
    """A failure the user must hear about: what went wrong and, when known, a reference for the admins."""
    ref = f" (reference `{escape(reference)}`)" if reference else ""
    return notice(f"{text}{ref}", ":warning:")


def feedback_thanks(value: str) -> dict[str, Any]:
    """The ephemeral acknowledgement of a feedback click."""
    if value == "helpful":
        return notice("Thanks! Glad it helped; your feedback is recorded.", ":white_check_mark:")
    return notice("Thanks for telling me; your feedback is recorded and helps improve the answers.", ":memo:")


def greeting(text: str) -> dict[str, Any]:
    """The first message in a new assistant thread: ``text`` (Markdown, :class:`app.welcome.Welcome`) in a
    markdown block, plain text as the fallback."""
    body = truncate(markdown_safe(text) or "Hi!", MAX_MARKDOWN)
    return {"text": _fallback(text), "blocks": [{"type": "markdown", "text": body}]}


def suggested_prompts(prompts: Sequence[Any]) -> list[dict[str, str]]:
    """``assistant.threads.setSuggestedPrompts``' ``prompts`` from :class:`app.welcome.Prompt`\\ s (at most 4)."""
    return [{"title": truncate(p.title, 75), "message": p.message} for p in prompts[:4]]


def thread_title(question: str) -> str:
    """An assistant thread's title (``assistant.threads.setTitle``): the first question, on one line, cut
    to 60 characters."""
    return truncate(" ".join(question.split()), 60) or "Question"


def help_message() -> dict[str, Any]:
    """``/kb help``."""
    text = "\n".join(HELP_LINES)
    return {"text": "How to use /kb", "blocks": [_section(text)]}


def sources_message(names: Sequence[str], status: Sequence[dict[str, Any]] = (),
                    scope: ChannelConfig | None = None) -> dict[str, Any]:
    """``/kb sources``: the configured sources with their page counts, and the scope of the channel where
    it was asked (``scope``, its entry under ``channels:`` of the sources file; None: not listed)."""
    if not names:
        return notice("No sources are configured. An admin sets `CHATOPS_SOURCES` (for example "
                      "`folder:./wiki?name=handbook`) and runs `/kb reindex`.", ":open_file_folder:")
    pages = {row.get("source"): row.get("pages", 0) for row in status}
    lines = [f"• *{escape(n)}*: {pages.get(n, 0)} pages" for n in names]
    blocks = [_section("*Knowledge base sources*\n" + "\n".join(lines))]
    if scope is not None:
        notes = []
        if scope.sources is not None:
            notes.append("In this channel I answer from: " + ", ".join(f"*{escape(n)}*" for n in scope.sources))
        if scope.reply_in_threads == "mention_only":
            notes.append("In this channel's threads I answer only when I am mentioned.")
        if notes:
            blocks.append(_context(notes))
    return {"text": "Knowledge base sources", "blocks": blocks}


def date_token(value: Any) -> str:
    """An ISO timestamp as a Slack date token (shown in the reader's time zone), else ``never``."""
    if not value:
        return "never"
    try:
        dt = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    except ValueError:
        return escape(str(value))
    fallback = dt.strftime("%Y-%m-%d %H:%M UTC")
    return f"<!date^{int(dt.timestamp())}^{{date_short_pretty}} at {{time}}|{fallback}>"


def status_message(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """``/kb status``: per source, pages, chunks, last sync (with its outcome), next sync, last error, and
    the pages the index-time scan flagged (only when there are some)."""
    if not rows:
        return notice("The knowledge base is empty and no sources are configured (`CHATOPS_SOURCES`).",
                      ":open_file_folder:")
    blocks: list[dict[str, Any]] = [_section("*Knowledge base status*")]
    for row in rows[: MAX_BLOCKS - 1]:
        last = date_token(row.get("last_run"))
        if row.get("last_status"):
            last += f" ({escape(str(row['last_status']))})"
        schedule = escape(str(row["schedule"])) if row.get("schedule") else ""
        if row.get("next_run"):
            nxt = date_token(row["next_run"]) + (f" ({schedule})" if schedule else "")
        else:
            nxt = schedule or "not scheduled"
        err = truncate(escape(str(row.get("last_error") or "none")), 1900)
        fields = [f"*Source*\n{escape(str(row.get('source', '?')))}",
                  f"*Pages / chunks*\n{row.get('pages', 0)} / {row.get('chunks', 0)}",
                  f"*Last sync*\n{last}", f"*Next sync*\n{nxt}", f"*Last error*\n{err}"]
        if row.get("pages_sensitive") or row.get("pages_injection"):
            fields.append(f"*Flagged pages*\n{row.get('pages_sensitive', 0)} with secrets or personal data (never "
                          f"quoted), {row.get('pages_injection', 0)} with instructions to the bot (left out)")
        if row.get("pages_unresolved_access"):
            fields.append(f"*Unresolved access*\n{row['pages_unresolved_access']} pages whose permissions could not "
                          "be read (cited to nobody until a sync reads them)")
        blocks.append({"type": "section", "fields": [{"type": "mrkdwn", "text": f} for f in fields]})
    lines = [f"{r.get('source')}: {r.get('pages', 0)} pages, {r.get('chunks', 0)} chunks" for r in rows]
    return {"text": _fallback("Knowledge base status: " + "; ".join(lines)), "blocks": blocks}


def reindex_started(source: str | None, full: bool) -> dict[str, Any]:
    """The immediate acknowledgement of ``/kb reindex``."""
    what = f"*{escape(source)}*" if source else "all sources"
    mode = "a full re-index" if full else "an incremental re-index"
    return notice(f"Started {mode} of {what}. I'll post a summary here when it's done.", ":arrows_counterclockwise:")


def reindex_summary(results: Sequence[Any], seconds: float) -> dict[str, Any]:
    """The summary posted when ``/kb reindex`` finishes (``results``: :class:`app.jobs.JobResult`)."""
    lines = []
    ok = True
    for r in results:
        name = escape(str(r.source))
        if r.status == "ok" and r.summary is not None:
            s = r.summary
            line = (f":white_check_mark: *{name}*: {s.added} added, {s.updated} updated, "
                    f"{s.deleted} deleted, {s.unchanged} unchanged, {s.skipped} skipped "
                    f"({s.seconds:.1f} s)")
            if s.errors:
                line += f"\n      problems: {escape(truncate('; '.join(map(str, s.errors[:3])), 500))}"
        elif r.status == "busy":
            ok = False
            line = f":hourglass: *{name}*: a run of this source is already in progress; try again when it ends"
        elif r.status == "queued":  # a web replica (chatops serve --role web) left it for the worker
            what = "every source" if r.source == "*" else f"*{name}*"
            line = f":inbox_tray: {what}: {escape(str(r.error))}; `/kb status` shows its run when it is done"
        else:
            ok = False
            line = f":x: *{name}*: {escape(truncate(r.error or r.status, 500))}"
        lines.append(line)
    head = "Re-index finished" if ok else "Re-index finished with problems"
    if results and all(r.status == "queued" for r in results):
        head = "Re-index queued"
    text = f"*{head}* in {seconds:.1f} s\n" + ("\n".join(lines) or "nothing to do")
    return {"text": _fallback(f"{head}: " + "; ".join(f"{r.source} {r.status}" for r in results)),
            "blocks": [_section(t) for t in split_text(text, MAX_SECTION)][:MAX_BLOCKS]}
