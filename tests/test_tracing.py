"""Optional OpenTelemetry traces (issue 13): with ``OTEL_EXPORTER_OTLP_ENDPOINT`` set, real ``chatops sync`` and
``chatops ask`` subprocesses export their spans over OTLP/HTTP (protobuf) to a stand-in collector
(tests/standins/otlp.py): one span per sync run, and per turn a ``chatops.turn`` span with the trace id, route and
outcome, under which are the turn's timed steps (``chatops.retrieve``, ``chatops.gate``...: the stages of its
``timings_ms``), the searches and every LLM call (the LLM is tests/standins/openai.py). No attribute carries the
question or the answer. Without the variable nothing of OpenTelemetry is imported
(tests/test_operability.py::test_help_and_usage_errors_import_nothing_heavy) and ``span`` does nothing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import WIKI, cli_environment, run_chatops, seed_embedding_cache
from tests.standins.openai import OpenAIStandIn
from tests.standins.otlp import OtlpStandin
from tests.llm_script import Brain

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

QUESTION = "how do I declare an incident?"


def test_sync_and_ask_export_their_spans_to_the_collector(tmp_path: Path, wiki_index, embedding_cache_dir: Path) -> None:
    data = seed_embedding_cache(tmp_path / "data", embedding_cache_dir / "embeddings.sqlite")
    wiki = tmp_path / "wiki"
    shutil.copytree(WIKI, wiki)
    collector = OtlpStandin().start()
    try:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url, "OTEL_SERVICE_NAME": "chatops-test",
               "CHATOPS_SOURCES": f"folder:{wiki}?name=handbook"}
        sync = run_chatops(["sync"], data, tmp_path, **env)
        assert sync.returncode == 0, sync.stderr
        [run] = collector.wait_for(lambda spans: [s for s in spans if s.name == "chatops.sync"])
        assert run.attributes == {"chatops.source": "handbook", "chatops.sync.kind": "content", "chatops.outcome": "ok"}
        assert run.service == "chatops-test" and run.parent_span_id == ""

        with OpenAIStandIn(Brain()) as llm:
            ask = run_chatops(["ask", "--json", QUESTION], data, tmp_path, OPENAI_API_KEY="sk-standin",
                              OPENAI_BASE_URL=llm.base_url, **env)
            llm_calls = len(llm.chat_requests())
        assert ask.returncode == 0, ask.stderr
        reply = json.loads(ask.stdout)
        assert not reply["refused"] and reply["citations"], reply["text"]
        [turn] = collector.wait_for(lambda spans: [s for s in spans if s.name == "chatops.turn"])
        assert turn.attributes == {"chatops.platform": "cli", "chatops.trace_id": reply["trace"]["trace_id"],
                                   "chatops.route": reply["route"], "chatops.outcome": "answered"}
        spans = collector.wait_for(lambda spans: len([s for s in spans if s.name == "chatops.llm"]) >= llm_calls
                                   and spans)
        mine = [s for s in spans if s.trace_id == turn.trace_id]
        by_id = {s.span_id: s for s in mine}

        def ancestors(s):  # the names of the spans above ``s``, nearest first
            while s.parent_span_id in by_id:
                s = by_id[s.parent_span_id]
                yield s.name

        searches = [s for s in mine if s.name == "chatops.search"]
        calls = [s for s in mine if s.name == "chatops.llm"]
        assert searches and all(next(ancestors(s)) == "chatops.retrieve" and "chatops.turn" in ancestors(s)
                                for s in searches)
        assert llm_calls >= 2 and len(calls) == llm_calls
        assert all("chatops.turn" in ancestors(s) and s.attributes["chatops.llm.model"] for s in calls)
        # the steps the reply timed are spans of the turn (its ``total`` is the turn's own span)
        stages = {s.name for s in mine if s.parent_span_id == turn.span_id}
        assert {"chatops.retrieve", "chatops.gate", "chatops.screen"} <= stages, stages
        assert {"retrieve", "gate", "screen"} <= set(reply["timings_ms"])
        # never the question or the answer
        words = {"incident", "declare", *reply["text"].split()[:5]}
        for s in spans:
            for v in s.attributes.values():
                assert not any(w in str(v) for w in words if len(w) > 4), (s.name, v)
    finally:
        collector.stop()


def test_without_the_endpoint_nothing_of_opentelemetry_is_imported(tmp_path: Path) -> None:
    code = ("import sys\nfrom telemetry.tracing import span, tracing_enabled\n"
            "with span('chatops.turn', {'a': 1}) as s:\n    s.set_attribute('b', 2)\n"
            "print(tracing_enabled(), any(m.startswith('opentelemetry') for m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env=cli_environment(tmp_path / "d"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "False"]


def test_a_bad_endpoint_is_a_clear_error(tmp_path: Path) -> None:
    proc = run_chatops(["status"], tmp_path / "d", tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT="otel-collector:4318")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL" in proc.stderr
