"""Extractive answers that read as written, through the real agent over a real index.

The example wiki plus a runbook with a long troubleshooting table: follow-ups carry the earlier
turn's terms (not its whole text) and are routed as follow-ups, a two-part question gets a cited
sentence for each part, an error code in a long table is answered with its row and the table's
header row, a table row never answers a question about something else, and sentences are whole
(a sentence wrapped over two lines, or with "e.g." in it, is quoted in full).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from agent.models import HistoryMessage, Reply, Turn
from agent.text import sentence_spans
from app.settings import Settings
from app.wiring import Runtime, build_agent
from index.embeddings import CachedEmbedder
from connectors.folder import FolderSource
from index.knowledge import KnowledgeIndex
from index.indexer import Indexer

from helpers import WIKI, public_viewer, public_ctx

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

PARKING_FAQ = """# Parking FAQ

Can I park at the Lisbon office for free? Staff park free in the basement garage on level -2; the gate
opens with your office badge. Visitors use the paid public car park across the street.
"""


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory, embedder: CachedEmbedder) -> Iterator[Runtime]:
    root = tmp_path_factory.mktemp("answers")
    wiki = root / "wiki"
    shutil.copytree(WIKI, wiki)
    (wiki / "it" / "foo-runbook.md").write_text(RUNBOOK, encoding="utf-8")
    (wiki / "company" / "parking-faq.md").write_text(PARKING_FAQ, encoding="utf-8")
    index = KnowledgeIndex(root / "index", embedder)
    report = Indexer(index).run(FolderSource(wiki))
    assert not report.errors, report
    yield build_agent(Settings(chatops_data_dir=root / "data"), index=index)
    index.close()


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
    assert "Code: E142; Symptom: Agent stopped after an update to build 142; Fix: Restart the agent service" \
        in reply.text
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


def test_a_plural_amount_word_asks_for_an_amount_too(runtime: Runtime) -> None:
    reply = ask(runtime, "what if the hotel I want there costs more?", ("how much can I spend on a hotel in Australia?",))
    assert not reply.refused, reply.text
    assert "$200" in reply.text, reply.text


def test_a_question_about_paying_for_something_is_answered_with_the_amount(runtime: Runtime) -> None:
    reply = ask(runtime, "will the company pay for my hotel in Australia?")
    assert not reply.refused, reply.text
    assert "$200" in reply.text, reply.text


def test_a_list_item_is_shown_under_its_heading_and_the_lead_in_of_its_list(runtime: Runtime) -> None:
    reply = ask(runtime, "how many business days before the last day is the offboarding request opened?")
    assert not reply.refused, reply.text
    assert ("Manager checklist \u2014 When someone on your team leaves, the manager: Opens an offboarding request "
            "in #ask-it at least 5 business days") in reply.text, reply.text
    assert any(c.quote.startswith("Opens an offboarding request") for c in reply.citations)  # the item, verbatim


def test_a_command_is_quoted_from_a_passage_past_the_first_eight(runtime: Runtime) -> None:
    # The answerer reads the first eight passages; a question asking for a command (a figure, an
    # identifier) also reads the next eight for a sentence that states it (a small dense model can
    # rank the one passage holding "/genie whoisoncall" ninth).
    from agent.extractive import ExtractiveAnswerer, ExtractiveConfig
    from agent.terms import key_terms
    from tools.knowledge_search import KnowledgeSearchArgs

    q = "which slash command declares an incident?"
    res = runtime.tools.call("knowledge.search", KnowledgeSearchArgs(query=q, k=30, retriever="hybrid"),
                             public_ctx(user_id="U1"))
    holding = [e for e in res.evidence if "/declare-incident" in e.chunk.text]
    others = [e for e in res.evidence if "/declare-incident" not in e.chunk.text]
    assert holding and len(others) >= 8
    terms = key_terms(q, runtime.search.analyze, runtime.search.idf)
    draft = ExtractiveAnswerer(ExtractiveConfig(), runtime.search.analyze).answer(
        [*others[:8], *holding], terms, question=q)
    assert "`/declare-incident` slash command" in draft.text, draft.text
    assert all(c.quote in next(e.chunk.text for e in res.evidence if e.chunk.chunk_id == c.chunk_id)
               for c in draft.citations)


def test_a_question_in_the_text_is_never_quoted_as_the_answer(runtime: Runtime) -> None:
    reply = ask(runtime, "can I park at the Lisbon office for free?")
    assert not reply.refused, reply.text
    assert "basement garage" in reply.text
    assert not any(c.quote.rstrip().endswith("?") for c in reply.citations), reply.text


def test_a_sentence_between_two_quoted_sentences_of_a_paragraph_is_quoted_too() -> None:
    # "Moving cross-border is complex. [...] Notify the team 30 days prior." without the sentence in
    # between drops whom to notify and reads as a non sequitur: the gap is quoted, verbatim.
    from agent.extractive import ExtractiveAnswerer, ExtractiveConfig
    from agent.terms import KeyTerms
    from connectors.models import Chunk
    from tools.knowledge_search import Evidence

    text = ("Relocating abroad involves taxes and visas for every relocation. Write to moves@example.com "
            "with your plans and your start date there. Give notice of the relocation at least 30 days ahead.\n\n"
            "Relocation within one country needs no notice.")
    chunk = Chunk("c1", "folder", "moving.md", "Moving", ("Abroad",), "", text)
    analyze = lambda s: [w.strip(".,").lower() for w in s.split()]  # noqa: E731
    terms = KeyTerms({"relocation": 2.0, "notice": 2.0, "abroad": 1.0, "relocating": 1.0})
    draft = ExtractiveAnswerer(ExtractiveConfig(), analyze).answer(
        [Evidence(chunk, 1.0, cosine=0.2)], terms, question="relocating abroad, how much notice for the relocation?")
    assert "30 days" in draft.text and "Relocating abroad" in draft.text, draft.text
    assert "moves@example.com" in draft.text, draft.text
    assert all(c.quote in text for c in draft.citations)


def test_a_question_asking_which_option_to_pick_quotes_the_sentence_naming_one() -> None:
    # "what option do I pick if I'm sick?" is answered by the sentence naming the option in quotes,
    # not by one that only mentions being sick.
    from agent.extractive import ExtractiveAnswerer, ExtractiveConfig
    from agent.terms import KeyTerms
    from connectors.models import Chunk
    from tools.knowledge_search import Evidence

    general = Chunk("c1", "folder", "time-off.md", "Time off", ("Tracking time off",), "",
                    "If you are sick or have a medical appointment, get help first and log your time off later.")
    options = Chunk("c2", "folder", "time-off.md", "Time off", ("Short-term leave",), "",
                    "If you or a family member is ill, use the \"Out Sick\" option in the leave list.")
    analyze = lambda s: [w.strip(".,?\"").lower() for w in s.split()]  # noqa: E731
    terms = KeyTerms({"sick": 3.0, "option": 1.0, "time": 1.0})
    draft = ExtractiveAnswerer(ExtractiveConfig(max_sentences=1), analyze).answer(
        [Evidence(general, 1.0, cosine=0.45), Evidence(options, 0.9, cosine=0.40)], terms,
        question="what option do i pick if im sick?")
    assert "Out Sick" in draft.text, draft.text


def test_a_sentence_pointing_back_to_a_quoted_one_is_quoted_with_it_even_over_a_weaker_pick() -> None:
    # "This means you have to..." says what the quoted sentence implies (here the fact asked): it is
    # quoted right after it, and when the answer is full it displaces the weakest later pick.
    from agent.extractive import ExtractiveAnswerer, ExtractiveConfig
    from agent.terms import KeyTerms
    from connectors.models import Chunk
    from tools.knowledge_search import Evidence

    text = ("Meetings you accepted are not declined automatically by the leave event. This means you have to "
            "create an out-of-office event in Google Calendar yourself.")
    main = Chunk("c1", "folder", "pto.md", "PTO", ("Calendar",), "", text)
    other = Chunk("c2", "folder", "norms.md", "Norms", ("Meetings",), "",
                  "Meetings on Fridays are optional for the whole team and can be declined without notice.")
    analyze = lambda s: [w.strip(".,?").lower() for w in s.split()]  # noqa: E731
    terms = KeyTerms({"meetings": 2.0, "declined": 2.0, "automatically": 2.0})
    draft = ExtractiveAnswerer(ExtractiveConfig(max_chars=200), analyze).answer(
        [Evidence(main, 1.0, cosine=0.5), Evidence(other, 0.9, cosine=0.45)], terms,
        question="will my meetings be declined automatically?")
    assert "Google Calendar" in draft.text, draft.text
    assert draft.text.index("not declined") < draft.text.index("Google Calendar"), draft.text
    assert all(c.quote in (text if c.chunk_id == "c1" else other.text) for c in draft.citations)


def test_a_question_asking_whether_something_is_allowed_prefers_the_sentence_stating_the_rule() -> None:
    # "am I allowed to freelance on the side?" is answered by the rule ("you must request approval if it
    # exceeds 15 hours a week"), not by a sentence that only shares the question's words.
    from agent.extractive import ExtractiveAnswerer, ExtractiveConfig
    from agent.terms import KeyTerms
    from connectors.models import Chunk
    from tools.knowledge_search import Evidence

    text = ("Many of our engineers enjoy side projects in their spare time. "
            "Outside work must be disclosed and needs approval if it exceeds 15 hours per week.")
    chunk = Chunk("c1", "folder", "outside.md", "Outside employment", ("Rules",), "", text)
    analyze = lambda s: [w.strip(".,?").lower() for w in s.split()]  # noqa: E731
    terms = KeyTerms({"side": 2.0, "work": 1.0, "freelance": 3.0})
    draft = ExtractiveAnswerer(ExtractiveConfig(max_sentences=1), analyze).answer(
        [Evidence(chunk, 1.0, cosine=0.45)], terms, question="am i allowed to do freelance work on the side?")
    assert "15 hours" in draft.text, draft.text
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


def test_a_where_question_prefers_the_sentence_naming_a_concrete_place() -> None:
    # "where do we tell users?" is answered by the sentence naming the channel, not by one that only
    # says users are told.
    from agent.extractive import ExtractiveAnswerer, ExtractiveConfig
    from agent.terms import KeyTerms
    from connectors.models import Chunk
    from tools.knowledge_search import Evidence

    vague = Chunk("c1", "folder", "outages.md", "Outages", ("Notify",), "",
                  "During a vendor outage we should still notify users as appropriate.")
    place = Chunk("c2", "folder", "outages.md", "Outages", ("Channels",), "",
                  "The #status-updates channel is where we notify users of an outage.")
    analyze = lambda s: [w.strip(".,?").lower() for w in s.split()]  # noqa: E731
    terms = KeyTerms({"users": 2.0, "notify": 1.0, "outage": 1.0})
    draft = ExtractiveAnswerer(ExtractiveConfig(max_sentences=1), analyze).answer(
        [Evidence(vague, 1.0, cosine=0.50), Evidence(place, 0.9, cosine=0.45)], terms,
        question="where do we notify users during an outage?")
    assert "#status-updates" in draft.text, draft.text


def test_a_part_is_answered_by_its_own_words_and_the_questions_setting_breaks_ties() -> None:
    # Two parts share the setting ("the office is closed"); each part's sentence must hold its own
    # words, and among those the one that also speaks to the setting is preferred. A part nothing
    # speaks to is named; one the gate refused is named without being searched for sentences.
    from agent.extractive import ExtractiveAnswerer, ExtractiveConfig, PartEvidence
    from agent.terms import KeyTerms
    from connectors.models import Chunk
    from tools.knowledge_search import Evidence

    generic = Chunk("c1", "folder", "visitors.md", "Visitors", ("Badges",), "",
                    "Visitors pick up a badge at reception.")
    closed = Chunk("c2", "folder", "closures.md", "Closures", ("Badges",), "",
                   "When the office is closed, visitors get a badge from security.")
    analyze = lambda s: [w.strip(".,?").lower() for w in s.split()]  # noqa: E731
    setting = {"office": 1.0, "closed": 1.0}
    badge = PartEvidence("where do visitors get a badge", KeyTerms({"visitors": 2.0, "badge": 2.0, **setting}),
                         [Evidence(generic, 1.0, cosine=0.5), Evidence(closed, 0.9, cosine=0.5)],
                         support=frozenset({"c1", "c2"}))
    parking = PartEvidence("can they park", KeyTerms({"park": 3.0, **setting}), [Evidence(generic, 1.0, cosine=0.5)])
    refused = PartEvidence("is lunch served", KeyTerms({"lunch": 3.0, **setting}), [], supported=False)
    draft = ExtractiveAnswerer(ExtractiveConfig(part_sentences=1), analyze).answer_parts([badge, parking, refused])
    assert "from security" in draft.text and "at reception" not in draft.text, draft.text
    assert draft.unanswered == ["can they park", "is lunch served"]
    assert "Nothing found on: “can they park”; “is lunch served”." in draft.text


def test_a_how_to_question_quotes_the_steps_after_the_sentence_that_names_the_way() -> None:
    # "If Zoom is down, use Slack for calls. To use it, do the following:" names the way; the numbered
    # steps after the lead-in are how, which is what "how do we ...?" asks: they are quoted too.
    from agent.extractive import ExtractiveAnswerer, ExtractiveConfig
    from agent.terms import KeyTerms
    from connectors.models import Chunk
    from tools.knowledge_search import Evidence

    text = ("If your badge stops working you can reset the badge yourself. To do so, do the following:\n\n"
            "1. Open the facilities portal.\n1. Choose `Reset badge` and tap it on the reader.\n\n"
            "Lost badges are replaced by reception.")
    chunk = Chunk("c1", "folder", "badges.md", "Badges", ("Resetting",), "", text)
    analyze = lambda s: [w.strip(".,?:`").lower() for w in s.split()]  # noqa: E731
    terms = KeyTerms({"badge": 2.0, "reset": 2.0})
    answerer = ExtractiveAnswerer(ExtractiveConfig(max_sentences=1), analyze)
    how = answerer.answer([Evidence(chunk, 1.0, cosine=0.5)], terms, question="how do i reset my badge?")
    assert "`Reset badge` and tap it on the reader" in how.text and "Open the facilities portal" in how.text, how.text
    assert all(c.quote in text for c in how.citations)
    what = answerer.answer([Evidence(chunk, 1.0, cosine=0.5)], terms, question="can a badge reset itself?")
    assert "facilities portal" not in what.text, what.text


def _earning_answerer(**config):
    from agent.extractive import ExtractiveAnswerer, ExtractiveConfig

    analyze = lambda s: [w.strip(".,?:`\"").lower() for w in s.split()]  # noqa: E731
    return ExtractiveAnswerer(ExtractiveConfig(**config), analyze)


def test_a_sentence_of_another_passage_adding_no_key_term_nor_the_asked_type_is_left_out() -> None:
    # "how do I declare an incident?": the definition of an incident and the SEV1 status-page cadence
    # share the question's words and sit on close pages, but add nothing the first sentence lacks.
    from agent.terms import KeyTerms
    from connectors.models import Chunk
    from tools.knowledge_search import Evidence

    how = Chunk("c1", "folder", "incidents.md", "Incidents", ("Declaring",), "",
                "To declare an incident, type /incident in the incidents channel.")
    definition = Chunk("c2", "folder", "glossary.md", "Glossary", ("Incident",), "",
                       "An incident is an unplanned disruption that customers notice.")
    cadence = Chunk("c3", "folder", "sev1.md", "SEV1", ("Status page",), "",
                    "During a SEV1 incident the status page is updated every 30 minutes.")
    terms = KeyTerms({"declare": 3.0, "incident": 1.0})
    draft = _earning_answerer().answer(
        [Evidence(how, 1.0, cosine=0.7), Evidence(definition, 0.9, cosine=0.7), Evidence(cadence, 0.8, cosine=0.7)],
        terms, question="how do I declare an incident?")
    assert "/incident" in draft.text, draft.text
    assert "unplanned disruption" not in draft.text and "every 30 minutes" not in draft.text, draft.text
    assert [c.chunk_id for c in draft.citations] == ["c1"]


def test_a_sentence_that_fails_to_earn_does_not_stop_the_search_for_one_that_does() -> None:
    # The first sentence covers every key term; the next best by gain (another page's definition) earns
    # nothing, but the quoted passage's own step with the command still does and must be found.
    from agent.terms import KeyTerms
    from connectors.models import Chunk
    from tools.knowledge_search import Evidence

    how = Chunk("c1", "folder", "incidents.md", "Incidents", ("Declaring an incident",), "",
                "Anyone can declare an incident, not only engineers.\n\n"
                "1. In any channel, type the `/declare-incident` command with the severity.")
    definition = Chunk("c2", "folder", "glossary.md", "Glossary", ("Incident",), "",
                       "An incident is any unplanned event that hurts customers; declare one when unsure.")
    terms = KeyTerms({"declare": 3.0, "incident": 1.0})
    draft = _earning_answerer().answer([Evidence(how, 1.0, cosine=0.75), Evidence(definition, 0.95, cosine=0.74)],
                                       terms, question="how do I declare an incident?")
    assert "/declare-incident" in draft.text, draft.text
    assert "unplanned event" not in draft.text, draft.text


def test_a_sentence_stating_the_asked_figure_is_kept_though_it_adds_no_key_term() -> None:
    # "how long until the secondary gets paged?": the sentence with "12 hours" shares no word with the
    # question (the first sentence covers them all), yet it states what was asked.
    from agent.terms import KeyTerms
    from connectors.models import Chunk
    from tools.knowledge_search import Evidence

    who = Chunk("c1", "folder", "on-call.md", "On-call", ("Escalation",), "",
                "The secondary on-call engineer gets paged when the primary does not respond.")
    when = Chunk("c2", "folder", "alerts.md", "Alerts", ("Acknowledging",), "",
                 "Acknowledgement is expected within 12 hours of the alert.")
    terms = KeyTerms({"secondary": 3.0, "paged": 3.0, "primary": 1.0})
    draft = _earning_answerer().answer(
        [Evidence(who, 1.0, cosine=0.6), Evidence(when, 0.9, cosine=0.5)], terms,
        question="how long until the secondary gets paged if the primary does not respond?")
    assert "secondary on-call engineer" in draft.text and "12 hours" in draft.text, draft.text


def test_a_sentence_of_a_passage_already_quoted_is_kept_as_its_context() -> None:
    # "can I exercise early?": the sentence after the rule, in the same passage, says where it applies
    # (the US and UK) without repeating the question's words; a passage already quoted is on topic.
    from agent.terms import KeyTerms
    from connectors.models import Chunk
    from tools.knowledge_search import Evidence

    text = ("Early exercise is allowed in countries where it brings tax benefits.\n\n"
            "Currently staff in the US and UK have that choice.")
    chunk = Chunk("c1", "folder", "equity.md", "Equity", ("Early exercise",), "", text)
    terms = KeyTerms({"early": 2.0, "exercise": 2.0, "germany": 3.0})
    draft = _earning_answerer().answer([Evidence(chunk, 1.0, cosine=0.8)], terms,
                                       question="can i exercise early? im based in germany")
    assert "Early exercise is allowed" in draft.text and "US and UK" in draft.text, draft.text


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


def test_at_most_three_picks_lack_the_asked_figure_and_the_rest_state_it() -> None:
    # "how long do the alpha ... epsilon meetings last?": each topic sentence adds a key term, but only
    # three of them are quoted; the sentence stating the duration still is.
    from agent.terms import KeyTerms
    from connectors.models import Chunk
    from tools.knowledge_search import Evidence

    facts = {"alpha": "Alpha reviews architecture proposals.", "beta": "Beta handles customer escalations.",
             "gamma": "Gamma plans product roadmaps.", "delta": "Delta owns the billing service.",
             "epsilon": "Epsilon runs hiring interviews."}
    names = list(facts)
    topics = [Chunk(f"c{i}", "folder", f"{n}.md", n.title(), ("Meetings",), "", facts[n]) for i, n in enumerate(names)]
    length = Chunk("c9", "folder", "length.md", "Length", ("Meetings",), "", "Meetings last 25 minutes at most.")
    terms = KeyTerms({**{n: 2.0 for n in names}, "meetings": 0.5})
    evidence = [Evidence(c, 1.0 - i / 10, cosine=0.6) for i, c in enumerate(topics)] + [Evidence(length, 0.3, cosine=0.3)]
    draft = _earning_answerer().answer(evidence, terms,
                                       question="how long do the alpha beta gamma delta epsilon meetings last?")
    assert "25 minutes" in draft.text, draft.text
    assert sum(fact in draft.text for fact in facts.values()) == 3, draft.text
