"""The CLI guides the person at the terminal, and stays exactly parseable for scripts.

Through the real ``chatops`` subprocess over the example wiki:

- ``chatops index`` (pages) and ``chatops eval`` (questions) draw a progress bar on stderr when
  stderr is a terminal (a real pseudo-terminal here), and none when it is a pipe: piped stdout is
  what it was (the report lines; ``--json`` one JSON object) and stderr holds only log records. The
  indexer reports progress through unchanged pages too, and log records written above a bar keep
  their format and secret masking.
- Refusals quote the question's own words ("policy"), never the index's Porter stems ("polici"),
  in the gate's reason and in the rewritten queries they say were searched.
- One section separator: the sections of ``chatops status``, ``eval``, ``ask`` (and the one of
  ``sources list``) are separated by one blank line, never a rule or two blank lines; where a passage
  is reads ``title › heading › subheading``. Both through :mod:`app.layout`.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import termios
from pathlib import Path

import pytest

from agent.gate import GateVerdict
from agent.models import Citation, Reply
from agent.planner import RuleBasedPlanner
from agent.terms import key_terms
from app.layout import PATH_SEPARATOR, SECTION_BREAK, SectionPrinter, section_path, sections
from bot.console import render_reply

from tests.helpers import (EVAL_FILE, WIKI, WIKI_PAGES, chatops_command, cli_environment, read_terminal, run_chatops,
                           indexed_data_dir, seed_embedding_cache)

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

REPORT = re.compile(r"wiki: \d+ added, \d+ updated, \d+ deleted, \d+ unchanged, \d+ skipped; \d+ chunks written "
                    r"\(\d+ embedded, \d+ from cache\), \d+ removed; index holds \d+ pages / \d+ chunks; \d+\.\d s")


def run_on_terminal(args: list[str], data_dir: Path, cwd: Path, timeout: float = 180,
                    **extra_env: str) -> tuple[int, str, str]:
    """Run ``chatops ARGS`` with stderr on a pseudo-terminal (120 columns) and stdout on a pipe (``extra_env``
    added to its environment); returns (exit status, stdout, everything the terminal received)."""
    try:
        master, slave = pty.openpty()
    except OSError as exc:  # a container without /dev/ptmx
        pytest.skip(f"no pseudo-terminal available: {exc}")
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))  # a new pty is 0 columns wide
    reader, received = read_terminal(master)
    try:
        proc = subprocess.run([*chatops_command(), *args], cwd=cwd, env=cli_environment(data_dir, **extra_env), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=slave, text=True, timeout=timeout)
    finally:
        os.close(slave)
        reader.join(timeout=10)
        os.close(master)
    return proc.returncode, proc.stdout, received.decode("utf-8", "replace")


def only_log_records(stderr: str) -> bool:
    """True when every stderr line is a JSON log record (what a pipe gets: no bar, no carriage return)."""
    return "\r" not in stderr and all(json.loads(line).get("level") for line in stderr.splitlines() if line)


@pytest.fixture
def fresh(tmp_path: Path, wiki_index, embedding_cache_dir: Path):
    """Makes fresh data dirs with a warm embedding cache (``wiki_index`` has filled the session cache)."""
    def make(name: str) -> Path:
        return seed_embedding_cache(tmp_path / name, embedding_cache_dir / "embeddings.sqlite")
    return make


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, wiki_index, embedding_cache_dir: Path) -> Path:
    """One data dir holding the example wiki, indexed through the CLI, for read-only tests."""
    return indexed_data_dir(tmp_path_factory.mktemp("guides") / "data", embedding_cache_dir / "embeddings.sqlite",
                            f"folder:{WIKI}")


# -- progress bars ----------------------------------------------------------------------------------

def test_index_shows_a_page_bar_on_a_terminal_and_nothing_in_a_pipe(tmp_path: Path, fresh) -> None:
    status, tty_out, terminal = run_on_terminal(["index", f"folder:{WIKI}"], fresh("tty"), cwd=tmp_path)
    assert status == 0, terminal
    assert re.search(r"index wiki: +\d+ pages \[", terminal), terminal[-500:]
    assert f"{WIKI_PAGES} pages [" in terminal  # the bar counted the pages of the run
    piped = run_chatops(["index", f"folder:{WIKI}"], fresh("pipe"), cwd=tmp_path)
    assert piped.returncode == 0, piped.stderr
    assert only_log_records(piped.stderr) and "pages [" not in piped.stderr
    # stdout is the same report either way (seconds and the calibration time aside): nothing of the bar
    lines = piped.stdout.splitlines()
    assert REPORT.fullmatch(lines[0]) and lines[1].startswith("gate calibration: ") and len(lines) == 2

    def mask(text: str) -> str:
        return re.sub(r"\d+\.\d s$|calibration: \S+", "#", text, flags=re.M)
    assert mask(tty_out) == mask(piped.stdout)


def test_eval_shows_a_question_bar_on_a_terminal_and_json_stays_one_object(tmp_path: Path, indexed: Path) -> None:
    questions = tmp_path / "two.jsonl"
    questions.write_text("".join(EVAL_FILE.read_text().splitlines(keepends=True)[:2]))
    # eval logs at WARNING unless CHATOPS_LOG_LEVEL says otherwise (tests/test_cli.py): ask for the turn records
    status, out, terminal = run_on_terminal(["eval", "--questions", str(questions)], indexed, cwd=tmp_path,
                                            CHATOPS_LOG_LEVEL="INFO")
    assert status == 0, terminal
    assert re.search(r"eval: +\d+%\|.*\| [0-2]/2 \[", terminal), terminal[-500:]
    assert "turn " in terminal and "outcome=" in terminal  # log records still reach the terminal, above the bar
    assert out.startswith("chatops eval (hybrid): 2 questions\n") and "\r" not in out
    piped = run_chatops(["eval", "--questions", str(questions), "--json"], indexed, cwd=tmp_path)
    assert piped.returncode == 0, piped.stderr
    assert only_log_records(piped.stderr) and "questions/s" not in piped.stderr
    assert piped.stdout.count("\n") == 1 and json.loads(piped.stdout)["questions"] == 2


def test_the_indexer_reports_progress_through_unchanged_pages_too(index_factory, wiki_copy: Path) -> None:
    from connectors.folder import FolderSource
    from index.indexer import Indexer

    index = index_factory()
    assert Indexer(index).run(FolderSource(wiki_copy)).added == WIKI_PAGES
    seen: list[int] = []
    rep = Indexer(index, batch_pages=4).run(FolderSource(wiki_copy), progress=lambda r: seen.append(r.unchanged))
    assert rep.unchanged == WIKI_PAGES and seen == [4, 8, 12, WIKI_PAGES]  # not one jump at the end


def test_log_records_above_a_bar_keep_their_format_and_masking() -> None:
    import io
    import logging

    from bot.logs import configure_logging
    from bot.progress import progress_bar

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        out = Terminal()
        handler = configure_logging("INFO", "text", secrets=("sup3r-s3cret-value",), stream=out)
        with progress_bar("index handbook", "pages", stream=out) as bar:
            bar.update(3)
            logging.getLogger("chatops.test").info("calling with sup3r-s3cret-value")
            assert handler.stream is not out  # written above the bar while it is drawn
        assert handler.stream is out  # and straight to the terminal again after
        text = out.getvalue()
        assert "index handbook: 3 pages [" in text
        assert "INFO chatops.test: calling with [redacted]\n" in text and "sup3r" not in text
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])


# -- refusals in the question's own words --------------------------------------------------------------

QUESTION = "what is the parental leave policy for contractors?"  # 'policy' is its most specific term


def test_a_refusal_through_chatops_ask_quotes_the_questions_own_words(tmp_path: Path, indexed: Path) -> None:
    proc = run_chatops(["ask", QUESTION], indexed, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert text.startswith("I couldn't find anything in the knowledge base that answers this")
    assert "not found" not in text and "polici" not in text  # the gate's reasons are not for the employee
    assert "The closest page I found is" in text  # where to look next
    own = set(re.findall(r"[\w']+", QUESTION.lower()))
    searched = re.findall(r"\u201c([^\u201d]*)\u201d", text)
    quoted = {w for q in searched for w in re.findall(r"[\w']+", q.lower())}
    assert searched and quoted <= own, quoted - own
    as_json = json.loads(run_chatops(["ask", "--json", QUESTION], indexed, cwd=tmp_path).stdout)
    assert as_json["refused"] and "mentions 'policy'" in as_json["trace"]["gate"]["reason"]  # the reason: in --json


def test_the_retry_query_that_refusals_quote_is_made_of_the_questions_words() -> None:
    from whoosh.analysis import StemmingAnalyzer

    analyzer = StemmingAnalyzer()
    terms = key_terms("how does the sabbatical policy work?", lambda t: [x.text for x in analyzer(t)], lambda t: 5.0)
    verdict = GateVerdict(False, [], 0.0, False, ["polici", "sabbat"], "no passage was close enough")
    query = RuleBasedPlanner._next_query(1, "how does the sabbatical policy work?", terms, verdict)
    assert query == "policy sabbatical work"  # the missing words first; the stems 'polici sabbat' before


# -- one section separator -------------------------------------------------------------------------------

def test_one_separator_between_a_page_title_and_its_headings() -> None:
    assert PATH_SEPARATOR == " \u203a "
    assert section_path("Glossary", "Company and people terms > PTO") == "Glossary \u203a Company and people terms \u203a PTO"
    assert section_path("Travel", "") == "Travel" and section_path("Travel", " > Booking") == "Travel \u203a Booking"
    reply = Reply("Give a week of notice. [1]", [Citation(1, "c1", "people/time-off.md", "Time off",
                                                           "https://wiki/time-off#notice",
                                                           "Requesting time off > Notice", "a week of notice")])
    assert "  [1] Time off \u203a Requesting time off \u203a Notice\n      https://wiki/time-off#notice" in render_reply(reply)


def test_chatops_ask_names_nested_sections_with_the_one_separator(tmp_path: Path, indexed: Path) -> None:
    proc = run_chatops(["ask", "how much notice do I give for time off?"], indexed, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    sources = [ln for ln in proc.stdout.splitlines() if re.match(r"  \[\d+\] ", ln)]
    assert sources and not any(" > " in ln for ln in sources)
    assert any(ln.count(PATH_SEPARATOR) >= 2 for ln in sources), sources  # title › section › subsection


def blocks(out: str) -> list[str]:
    """The sections of a command's text output, checking they are separated the one way."""
    assert out.endswith("\n") and not out.startswith("\n") and "\n\n\n" not in out, repr(out)
    assert not re.search(r"(?m)^\s*(-{3,}|={2,}|_{3,}|\*{3,})\s*$", out), out  # no rules between sections
    return out.rstrip("\n").split(SECTION_BREAK)


def test_sections_are_separated_by_one_blank_line() -> None:
    assert SECTION_BREAK == "\n\n"
    assert sections("answer\n", "", "Sources:\n  [1] a", "\n") == "answer\n\nSources:\n  [1] a"
    import io

    out = io.StringIO()
    printer = SectionPrinter(out)
    printer.section()  # an empty section leaves no trace
    printer("data dir: /d")
    printer.section()
    printer.section("a: 1 page")
    printer("  last error: boom")
    printer.section("")
    printer.section("calibration")
    assert out.getvalue() == "data dir: /d\n\na: 1 page\n  last error: boom\n\ncalibration\n"


def test_status_eval_ask_and_sources_list_share_the_section_separator(tmp_path: Path, indexed: Path) -> None:
    status = run_chatops(["status"], indexed, cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    heads = [b.split("\n")[0] for b in blocks(status.stdout)]
    assert heads[0].startswith("data dir: ") and heads[1].startswith("wiki: ") and heads[2].startswith("gate calibration")
    assert len(heads) == 3

    listed = run_chatops(["sources", "list"], indexed, cwd=tmp_path)
    assert len(blocks(listed.stdout)) == 1 and listed.stdout.startswith("wiki: ")

    questions = tmp_path / "two.jsonl"
    questions.write_text("".join(EVAL_FILE.read_text().splitlines(keepends=True)[:2]))
    ev = run_chatops(["eval", "--questions", str(questions), "--source", f"folder:{WIKI}"], indexed, cwd=tmp_path)
    assert ev.returncode == 0, ev.stderr
    parts = blocks(ev.stdout)
    assert REPORT.fullmatch(parts[0].split("\n")[0])  # the index run, then the scores, then scores by kind
    assert parts[1].startswith("chatops eval (hybrid): 2 questions") and parts[2].startswith("by kind")
    assert len(parts) == 3

    answer = run_chatops(["ask", "how do I declare an incident?"], indexed, cwd=tmp_path)
    parts = blocks(answer.stdout)  # the answer (its paragraphs are blocks too), then its sources
    assert len(parts) >= 2 and parts[-1].startswith("Sources:\n  [1] ") and "Sources:" not in "".join(parts[:-1])
    action = run_chatops(["ask", "book a 30 min sync with bob@example.com tomorrow at 3pm"], indexed, cwd=tmp_path)
    parts = blocks(action.stdout)
    assert parts[1].startswith("Pending action: ") and parts[2].startswith("To confirm it: chatops actions confirm ")
