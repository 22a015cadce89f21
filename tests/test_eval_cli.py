"""``chatops eval`` as a reader of its output uses it, through the real CLI over the example wiki.

- ``citation_precision``: per answerable question answered with citations, the distinct cited pages that
  are gold pages over the distinct cited pages; the mean over those questions, overall and per kind
  (``tests/data/eval_precision.jsonl``: one question whose gold pages are every page, one whose only gold
  page is not in the wiki, one real question, a refused answerable one and an unanswerable one, which do
  not count); shown in the text table.
- Each ``per_question`` row carries what was said: the question, the reply text and its citations, and the
  gate's verdict (reason and signals).
- Several ``--set NAME=QUESTIONS::SOURCE``: each set indexed in its own data dir (``DATA_DIR/eval/NAME``,
  one embedding cache), one table with a row per set; ``--json`` gives ``{"retriever", "sets"}``.
- ``unsupported_posted``: the posted sentences with a figure, date, identifier or name that no chunk they cite
  holds (a sentence without a marker stands on its paragraph's); 0 for the extractive answers over the example
  wiki and for a phone number quoted verbatim, counted per kind, shown in both tables; a reply inventing a figure
  is counted.
- Usage errors exit 2 with a message; ``make eval`` without ``../shared`` stops with one, before installing.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from agent.models import Citation, Reply
from bot.evaluate import unsupported_posted
from core.models import Chunk
from tests.helpers import EVAL_FILE, ROOT, run_chatops, seed_embedding_cache

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

PRECISION_FILE = ROOT / "tests" / "data" / "eval_precision.jsonl"
CITATION_KEYS = {"n", "doc_id", "title", "section", "quote"}


@pytest.fixture(scope="module")
def precision_run(tmp_path_factory: pytest.TempPathFactory, wiki_index, embedding_cache_dir: Path
                  ) -> tuple[Path, dict]:
    """``chatops eval --json`` of the precision questions over examples/wiki: (data dir, result)."""
    data = seed_embedding_cache(tmp_path_factory.mktemp("eval-precision") / "data",
                                embedding_cache_dir / "embeddings.sqlite")
    proc = run_chatops(["eval", "--questions", str(PRECISION_FILE), "--source", "folder:examples/wiki", "--json"],
                       data, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return data, json.loads(proc.stdout)


def test_citation_precision_is_the_share_of_cited_pages_that_are_gold(precision_run) -> None:
    _, result = precision_run
    rows = {r["id"]: r for r in result["per_question"]}
    for qid in ("p-all", "p-none", "p-real"):
        assert not rows[qid]["refused"] and rows[qid]["citations"], (qid, rows[qid]["text"])
    assert rows["p-all"]["citation_precision"] == 1.0  # every page is gold
    assert rows["p-none"]["citation_precision"] == 0.0  # the only gold page is not in the wiki
    cited = {c["doc_id"] for c in rows["p-real"]["citations"]}
    assert rows["p-real"]["citation_precision"] == len(cited & {"finance/travel-and-expenses.md"}) / len(cited)
    assert rows["p-refused"]["refused"] and rows["p-refused"]["citation_precision"] is None  # does not count
    assert "citation_precision" not in rows["p-unanswerable"]  # not an answerable kind

    real = rows["p-real"]["citation_precision"]
    assert result["answers"]["citation_precision"] == pytest.approx((1.0 + 0.0 + real) / 3, abs=1e-4)  # macro
    by_kind = {k: v["answers"]["citation_precision"] for k, v in result["by_kind"].items()}
    assert by_kind == {"single": pytest.approx((1.0 + real) / 2, abs=1e-4), "paraphrase": 0.0, "multi": None,
                       "unanswerable": None}
    for key in ("answer_contains", "citation_validity", "refusal_unanswerable", "false_refusal", "answer_chars_mean"):
        assert key in result["answers"]  # every earlier figure is kept


def test_extractive_answers_post_no_unsupported_sentence(precision_run) -> None:
    _, result = precision_run
    assert result["answers"]["unsupported_posted"] == 0
    assert result["answers"]["unsupported_posted_by_kind"] == {k: 0 for k in
                                                               ("number", "time", "date", "identifier", "name")}
    for row in result["per_question"]:
        assert row["unsupported_posted"] == 0 and row["unsupported_sentences"] == [], row["text"]


PAYROLL = """# Payroll

## Payroll help desk

Please direct questions about your pay to the payroll help desk: 1-844-303-6515 or email them. The desk answers
on weekdays.

## Pay periods

You are paid every two weeks, on Friday.
"""


def test_a_phone_number_quoted_verbatim_is_no_unsupported_fact(tmp_path: Path, embedding_cache_dir: Path) -> None:
    # "844" read as a code of its own out of "1-844-303-6515" was a fact no passage held as a token
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    (wiki / "payroll.md").write_text(PAYROLL, encoding="utf-8")
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"id": "desk", "question": "whats the phone number for the payroll help desk?",
                                     "kind": "single", "gold_docs": ["payroll.md"],
                                     "answer_contains": ["1-844-303-6515"]}) + "\n", encoding="utf-8")
    data = seed_embedding_cache(tmp_path / "data", embedding_cache_dir / "embeddings.sqlite")
    proc = run_chatops(["eval", "--questions", str(questions), "--source", f"folder:{wiki}", "--json"], data,
                       cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    [row] = json.loads(proc.stdout)["per_question"]
    assert not row["refused"] and row["answer_contains"], row["text"]
    assert row["unsupported_posted"] == 0, row["unsupported_sentences"]


def test_unsupported_posted_counts_a_sentence_whose_fact_no_cited_chunk_holds() -> None:
    chunks = {c.chunk_id: c for c in (
        Chunk("c1", "wiki", "time-off.md", "Time off", ("PTO",), "", "Everyone gets 25 days of PTO per year.\n\n"
              "Requests go through PeopleDesk."),
        Chunk("c2", "wiki", "travel.md", "Travel", (), "", "Book trains in the travel tool."))}

    def cite(n: int, cid: str, quote: str) -> Citation:
        c = chunks[cid]
        return Citation(n, cid, c.doc_id, c.title, "", c.section, quote)

    # the quote is only the first sentence: the chunk's full text holds "PeopleDesk"; the paragraph's marker
    # covers its unmarked sentence; [2]'s chunk does not hold "25" or "Workday"
    text = ("Everyone gets 25 days of PTO per year. Requests go through PeopleDesk. [1]\n\n"
            "- Book 25 trains\n- Ask in Workday [2]\n\nNothing found on: \u201cMarch 3\u201d.")
    reply = Reply(text, [cite(1, "c1", "Everyone gets 25 days of PTO per year."),
                         cite(2, "c2", "Book trains in the travel tool.")])
    assert unsupported_posted(reply, chunks.get) == [{"sentence": "Book 25 trains", "facts": ["number:25"]},
                                                     {"sentence": "Ask in Workday", "facts": ["name:Workday"]}]
    assert unsupported_posted(Reply(text, reply.citations, refused=True), chunks.get) == []


def test_each_row_carries_the_question_the_reply_text_and_its_citations(precision_run) -> None:
    _, result = precision_run
    questions = {q["id"]: q["question"] for q in map(json.loads, PRECISION_FILE.read_text().splitlines())}
    for row in result["per_question"]:
        assert row["question"] == questions[row["id"]]
        assert row["text"].strip(), row["id"]
        for c in row["citations"]:
            assert set(c) == CITATION_KEYS and c["quote"] and c["doc_id"] and c["title"], c
        markers = {int(m) for m in re.findall(r"\[(\d{1,3})\]", row["text"])}
        assert markers <= {c["n"] for c in row["citations"]}, row["text"]
        if row["refused"]:
            assert not row["citations"] and row["answer_chars"] == 0
        else:
            assert row["answer_chars"] == len(row["text"])
    rows = {r["id"]: r for r in result["per_question"]}
    assert "30 days" in rows["p-real"]["text"]
    # and why: the gate's verdict, its reason and signals (for the reader of the run, never the employee)
    assert rows["p-refused"]["gate"]["sufficient"] is False and rows["p-refused"]["gate"]["reason"]
    assert rows["p-real"]["gate"]["sufficient"] is True and "top_cosine" in rows["p-real"]["gate"]["features"]


def test_the_text_table_shows_citation_precision_overall_and_per_kind(precision_run) -> None:
    data, result = precision_run
    proc = run_chatops(["eval", "--questions", str(PRECISION_FILE)], data, cwd=ROOT, timeout=300)  # indexed already
    assert proc.returncode == 0, proc.stderr
    overall = result["answers"]["citation_precision"]
    assert f"citation_precision {overall:.3f}" in proc.stdout, proc.stdout
    assert re.search(r"^by kind .*cit_precision", proc.stdout, re.M), proc.stdout
    assert re.search(r"^paraphrase\s+1 .*0\.000$", proc.stdout, re.M), proc.stdout
    assert "unsupported_posted 0" in proc.stdout, proc.stdout


def test_several_sets_print_one_table_with_a_row_per_set(tmp_path: Path, wiki_index, embedding_cache_dir: Path
                                                         ) -> None:
    data = seed_embedding_cache(tmp_path / "data", embedding_cache_dir / "embeddings.sqlite")
    sets = ["--set", f"precision={PRECISION_FILE}::folder:examples/wiki",
            "--set", f"example={EVAL_FILE}::folder:examples/wiki"]
    proc = run_chatops(["eval", *sets], data, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr
    for name in ("precision", "example"):
        assert (data / "eval" / name / "index").is_dir()  # each set on its own index
    assert len(re.findall(r"\(0 embedded, \d+ from cache\)", proc.stdout)) == 2, proc.stdout  # one shared cache

    headers = [line for line in proc.stdout.splitlines() if line.split()[:3] == ["set", "n", "R@5"]]
    assert len(headers) == 1, proc.stdout  # one table
    assert headers[0].split() == ["set", "n", "R@5", "contains", "cit_valid", "cit_prec", "refusal", "false_ref",
                                  "chars", "unsup", "p50_ms", "p95_ms"]
    assert "retrieval  R@1" not in proc.stdout  # not a full table per set
    table = proc.stdout[proc.stdout.index(headers[0]):].splitlines()
    n_example = sum(1 for line in EVAL_FILE.read_text().splitlines() if line.strip())
    assert table[1].split()[:2] == ["precision", "5"] and table[2].split()[:2] == ["example", str(n_example)], table
    assert all(len(row.split()) == len(headers[0].split()) for row in table[1:3]), table

    again = run_chatops(["eval", *sets, "--json"], data, cwd=ROOT, timeout=600)
    assert again.returncode == 0, again.stderr
    result = json.loads(again.stdout)
    assert set(result) == {"retriever", "sets"} and list(result["sets"]) == ["precision", "example"]
    assert result["sets"]["precision"]["questions"] == 5 and result["sets"]["example"]["questions"] == n_example
    assert result["sets"]["precision"]["sources"] == ["folder:examples/wiki"]
    assert result["sets"]["precision"]["per_question"][0]["text"]
    assert result["sets"]["example"]["answers"]["unsupported_posted"] == 0, [
        (r["id"], r["unsupported_sentences"]) for r in result["sets"]["example"]["per_question"]]
    assert table[2].split()[9] == "0"  # the unsup column of the example set


@pytest.mark.parametrize(("args", "message"), [
    (["--set", "dev=questions.jsonl"], "expected NAME=QUESTIONS::SOURCE"),
    (["--set", "../up=q.jsonl::folder:examples/wiki"], "plain folder name"),
    (["--set", f"a={EVAL_FILE}::folder:examples/wiki", "--set", f"a={EVAL_FILE}::folder:examples/wiki"], "own NAME"),
    (["--questions", str(EVAL_FILE), "--set", f"a={EVAL_FILE}::folder:examples/wiki"], "not both"),
    (["--set", f"a={EVAL_FILE}::folder:examples/wiki", "--source", "folder:examples/wiki"], "--source goes with"),
    ([], "either --questions"),
    (["--set", "a=missing.jsonl::folder:examples/wiki"], "missing.jsonl"),
])
def test_eval_usage_errors_exit_2_with_a_message(tmp_path: Path, args: list[str], message: str) -> None:
    proc = run_chatops(["eval", *args], tmp_path / "data", cwd=ROOT)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert not (tmp_path / "data" / "eval").exists()  # nothing indexed


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_eval_without_the_shared_folder_stops_with_a_message(tmp_path: Path) -> None:
    proc = subprocess.run(["make", "eval", f"SHARED={tmp_path / 'absent'}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode != 0
    assert f"{tmp_path / 'absent'}/eval/dev.jsonl is missing" in proc.stderr, proc.stderr
    assert "pip install" not in proc.stdout  # stopped before installing anything
