"""The Slack adapter's pure parts: Slack text to plain text, Markdown to mrkdwn, splitting to Slack's limits,
the Block Kit renderers, the ``/kb`` grammar, settings validation, log redaction and the button registry.

No network and no index: these run in milliseconds.
"""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from agent.models import Citation, PendingAction, Reply
from app.settings import Settings
from bot.slack.actions import ActionRegistry
from bot.slack.commands import parse_kb
from bot.slack.config import SlackConfig, SlackConfigError, parse_admin_ids
from bot.slack.inbound import mentions, to_plain
from bot.logsafe import RedactingFilter, redact
from bot.slack.middleware import is_from_bot
from bot.slack.mrkdwn import split_text
from bot.slack import render
from tests.standins.slack.blocks import block_problem


def cite(n: int, title: str = "Release process", section: str = "Branch cut",
         url: str = "https://wiki.example.com/release#branch-cut") -> Citation:
    return Citation(n=n, chunk_id=f"c{n}", doc_id="engineering/release.md", title=title, url=url, section=section,
                    quote="q")


# -- inbound text --------------------------------------------------------------------------------------------
def test_to_plain_strips_the_bot_mention_and_unwraps_markup() -> None:
    text = ("<@UBOT> what does <@U123|ana> say about <#C42|releases> &amp; <https://x.example/a?b=1|the doc>, "
            "see <https://y.example> or <mailto:a@b.c|a@b.c> &lt;3 <!here>")
    assert to_plain(text, "UBOT") == ("what does @ana say about #releases & the doc (https://x.example/a?b=1), "
                                      "see https://y.example or a@b.c <3 @here")
    assert to_plain("<@UBOT>", "UBOT") == ""
    assert to_plain(None, "UBOT") == ""  # type: ignore[arg-type]
    assert mentions("hi <@UBOT|chatops>", "UBOT") and not mentions("hi <@UOTHER>", "UBOT")


def test_bot_events_are_recognised() -> None:
    assert is_from_bot({"bot_id": "B1", "text": "x"}, "UBOT", "BBOT")
    assert is_from_bot({"subtype": "bot_message"}, "UBOT", "BBOT")
    assert is_from_bot({"user": "UBOT"}, "UBOT", "BBOT")
    assert is_from_bot({"subtype": "message_changed", "message": {"bot_id": "B9"}}, "UBOT", "BBOT")
    assert not is_from_bot({"user": "UALICE", "text": "hi"}, "UBOT", "BBOT")


# -- mrkdwn ----------------------------------------------------------------------------------------------------
def test_split_text_respects_the_limit_and_boundaries() -> None:
    para = "This sentence is about releases and their branch cuts. " * 30
    text = "\n\n".join([para.strip()] * 5)
    pieces = split_text(text, 3000)
    assert len(pieces) > 1 and all(len(p) <= 3000 for p in pieces)
    assert all(p.endswith(".") for p in pieces), [p[-20:] for p in pieces]
    # nothing lost but whitespace
    assert "".join(pieces).replace(" ", "").replace("\n", "") == text.replace(" ", "").replace("\n", "")


def test_split_text_keeps_links_entities_and_code_fences_whole() -> None:
    link = "<https://example.com/" + "a" * 40 + "|link>"
    text = ("word " * 5 + link + " &amp; ") * 30
    for piece in split_text(text, 200):
        assert len(piece) <= 200
        assert piece.count("<") == piece.count(">"), piece
        assert "&am" not in piece.replace("&amp;", "")
    code = "```" + "\n".join(f"line {i}" for i in range(200)) + "```"
    pieces = split_text(code, 300)
    assert len(pieces) > 1 and all(p.startswith("```") and p.endswith("```") for p in pieces)
    with pytest.raises(ValueError):
        split_text("x", 5)


# -- renderers -----------------------------------------------------------------------------------------------
def test_answer_renders_markdown_numbered_sources_and_native_feedback() -> None:
    reply = Reply("The branch is cut on **Thursday** [1].\n\n- Releases ship on Tuesday [2].",
                  citations=[cite(1), cite(1), cite(2, section="Release schedule", url="https://w.example/r|x>y")])
    [msg] = render.answer_messages(reply)
    assert not block_problem(msg["blocks"])
    md, context, feedback = msg["blocks"]
    # standard Markdown as the agent wrote it: no hand conversion to mrkdwn
    assert md == {"type": "markdown", "text": "The branch is cut on **Thursday** [1].\n\n- Releases ship on Tuesday [2]."}
    lines = [e["text"] for e in context["elements"]]
    assert lines == ["*[1]* <https://wiki.example.com/release#branch-cut|Release process> › Branch cut",
                     "*[2]* <https://w.example/r%7Cx%3Ey|Release process> › Release schedule"]
    assert feedback["type"] == "context_actions" and feedback["block_id"] == f"feedback:{reply.trace.trace_id}"
    [element] = feedback["elements"]
    assert element["type"] == "feedback_buttons" and element["action_id"] == render.FEEDBACK
    assert element["positive_button"]["value"] == f"helpful:{reply.trace.trace_id}"
    assert element["negative_button"]["value"] == f"not_helpful:{reply.trace.trace_id}"
    assert msg["text"].startswith("The branch is cut on **Thursday**")  # the plain-text fallback


def test_slack_control_sequences_from_a_page_are_neutralised_in_the_markdown() -> None:
    reply = Reply("Ping <!channel> or <@U0BOSS> in <#C0ALL> [1]; type `<!here>` to ping.", citations=[cite(1)])
    md = render.answer_messages(reply)[0]["blocks"][0]["text"]
    assert "<!channel>" not in md and "<@U0BOSS>" not in md and "<#C0ALL>" not in md and "<!here>" not in md
    assert "&lt;!channel&gt;" in md and "`<\u2060!here>`" in md


HOSTILE_LINKS = ("Log in at <https://evil.example.net/login|https://intranet.example.com> [1], or at "
                 "[https://intranet.example.com](https://evil.example.net/x) & [the wiki](https://wiki.example.com) "
                 "[1]; `<https://evil.example.net|ok>` is code.")


def test_slack_links_and_misleading_markdown_links_from_a_page_are_neutralised_when_posted() -> None:
    """Slack reads ``<url|label>`` as a link showing only the label: escaped, it shows as typed. A Markdown
    link labelled with another address shows its real target."""
    reply = Reply(HOSTILE_LINKS, citations=[cite(1)])
    md = render.answer_messages(reply)[0]["blocks"][0]["text"]
    assert "<https://evil" not in md.replace("<\u2060", "")
    assert "&lt;https://evil.example.net/login|https://intranet.example.com&gt;" in md
    assert "[https://evil.example.net/x](https://evil.example.net/x) &amp; [the wiki](https://wiki.example.com)" in md
    assert "`<\u2060https://evil.example.net|ok>`" in md
    assert render.stream_parts(reply)[0] == md  # the text a stream ends with is the same
    preview = json.dumps(render.pending_action_blocks(PendingAction("x.do", {}, "k", HOSTILE_LINKS)))
    assert "<https://evil" not in preview and "&lt;https://evil.example.net/login|" in preview  # section text


#: The answer composer's shape (issue 22): a lead-in and its numbered list, a table row with its header.
LIST_AND_TABLE = ("To request leave, do the following: [1]\n1. Open HR Links.\n2. Choose *Absence request*.\n"
                  "3. Submit it three business days ahead. [1]\n\n| Plan | Monthly premium | [2]\n|---|---|\n| Basic | $12 |")


def test_a_list_and_a_table_render_as_a_markdown_list_and_an_aligned_code_block() -> None:
    reply = Reply(LIST_AND_TABLE, citations=[cite(1), cite(2, title="Benefits", section="Health plans")])
    [msg] = render.answer_messages(reply)
    assert not block_problem(msg["blocks"])
    assert msg["blocks"][0] == {"type": "markdown", "text": (
        "To request leave, do the following: [1]\n"
        "\n"
        "1. Open HR Links.\n"
        "2. Choose *Absence request*.\n"
        "3. Submit it three business days ahead. [1]\n"
        "\n"
        "```\n"
        "Plan   Monthly premium  [2]\n"
        "─────  ───────────────\n"
        "Basic  $12\n"
        "```")}
    assert [b["type"] for b in msg["blocks"][1:]] == ["context", "context_actions"]
    # a streamed answer carries the same text, its blocks attached at the stop
    body, _ = render.stream_parts(reply)
    assert body == msg["blocks"][0]["text"]


def test_a_wide_table_or_one_with_links_renders_as_header_value_lines() -> None:
    reply = Reply("Daily limits: [1]\n\n| Region | Hotel per night | Meals per day | [1]\n|---|--:|--:|\n"
                  "| United States and Canada, including Alaska and Hawaii | $250 | $75 |\n"
                  "| [Rest of the world](https://wiki.example.com/regions) | $150 | $50 |", citations=[cite(1)])
    [msg] = render.answer_messages(reply)
    assert msg["blocks"][0]["text"] == (
        "Daily limits: [1]\n"
        "\n"
        "- **Region:** United States and Canada, including Alaska and Hawaii · **Hotel per night:** $250 · "
        "**Meals per day:** $75 [1]\n"
        "- **Region:** [Rest of the world](https://wiki.example.com/regions) · **Hotel per night:** $150 · "
        "**Meals per day:** $50")


def test_a_long_table_is_split_over_messages_with_its_code_fences_closed() -> None:
    rows = "\n".join(f"| Office {i} | {i % 7} days |" for i in range(1500))
    reply = Reply(f"Days per office: [1]\n\n| Office | Days |\n|---|---|\n{rows}", citations=[cite(1)])
    messages = render.answer_messages(reply)
    assert len(messages) >= 2
    for m in messages:
        assert not block_problem(m["blocks"]), block_problem(m["blocks"])
        md = m["blocks"][0]["text"]
        assert md.count("```") % 2 == 0 and "|---|" not in md
    shown = "".join(m["blocks"][0]["text"] for m in messages)
    assert "Office 1499  1 days" in shown


def test_feedback_values_parse_both_the_native_element_and_the_old_buttons() -> None:
    assert render.parse_feedback_value(render.FEEDBACK, "not_helpful:abc") == ("not_helpful", "abc")
    assert render.parse_feedback_value(render.FEEDBACK_HELPFUL, "abc") == ("helpful", "abc")
    for action_id, value in ((render.FEEDBACK, "maybe:abc"), (render.FEEDBACK, "helpful:"),
                             (render.FEEDBACK, "helpful:" + "x" * 65), ("feedback:meh", "abc")):
        with pytest.raises(ValueError):
            render.parse_feedback_value(action_id, value)


def test_the_feedback_modal_validates_and_its_submission_parses() -> None:
    from tests.standins.slack.blocks import view_problem

    view = render.feedback_modal("t" * 32)
    assert view_problem(view, "modal") is None
    chosen = {"reason": {"value": {"selected_option": {"value": "wrong"}}}, "detail": {"value": {"value": None}}}
    assert render.parse_feedback_modal({**view, "state": {"values": chosen}}) == ("t" * 32, "wrong")
    chosen["detail"]["value"]["value"] = "x" * 600
    assert render.parse_feedback_modal({**view, "state": {"values": chosen}})[1] == "wrong: " + "x" * 500
    chosen["reason"]["value"]["selected_option"]["value"] = "rude"
    with pytest.raises(ValueError):
        render.parse_feedback_modal({**view, "state": {"values": chosen}})


def test_refusal_has_no_sources_and_says_what_was_searched() -> None:
    reply = Reply("I couldn't find anything in the knowledge base, so I won't guess. I searched for “wifi”.",
                  refused=True, searched=["wifi"])
    [msg] = render.answer_messages(reply)
    types = [b["type"] for b in msg["blocks"]]
    assert types == ["markdown", "context_actions"]
    assert "couldn't find" in msg["blocks"][0]["text"] and "wifi" in msg["blocks"][0]["text"]


def test_a_huge_answer_is_split_over_messages_within_limits() -> None:
    text = " ".join(f"Sentence number {i} about the release process and its many rules [1]." for i in range(3000))
    reply = Reply(text, citations=[cite(n) for n in range(1, 13)])
    messages = render.answer_messages(reply, share=render.share_value(reply.trace.trace_id, "q"))
    assert len(messages) >= 2
    for m in messages:
        assert not block_problem(m["blocks"]), block_problem(m["blocks"])
        assert len(m["text"]) <= render.MAX_TEXT
        assert sum(len(b["text"]) for b in m["blocks"] if b["type"] == "markdown") <= render.MAX_MARKDOWN
    # 12,000 characters a message: about a fifth as many messages as 3,000-character sections needed
    assert len(messages) <= -(-len(text) // render.MAX_MARKDOWN) + 1
    last = messages[-1]["blocks"]
    assert [b["type"] for b in last[-4:]] == ["context", "context", "context_actions", "actions"]  # 12 sources: 10 + 2
    assert last[-1]["elements"][-1]["action_id"] == render.SHARE
    shown = "".join(b["text"] for m in messages for b in m["blocks"] if b["type"] == "markdown")
    assert "Sentence number 2999" in shown


def test_share_value_round_trips_and_fits_a_button() -> None:
    value = render.share_value("a" * 32, "q" * 5000 + "\u201c")
    assert len(value) <= 2000
    trace, question = render.parse_share_value(value)
    assert trace == "a" * 32 and question.startswith("qqq")
    assert render.parse_share_value("not json") == ("", "")


def test_pending_action_renders_confirm_and_cancel() -> None:
    reply = Reply("I can book it.", pending_action=PendingAction("calendar.create", {}, "idem-1", "Book **Room 4**"))
    [msg] = render.answer_messages(reply)
    ids = [e["action_id"] for b in msg["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert ids[:2] == [render.PENDING_CONFIRM + "idem-1", render.PENDING_CANCEL + "idem-1"]
    custom = [{"type": "section", "text": {"type": "mrkdwn", "text": "stored preview"}}]
    [msg] = render.answer_messages(reply, pending_blocks=custom, share="x")
    assert msg["blocks"] == custom and msg["text"] == "I can book it."  # the service's preview is the answer
    assert not block_problem(msg["blocks"])


def test_status_and_reindex_summary_render() -> None:
    from app.jobs import JobResult
    from index.summary import SyncSummary

    status = render.status_message([{"source": "handbook", "pages": 13, "chunks": 107,
                                     "last_run": "2025-01-02T03:04:05+00:00", "last_status": "ok",
                                     "last_error": "", "next_run": None}])
    fields = [f["text"] for f in status["blocks"][1]["fields"]]
    assert "13 / 107" in fields[1] and "<!date^1735787045^" in fields[2] and "not scheduled" in fields[3]
    summary = render.reindex_summary([JobResult("handbook", "ok", SyncSummary(added=1, unchanged=13, seconds=0.4)),
                                      JobResult("wiki", "failed", None, "SourceUnavailableError: gone")], 1.25)
    text = summary["blocks"][0]["text"]["text"]
    assert "with problems" in text and "1 added" in text and "13 unchanged" in text and "gone" in text
    assert not block_problem(summary["blocks"]) and not block_problem(status["blocks"])
    assert not any("Unresolved access" in f for f in fields)
    flagged = render.status_message([{"source": "eng", "pages": 40, "chunks": 300, "last_run": None,
                                      "last_status": None, "last_error": "", "next_run": None,
                                      "pages_unresolved_access": 3}])
    shown = [f["text"] for f in flagged["blocks"][1]["fields"]]
    assert any(f.startswith("*Unresolved access*\n3 pages") for f in shown) and not block_problem(flagged["blocks"])


# -- /kb grammar ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, kind, extra", [
    ("", "help", {}),
    ("help", "help", {}),
    ("STATUS", "status", {}),
    ("sources", "sources", {}),
    ("status of the release process", "question", {"question": "status of the release process"}),
    ("reindex", "reindex", {"source": None, "full": False}),
    ("reindex handbook --full", "reindex", {"source": "handbook", "full": True}),
    ("reindex —full", "reindex", {"source": None, "full": True}),
    ("reindex a b", "invalid", {}),
    ("reindex --fast", "invalid", {}),
    ("how do I declare an incident?", "question", {"question": "how do I declare an incident?"}),
])
def test_kb_grammar(text: str, kind: str, extra: dict) -> None:
    cmd = parse_kb(text)
    assert cmd.kind == kind
    for k, v in extra.items():
        assert getattr(cmd, k) == v
    if kind == "invalid":
        assert "usage" in cmd.error


# -- settings ----------------------------------------------------------------------------------------------------
def test_slack_config_validates_and_hides_secrets() -> None:
    s = Settings(slack_bot_token="xoxb-1-t0kenValue", slack_signing_secret="s1gningValue", admin_user_ids="U1AB, W2CD")
    cfg = SlackConfig.from_settings(s)
    assert cfg.admin_ids == {"U1AB", "W2CD"} and cfg.api_url == "https://slack.com/api/"
    for shown in (repr(cfg), repr(s), str(s)):
        assert "t0kenValue" not in shown and "s1gningValue" not in shown
    with pytest.raises(SlackConfigError, match="SLACK_SIGNING_SECRET"):
        SlackConfig.from_settings(Settings(slack_bot_token="xoxb-1", slack_signing_secret=""))
    with pytest.raises(SlackConfigError, match="SLACK_APP_TOKEN"):
        SlackConfig.from_settings(Settings(slack_bot_token="xoxb-1"), socket_mode=True)
    with pytest.raises(SlackConfigError, match="SLACK_BOT_TOKEN"):
        SlackConfig.from_settings(Settings(slack_bot_token=None, slack_signing_secret="x"))
    with pytest.raises(SlackConfigError, match="xoxb-"):
        SlackConfig.from_settings(Settings(slack_bot_token="xoxp-user", slack_signing_secret="x"))
    with pytest.raises(SlackConfigError, match="ADMIN_USER_IDS"):
        parse_admin_ids("U1AB, alice")


def test_redaction_masks_tokens_and_secrets() -> None:
    line = "calling with xoxb-123-456-abcDEF and xapp-1-A1-2-zz and body token=legacy123&x=1 secret=mysecret99"
    out = redact(line, ["mysecret99"])
    assert "xoxb-" not in out and "xapp-" not in out and "legacy123" not in out and "mysecret99" not in out
    record = logging.LogRecord("t", logging.INFO, __file__, 1, "token %s", ("xoxb-9-9-secretish",), None)
    RedactingFilter(["nothing"]).filter(record)
    assert "secretish" not in record.getMessage()


def test_action_registry_routes_by_longest_prefix() -> None:
    reg = ActionRegistry()
    seen: list[str] = []

    async def a(ctx):
        seen.append("a")

    async def b(ctx):
        seen.append("b")

    reg.register("pending:", a)
    reg.register("pending:calendar:", b)
    assert reg.resolve("pending:calendar:confirm") is b and reg.resolve("pending:confirm") is a
    assert reg.resolve("other:x") is None
    asyncio.run(reg.resolve("pending:x")(None))  # type: ignore[arg-type, misc]
    assert seen == ["a"]
    with pytest.raises(ValueError):
        reg.register("", a)
    assert json.dumps(reg.prefixes()) == '["pending:", "pending:calendar:"]'


@pytest.mark.parametrize("url", ["file:///srv/wiki/hr/leave.md", "javascript:alert(1)", "ftp://x/y", "https:/no-host", ""])
def test_sources_that_are_not_web_links_show_the_title_alone(url: str) -> None:
    lines = [e["text"] for b in render.sources_context([cite(1, url=url)]) for e in b["elements"]]
    assert lines == ["*[1]* Release process › Branch cut"]


def test_the_home_view_stays_within_slacks_limits_with_many_sources_and_actions() -> None:
    from datetime import datetime, timedelta, timezone

    from bot.slack.home import MAX_HOME_PENDING, home_view
    from tests.standins.slack.blocks import view_problem
    from state import PendingRecord

    now = datetime.now(timezone.utc)
    rows = [{"source": f"s{i}", "pages": i, "last_run": now.isoformat(), "last_status": "failed" if i == 3 else "ok",
             "next_run": None} for i in range(45)]
    pending = [PendingRecord(f"k{i}", "calendar.create", {}, "U1", "slack", "D1", "", "x" * 900, "pending", None,
                             now, now + timedelta(hours=1), now) for i in range(30)]
    view = home_view(rows, pending)
    assert view_problem(view, "home") is None
    text = json.dumps(view)
    assert "*s3*: 3 pages, last synced <!date^" in text and "(failed)" in text
    assert "and 25 more" in text and text.count(":hourglass:") == MAX_HOME_PENDING
    assert "in <#D1>" not in text  # a DM is not linked as a channel
    empty = home_view([], [])
    assert view_problem(empty, "home") is None and "No sources are indexed yet" in json.dumps(empty)


def test_stream_pieces_cut_at_sentence_ends_and_join_back_exactly() -> None:
    from bot.slack.stream import stream_pieces

    text = " ".join(f"Sentence {i} is about the release process [1]." for i in range(40)) + "\n\n- a list item"
    pieces = stream_pieces(text, 200)
    assert "".join(pieces) == text and len(pieces) > 5
    assert all(p.rstrip().endswith(("].", "item")) for p in pieces)
    assert all(len(p) < 200 + 60 for p in pieces)
    assert stream_pieces("", 10) == [] and stream_pieces("One long sentence without end", 5) == [
        "One long sentence without end"]
    with pytest.raises(ValueError):
        stream_pieces("x", 0)


def test_what_is_streamed_and_what_is_not() -> None:
    reply = Reply("The branch is cut on Thursday [1].", citations=[cite(1)])
    body, blocks = render.stream_parts(reply)
    assert body == "The branch is cut on Thursday [1]."
    assert [b["type"] for b in blocks] == ["context", "context_actions"]  # attached when the stream stops
    assert render.stream_parts(Reply("x" * 12001)) is None  # posted as several messages instead
    action = PendingAction("calendar.create", {"title": "x"}, "k1", "Book x")
    assert render.stream_parts(Reply("Shall I book it?", pending_action=action)) is None


def test_streaming_is_on_unless_slack_stream_answers_is_false() -> None:
    base = {"slack_bot_token": "xoxb-1", "slack_signing_secret": "s"}
    assert SlackConfig.from_settings(Settings(**base)).stream_answers is True
    assert SlackConfig.from_settings(Settings(**base, slack_stream_answers=False)).stream_answers is False
