"""The extractive composer (:mod:`agent.compose`), promise by promise, on hand-made chunks.

Chunks, the analyzer (Whoosh's stemming analyzer, as the index uses) and the composer are real; the
similarity is left out (``None``) so each case turns on coverage and answer type alone, or given as a fixed
function where the case is about it.
"""

from __future__ import annotations

import numpy as np
from whoosh.analysis import StemmingAnalyzer

from agent.compose import Composer, ComposerConfig, PartEvidence
from agent.terms import key_terms
from core.models import Chunk
from tools.knowledge_search import Evidence

_ANA = StemmingAnalyzer()


def analyze(text: str) -> list[str]:
    return [t.text for t in _ANA(text)]


def chunk(n: int, text: str, page: str | None = None, section: tuple[str, ...] = ("Section",)) -> Evidence:
    c = Chunk(f"c{n:031d}", "folder", page or f"page{n}.md", f"Page {n}", section, "", text)
    return Evidence(c, 1.0 / n, {"dense": n, "bm25": n}, {}, 0.5)


def terms(question: str):
    # every word equally rare (IDF 5), none absent (IDF 9) or common: the specific terms are the question's words
    return key_terms(question, analyze, lambda t: 9.0 if t == "zqxjvkq0absent" else 5.0)


def answer(question: str, evidence: list[Evidence], similarity=None, **config):
    composer = Composer(ComposerConfig(**config), analyze, similarity)
    return composer.answer([PartEvidence(question, terms(question), evidence)])


def test_the_unit_stating_the_asked_figure_is_quoted_before_one_that_only_shares_words() -> None:
    ev = chunk(1, "Parental leave is a benefit every parent values and the parental leave policy is long.\n\n"
                  "Parental leave lasts 12 weeks.")
    draft = answer("how long is parental leave?", [ev])
    assert draft.text.startswith("Parental leave lasts 12 weeks."), draft.text


def test_a_table_row_is_quoted_under_its_header_as_a_small_table() -> None:
    ev = chunk(1, "Error codes:\n\n| Code | Fix |\n|---|---|\n| E41 | Reboot the router |\n| E42 | Restart the agent |\n")
    draft = answer("how do I fix E42?", [ev])
    assert "| Code | Fix |\n|---|---|\n| E42 | Restart the agent | [1]" in draft.text, draft.text
    assert {c.quote for c in draft.citations} == {"Code | Fix |", "E42 | Restart the agent |"}


def test_a_list_item_is_quoted_with_its_lead_in_and_its_list() -> None:
    ev = chunk(1, "To request a badge, do the following:\n1. Open the portal.\n2. Choose Badge request.\n"
                  "3. Submit it three days ahead.\n")
    draft = answer("how do I request a badge portal?", [ev])
    assert draft.text == ("To request a badge, do the following:\n1. Open the portal.\n2. Choose Badge request.\n"
                          "3. Submit it three days ahead. [1]"), draft.text
    assert len(draft.citations) == 4  # the lead-in and each item, verbatim


def test_a_sentence_leaning_on_the_one_before_is_quoted_with_it() -> None:
    ev = chunk(1, "Change the phone's passcode every year. It must be longer than 14 characters and mix letters "
                  "and digits, which most people find hard to remember at first.")
    draft = answer("how many characters must the passcode have?", [ev], neighbour_chars=0)
    assert "Change the phone's passcode every year. It must be longer than 14 characters" in draft.text, draft.text


def test_a_question_in_the_text_is_never_quoted_not_even_as_context() -> None:
    ev = chunk(1, "Can I park at the office for free? Staff park free in the garage on level -2.")
    draft = answer("can I park at the office for free?", [ev])
    assert "garage" in draft.text and "?" not in draft.text, draft.text


def test_another_page_is_quoted_only_when_its_unit_is_as_good() -> None:
    good = chunk(1, "The travel stipend is $500 per trip.", page="travel.md")
    weak = chunk(2, "Stipends are reviewed every year by the finance team.", page="finance.md")
    draft = answer("how much is the travel stipend?", [good, weak])
    assert {c.doc_id for c in draft.citations} == {"travel.md"}, draft.text


def test_another_page_is_not_quoted_for_a_question_term_only_its_title_or_heading_holds() -> None:
    laptop = chunk(1, "Order your laptop through the IT portal before your start date.", page="laptops.md")
    # its title holds "setup" (a question term the quoted unit lacks), its own words do not
    setup = Chunk(f"c{2:031d}", "folder", "setup.md", "Workstation setup", ("Setup",), "",
                  "Visit the portal page to read the laptop requirements before your start date.")
    draft = answer("how do i order a laptop for setup?", [laptop, Evidence(setup, 0.5, {"dense": 2, "bm25": 2}, {}, 0.5)])
    assert {c.doc_id for c in draft.citations} == {"laptops.md"}, draft.text


def test_the_similarity_bridges_a_paraphrase() -> None:
    on_words = chunk(1, "The gym is on the second floor next to the kitchen.")
    paraphrase = chunk(2, "The wellness stipend covers fitness classes up to $50 a month.")

    def similarity(question, texts):
        return np.array([0.9 if "wellness" in t else 0.2 for t in texts], dtype=np.float32)

    draft = answer("will the company pay for my yoga class at the gym?", [on_words, paraphrase], similarity)
    assert draft.text.startswith("The wellness stipend covers fitness classes"), draft.text


def test_each_part_is_answered_from_its_own_evidence_and_a_part_without_support_is_named() -> None:
    badge = chunk(1, "Visitors get a badge at the front desk.")
    composer = Composer(ComposerConfig(), analyze)
    draft = composer.answer([PartEvidence("where do visitors get a badge", terms("where do visitors get a badge"),
                                          [badge]),
                             PartEvidence("is lunch served", terms("is lunch served"), [], supported=False)])
    assert draft.text.startswith("Visitors get a badge at the front desk. [1]"), draft.text
    assert draft.unanswered == ["is lunch served"] and "Nothing found on: \u201cis lunch served\u201d" in draft.text


def test_a_part_is_answered_from_any_passage_of_its_first_supporting_page_not_from_other_pages() -> None:
    # the gate counted the page's first passage; the sentence that answers is in its second, which is quoted, while a
    # passage of another page the gate did not count is not
    counted = chunk(1, "Logs of the data pipeline are kept in the observability stack.", page="logs.md")
    answers = chunk(2, "When secrets are printed into the logs, file a high urgency bug.", page="logs.md")
    other = chunk(3, "Secrets printed into the logs are rotated by the platform team.", page="other.md")
    q = "what do we do if secrets are printed into the logs"
    draft = Composer(ComposerConfig(), analyze).answer(
        [PartEvidence(q, terms(q), [counted, answers, other], support=frozenset({counted.chunk.chunk_id}))])
    assert "file a high urgency bug" in draft.text, draft.text
    assert {c.doc_id for c in draft.citations} == {"logs.md"}, draft.citations


def test_flagged_text_is_never_quoted() -> None:
    ev = chunk(1, "The VPN password is hunter2-Prod-77!x. Ask IT in #it-help for VPN access.")
    draft = answer("how do I get vpn access?", [ev])
    assert "hunter2" not in draft.text and "#it-help" in draft.text, draft.text


def test_the_same_words_on_two_pages_made_from_one_template_are_quoted_once() -> None:
    same = "Every install requires VPN access from the office network."
    a = chunk(1, f"{same}\n\nThe foo tool ships weekly.", page="runbooks/foo.md")
    b = chunk(2, f"{same}\n\nThe bar tool ships monthly.", page="runbooks/bar.md")
    draft = answer("does the install need vpn access?", [a, b])
    assert draft.text.count(same) == 1, draft.text


def test_how_much_time_off_asks_for_a_period_not_money() -> None:
    from agent.answertype import asked_type

    assert asked_type("how much paid time off do i get?") == "duration"
    assert asked_type("how much does the company pay for my gym?") == "money"


def test_a_how_to_question_is_answered_by_the_steps_under_their_lead_in() -> None:
    ev = chunk(1, "An incident is any unplanned event that hurts customers, and anyone can declare an incident.\n\n"
                  "Anyone can declare an incident, not only engineers.\n\n"
                  "1. Type the `/declare-incident` command in any channel.\n2. Join the channel the bot creates.\n")
    draft = answer("how do I declare an incident?", [ev])
    assert "Anyone can declare an incident, not only engineers.\n1. Type the `/declare-incident` command" in draft.text, \
        draft.text


def test_a_sentence_is_quoted_with_its_short_paragraph_and_the_list_the_paragraph_leads() -> None:
    ev = chunk(1, "Team members can refresh a laptop after 3 years of use. You may keep an older laptop while it "
                  "gets updates. Order a new laptop from this list:\n- MacBook Pro 14\n- MacBook Air 13\n\n"
                  "Unrelated closing words about something else entirely, long enough to be their own paragraph.")
    draft = answer("may I keep an older laptop?", [ev])
    assert draft.text.startswith("Team members can refresh a laptop after 3 years of use. You may keep"), draft.text
    assert "- MacBook Pro 14\n- MacBook Air 13 [1]" in draft.text and "Unrelated" not in draft.text, draft.text
    whole = answer("may I keep an older laptop?", [ev], paragraph_chars=0, neighbour_chars=0)  # the rule off
    assert "3 years of use. You may keep" not in whole.text, whole.text


def test_a_list_without_a_lead_in_is_shown_under_its_heading() -> None:
    ev = chunk(1, "Data classes, from the most to the least guarded.\n\n### Highly restricted\n\n"
                  "- Customer passwords and credentials.\n- Signing keys.\n")
    draft = answer("which class are customer passwords?", [ev])
    assert draft.text.startswith("**Highly restricted:**\n- Customer passwords and credentials."), draft.text
    assert all(c.quote != "Highly restricted" for c in draft.citations)  # a label, not a quote


def test_a_question_naming_a_command_is_answered_by_what_it_asks_not_by_any_code_span() -> None:
    # The word "command" in a question no longer makes every unit with a code span an answer: the unit that
    # speaks to the question's terms is quoted first (issue 22: a special case that earned nothing on dev,
    # dev2 or dev3; on dev it put "`cmd`+`k` lets you search ..." into an incident answer).
    incident = chunk(1, "To declare an incident, post in the incidents channel and page the on-call engineer.",
                     page="incidents.md")
    shortcut = chunk(2, "Press `cmd`+`k` to search for a channel by name.", page="slack.md")
    draft = answer("how do i declare an incident, is there a command?", [shortcut, incident])
    assert draft.text.startswith("To declare an incident, post in the incidents channel"), draft.text
