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
