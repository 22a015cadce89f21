"""``chatops ask``'s warm worker (issue 24 item 12; ``bot/cli/warm.py``, ``bot/cli/warm_worker.py``).

Real ``chatops`` console-script processes over a real index of the example wiki, with ``ASK_WORKER=on`` unless a
test says otherwise (pytest has no terminal, so ``auto`` is off): the first question starts a worker, the next is
answered by it (``run/ask-worker.log`` has one line per question it answered) with the answer and citations the
process gives itself; a changed setting is answered by the process, the old worker exits and one of the new
settings starts; a page edited and re-indexed while the worker lives is in its next answer; it stops when idle and
removes its socket; ``chatops index``, ``chatops sync`` and ``chatops ask --start-worker`` start one, so the first question
of a session finds it warm, and a question asked while a worker is still starting waits for it (not for one that
exits); a socket nobody listens on, a worker that never answers and one that answers nonsense cost the
client a local answer, never a hang or a traceback. The fixture ``no_workers_left`` kills every worker a test
started (found by their command line and data dir in ``/proc``), so no test leaves one running.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import threading
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import ROOT, read_terminal, run_chatops, indexed_data_dir, seed_embedding_cache, wait_for

from bot.cli import warm

pytestmark = pytest.mark.server  # starts processes: not in make test-fast

QUESTION = "how do I declare an incident?"
BUDGET = "how much is the home office budget for new joiners?"


def _workers(data: Path) -> list[int]:
    """The pids of the ask workers running for ``data`` (their command line and ``CHATOPS_DATA_DIR``)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if b"bot.cli.warm_worker" not in (entry / "cmdline").read_bytes():
                continue
            if f"CHATOPS_DATA_DIR={data}".encode() in (entry / "environ").read_bytes().split(b"\0"):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, embedding_cache_dir: Path, session_wiki: Path) -> Path:
    """A data dir indexed once by ``chatops index`` (with the session's embedding cache)."""
    return indexed_data_dir(tmp_path_factory.mktemp("ask-worker") / "data", embedding_cache_dir / "embeddings.sqlite",
                            f"folder:{session_wiki}")


@pytest.fixture
def data(indexed: Path, tmp_path: Path) -> Iterator[Path]:
    """A copy of the indexed data dir for one test; every worker started for it is killed afterwards."""
    copy = Path(shutil.copytree(indexed, tmp_path / "data"))
    yield copy
    _kill_workers(copy)


def _kill_workers(data: Path) -> None:
    for pid in _workers(data):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    wait_for(lambda: not _workers(data), 10, "the workers to be gone")


def ask(data: Path, question: str = QUESTION, *extra: str, **env: str) -> dict:
    """``chatops ask --json`` as a real process (``ASK_WORKER=on`` unless ``env`` says otherwise): its reply."""
    settings = {"ASK_WORKER": "on", **env}
    proc = run_chatops(["ask", "--json", *extra, question], data, cwd=data.parent, **settings)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout)


def answered(data: Path) -> int:
    """How many questions the workers of ``data`` answered (their log)."""
    log = data / "run" / "ask-worker.log"
    return log.read_text().count(" answered pid ") if log.exists() else 0


def ready_worker(data: Path, count: int = 1, listening: bool = True) -> int:
    """Wait for the ``count``-th worker of ``data`` to be ready (and, with ``listening``, its socket); its pid."""
    log = data / "run" / "ask-worker.log"
    wait_for(lambda: log.exists() and log.read_text().count(" ready in ") >= count and (
        not listening or (data / "run" / "ask.sock").exists()), 90, f"worker {count} to listen")
    return int(log.read_text().split(" ready in ")[count - 1].rsplit("pid ", 1)[1])


def same_answer(a: dict, b: dict) -> None:
    for key in ("route", "text", "refused", "citations", "pending_action"):
        assert a[key] == b[key], key


def test_the_second_question_is_answered_by_the_worker_the_first_started(data: Path) -> None:
    first = ask(data)
    pid = ready_worker(data)
    assert answered(data) == 0
    run = data / "run"
    assert stat.S_IMODE(run.stat().st_mode) == 0o700
    assert stat.S_IMODE((run / "ask.sock").stat().st_mode) == 0o600
    second = ask(data)
    assert answered(data) == 1
    same_answer(first, second)
    assert second["citations"]
    local = ask(data, QUESTION, "--no-worker")
    assert answered(data) == 1, "--no-worker answers in the process"
    same_answer(first, local)
    new = ask(data, BUDGET)  # a question whose vector is not cached: the worker's model embeds it
    assert answered(data) == 2
    same_answer(new, ask(data, BUDGET, "--no-worker"))
    assert _workers(data) == [pid]


def test_a_changed_setting_is_not_served_by_the_old_worker(data: Path) -> None:
    ask(data)
    old = ready_worker(data)
    changed = ask(data, MIN_CITATIONS="3")
    assert answered(data) == 0
    log = (data / "run" / "ask-worker.log").read_text()
    assert "stale request (environment: MIN_CITATIONS differs)" in log
    same_answer(changed, ask(data, QUESTION, "--no-worker", MIN_CITATIONS="3"))
    new = ready_worker(data, 2)  # the client started one of its own settings
    assert new != old
    wait_for(lambda: _workers(data) == [new], 10, "the old worker to exit")
    ask(data, MIN_CITATIONS="3")
    assert answered(data) == 1
    ask(data)  # and back: the default settings are not the new worker's
    assert answered(data) == 1


def test_a_page_edited_and_reindexed_is_in_the_workers_next_answer(tmp_path: Path, embedding_cache_dir: Path,
                                                                   wiki_copy: Path) -> None:
    data = seed_embedding_cache(tmp_path / "data", embedding_cache_dir / "embeddings.sqlite")
    try:
        assert run_chatops(["index", f"folder:{wiki_copy}"], data, cwd=tmp_path).returncode == 0
        before = ask(data, BUDGET)
        ready_worker(data)
        assert "$1,500" in ask(data, BUDGET)["text"] and answered(data) == 1
        page = wiki_copy / "people" / "remote-work.md"
        page.write_text(page.read_text().replace("$1,500", "$1,900"))
        reindex = run_chatops(["index", f"folder:{wiki_copy}"], data, cwd=tmp_path)  # the worker holds no lock
        assert reindex.returncode == 0, reindex.stderr[-3000:]
        after = ask(data, BUDGET)
        assert answered(data) == 2
        assert "$1,900" in after["text"] and "$1,500" not in after["text"], after["text"]
        assert after["text"] != before["text"]
        same_answer(after, ask(data, BUDGET, "--no-worker"))
    finally:
        _kill_workers(data)


def test_the_worker_answers_each_viewer_with_their_own_access(tmp_path: Path, embedding_cache_dir: Path) -> None:
    """tests/acl_corpus (an HR page only the group hr may read, as in tests/test_access_cli.py): one worker answers
    Hana (hr), Bob and an asker without ``--as`` in turn; only Hana's answers quote the page, each as the process's."""
    corpus = ROOT / "tests" / "acl_corpus"
    config = {"CHATOPS_CONFIG": str(corpus / "chatops.yml")}
    question = "what is the salary band for a senior engineer?"
    data = seed_embedding_cache(tmp_path / "data", embedding_cache_dir / "embeddings.sqlite")
    try:
        index = run_chatops(["index", f"folder:{corpus / 'handbook'}?name=handbook",
                             f"folder:{corpus / 'hr'}?name=hr&audience=hr"], data, cwd=tmp_path, **config)
        assert index.returncode == 0, index.stderr[-3000:]
        ask(data, question, "--as", "hana@example.com", **config)
        ready_worker(data)
        for n, viewer in enumerate([("--as", "hana@example.com"), ("--as", "bob@example.com"), (),
                                    ("--as", "hana@example.com"), ()], start=1):
            reply = ask(data, question, *viewer, **config)
            assert answered(data) == n
            same_answer(reply, ask(data, question, *viewer, "--no-worker", **config))
            quoted = "salary-bands.md" in {c["doc_id"] for c in reply["citations"]}
            assert quoted == (viewer == ("--as", "hana@example.com")), (viewer, reply["text"])
            if not quoted:
                assert "98,000" not in json.dumps(reply) and "salary-bands" not in json.dumps(reply)
    finally:
        _kill_workers(data)


def test_a_bot_package_in_the_working_directory_is_not_the_workers_code(data: Path) -> None:
    """The worker runs the modules ``chatops`` runs (``python -P``), not a ``bot/`` the asker's folder holds."""
    fake = data.parent / "bot"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise SystemExit('not chatops')\n")
    first = ask(data)
    ready_worker(data)
    same_answer(first, ask(data))
    assert answered(data) == 1


def test_the_idle_timeout_stops_the_worker_and_removes_its_socket(data: Path) -> None:
    ask(data, ASK_WORKER_IDLE_SECONDS="2")
    ready_worker(data, listening=False)  # (on a loaded machine it may be gone before this looks)
    wait_for(lambda: not _workers(data), 30, "the idle worker to exit")
    assert not (data / "run" / "ask.sock").exists()
    assert "idle for 2 s: exiting" in (data / "run" / "ask-worker.log").read_text()


def test_sigterm_stops_the_worker_and_removes_its_socket(data: Path) -> None:
    ask(data)
    pid = ready_worker(data)
    os.kill(pid, signal.SIGTERM)
    wait_for(lambda: not _workers(data), 30, "the worker to exit")
    assert not (data / "run" / "ask.sock").exists()


def _dead_socket(data: Path) -> Path:
    """A socket file in ``data/run`` that nobody listens on (its process closed it without removing it)."""
    run = data / "run"
    run.mkdir(mode=0o700)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(run / "ask.sock"))
    dead.close()
    return run / "ask.sock"


def test_a_stale_socket_file_does_not_block(data: Path) -> None:
    path = _dead_socket(data)
    first = ask(data)
    ready_worker(data)
    assert path.exists()
    same_answer(first, ask(data))
    assert answered(data) == 1


def test_a_worker_killed_hard_leaves_a_socket_that_does_not_block(data: Path) -> None:
    ask(data)
    os.kill(ready_worker(data), signal.SIGKILL)
    wait_for(lambda: not _workers(data), 10, "the worker to die")
    assert (data / "run" / "ask.sock").exists()
    ask(data)
    ready_worker(data, 2)
    ask(data)
    assert answered(data) == 1


@pytest.mark.parametrize("behaviour", ["silent", "garbage", "closes"])
def test_a_worker_that_hangs_or_answers_nonsense_costs_a_local_answer(data: Path, behaviour: str) -> None:
    run = data / "run"
    run.mkdir(mode=0o700)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(run / "ask.sock"))
    listener.listen(4)
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            if behaviour == "garbage":
                conn.sendall(b'{"status": "accepted"}\n[1, 2\n')
            if behaviour == "closes":
                conn.close()
            else:
                held.append(conn)  # never answers (or after the garbage, never closes)

    threading.Thread(target=serve, daemon=True).start()
    try:
        start = time.monotonic()
        reply = ask(data, QUESTION, ASK_WORKER_IDLE_SECONDS="60")
        assert time.monotonic() - start < warm.ACCEPT_TIMEOUT + 60
        assert reply["citations"] and answered(data) == 0
    finally:
        listener.close()
        for conn in held:
            conn.close()


def test_auto_without_a_terminal_starts_no_worker(data: Path, session_wiki: Path) -> None:
    assert run_chatops(["index", f"folder:{session_wiki}"], data, cwd=data.parent, ASK_WORKER="auto").returncode == 0
    ask(data, ASK_WORKER="auto")
    ask(data, ASK_WORKER="auto")
    time.sleep(1)
    assert not (data / "run").exists()
    assert not _workers(data)


def test_auto_at_a_terminal_starts_one(data: Path) -> None:
    """stdin and stdout on a pseudo-terminal, ``ASK_WORKER`` unset (``auto``): a person at a shell gets a worker."""
    import pty
    import subprocess

    from tests.helpers import chatops_command, cli_environment

    controller, terminal = pty.openpty()
    reader, printed = read_terminal(controller)
    try:
        proc = subprocess.run([*chatops_command(), "ask", QUESTION], cwd=data.parent, env=cli_environment(data),
                              stdin=terminal, stdout=terminal, stderr=subprocess.PIPE, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        ready_worker(data)
    finally:
        os.close(terminal)
        reader.join(5)
        os.close(controller)
    assert b"[1]" in printed


def test_no_worker_flag_and_off_start_none(data: Path) -> None:
    ask(data, QUESTION, "--no-worker")
    ask(data, ASK_WORKER="off")
    time.sleep(1)
    assert not (data / "run").exists()
    assert not _workers(data)


def test_the_code_version_covers_every_package_of_the_distribution() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    assert sorted(warm.PACKAGES) == sorted(p.rstrip("*") for p in include)


def test_two_lines_in_one_packet_are_both_read() -> None:
    """The worker's "accepted" and its answer may reach the client in one read: the second line is kept for the next
    call (a reader that dropped it waited for the answer timeout, then answered locally)."""
    client, worker = socket.socketpair()
    with client, worker, client.makefile("rb") as stream:
        client.settimeout(5)
        worker.sendall(b'{"status": "accepted", "pid": 1}\n{"status": "ok", "rc": 0}\n[1, 2\n')
        assert warm.read_line(stream) == {"status": "accepted", "pid": 1}
        assert warm.read_line(stream) == {"status": "ok", "rc": 0}
        with pytest.raises(ValueError):
            warm.read_line(stream)  # not a JSON object line
        worker.sendall(b'{"no": "newline"}')
        worker.shutdown(socket.SHUT_WR)
        with pytest.raises(ValueError, match="closed before a full line"):
            warm.read_line(stream)


def _take(lock) -> bool:
    import fcntl

    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _lock_held(data: Path) -> bool:
    import fcntl

    try:
        with open(data / "run" / "ask.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    return False


@pytest.mark.parametrize("command", ["index", "sync"])
def test_index_and_sync_start_the_worker_so_the_first_question_is_answered_warm(data: Path, session_wiki: Path,
                                                                                 command: str) -> None:
    """The first ``chatops ask`` after ``chatops index`` (or ``sync``) is the worker's: that command started it when it
    finished (``ASK_WORKER=on`` here; ``auto`` at a terminal), and the question waits for it if it is still starting
    instead of loading everything a second time beside it."""
    args = ["index", f"folder:{session_wiki}"] if command == "index" else ["sync"]
    proc = run_chatops(args, data, cwd=data.parent, ASK_WORKER="on", CHATOPS_SOURCES=f"folder:{session_wiki}?name=wiki")
    assert proc.returncode == 0, proc.stderr[-3000:]
    wait_for(lambda: _workers(data), 30, "the worker the index run started")
    first = ask(data, CHATOPS_SOURCES=f"folder:{session_wiki}?name=wiki")  # the same environment as the index run's
    assert answered(data) == 1, (data / "run" / "ask-worker.log").read_text()
    log = (data / "run" / "ask-worker.log").read_text()
    assert log.count(" ready in ") == 1, log  # the question did not start a second one beside it
    same_answer(first, ask(data, QUESTION, "--no-worker"))
    assert first["citations"]


def test_a_question_waits_for_a_starting_worker_and_not_for_one_that_exits(data: Path) -> None:
    """``chatops ask --start-worker`` returns at once; a question asked while the worker starts is answered by it.
    A lock held by a process that never listens and then lets go (a worker that failed to start) is waited for only
    while it is held: the question is then answered locally."""
    started = run_chatops(["ask", "--start-worker"], data, cwd=data.parent, ASK_WORKER="on")
    assert started.returncode == 0 and "starting the ask worker" in started.stderr, started.stderr
    wait_for(lambda: _lock_held(data), 30, "the worker to take its lock")
    again = run_chatops(["ask", "--start-worker"], data, cwd=data.parent, ASK_WORKER="on")
    assert again.returncode == 0 and "running or starting" in again.stderr, again.stderr
    first = ask(data)
    assert answered(data) == 1
    assert (data / "run" / "ask-worker.log").read_text().count(" ready in ") == 1
    same_answer(first, ask(data, QUESTION, "--no-worker"))
    _kill_workers(data)

    import subprocess

    from tests.helpers import chatops_command, cli_environment

    with open(data / "run" / "ask.lock", "a") as lock:  # a "worker" that holds the lock and never listens
        wait_for(lambda: _take(lock), 10, "the killed worker's lock to be released")  # (its files close last)
        proc = subprocess.Popen([*chatops_command(), "ask", "--json", QUESTION], cwd=data.parent,
                                env=cli_environment(data, ASK_WORKER="on"), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        time.sleep(3)
        assert proc.poll() is None, "the question waits while the lock is held"
    start = time.monotonic()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    assert time.monotonic() - start < warm.START_WAIT, "it stopped waiting when the lock was let go"
    same_answer(json.loads(out), first)
    assert answered(data) == 1  # answered locally (the worker it then started answered nothing yet)


def test_start_worker_asks_nothing_and_respects_off(data: Path) -> None:
    for args, env, message in ((["ask", "--start-worker", QUESTION], {"ASK_WORKER": "on"}, "asks nothing"),
                               (["ask", "--start-worker"], {"ASK_WORKER": "off"}, "the ask worker is off"),
                               (["ask", "--start-worker", "--no-worker"], {}, "the ask worker is off"),
                               (["ask"], {}, "ask needs a question")):
        proc = run_chatops(args, data, cwd=data.parent, **env)
        assert proc.returncode == 2 and message in proc.stderr, (args, proc.stderr)
    assert not _workers(data)
