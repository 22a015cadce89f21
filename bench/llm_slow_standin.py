"""Seconds and LLM calls per turn with a slow, limited model: a stand-in that behaves like llama-cpp-python's
server running SmolLM2-135M on 2 cores (issue 23 item 4).

The stand-in (``tests/standins/openai.py``, on 127.0.0.1) is scripted here the way that server answered: it
ignores ``tools`` (the routing call gets prose), answers a ``json_schema`` response format with a 500
(``json_object`` with a schema works), and takes ``--delay`` seconds per call plus ``--token-delay`` per
completion token. The server profile lives in this script's brain, not in the stand-in's options, so the
same script measures the code before this change too:

    .venv/bin/python bench/llm_slow_standin.py                              # this checkout
    PYTHONPATH=/work/main .venv/bin/python bench/llm_slow_standin.py        # another checkout's code

Asks the first ``--n`` single-page questions of ``examples/eval.jsonl`` through the real agent
(``app.wiring.build_agent`` with ``OPENAI_BASE_URL`` set, the wiki indexed once) and prints, per variant
(``LLM_TOOLS``/``LLM_JSON_SCHEMA`` as given; settings the checkout lacks are ignored): seconds per turn
(mean, max), LLM calls per turn, answers that used the model's draft, extractive fallbacks, routes taken.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import tempfile
import time
from pathlib import Path

from tests.llm_script import PASSAGE, first_sentence
from tests.standins.openai import OpenAIStandIn, Response, chat, error, json_reply

from agent.llm import prompts
from agent.models import Turn
from app.settings import Settings
from app.wiring import build_agent
from core.access import Viewer
from connectors.folder import FolderSource
from index.indexer import Indexer

ROOT = Path(__file__).resolve().parents[1]

class LlamaCppLike:
    """The scripted small model behind a server that ignores tools and rejects ``json_schema``."""

    def __init__(self, delay: float, token_delay: float) -> None:
        self.delay, self.token_delay = delay, token_delay

    def __call__(self, req: dict) -> Response:
        if (req.get("response_format") or {}).get("type") == "json_schema":
            return error(500, "response_format json_schema is not supported")
        resp = self.answer(req)
        time.sleep(self.delay + self.token_delay * resp.body["usage"]["completion_tokens"])
        return resp

    def answer(self, req: dict) -> Response:
        system = req["messages"][0]["content"]
        last = req["messages"][-1]["content"]
        if system.startswith(prompts.ROUTER_SYSTEM):  # tools ignored: prose, as SmolLM2 wrote
            return chat("I think you should ask your manager or check the company handbook for that.",
                        completion_tokens=20)
        if system.startswith(getattr(prompts, "ROUTE_JSON_SYSTEM", "\0")):
            return json_reply({"route": "search", "query": req["messages"][-1]["content"]}, completion_tokens=15)
        if system == prompts.REWRITE_SYSTEM:
            q = req["messages"][1]["content"].split("Latest message: ")[1].split("\n")[0]
            return json_reply({"standalone": q, "sub_queries": [], "expansion": [], "hypothetical_answer": ""},
                              completion_tokens=30)
        if system == prompts.REFLECT_SYSTEM:
            return json_reply({"relevant": True, "sufficient": True, "missing": "", "next_query": ""},
                              completion_tokens=25)
        if system == prompts.ANSWER_SYSTEM:
            ps = PASSAGE.findall(last)[:2]
            return chat(" ".join(f"{first_sentence(t)} [{n}]" for n, _, t in ps) or "INSUFFICIENT",
                        completion_tokens=60)
        if system == prompts.CLAIMS_SYSTEM:
            n = len(re.findall(r"Claim (\d+):", last))
            return json_reply({"verdicts": [{"claim": i, "supported": True} for i in range(1, n + 1)]},
                              completion_tokens=10 + 8 * n)
        if system == prompts.COMPLIANCE_SYSTEM:
            return json_reply({"ok": True, "reasons": []}, completion_tokens=10)
        return chat("pong", completion_tokens=2)  # the tool probe, or anything else: prose


def run(variant: dict[str, str], questions: list[str], index, data: Path, args) -> dict:
    """Ask every question through a fresh agent of ``variant``'s settings; the figures."""
    brain = LlamaCppLike(args.delay, args.token_delay)
    known = set(Settings.model_fields)
    with OpenAIStandIn(brain) as llm:
        kw = {"chatops_data_dir": data, "openai_base_url": llm.base_url, "openai_api_key": "k",
              "turn_budget_ms": args.budget_ms}
        kw.update({k: v for k, v in variant.items() if k in known})
        rt = build_agent(Settings(**kw), index=index)
        seconds, calls, drafted, fallback, routes = [], [], 0, 0, {}
        for q in questions:
            t = time.perf_counter()
            reply = rt.agent.answer(Turn(viewer=Viewer.public("dm"), text=q))
            seconds.append(time.perf_counter() - t)
            steps = reply.trace.steps
            calls.append(next((s["calls"] for s in steps if s["step"] == "llm_usage"), 0))
            fell = any(s["step"] == "fallback" for s in steps)
            fallback += fell
            drafted += not fell and reply.route in ("knowledge", "followup") and bool(reply.citations)
            routes[reply.route] = routes.get(reply.route, 0) + 1
    n = len(questions)
    return {"variant": variant or "defaults", "turns": n, "s_per_turn_mean": round(statistics.mean(seconds), 2),
            "s_per_turn_max": round(max(seconds), 2), "llm_calls_per_turn": round(sum(calls) / n, 2),
            "model_drafted_answers": drafted, "extractive_fallbacks": fallback, "routes": routes}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=6, help="questions to ask (default 6)")
    ap.add_argument("--delay", type=float, default=2.0, help="seconds per call (default 2.0)")
    ap.add_argument("--token-delay", type=float, default=1 / 21, help="seconds per completion token (default 1/21)")
    ap.add_argument("--budget-ms", type=int, default=20000, help="TURN_BUDGET_MS (default 20000)")
    args = ap.parse_args()
    rows = [json.loads(line) for line in (ROOT / "examples" / "eval.jsonl").read_text().splitlines() if line.strip()]
    questions = [r["question"] for r in rows if r.get("kind") == "single"][: args.n]
    variants = [{}, {"llm_tools": "off", "llm_json_schema": "auto"}]
    print(f"stand-in: tools ignored, json_schema -> 500, {args.delay} s/call + {args.token_delay:.3f} s/token; "
          f"budget {args.budget_ms} ms; {len(questions)} questions; code from {Path(prompts.__file__).parents[2]}")
    with tempfile.TemporaryDirectory(prefix="llm-slow-") as tmp:
        os.environ.setdefault("EMBEDDING_MODEL", "local")
        base = build_agent(Settings(chatops_data_dir=Path(tmp) / "index"))
        Indexer(base.index).run(FolderSource(ROOT / "examples" / "wiki"))
        for i, variant in enumerate(variants):
            print(json.dumps(run(variant, questions, base.index, Path(tmp) / f"v{i}", args)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
