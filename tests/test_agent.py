"""The agent end to end over the shared example-wiki index (rule-based planner, no LLM).

Built with :func:`app.wiring.build_agent`. Covers routing (empty, chit-chat, action, follow-up
with its standalone rewrite), input guards (a 20,000-character message is truncated and noted),
refusals for unanswerable questions (no citations, says what was searched), cited answers whose
quotes are verbatim spans of the stored chunks and whose ``[n]`` markers all resolve, and
:func:`agent.citations.validate_citations` rejecting forged quotes and foreign chunks.
"""

from __future__ import annotations

import re

import pytest

from agent.citations import validate_citations
from agent.models import Citation, HistoryMessage, Reply, Turn
from app.settings import Settings
from app.wiring import Runtime, build_agent
from index.knowledge import KnowledgeIndex
from tools.knowledge_search import KnowledgeSearchArgs
from tests.helpers import public_viewer, public_ctx

MARKER = re.compile(r"\[(\d{1,3})\]")


@pytest.fixture(scope="module")
def runtime(wiki_index: KnowledgeIndex, tmp_path_factory: pytest.TempPathFactory) -> Runtime:
    # Not closed here: the index belongs to the session fixture.
    return build_agent(Settings(chatops_data_dir=tmp_path_factory.mktemp("agent-data")), index=wiki_index)


def ask(runtime: Runtime, text: str, history: tuple[str | HistoryMessage, ...] = ()) -> Reply:
    """Answer ``text``; plain strings in ``history`` are the asker's own earlier messages."""
    thread = tuple(h if isinstance(h, HistoryMessage) else HistoryMessage.own(h) for h in history)
    return runtime.agent.answer(Turn(viewer=public_viewer(), text=text, history=thread, platform="test"))


# -- routes without retrieval -----------------------------------------------------------------------

@pytest.mark.parametrize("text", ["", "   \n\t ", "\x00"])
def test_empty_question_is_not_answered(runtime: Runtime, text: str) -> None:
    reply = ask(runtime, text)
    assert reply.route == "empty"
    assert reply.citations == [] and reply.trace.queries == []
    assert reply.text.strip()  # a prompt to ask something, not an answer
    assert not MARKER.search(reply.text)


def test_chitchat_gets_a_reply_without_retrieval(runtime: Runtime) -> None:
    reply = ask(runtime, "thanks!")
    assert reply.route == "chitchat"
    assert reply.text.strip() and not reply.refused
    assert reply.trace.queries == [] and reply.citations == []


def test_action_request_routes_to_action(runtime: Runtime) -> None:
    reply = ask(runtime, "set up a 45 min design review with dana@example.com tomorrow at 2pm")
    assert reply.route == "action"
    assert reply.trace.route == "action"
    assert reply.citations == [] and reply.trace.queries == []
    assert reply.text.strip()


# -- guards -----------------------------------------------------------------------------------------

def test_huge_question_is_truncated_and_noted(runtime: Runtime) -> None:
    text = ("how do I declare an incident? " * 700)[:20_000]
    assert len(text) == 20_000
    reply = ask(runtime, text)
    assert isinstance(reply, Reply) and reply.text.strip()
    assert reply.route == "knowledge"
    notes = " ".join(reply.trace.notes)
    assert "4,000" in notes or "4000" in notes, reply.trace.notes
    # What was searched is the truncated message, not the whole 20,000 characters.
    assert reply.trace.queries and all(len(q["query"]) <= 4000 for q in reply.trace.queries)


# -- refusals ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("question, topic", [
    ("does our benefits package include pet insurance?", "pet insurance"),
    ("how does the sabbatical policy work, can i take one after 5 years?", "sabbatical"),
])
def test_unanswerable_question_is_refused_and_says_what_was_searched(runtime: Runtime, question: str,
                                                                     topic: str) -> None:
    reply = ask(runtime, question)
    assert reply.refused
    assert reply.citations == []
    assert not MARKER.search(reply.text)
    assert reply.searched and reply.searched[0] == question
    assert question in reply.text  # the refusal quotes what was searched
    assert topic in reply.text.lower()
    assert reply.trace.queries, "a refusal comes after searching"


# -- answers ----------------------------------------------------------------------------------------

def test_answer_has_verbatim_citations(runtime: Runtime, wiki_index: KnowledgeIndex) -> None:
    reply = ask(runtime, "how do I declare an incident?")
    assert reply.route == "knowledge"
    assert not reply.refused, reply.text
    assert len(reply.citations) >= 2
    assert any(c.doc_id == "engineering/incident-response.md" for c in reply.citations)
    shown = {h["chunk_id"] for q in reply.trace.queries for h in q["hits"]}
    for c in reply.citations:
        stored = wiki_index.dense.get(c.chunk_id)
        assert stored is not None, c
        assert c.quote.strip() and c.quote in stored.text, (c.quote, stored.text)
        assert c.doc_id == stored.doc_id and c.title == stored.title and c.url == stored.url
        assert c.section == stored.section
        assert c.chunk_id in shown  # cited evidence was retrieved in this turn
    markers = {int(n) for n in MARKER.findall(reply.text)}
    numbers = {c.n for c in reply.citations}
    assert markers, reply.text
    assert markers <= numbers and numbers <= markers
    # One number per chunk.
    by_n = {}
    for c in reply.citations:
        assert by_n.setdefault(c.n, c.chunk_id) == c.chunk_id


def test_a_wh_word_in_an_embedded_clause_sets_no_answer_type(runtime: Runtime) -> None:
    # "when slack is down" is a condition, not the ask: the question asks for a number to call, not a time, so
    # the answer quotes the phone-number sentence (where the number is kept) rather than one stating a time
    # ("deactivated at 17:00").
    reply = ask(runtime, "what phone number do I call when slack is down?")
    assert not reply.refused, reply.text
    assert reply.trace.gate["features"]["answer_type"] == "number"
    assert "on-call phone number" in reply.text and "17:00" not in reply.text.split("\n")[0], reply.text


@pytest.mark.parametrize("earlier", [
    HistoryMessage.own("when do minor releases go out?"),
    # a colleague's question in a shared thread is legitimate context for a follow-up question
    HistoryMessage("when do minor releases go out?", "U0COLLEAGUE", from_requester=False),
], ids=["own", "colleague"])
def test_followup_is_rewritten_with_the_thread_history(runtime: Runtime, earlier: HistoryMessage) -> None:
    reply = ask(runtime, "and when's the branch cut for those?", (earlier,))
    assert reply.route == "followup"
    rewrites = [s for s in reply.trace.steps if s["step"] == "rewrite_followup"]
    assert len(rewrites) == 1
    standalone = rewrites[0]["standalone"]
    assert "minor releases" in standalone and "branch cut" in standalone
    assert reply.trace.queries[0]["query"] == standalone
    if not reply.refused:
        assert any(c.doc_id == "engineering/release-process.md" for c in reply.citations)


def test_same_question_without_history_is_not_a_followup(runtime: Runtime) -> None:
    reply = ask(runtime, "and when's the branch cut for those?")
    assert reply.route == "knowledge"
    assert not any(s["step"] == "rewrite_followup" for s in reply.trace.steps)


def test_reply_serialises_for_the_cli(runtime: Runtime) -> None:
    d = ask(runtime, "how do I declare an incident?").as_dict()
    assert set(d) == {"route", "text", "refused", "citations", "pending_action", "trace", "timings_ms"}
    assert d["pending_action"] is None and d["timings_ms"]["total"] > 0


# -- citation validation ----------------------------------------------------------------------------

def test_validate_citations_rejects_forged_quotes_and_foreign_chunks(runtime: Runtime,
                                                                     wiki_index: KnowledgeIndex) -> None:
    evidence = runtime.search.run(KnowledgeSearchArgs(query="how do I declare an incident?", k=5), public_ctx()).evidence
    assert len(evidence) >= 2
    first, second = evidence[0].chunk, evidence[1].chunk
    real_quote = first.text[: min(60, len(first.text))]
    good = Citation(1, first.chunk_id, first.doc_id, first.title, first.url, first.section, real_quote)
    forged = Citation(2, second.chunk_id, second.doc_id, second.title, second.url, second.section,
                      "Incidents never need to be declared on weekends.")
    outside = next(c for c in (wiki_index.dense.get(cid) for cid in wiki_index.dense.chunk_ids())
                   if c is not None and c.chunk_id not in {e.chunk.chunk_id for e in evidence})
    foreign = Citation(3, outside.chunk_id, outside.doc_id, outside.title, outside.url, outside.section,
                       outside.text[:40])
    wrong_doc = Citation(4, first.chunk_id, "people/time-off.md", first.title, first.url, first.section, real_quote)

    check = validate_citations("A [1]. B [2]. C [3]. D [4]. E [5].", [good, forged, foreign, wrong_doc], evidence)

    assert [c.n for c in check.valid] == [1]
    rejected = {c.n: reason for c, reason in check.rejected}
    assert set(rejected) == {2, 3, 4}
    assert "verbatim" in rejected[2]
    assert "not retrieved" in rejected[3]
    assert "doc_id" in rejected[4]
    assert check.dangling_markers == [2, 3, 4, 5]
    assert not check.ok


def test_validate_citations_accepts_a_clean_answer(runtime: Runtime) -> None:
    evidence = runtime.search.run(KnowledgeSearchArgs(query="parental leave weeks", k=3), public_ctx()).evidence
    chunk = evidence[0].chunk
    quote = chunk.text[-50:]
    cit = Citation(1, chunk.chunk_id, chunk.doc_id, chunk.title, chunk.url, chunk.section, quote)
    check = validate_citations(f"{quote} [1]", [cit], evidence)
    assert check.ok and check.valid == [cit] and check.dangling_markers == []
    # A quote that differs by one character is not verbatim.
    tampered = Citation(1, chunk.chunk_id, chunk.doc_id, chunk.title, chunk.url, chunk.section,
                        quote[:-1] + ("X" if quote[-1] != "X" else "Y"))
    assert not validate_citations(f"{quote} [1]", [tampered], evidence).ok
