"""Extractive answers that read as written, through the real agent over a real index.

The example wiki plus a runbook with a long troubleshooting table: follow-ups carry the earlier
turn's terms (not its whole text) and are routed as follow-ups, a two-part question gets a cited
sentence for each part, an error code in a long table is answered with its row and the table's
header row, a table row never answers a question about something else, and sentences are whole
(a sentence wrapped over two lines, or with "e.g." in it, is quoted in full).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent.models import HistoryMessage, Reply, Turn
from agent.text import sentence_spans
from app.wiring import Runtime
from index.embeddings import CachedEmbedder

from tests.helpers import agent_over_wiki, public_viewer

_ROWS = "\n".join(f"| E{n} | Agent stopped after an update to build {n} | Restart the agent service |"
                  for n in range(100, 160))
RUNBOOK = f"""# Foo agent runbook

## Install

Install the foo agent from the internal package mirror. Requires VPN access: connect to the
corporate VPN before you start, or the download times out. Ask #it-help for a VPN account.

## Troubleshooting

| Code | Symptom | Fix |
|------|---------|-----|
{_ROWS}
| E142X | Disk full on the build host | Clear /var/cache/foo and restart |
| E42 | Licence server unreachable | Renew the licence token with foo-admin renew |
"""

EMPLOYMENT = """# Employment verification

## Verifying employment and income

When a bank, a landlord or a car dealer needs to check where you work and what you earn, they call the
Employment Verification Desk at +1 555 0100, open 24 hours a day. We never confirm your salary by email.

## Reference letters

Your manager writes reference letters; ask them at least two weeks before you need one.
"""

PARKING_FAQ = """# Parking FAQ

Can I park at the Lisbon office for free? Staff park free in the basement garage on level -2; the gate
opens with your office badge. Visitors use the paid public car park across the street.
"""

OFFSITE = """# Company offsite

## Travel and lodging

Twice a year the whole company meets in Porto for a week. We book a block of rooms in a hotel near the venue, so
you do not need to find a place to stay.

## Summer party

The summer party is held at the Quinta da Aveleda winery every July.

## Employee assistance

The Employee Assistance Program is run by ComPsych: call or email them for confidential help with
health, family or money worries.

## Bereavement

After a pregnancy loss, both parents take at least 2 weeks of paid leave.

If someone close to you dies, take as much time off as you need and keep your manager posted.

## Whistleblowing

If you see illegal or dangerous behaviour at work, please email Priya and Tomas, who keep it confidential.

## Video calls

We use video calls for every team meeting, and they should start on time.

The tool for them is Google Meet.

## Vocabulary

### PDI

“Please do investigate”. Seen most often on to-do lists to flag a task we will look into, feasible or not.

## Levels

Senior engineers lead projects across several teams and mentor others (level L4).
"""

HOURS = """# Working hours

## Summer hours

From May 1 through August 31 we work 4-day work weeks during the summer, with Fridays off.

## Balance

We limit ourselves to a 40-hour (32-hour in the summer) work week. Nobody is expected to answer messages at night.
"""

_LINES = "\n".join(f"- **Client project {n} - #{n}:** Time spent delivering work for client project {n}."
                   for n in range(1200, 1240))
_RULES = "\n\n".join(f"## Timesheet line rule {n}\n\nWhat is a timesheet line for? Rule {n}: a timesheet line is for one "
                      f"kind of work, and each line is for the hours you log against it." for n in range(1, 9))
TIMESHEET = f"""# Timesheets

## What a timesheet line is

Every hour you work goes on a timesheet line. Submit your timesheet every Friday before 5pm.

## Out of office

Log holidays, sick leave and annual leave to timesheet line #670, Out of office, so we know you were not
billing a client for those hours.

{_RULES}

## Lines

{_LINES}
- **Hiring and onboarding - #1241:** Time spent interviewing candidates or onboarding new staff.
"""


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory, embedder: CachedEmbedder) -> Iterator[Runtime]:
    pages = {"it/foo-runbook.md": RUNBOOK, "company/parking-faq.md": PARKING_FAQ, "finance/timesheets.md": TIMESHEET,
             "people/employment-verification.md": EMPLOYMENT, "company/offsite.md": OFFSITE,
             "company/hours.md": HOURS}
    with agent_over_wiki(tmp_path_factory.mktemp("answers"), embedder, pages) as rt:
        yield rt


def ask(runtime: Runtime, text: str, history: tuple[str, ...] = ()) -> Reply:
    return runtime.agent.answer(Turn(viewer=public_viewer(), text=text, history=tuple(HistoryMessage.own(h) for h in history),
                                     platform="test"))


def test_a_followup_carries_the_earlier_terms_and_is_routed_as_a_followup(runtime: Runtime) -> None:
    reply = ask(runtime, "can I carry it over into next year?", ("how much PTO do we get?",))
    assert reply.route == "followup"
    rewrite = next(s["standalone"] for s in reply.trace.steps if s["step"] == "rewrite_followup")
    assert rewrite == "can I carry PTO over into next year?"  # the topic replaces "it"; no "how much ... get"
    assert not reply.refused, reply.text
    assert "5 unused PTO days" in reply.text
    assert any(c.doc_id == "people/time-off.md" for c in reply.citations)


def test_a_new_question_in_an_old_thread_keeps_its_own_words(runtime: Runtime) -> None:
    reply = ask(runtime, "how many weeks of parental leave do new parents get?", ("how much PTO do we get?",))
    assert reply.route == "knowledge"
    assert not reply.refused and "18 weeks" in reply.text
    assert all(c.doc_id == "people/parental-leave.md" for c in reply.citations[:1])


def test_a_two_part_question_is_answered_for_both_parts_with_citations(runtime: Runtime) -> None:
    reply = ask(runtime, "how many weeks of parental leave do I get, and when do I have to submit my expenses?")
    assert not reply.refused, reply.text
    assert "18 weeks" in reply.text and "30 days" in reply.text
    docs = {c.doc_id for c in reply.citations}
    assert {"people/parental-leave.md", "finance/travel-and-expenses.md"} <= docs
    assert "Nothing found" not in reply.text


def test_an_error_code_in_a_long_table_is_answered_with_its_row_and_header(runtime: Runtime) -> None:
    reply = ask(runtime, "how do I fix error E142?")
    assert not reply.refused, reply.text
    assert ("| Code | Symptom | Fix |\n|---|---|---|\n| E142 | Agent stopped after an update to build 142 | "
            "Restart the agent service |") in reply.text
    quotes = [c.quote for c in reply.citations]
    assert any(q.startswith("E142 |") for q in quotes)  # the row, verbatim
    assert any(q.startswith("Code | Symptom | Fix") for q in quotes)  # and its header, verbatim
    assert "E142X" not in reply.text and "E141" not in reply.text and "E143" not in reply.text


def test_a_table_row_never_answers_an_unrelated_question(runtime: Runtime) -> None:
    reply = ask(runtime, "what should I do if I need VPN access for the foo agent install?")
    assert not any(c.quote.startswith("E1") for c in reply.citations), reply.text
    assert "Restart the agent service" not in reply.text
    if not reply.refused:
        assert "Requires VPN access" in reply.text


def test_a_paraphrase_under_the_relevance_floor_is_answered_when_both_retrievers_rank_its_passage_first(
        runtime: Runtime) -> None:
    reply = ask(runtime, "the landlord wants to check my work, who does she call")
    gate = reply.trace.gate or {}
    assert gate["top_cosine"] < 0.43, gate  # under the default relevance floor: only agreed support admits it
    assert not reply.refused, reply.text
    assert "Employment Verification Desk" in reply.text
    assert gate["features"]["dense_rank"] == 1 and gate["features"]["bm25_rank"] == 1


def test_agreed_support_is_not_admitted_when_a_word_of_the_question_is_on_no_page(runtime: Runtime) -> None:
    # "tenancy" is on no page: below the floor the gate cannot tell a chat word from the very thing asked
    reply = ask(runtime, "the landlord wants to check my work for my tenancy, who does she call")
    assert reply.refused, reply.text
    assert "Employment Verification Desk" not in reply.text
    assert "tenancy" in (reply.trace.gate or {})["reason"]


@pytest.mark.parametrize("question", [
    "which hotel do we stay at for the offsite in porto?",  # the page books "a hotel", never names one
    "whats the phone number for ComPsych?",  # "call or email them", no number
    "how many years of experience do i need to be a senior engineer?",  # "level L4" is a number, not a period
])
def test_a_near_miss_whose_page_does_not_state_the_type_asked_is_refused(runtime: Runtime, question: str) -> None:
    reply = ask(runtime, question)
    assert reply.refused, reply.text
    assert "asked for" in (reply.trace.gate or {})["reason"]


@pytest.mark.parametrize(("question", "expected"), [
    ("which winery hosts the summer party?", "Quinta da Aveleda"),
    ("whats the phone number of the employment verification desk?", "+1 555 0100"),
])
def test_the_same_types_are_answered_when_the_page_states_them(runtime: Runtime, question: str, expected: str) -> None:
    reply = ask(runtime, question)
    assert not reply.refused, reply.text
    assert expected in reply.text


def test_a_period_question_quotes_the_sentence_counting_in_the_unit_asked(runtime: Runtime) -> None:
    reply = ask(runtime, "how many hours a week do we work during the summer?")
    assert not reply.refused, reply.text
    assert reply.text.startswith("We limit ourselves to a 40-hour (32-hour in the summer) work week."), reply.text


def test_an_unbounded_period_answers_how_much_time(runtime: Runtime) -> None:
    reply = ask(runtime, "my grandad died last night, how much time can i take off?")
    assert not reply.refused, reply.text
    assert reply.text.startswith("If someone close to you dies, take as much time off as you need"), reply.text


def test_a_first_name_after_a_verb_of_contacting_answers_who(runtime: Runtime) -> None:
    reply = ask(runtime, "if i see something illegal at work like fraud, who do i report it to?")
    assert not reply.refused, reply.text
    assert "please email Priya and Tomas" in reply.text


def test_what_we_use_asks_for_a_name(runtime: Runtime) -> None:
    reply = ask(runtime, "what do we use for video calls?")
    assert not reply.refused, reply.text
    assert reply.text.startswith("The tool for them is Google Meet."), reply.text


def test_a_sentence_too_short_to_stand_alone_is_quoted_with_the_next() -> None:
    text = "“Please do investigate”. Seen most often on to-do lists to flag a task.\n\n1. Check the logs for errors first."
    assert [s.text for s in sentence_spans(text)] == [
        "“Please do investigate”. Seen most often on to-do lists to flag a task.", "Check the logs for errors first."]


def test_a_glossary_entry_is_answered_with_its_short_first_sentence(runtime: Runtime) -> None:
    reply = ask(runtime, "what does PDI mean on a todo")
    assert not reply.refused, reply.text
    assert "Please do investigate" in reply.text


def test_sentences_are_whole_across_line_wraps_and_abbreviations() -> None:
    text = ("Meltano will assist with travel expenses (e.g.\nflights and trains) for up to $150 per visit. "
            "Lodging is excluded from the visiting grant.\n\n- Whale: > 2000 pipelines\n\n```\nnot a sentence.\n```")
    spans = [s.text for s in sentence_spans(text)]
    assert spans == ["Meltano will assist with travel expenses (e.g.\nflights and trains) for up to $150 per visit.",
                     "Lodging is excluded from the visiting grant.", "Whale: > 2000 pipelines"]
    assert all(text[s.start:s.end] == s.text for s in sentence_spans(text))


def test_a_part_naming_only_an_answer_type_or_leaning_on_a_pronoun_is_not_a_part_of_its_own() -> None:
    from agent.rewrite import question_parts

    assert question_parts("how long should 1-1s with my manager be and how often") == []
    assert question_parts("how do i get my fix into the next patch release and when does that ship?") == []
    assert question_parts("new hire here - how do i get my laptop and what do i need to install on it first?") == [
        "how do i get my laptop", "what do i need to install on it first"]



def test_a_question_asking_an_amount_quotes_the_table_row_that_states_it(runtime: Runtime) -> None:
    reply = ask(runtime, "how much can I spend on a hotel in Australia?")
    assert not reply.refused, reply.text
    assert "$200" in reply.text, reply.text
    assert any(c.quote.startswith("Australia and New Zealand |") for c in reply.citations)


def test_a_rate_is_read_from_a_table_row_under_its_header_and_refused_in_a_unit_it_is_not_stated_in(runtime: Runtime) -> None:
    # The row "| United States and Canada | $250 | $75 |" holds no word of the question: the gate reads it under its
    # header ("Hotel per night"), as the composer quotes it.
    night = ask(runtime, "whats the hotel limit per night in the US?")
    assert not night.refused and "$250" in night.text and "Hotel per night" in night.text, night.text
    # A period converts (a nightly limit answers "per week"); a trip is no period, and the wiki states no limit per
    # trip: a neighbouring figure is no answer.
    assert not ask(runtime, "how much is the hotel allowance per week?").refused
    assert ask(runtime, "whats the hotel limit per trip?").refused


def test_a_code_number_in_the_question_is_matched_as_written(runtime: Runtime) -> None:
    # "1241" is a code, not an amount: the passage holding it verbatim answers, not the page's other lines.
    reply = ask(runtime, "what is timesheet line 1241 for")
    assert not reply.refused and "Hiring and onboarding" in reply.text, reply.text


def test_a_plural_amount_word_asks_for_an_amount_too(runtime: Runtime) -> None:
    reply = ask(runtime, "what if the hotel I want there costs more?", ("how much can I spend on a hotel in Australia?",))
    assert not reply.refused, reply.text
    assert "$200" in reply.text, reply.text


def test_a_question_about_paying_for_something_is_answered_with_the_amount(runtime: Runtime) -> None:
    reply = ask(runtime, "will the company pay for my hotel in Australia?")
    assert not reply.refused, reply.text
    assert "$200" in reply.text, reply.text


def test_a_list_item_is_quoted_as_its_list_under_its_lead_in(runtime: Runtime) -> None:
    reply = ask(runtime, "how many business days before the last day is the offboarding request opened?")
    assert not reply.refused, reply.text
    assert ("When someone on your team leaves, the manager:\n- Opens an offboarding request "
            "in #ask-it at least 5 business days") in reply.text, reply.text
    assert any(c.quote.startswith("Opens an offboarding request") for c in reply.citations)  # the item, verbatim


def test_a_question_in_the_text_is_never_quoted_as_the_answer(runtime: Runtime) -> None:
    reply = ask(runtime, "can I park at the Lisbon office for free?")
    assert not reply.refused, reply.text
    assert "basement garage" in reply.text
    assert not any(c.quote.rstrip().endswith("?") for c in reply.citations), reply.text


def test_each_part_is_searched_with_the_questions_setting_and_a_leaning_part_with_the_part_before() -> None:
    from agent.rewrite import part_queries

    got = part_queries("moving from lisbon to berlin. do i need a visa, and which tax forms do i file for it?")
    assert got == [("do i need a visa", "do i need a visa moving lisbon berlin"),  # the setting comes along
                   ("which tax forms do i file for it", "which tax forms do i file for it moving lisbon berlin visa")]
    free = part_queries("how many weeks of parental leave do I get, and when do I have to submit my expenses?")
    assert free == [("how many weeks of parental leave do I get", "how many weeks of parental leave do I get"),
                    ("when do I have to submit my expenses", "when do I have to submit my expenses")]
    assert part_queries("how long is parental leave?") == []


def test_a_part_with_no_support_is_named_while_the_supported_part_is_answered(runtime: Runtime) -> None:
    reply = ask(runtime, "how many weeks of parental leave do I get, and is there a stipend for pet insurance?")
    assert not reply.refused, reply.text
    assert "18 weeks" in reply.text
    assert {c.doc_id for c in reply.citations} == {"people/parental-leave.md"}, (reply.text, reply.trace.steps)
    assert "Nothing found on: “is there a stipend for pet insurance”" in reply.text
    parts = {s["part"]: s["sufficient"] for s in reply.trace.steps if s["step"] == "part_gate"}
    assert parts == {"how many weeks of parental leave do I get": True, "is there a stipend for pet insurance": False}


def test_the_first_search_searches_each_part_as_its_gate_reads_it(runtime: Runtime) -> None:
    # The turn's first retrieval fuses the whole question with each part's own query, so the part
    # gates read hits already at hand (no second search per part).
    reply = ask(runtime, "new hire here - how do i get my laptop and what do i need to install on it first?")
    first = [q["query"] for q in reply.trace.queries if q.get("attempt") == 0 and "fused_from" not in q]
    gated = [s["query"] for s in reply.trace.steps if s["step"] == "part_gate"]
    assert gated == ["how do i get my laptop new hire", "what do i need to install on it first new hire laptop"]
    assert set(gated) <= set(first)
    assert not any(q.get("attempt") == "part" for q in reply.trace.queries)


def test_a_multi_part_question_is_refused_when_no_part_and_not_the_whole_has_support(runtime: Runtime) -> None:
    reply = ask(runtime, "is there a stipend for pet insurance, and how much is the yacht allowance?")
    assert reply.refused and not reply.citations, reply.text


def test_eval_reports_the_mean_length_of_the_answered_replies(runtime: Runtime) -> None:
    # answer_chars per row (0 for a refusal), answer_chars_mean over the answerable questions answered.
    from bot.evaluate import EvalQuestion, run_eval

    questions = [EvalQuestion("a", "how much PTO do we get?", "single", ("people/time-off.md",), ("PTO",)),
                 EvalQuestion("u", "what is the airspeed of an unladen swallow?", "unanswerable", (), ())]
    texts: dict[str, tuple[bool, str]] = {}
    result = run_eval(runtime.agent, questions, lookup=runtime.index.dense.get,
                      progress=lambda q, reply, row: texts.__setitem__(q.id, (reply.refused, reply.text)))
    rows = {r["id"]: r for r in result["per_question"]}
    assert not texts["a"][0] and rows["a"]["answer_chars"] == len(texts["a"][1]) > 0
    assert texts["u"][0] and rows["u"]["answer_chars"] == 0
    assert result["answers"]["answer_chars_mean"] == len(texts["a"][1])


