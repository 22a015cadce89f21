"""Agent overhead per LLM turn, excluding time inside the LLM (target: under 50 ms).

Usage: python bench/agent_overhead.py [--index DIR] [--turns N]

Runs full LLM-planner turns (route, rewrite, retrieve, reflect, answer, claim check, compliance)
against the stand-in OpenAI server of the tests, answering instantly, and reports per turn: the
total time, the time spent inside LLM calls (HTTP round trips to the stand-in included), and the
difference, which is the agent's own overhead (retrieval, gate, citation work, prompts, parsing).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from agent.agent import Agent
from agent.llm.client import LLMClient, build_openai_client
from agent.llm.planner import LLMPlanner, LLMPlannerConfig
from agent.models import Turn
from core.access import Viewer
from app.settings import Settings
from app.wiring import build_agent
from index.embeddings import CachedEmbedder, EmbeddingCache, OnnxMiniLMEmbedder
from connectors.folder import FolderSource
from index.knowledge import KnowledgeIndex
from index.indexer import Indexer
from tests.llm_script import Brain  # (the tests' scripted model)
from tests.standins.openai import OpenAIStandIn

ROOT = Path(__file__).resolve().parents[1]

QUESTIONS = ["how do I declare an incident?", "how much is the home office budget?", "when do patch releases go out?",
             "what does DRI mean?", "how many days of PTO do we get?", "how do I report phishing?"]


class TimedLLM(LLMClient):
    """An LLMClient that adds up the wall time spent inside ``chat``."""

    spent_ms = 0.0

    def chat(self, *a, **kw):  # noqa: D102 - see LLMClient.chat
        t = time.perf_counter()
        try:
            return super().chat(*a, **kw)
        finally:
            TimedLLM.spent_ms += (time.perf_counter() - t) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", help="an existing index folder (default: build one from examples/wiki)")
    ap.add_argument("--turns", type=int, default=60)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        embedder = CachedEmbedder(OnnxMiniLMEmbedder(), EmbeddingCache(Path(tmp) / "emb.sqlite"))
        index = KnowledgeIndex(args.index or Path(tmp) / "index", embedder)
        if not args.index:
            Indexer(index).run(FolderSource(ROOT / "examples" / "wiki"))
        rt = build_agent(Settings(chatops_data_dir=Path(tmp) / "data"), index=index)
        with OpenAIStandIn(Brain()) as llm:
            client = TimedLLM(build_openai_client("bench", llm.base_url, timeout=10))
            planner = LLMPlanner(rt.tools, client, rt.agent.planner,
                                 LLMPlannerConfig(answer_cache_ttl_s=0, route_cache_ttl_s=0))
            agent = Agent(planner)
            for q in QUESTIONS:  # warm-up: query embeddings, searcher, HTTP connection
                agent.answer(Turn(viewer=Viewer.public(), text=q))
            totals, inside, calls = [], [], []
            for i in range(args.turns):
                TimedLLM.spent_ms = 0.0
                t = time.perf_counter()
                reply = agent.answer(Turn(viewer=Viewer.public(), text=f"{QUESTIONS[i % len(QUESTIONS)]} (#{i})"))
                totals.append((time.perf_counter() - t) * 1000)
                inside.append(TimedLLM.spent_ms)
                calls.append(reply.trace.timings_ms.get("llm_calls", 0))
        index.close()
    over = sorted(t - s for t, s in zip(totals, inside))
    p95 = over[min(len(over) - 1, int(0.95 * len(over)))]
    print(json.dumps({"turns": args.turns, "llm_calls_mean": round(statistics.mean(calls), 2),
                      "turn_ms_p50": round(statistics.median(totals), 1),
                      "inside_llm_ms_p50": round(statistics.median(inside), 1),
                      "overhead_ms_p50": round(statistics.median(over), 1), "overhead_ms_p95": round(p95, 1)}))
    print(f"agent overhead per turn (excluding LLM calls): p50 {statistics.median(over):.1f} ms, p95 {p95:.1f} ms "
          f"(target < 50 ms); {statistics.mean(calls):.1f} LLM calls per turn")


if __name__ == "__main__":
    main()
