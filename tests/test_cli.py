"""The ``chatops`` console script, run as a real subprocess with its own CHATOPS_DATA_DIR.

Covers ``chatops index`` (prints added/updated/deleted/unchanged counts, exit 0; incremental on a
second run), ``chatops ask --json`` (exactly one JSON object with the documented keys and
citations), ``chatops chat`` (thread memory over stdin, ``/new``), ``ask --history`` as the user's own
earlier messages (they complete a meeting request), usage and configuration errors (exit 2 with a
message on stderr), ``chatops eval --json`` over examples/eval.jsonl (metric keys, citation validity,
recall@10), and a folder planted with links out of it (to a secret, to ``/proc/self/environ``, a linked
folder) and a FIFO: indexed promptly, nothing planted is ever quoted.

Data dirs start with a copy of the session's embedding cache, so the example wiki is not
re-embedded by every subprocess.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers import (EVAL_FILE, PLANTED_ENV, PLANTED_SECRET, ROOT, WIKI_PAGES, chatops_command, cli_environment,
                     plant_folder, run_chatops, seed_embedding_cache)

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

COUNTS = re.compile(r"(\d+) added, (\d+) updated, (\d+) deleted, (\d+) unchanged")


def _one_json_object(stdout: str) -> dict:
    text = stdout.strip()
    obj, end = json.JSONDecoder().raw_decode(text)
    assert text[end:].strip() == "", f"more than one JSON value on stdout: {text[end:end + 200]!r}"
    assert isinstance(obj, dict)
    return obj


@pytest.fixture(scope="module")
def cli_data(tmp_path_factory: pytest.TempPathFactory, wiki_index, embedding_cache_dir: Path) -> Path:
    """A data dir with a warm embedding cache (``wiki_index`` has filled the session cache)."""
    return seed_embedding_cache(tmp_path_factory.mktemp("cli") / "data", embedding_cache_dir / "embeddings.sqlite")


@pytest.fixture(scope="module")
def indexed_cli(cli_data: Path, session_wiki: Path) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """``chatops index folder:<wiki copy>`` run once into ``cli_data``."""
    proc = run_chatops(["index", f"folder:{session_wiki}"], cli_data, cwd=cli_data.parent)
    return cli_data, proc


def test_index_prints_counts_and_exits_0(indexed_cli, session_wiki: Path) -> None:
    data, first = indexed_cli
    assert first.returncode == 0, first.stderr
    m = COUNTS.search(first.stdout)
    assert m, first.stdout
    assert tuple(map(int, m.groups())) == (WIKI_PAGES, 0, 0, 0)
    assert f"index holds {WIKI_PAGES} pages" in first.stdout

    again = run_chatops(["index", f"folder:{session_wiki}"], data, cwd=data.parent)
    assert again.returncode == 0, again.stderr
    m = COUNTS.search(again.stdout)
    assert m and tuple(map(int, m.groups())) == (0, 0, 0, WIKI_PAGES)
    assert "0 chunks written" in again.stdout


def test_ask_json_prints_one_object_with_citations(indexed_cli) -> None:
    data, indexed = indexed_cli
    assert indexed.returncode == 0, indexed.stderr
    proc = run_chatops(["ask", "--json", "how do I declare an incident?"], data, cwd=data.parent)
    assert proc.returncode == 0, proc.stderr
    reply = _one_json_object(proc.stdout)
    assert set(reply) == {"route", "text", "refused", "citations", "pending_action", "trace", "timings_ms"}
    assert reply["route"] == "knowledge"
    assert reply["refused"] is False
    assert reply["pending_action"] is None
    assert isinstance(reply["trace"], dict) and reply["trace"]["queries"]
    assert reply["timings_ms"]["total"] > 0
    assert len(reply["citations"]) >= 2
    for c in reply["citations"]:
        assert {"n", "doc_id", "title", "url", "section", "quote"} <= set(c)
        assert isinstance(c["n"], int) and c["quote"].strip()
        assert f"[{c['n']}]" in reply["text"]
    assert any(c["doc_id"] == "engineering/incident-response.md" for c in reply["citations"])


def test_chat_keeps_thread_history_and_refuses_without_sources(indexed_cli) -> None:
    data, _ = indexed_cli
    conversation = ("when do minor releases go out?\n"
                    "and when's the branch cut for those?\n"
                    "/new\n"
                    "does our benefits package include pet insurance?\n"
                    "/quit\n")
    proc = subprocess.run([*chatops_command(), "chat"], input=conversation, cwd=data.parent,
                          env=cli_environment(data), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    turns = proc.stdout.split("bot> ")[1:]
    assert len(turns) == 3, proc.stdout
    minor, branch_cut, refusal = turns
    assert "(new thread)" in branch_cut  # printed after the second answer
    assert "Sources:" not in refusal and not re.search(r"\[\d+\]", refusal)
    assert "pet insurance" in refusal
    assert "Sources:" in minor and "release-process" in minor
    # The follow-up was answered from the release process page thanks to the thread history.
    assert "Sources:" in branch_cut and "release-process" in branch_cut


def test_ask_history_is_the_users_own_and_completes_their_request(indexed_cli) -> None:
    data, _ = indexed_cli
    proc = run_chatops(["ask", "--json", "--history", "book a meeting called Sprint planning with bob@example.com",
                        "tomorrow at 3pm"], data, cwd=data.parent)
    assert proc.returncode == 0, proc.stderr
    reply = _one_json_object(proc.stdout)
    assert reply["route"] == "action" and reply["pending_action"] is not None
    assert reply["pending_action"]["args"]["title"] == "Sprint planning"
    assert reply["pending_action"]["args"]["attendees"] == ["bob@example.com"]


@pytest.mark.parametrize("args, fragment", [
    (["index", "notatype:x"], "unknown source type"),
    (["index", "folder:./wiki?bogus=1"], "unknown option"),
    (["index", "folder:/no/such/folder"], "/no/such/folder"),
])
def test_bad_source_spec_exits_2_with_a_message(tmp_path: Path, args: list[str], fragment: str) -> None:
    proc = run_chatops(args, tmp_path / "data", cwd=tmp_path)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert fragment in proc.stderr
    assert proc.stderr.startswith("chatops:")
    assert "Traceback" not in proc.stderr


def test_ask_without_a_question_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_chatops(["ask"], tmp_path / "data", cwd=tmp_path)
    assert proc.returncode == 2
    assert "question" in proc.stderr


def test_ask_with_invalid_settings_exits_2(tmp_path: Path) -> None:
    proc = run_chatops(["ask", "hello"], tmp_path / "data", cwd=tmp_path, CHATOPS_LOG_LEVEL="bogus")
    assert "CHATOPS_LOG_LEVEL" in proc.stderr
    assert proc.returncode == 2


def test_ask_keeps_the_turn_log_off_its_output_unless_a_log_level_is_set(tmp_path: Path) -> None:
    """``ask`` prints the answer; the turn's INFO log line joins it only when CHATOPS_LOG_LEVEL asks for it."""
    quiet = run_chatops(["ask", "how do I request leave?"], tmp_path / "data", cwd=tmp_path)
    assert quiet.returncode == 2 and "chatops index" in quiet.stderr  # empty index: the agent ran, then the advice
    assert "outcome" not in quiet.stderr and '"INFO"' not in quiet.stderr, quiet.stderr
    loud = run_chatops(["ask", "how do I request leave?"], tmp_path / "data", cwd=tmp_path, CHATOPS_LOG_LEVEL="INFO")
    turn = [json.loads(line) for line in loud.stderr.splitlines() if line.startswith("{")]
    assert any(r.get("level") == "INFO" and r.get("outcome") for r in turn), loud.stderr


def test_eval_json_reports_metrics(tmp_path: Path, embedding_cache_dir: Path, wiki_index) -> None:
    data = seed_embedding_cache(tmp_path / "data", embedding_cache_dir / "embeddings.sqlite")
    proc = run_chatops(["eval", "--questions", "examples/eval.jsonl", "--source", "folder:examples/wiki", "--json"],
                       data, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = _one_json_object(proc.stdout)
    n_questions = sum(1 for line in EVAL_FILE.read_text(encoding="utf-8").splitlines() if line.strip())
    assert result["questions"] == n_questions
    assert {"recall@5", "recall@10", "mrr@10", "ndcg@10"} <= set(result["retrieval"])
    assert {"answer_contains", "citation_validity", "refusal_unanswerable", "false_refusal"} <= set(result["answers"])
    assert {"p50", "p95"} <= set(result["latency_ms"])
    assert 0 < result["latency_ms"]["p50"] <= result["latency_ms"]["p95"]
    kinds = {json.loads(line)["kind"] for line in EVAL_FILE.read_text(encoding="utf-8").splitlines() if line.strip()}
    assert set(result["by_kind"]) == kinds
    assert result["answers"]["citation_validity"] == 1.0
    assert result["retrieval"]["recall@10"] >= 0.8
    for metric in ("recall@5", "mrr@10", "ndcg@10"):
        assert 0.0 <= result["retrieval"][metric] <= 1.0


# -- a folder planted with links and special files ---------------------------------------------------------------

def test_index_of_a_planted_folder_finishes_and_never_quotes_what_the_links_point_at(tmp_path: Path) -> None:
    wiki = plant_folder(tmp_path)
    data = tmp_path / "data"
    # A FIFO read as a page would block forever: the timeout turns that into a failure.
    proc = run_chatops(["index", f"folder:{wiki}"], data, cwd=tmp_path, timeout=90, CHATOPS_PLANTED_VALUE=PLANTED_ENV)
    assert proc.returncode == 0, proc.stderr
    m = COUNTS.search(proc.stdout)
    assert m and tuple(map(int, m.groups())) == (2, 0, 0, 0), proc.stdout
    assert "4 skipped" in proc.stdout and "index holds 2 pages" in proc.stdout
    for planted, why in [("red-binder.md", "symbolic link"), ("it/environment.md", "symbolic link"),
                         ("pipe.md", "FIFO"), ("archive/", "linked folder")]:
        assert re.search(rf"skipped {re.escape(planted)}: .*{why}", proc.stdout), (planted, proc.stdout)

    for question in ("what is the launch word written in the red binder of the vault room?",
                     "CHATOPS_PLANTED_VALUE"):
        ask = run_chatops(["ask", "--json", question], data, cwd=tmp_path, CHATOPS_PLANTED_VALUE=PLANTED_ENV)
        assert ask.returncode == 0, ask.stderr
        reply = _one_json_object(ask.stdout)
        assert PLANTED_SECRET not in ask.stdout and PLANTED_ENV not in ask.stdout, reply["text"]
        assert {c["doc_id"] for c in reply["citations"]} <= {"it/laptops.md", "vault-room.md"}


@pytest.mark.parametrize("question", [b"where is the \xff parking garage?", b"caf\xc3 au lait",
                                      "lone \udc80 surrogate".encode("utf-8", "surrogatepass")],
                         ids=["invalid-byte", "cut-sequence", "encoded-surrogate"])
def test_a_question_that_is_not_utf8_gets_one_clear_line_and_exit_2(tmp_path: Path, question: bytes) -> None:
    """argv bytes that are not UTF-8 (Python passes them on as lone surrogates) are refused before any
    work, in one line naming the byte; never a pydantic error or a traceback."""
    proc = subprocess.run([*map(os.fsencode, chatops_command()), b"ask", question], capture_output=True,
                          cwd=tmp_path, env=cli_environment(tmp_path / "data"), timeout=60)
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 2, err
    assert err.startswith("chatops: the question is not valid UTF-8 text (") and err.count("\n") == 1, err
    assert "validation error" not in err and "Traceback" not in err and proc.stdout == b""


def test_a_lone_surrogate_passed_to_main_is_refused_the_same_way(capsys) -> None:
    from bot.cli import main

    assert main(["ask", "--history", "fine", "x\ud800y"]) == 2
    err = capsys.readouterr().err
    assert err == ("chatops: the question is not valid UTF-8 text (a lone surrogate U+D800 at character 2); check "
                   "the terminal's or the script's encoding (e.g. LANG=C.UTF-8) and try again\n")
