"""The Teams renderers' pure parts: the notification summary and the streamed answer's sources card."""

from __future__ import annotations

from agent.models import Citation, Reply
from bot.teams import cards


def test_the_summary_is_the_answer_on_one_line_without_markup() -> None:
    reply = Reply(text="**Declare** it with `/declare-incident` [1].\n\nSee the [runbook](https://wiki/x) [2].")
    assert cards.summary(reply) == "Declare it with /declare-incident. See the runbook."


def test_a_long_summary_is_cut_at_a_word_with_an_ellipsis() -> None:
    summary = cards.summary(Reply(text="word " * 100))
    assert len(summary) <= cards.MAX_SUMMARY and summary.endswith("word\u2026")


def test_the_sources_card_has_the_sources_only() -> None:
    cited = Reply(text="Use /declare-incident [1].", citations=[
        Citation(n=1, chunk_id="ir#1", doc_id="ir.md", title="Incident response", section="Declaring", url="https://wiki/ir",
                 quote="Use /declare-incident")])
    card = cards.sources_card(cited)
    texts = [b["text"] for b in card["body"]]
    assert texts == ["Sources", "[1] Incident response \u203a Declaring"]
    assert card["actions"] == [{"type": "Action.OpenUrl", "title": "[1] Incident response", "url": "https://wiki/ir"}]
    assert cards.sources_card(Reply(text="I couldn't find that.", refused=True)) is None


#: The answer composer's shape (issue 22): a lead-in and its numbered list, a table row with its header.
LIST_AND_TABLE = ("To request leave, do the following: [1]\n1. Open HR Links.\n2. Choose *Absence request*.\n"
                  "3. Submit it three business days ahead. [1]\n\n| Plan | Monthly premium | [2]\n|---|--:|\n| Basic | $12 |")


def test_a_list_gets_its_own_text_block_and_a_table_a_table_element_in_a_1_5_card() -> None:
    card = cards.answer_card(Reply(text=LIST_AND_TABLE))
    assert card["version"] == "1.5"  # Table came with schema 1.5, the newest Teams renders
    assert card["body"] == [
        {"type": "TextBlock", "text": "To request leave, do the following: [1]", "wrap": True},
        {"type": "TextBlock", "text": "1. Open HR Links.\n2. Choose *Absence request*.\n"
                                      "3. Submit it three business days ahead. [1]", "wrap": True},
        {"type": "Table", "firstRowAsHeader": True,
         "columns": [{"width": 5}, {"width": 19, "horizontalCellContentAlignment": "right"}],
         "rows": [
             {"type": "TableRow", "cells": [
                 {"type": "TableCell", "items": [{"type": "TextBlock", "text": "Plan", "wrap": True, "weight": "Bolder"}]},
                 {"type": "TableCell", "items": [{"type": "TextBlock", "text": "Monthly premium [2]", "wrap": True,
                                                  "weight": "Bolder"}]}]},
             {"type": "TableRow", "cells": [
                 {"type": "TableCell", "items": [{"type": "TextBlock", "text": "Basic", "wrap": True}]},
                 {"type": "TableCell", "items": [{"type": "TextBlock", "text": "$12", "wrap": True}]}]}]},
    ]


def test_prose_alone_stays_one_text_block_in_a_1_4_card() -> None:
    text = "**Declare** it with `/declare-incident` [1].\n\nSee the [runbook](https://wiki/x) [2]."
    card = cards.answer_card(Reply(text=text))
    assert card["version"] == "1.4" and card["body"] == [{"type": "TextBlock", "text": text, "wrap": True}]


def test_a_table_past_the_cell_budget_names_the_rows_left_out() -> None:
    rows = "\n".join(f"| {i} | {i * 2} |" for i in range(300))
    [table, more] = cards.text_elements(f"| n | 2n |\n|---|---|\n{rows}")
    assert len(table["rows"]) == cards.MAX_TABLE_CELLS // 2  # the header and 99 rows
    assert more["text"] == "(201 more rows in the source)" and more["isSubtle"] is True


def test_a_streamed_answers_text_shows_the_table_as_an_aligned_code_block() -> None:
    text = cards.message_text(Reply(text=LIST_AND_TABLE))
    assert text.endswith("```\nPlan   Monthly premium  [2]\n─────  ───────────────\nBasic              $12\n```")
    assert "\n\n1. Open HR Links.\n2. Choose" in text


def test_the_summary_reads_a_table_as_header_value_pairs() -> None:
    assert cards.summary(Reply(text=LIST_AND_TABLE)) == (
        "To request leave, do the following: 1. Open HR Links. 2. Choose Absence request. 3. Submit it three "
        "business days ahead. - Plan: Basic · Monthly premium: $12")


def test_a_markdown_link_labelled_with_another_address_shows_its_real_target_in_cards() -> None:
    reply = Reply("Log in at [https://intranet.example.com](https://evil.example.net/x) or [the wiki]"
                  "(https://wiki.example.com) [1].",
                  citations=[Citation(n=1, chunk_id="c1", doc_id="d", title="Login", url="https://wiki.example.com/l",
                                      section="", quote="q")])
    shown = " ".join(b.get("text", "") for b in cards.answer_card(reply)["body"])
    assert "[https://evil.example.net/x](https://evil.example.net/x)" in shown and "[the wiki]" in shown
    assert "https://intranet" not in shown
    assert "https://intranet" not in cards.message_text(reply)  # a streamed answer's final text
    assert "intranet" not in cards.summary(reply)  # the notification's one line
