"""The one parse of an answer's Markdown that every renderer shares (``bot/markdown_blocks.py``): blocks,
citation markers where the answer composer puts them (end of a list item, of a table row line, on the
lead-in line), and the shared renderings (aligned table lines, "Header: value" records, chat Markdown).

Pure functions: no network, no index.
"""

from __future__ import annotations

import pytest

from bot.markdown_blocks import (CODE_TABLE_WIDTH, ListBlock, Prose, Row, Table, chat_markdown, display_width,
                                 parse_blocks, plain_inline, table_lines, table_records)

#: The composer's shape (issue 22): a lead-in with its numbered list, a table row with its header.
ANSWER = ("To request leave, do the following: [1]\n"
          "1. Open HR Links.\n"
          "2. Choose *Absence request*.\n"
          "3. Submit it three business days ahead. [1]\n"
          "\n"
          "| Plan | Monthly premium | [2]\n"
          "|---|---|\n"
          "| Basic | $12 |")


def test_the_composers_answer_parses_into_lead_in_list_and_table() -> None:
    assert parse_blocks(ANSWER) == (
        Prose("To request leave, do the following: [1]"),
        ListBlock(ordered=True, start=1, items=("Open HR Links.", "Choose *Absence request*.",
                                                "Submit it three business days ahead. [1]")),
        Table(Row(("Plan", "Monthly premium"), "[2]"), (Row(("Basic", "$12")),), ("", "")),
    )


def test_markers_after_a_rows_last_pipe_become_its_note_wherever_the_row_is() -> None:
    [table] = parse_blocks("| A | B |\n|:--|--:| [3]\n| a | b | [1]\n| c | d |[1][2]\n| e | f [4] |")
    assert table.header == Row(("A", "B"), "[3]")  # a marker on the delimiter row belongs to the header
    assert table.rows == (Row(("a", "b"), "[1]"), Row(("c", "d"), "[1][2]"), Row(("e", "f [4]")))
    assert table.align == ("left", "right")


def test_a_pipe_line_that_is_no_table_keeps_its_marker_as_written() -> None:
    text = "Use the a | b form. [1]\n| not a table | [2]"
    assert parse_blocks(text) == (Prose(text),)
    assert chat_markdown(text) == text


def test_rows_are_padded_or_cut_to_the_headers_cells_and_cells_are_unescaped() -> None:
    [table] = parse_blocks("| A | B | C |\n|---|---|---|\n| 1 |\n| x \\| y | 2 | 3 |")
    assert table.rows == (Row(("1", "", "")), Row(("x | y", "2", "3")))


def test_list_items_keep_their_continuation_lines_and_nested_lists() -> None:
    [lead, bullets, numbered] = parse_blocks("Steps:\n\n- one\n  still one\n- two\n  - two a\n\n3) three\n4) four")
    assert lead == Prose("Steps:")
    assert bullets == ListBlock(False, 1, ("one\nstill one", "two\n- two a"))
    assert numbered == ListBlock(True, 3, ("three", "four"))


def test_nothing_is_dropped_not_even_a_line_no_block_covers() -> None:
    text = "See the guide [1].\n\n[guide]: https://wiki.example.com/guide\n\n```\n| a | b |\n|---|---|\n```"
    blocks = parse_blocks(text)
    assert all(isinstance(b, Prose) for b in blocks)
    assert "\n\n".join(b.text for b in blocks) == text


@pytest.mark.parametrize("md, plain", [
    ("**Plus** plan", "Plus plan"), ("[HR Links](https://hr.example.com)", "HR Links"), ("`/kb` now", "/kb now"),
    ("a &amp; b", "a & b"), ("![logo](x.png)", "logo"), ("fee [2]", "fee [2]"),
])
def test_plain_inline_drops_markup_and_keeps_markers(md: str, plain: str) -> None:
    assert plain_inline(md) == plain


def test_table_lines_align_columns_by_display_width_with_notes_in_a_column() -> None:
    [table] = parse_blocks("| Region | Hotel | [1]\n|---|--:|\n| **UK** | $220 |\n| 日本 | $200 | [2]")
    assert table_lines(table) == [
        "Region  Hotel  [1]",
        "\u2500\u2500\u2500\u2500\u2500\u2500  \u2500\u2500\u2500\u2500\u2500",
        "UK       $220",
        "日本     $200  [2]",
    ]
    assert display_width("日本") == 4


def test_table_records_are_header_value_lines_with_the_headers_note_on_the_first() -> None:
    [table] = parse_blocks("| Plan | Premium | Notes | [2]\n|---|---|---|\n| Basic | $12 | |\n| Plus | $48 | dental | [2]")
    assert table_records(table) == ["- **Plan:** Basic · **Premium:** $12 [2]",
                                    "- **Plan:** Plus · **Premium:** $48 · **Notes:** dental [2]"]
    [bare] = parse_blocks("| Plan | Premium | [1]\n|---|---|")
    assert table_records(bare) == ["- Plan · Premium [1]"]


def test_chat_markdown_of_the_composers_answer() -> None:
    assert chat_markdown(ANSWER) == (
        "To request leave, do the following: [1]\n"
        "\n"
        "1. Open HR Links.\n"
        "2. Choose *Absence request*.\n"
        "3. Submit it three business days ahead. [1]\n"
        "\n"
        "```\n"
        "Plan   Monthly premium  [2]\n"
        "\u2500\u2500\u2500\u2500\u2500  \u2500\u2500\u2500\u2500\u2500\u2500\u2500\u2500\u2500\u2500\u2500\u2500\u2500\u2500\u2500\n"
        "Basic  $12\n"
        "```")


def test_chat_markdown_turns_wide_or_linked_tables_into_records() -> None:
    wide = "| Item | Rule |\n|---|---|\n| Hotel | " + "up to $250 a night in the US and Canada, " * 2 + "|"
    [table] = parse_blocks(wide)
    assert max(map(display_width, table_lines(table))) > CODE_TABLE_WIDTH
    assert chat_markdown(wide) == "\n".join(table_records(table)) and "```" not in chat_markdown(wide)
    linked = "| Tool | Where |\n|---|---|\n| Ledgerly | [open](https://ledgerly.example.com) |"
    assert chat_markdown(linked) == "- **Tool:** Ledgerly · **Where:** [open](https://ledgerly.example.com)"
    assert chat_markdown(ANSWER, code_width=0).endswith("- **Plan:** Basic · **Monthly premium:** $12 [2]")


def test_chat_markdown_leaves_prose_as_written_and_keeps_nested_lists_tight() -> None:
    prose = "**Declare** it with `/declare-incident` [1].\nThen page the on-call.\n\nSee the [runbook](https://x) [2]."
    assert chat_markdown(prose) == prose  # what a stream already showed still matches
    assert chat_markdown("* a\n* b\n  1. b1\n  2. b2") == "- a\n- b\n  1. b1\n  2. b2"
    assert chat_markdown("") == "" and parse_blocks(None) == ()  # type: ignore[arg-type]
