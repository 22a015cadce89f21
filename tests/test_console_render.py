"""The terminal's rendering of answers (``bot/console.py``, what ``chatops ask`` and ``chatops chat`` print):
lists line by line, tables in aligned columns, prose as written. Pure functions: no subprocess, no index."""

from __future__ import annotations

from agent.models import Citation, Reply
from bot.console import render_reply, render_text

#: The answer composer's shape (issue 22): a lead-in and its numbered list, a table row with its header.
LIST_AND_TABLE = ("To request leave, do the following: [1]\n1. Open HR Links.\n2. Choose *Absence request*.\n"
                  "3. Submit it three business days ahead. [1]\n\n| Plan | Monthly premium | [2]\n|---|---|\n| Basic | $12 |")


def test_a_list_prints_line_by_line_and_a_table_in_aligned_columns() -> None:
    reply = Reply(LIST_AND_TABLE, [Citation(1, "c1", "people/leave.md", "Leave", "https://wiki/leave", "", "q"),
                                   Citation(2, "c2", "people/benefits.md", "Benefits", "https://wiki/benefits", "", "q")])
    assert render_reply(reply) == (
        "To request leave, do the following: [1]\n"
        "\n"
        "1. Open HR Links.\n"
        "2. Choose *Absence request*.\n"
        "3. Submit it three business days ahead. [1]\n"
        "\n"
        "Plan   Monthly premium  [2]\n"
        "─────  ───────────────\n"
        "Basic  $12\n"
        "\n"
        "Sources:\n"
        "  [1] Leave\n      https://wiki/leave\n"
        "  [2] Benefits\n      https://wiki/benefits")


def test_bullets_nested_items_and_wide_cells_keep_their_shape() -> None:
    text = ("Bring:\n\n- a laptop\n  charged\n- your badge\n  1. front\n  2. back\n\n"
            "| Region | Hotel per night |\n|---|--:|\n| Western Europe and the UK | $220 |\n| 日本 | $200 |")
    assert render_text(text) == (
        "Bring:\n"
        "\n"
        "• a laptop\n"
        "  charged\n"
        "• your badge\n"
        "  1. front\n"
        "  2. back\n"
        "\n"
        "Region                     Hotel per night\n"
        "─────────────────────────  ───────────────\n"
        "Western Europe and the UK             $220\n"
        "日本                                  $200")


def test_prose_prints_as_written() -> None:
    text = "**Declare** it with `/declare-incident` [1].\n\nSee the [runbook](https://x) [2]."
    assert render_text(text) == text
