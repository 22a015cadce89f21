"""Permissions on the command line (issue 11): ``chatops ask --as`` and the eval's ``acl_*`` figures.

Real subprocesses over tests/acl_corpus: a public handbook and an HR folder indexed with
``audience=hr`` (the static group of tests/acl_corpus/chatops.yml, through ``CHATOPS_CONFIG``).
``ask --as`` an HR member cites the HR page; ``ask --as`` someone else and ``ask`` without ``--as``
(public pages only) never quote it. ``chatops eval`` over tests/acl_corpus/eval.jsonl reports
``acl_leaks`` 0 and ``acl_recall`` 1.0 (Hana's DM question), and :func:`bot.evaluate.acl_scores`
counts a leak when a reply cites a page the viewer may not read.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.models import Citation, Reply
from bot.evaluate import EvalQuestion, acl_scores
from core.access import Access, Viewer
from core.models import Chunk
from tests.helpers import ROOT, run_chatops, indexed_data_dir

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

CORPUS = ROOT / "tests" / "acl_corpus"
CONFIG = str(CORPUS / "chatops.yml")
QUESTION = "what is the salary band for a senior engineer?"
SOURCES = [f"folder:{CORPUS / 'handbook'}?name=handbook", f"folder:{CORPUS / 'hr'}?name=hr&audience=hr"]


@pytest.fixture(scope="module")
def acl_data(tmp_path_factory: pytest.TempPathFactory, embedding_cache_dir: Path) -> Path:
    return indexed_data_dir(tmp_path_factory.mktemp("acl-cli") / "data", embedding_cache_dir / "embeddings.sqlite",
                            *SOURCES, cwd=ROOT, CHATOPS_CONFIG=CONFIG)


def ask(data: Path, *args: str) -> dict:
    proc = run_chatops(["ask", "--json", *args, QUESTION], data, cwd=ROOT, CHATOPS_CONFIG=CONFIG)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_ask_as_a_reader_cites_the_restricted_page_and_nobody_else_sees_it(acl_data: Path) -> None:
    hana = ask(acl_data, "--as", "Hana@Example.com")
    assert not hana["refused"] and "salary-bands.md" in {c["doc_id"] for c in hana["citations"]}, hana["text"]
    for args in (("--as", "bob@example.com"), ()):
        other = ask(acl_data, *args)
        assert other["refused"] and not other["citations"]
        assert "98,000" not in json.dumps(other) and "salary-bands" not in json.dumps(other)


def test_ask_as_needs_an_email(acl_data: Path) -> None:
    proc = run_chatops(["ask", "--as", "hana", QUESTION], acl_data, cwd=ROOT, CHATOPS_CONFIG=CONFIG)
    assert proc.returncode == 2 and "--as needs an e-mail" in proc.stderr


def test_eval_reports_no_leaks_and_the_restricted_recall(acl_data: Path) -> None:
    args = ["eval", "--questions", str(CORPUS / "eval.jsonl"), "--json"]
    for spec in SOURCES:
        args += ["--source", spec]
    proc = run_chatops(args, acl_data, cwd=ROOT, timeout=300, CHATOPS_CONFIG=CONFIG)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["access"] == {"acl_leaks": 0, "acl_recall": 1.0, "acl_questions": 1}, result["per_question"]
    rows = {r["id"]: r for r in result["per_question"]}
    assert rows["acl-002"]["refused"] and rows["acl-003"]["refused"] and not rows["acl-004"]["refused"]


def test_acl_scores_count_a_cited_restricted_page_as_a_leak() -> None:
    hr = Chunk(chunk_id="c-hr", source="hr", doc_id="salary-bands.md", title="Salary bands", section_path=(),
               url="", text="98,000", access=Access.only(["group:chatops/hr"]))
    reply = Reply("The band is 98,000 [1].", citations=[Citation(1, "c-hr", "salary-bands.md", "Salary bands", "", "",
                                                                  "98,000")])
    q = EvalQuestion("x", QUESTION, "single", ("salary-bands.md",), ())
    lookup = {"c-hr": hr}.get
    assert acl_scores(q, reply, Viewer.public(), lookup, {"salary-bands.md": "c-hr"})["acl_leaks"] == 1
    ok = acl_scores(q, reply, Viewer.person(["group:chatops/hr"]), lookup, {"salary-bands.md": "c-hr"})
    assert ok == {"acl_leaks": 0, "acl_restricted_gold": True, "acl_answered": True}
