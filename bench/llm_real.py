"""The dev sets in LLM mode against a real model: SmolLM2-135M-Instruct on llama-cpp-python's
OpenAI-compatible server (127.0.0.1), through ``chatops eval --set`` exactly as ``make eval`` runs them.

Usage: python bench/llm_real.py [--limit N] [--sets dev,dev2,dev3] [--shared DIR] [--data DIR] [--base-url URL] [--json] [--raw FILE]

Prints, per set (dev, dev2, dev3 over the ../shared handbooks): the eval figures (R@5, answer_contains,
citation_validity, refusal_unanswerable, false_refusal, ``unsupported_posted``), LLM calls and tokens per turn
(mean, and per knowledge turn), the turns answered without the model after it failed (``turns_fallback``) and
the calls that timed out, seconds per turn (mean, p95, max) and the turns that hit their budget. The
server is started from the real-model venv (``make test-llm`` builds it; ``$CHATOPS_LLM_PYTHON``) unless
``--base-url`` names one already running. ``--limit N`` asks the first N questions of each set, taken in turn
from each kind so that every kind is represented. Skips (exit 0) with the reason when the dev sets are absent.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from tests.helpers import chatops_command, cli_environment
from tests.llm_real.realmodel import LLMServer, ServerUnavailable, llm_environment, serve_smollm2

ROOT = Path(__file__).resolve().parents[1]

SETS = {
    "dev": ("eval/dev.jsonl", "folder:{shared}/corpus/sourcegraph-handbook?url_base=https://handbook.sourcegraph.com/"),
    "dev2": ("eval/dev2.jsonl", "folder:{shared}/corpus/meltano-handbook"),
    "dev3": ("eval/dev3.jsonl", "folder:{shared}/corpus/18f-handbook"),
}
KNOWLEDGE = {"single", "multi", "paraphrase", "exact_term", "followup"}


def limited(path: Path, limit: int | None) -> list[str]:
    """The file's lines, or ``limit`` of them taken round-robin over the kinds (file order within a kind)."""
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    if limit is None or limit >= len(lines):
        return lines
    by_kind: dict[str, list[str]] = defaultdict(list)
    for line in lines:
        by_kind[json.loads(line)["kind"]].append(line)
    out: list[str] = []
    while len(out) < limit:
        for kind in list(by_kind):
            if by_kind[kind] and len(out) < limit:
                out.append(by_kind[kind].pop(0))
    return out


def run_sets(server: LLMServer, shared: Path, data: Path, limit: int | None, work: Path, budget_ms: int,
             names: list[str]) -> dict:
    args = ["eval", "--json"]
    for name in names:
        questions, source = SETS[name]
        picked = work / f"{name}.jsonl"
        picked.write_text("\n".join(limited(shared / questions, limit)) + "\n")
        args += ["--set", f"{name}={picked}::{source.format(shared=shared)}"]
    env = cli_environment(data, **llm_environment(server), TURN_BUDGET_MS=str(budget_ms))
    done = subprocess.run([*chatops_command(), *args], cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"chatops eval failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(done.stdout)["sets"]


def figures(result: dict, budget_s: float) -> dict:
    rows = result["per_question"]
    secs = [r["latency_ms"] / 1000 for r in rows]
    know = [r for r in rows if r["kind"] in KNOWLEDGE]
    a = result["answers"]
    return {
        "questions": len(rows), "recall@5": result["retrieval"].get("recall@5"),
        "answer_contains": a["answer_contains"], "citation_validity": a["citation_validity"],
        "refusal_unanswerable": a["refusal_unanswerable"], "false_refusal": a["false_refusal"],
        "unsupported_posted": a["unsupported_posted"],
        "llm_calls_per_turn": statistics.fmean(r["llm_calls"] for r in rows),
        "llm_calls_per_knowledge_turn": statistics.fmean(r["llm_calls"] for r in know) if know else None,
        "llm_tokens_per_turn": statistics.fmean(r["llm_tokens"] for r in rows),
        "turns_without_llm": sum(1 for r in rows if r["llm_calls"] == 0),
        "turns_fallback": sum(1 for r in rows if r.get("llm_fallback")),
        "llm_timeouts": sum(r.get("llm_timeouts", 0) for r in rows),
        "s_per_turn_mean": statistics.fmean(secs), "s_per_turn_p95": sorted(secs)[max(0, int(0.95 * len(secs)) - 1)],
        "s_per_turn_max": max(secs), "turns_over_budget": sum(1 for s in secs if s > budget_s),
    }


def table(all_figs: dict[str, dict]) -> str:
    cols = ["questions", "recall@5", "answer_contains", "citation_validity", "refusal_unanswerable", "false_refusal",
            "unsupported_posted", "llm_calls_per_turn", "llm_calls_per_knowledge_turn", "llm_tokens_per_turn",
            "turns_without_llm", "turns_fallback", "llm_timeouts", "s_per_turn_mean", "s_per_turn_p95", "s_per_turn_max", "turns_over_budget"]

    def f(v) -> str:
        return "-" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))

    width = max(map(len, cols))
    lines = [f"{'':{width}}  " + "  ".join(f"{n:>8}" for n in all_figs)]
    lines += [f"{c:{width}}  " + "  ".join(f"{f(all_figs[n].get(c)):>8}" for n in all_figs) for c in cols]
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--limit", type=int, help="questions per set (default: all)")
    p.add_argument("--shared", type=Path, default=ROOT.parent / "shared", help="the dev sets and corpora (../shared)")
    p.add_argument("--data", type=Path, default=ROOT / ".chatops-eval", help="data dir of the sets' indexes "
                   "(make eval's; incremental)")
    p.add_argument("--base-url", help="an OpenAI-compatible server already serving SmolLM2 as "
                   "smollm2-135m-instruct (default: start one)")
    p.add_argument("--sets", default="dev,dev2,dev3", help="which dev sets, comma-separated (default: all three)")
    p.add_argument("--budget-ms", type=int, default=20000, help="TURN_BUDGET_MS (default: production's 20000)")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    p.add_argument("--raw", type=Path, help="also write chatops eval's whole JSON per set (every question's row, "
                   "its trace figures and gate verdict) to this file")
    args = p.parse_args()
    names = [n.strip() for n in args.sets.split(",") if n.strip()]
    if not names or set(names) - set(SETS):
        p.error(f"--sets: choose among {', '.join(SETS)}")
    missing = [f for q, s in SETS.values() for f in (q, s.split(":", 1)[1].split("?")[0].replace("{shared}/", ""))
               if not (args.shared / f).exists()]
    if missing:
        print(f"skipped: the dev sets are not in {args.shared} (missing {', '.join(missing)}); "
              "pass --shared DIR", file=sys.stderr)
        return 0
    with tempfile.TemporaryDirectory(prefix="llm-real-") as tmp:
        work = Path(tmp)
        t = time.monotonic()
        try:
            if args.base_url:
                results = run_sets(LLMServer(args.base_url, work / "none.log"), args.shared, args.data, args.limit, work,
                                   args.budget_ms, names)
            else:
                with serve_smollm2(work / "server.log") as server:
                    results = run_sets(server, args.shared, args.data, args.limit, work,
                                   args.budget_ms, names)
        except ServerUnavailable as exc:
            print(f"the real model cannot be served: {exc}", file=sys.stderr)
            return 2
        if args.raw:
            args.raw.write_text(json.dumps(results, indent=1))
        figs = {name: figures(r, args.budget_ms / 1000) for name, r in results.items()}
        if args.json:
            print(json.dumps({"limit": args.limit, "seconds": round(time.monotonic() - t), "sets": figs}))
        else:
            print(f"LLM mode, SmolLM2-135M-Instruct (llama-cpp-python), limit {args.limit or 'none'} per set, "
                  f"{time.monotonic() - t:.0f} s in all")
            print(table(figs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
