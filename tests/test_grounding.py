"""The checkable facts of a sentence and whether the passages it cites hold them (:mod:`agent.grounding`).

Each fact kind (figures, clock times, month and weekday names, identifiers, names) is found when the
passage holds it and reported when it does not; figures compare by value whatever their formatting
(thousands separators, currency signs, number words); a sentence of generic words has nothing to check.
"""

from __future__ import annotations

import pytest

from agent.grounding import facts, ungrounded

PTO = "Everyone gets **25 days of PTO per calendar year**. Carried-over days must be used by 31 March."


def missing(sentence: str, *passages: str) -> list[tuple[str, str]]:
    return [(f.kind, f.text) for f in ungrounded(sentence, list(passages))]


@pytest.mark.parametrize(("sentence", "passage", "absent"), [
    # figures, by value
    ("Everyone gets 25 days of PTO.", PTO, []),
    ("Everyone gets 20 days of PTO.", PTO, [("number", "20")]),
    ("The stipend is $1,000 a year.", "A stipend of 1000 USD per year.", []),
    ("The stipend is $1,500 a year.", "A stipend of 1000 USD per year.", [("number", "$1,500")]),
    ("The budget is $5k.", "Up to $5,000.", []),
    ("Give two weeks of notice.", "Give at least 2 weeks of notice.", []),
    ("Give 2 weeks of notice.", "Give at least two weeks of notice.", []),
    ("Give three weeks of notice.", "Give at least two weeks of notice.", [("number", "three")]),
    ("The term is ten (10) years.", "A term of 10 years.", []),
    ("The match is 4%.", "We match 4 percent of salary.", []),
    ("The match is 5%.", "We match 4 percent of salary.", [("number", "5")]),
    ("A budget of two hundred dollars.", "Budget: $200.", []),
    ("Twenty-five people may attend.", "Up to 25 people attend.", []),
    ("It takes one week.", "It takes a week.", []),
    ("Pick one of the two rooms.", "There are 2 rooms.", []),  # "one of": a pronoun, not a figure
    # clock times, 12- or 24-hour
    ("Standup is at 3:30 PM.", "Standup: 15:30 daily.", []),
    ("Standup is at 3pm.", "Standup at 3:00 p.m.", []),
    ("Standup is at 4pm.", "Standup at 3:00 p.m.", [("time", "4pm")]),
    # dates: month and weekday names, abbreviations as the full name
    ("Days expire by 31 March.", PTO, []),
    ("Days expire by 31 Mar.", PTO, []),
    ("Days expire by 31 April.", PTO, [("date", "April")]),
    ("Payroll runs on Fridays.", "Payroll runs every Friday.", []),
    ("Payroll runs on Thursday.", "Payroll runs every Friday.", [("date", "Thursday")]),
    # identifiers, verbatim and case-insensitive, not inside a longer token
    ("Ask in #eng-help first.", "Questions go to #ENG-HELP.", []),
    ("Ask in #eng-help first.", "Questions go to #eng-helpdesk.", [("identifier", "#eng-help")]),
    ("Run `/incident` to start.", "Type /incident in Slack.", []),
    ("Write to people-ops@example.com today.", "Mail people-ops@example.com.", []),
    ("Write to hr@example.com today.", "Mail people-ops@example.com.", [("identifier", "hr@example.com")]),
    ("File form SF-182 first.", "Training needs an SF-182.", []),
    ("File form SF-128 first.", "Training needs an SF-182.", [("identifier", "SF-128")]),
    ("Set the ACCOUNT_CODE field.", "Fill in account_code.", []),
    ("Set the COST_CENTER field.", "Fill in account_code.", [("identifier", "COST_CENTER")]),
    # names: capitalised words not starting the sentence, case-insensitive
    ("Requests go through PeopleDesk.", "File it in peopledesk.", []),
    ("Requests go through Workday.", "File it in PeopleDesk.", [("name", "Workday")]),
    ("Ask Dana in Lisbon.", "Ask your manager.", [("name", "Dana"), ("name", "Lisbon")]),
])
def test_each_fact_kind_is_found_in_the_passage_or_reported(sentence: str, passage: str, absent: list) -> None:
    assert missing(sentence, passage) == absent


def test_a_sentence_of_generic_words_is_grounded_whatever_the_passage() -> None:
    sentence = "You should ask your manager before you go, and follow up if nobody answers."
    assert facts(sentence) == []
    assert ungrounded(sentence, ["Nothing related at all."]) == []
    assert ungrounded(sentence, []) == []


def test_the_first_word_is_not_a_name_but_a_later_capitalised_one_is() -> None:
    assert facts("Managers approve it.") == []
    assert [(f.kind, f.text) for f in facts("It is approved by Managers.")] == [("name", "Managers")]


def test_a_figure_inside_an_identifier_or_a_time_is_not_a_figure_of_its_own() -> None:
    found = [(f.kind, f.text) for f in facts("File SF-182 by 3:30 PM, version v1.2.3 of config.yaml.")]
    assert found == [("identifier", "SF-182"), ("time", "3:30 PM"), ("identifier", "v1.2.3"),
                     ("identifier", "config.yaml")]


def test_a_phone_number_quoted_verbatim_is_grounded() -> None:
    passage = "Please direct questions to the payroll help desk: 1-844-303-6515 or email them."
    assert ungrounded(passage, [passage]) == []
    assert ungrounded("Call (877) 472-6716 to book.", ["Call (877) 472-6716 to book."]) == []


def test_any_cited_passage_may_hold_a_fact() -> None:
    sentence = "PTO is 25 days, requested in PeopleDesk."
    assert missing(sentence, PTO) == [("name", "PeopleDesk")]
    assert missing(sentence, PTO, "Requests go through PeopleDesk.") == []
    assert missing(sentence) == [("number", "25"), ("name", "PeopleDesk")]  # no passage: nothing is held
