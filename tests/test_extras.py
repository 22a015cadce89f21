"""Optional features as extras (app/extras.py): a setting that asks for a feature whose extra is missing stops
the ``chatops`` console script at startup with one line naming the extra and how to install it (exit 2, no
traceback). The test environment has every extra (requirements.lock), so a missing one is simulated in the
subprocess: a ``sitecustomize`` on its PYTHONPATH sets the extra's top-level modules to ``None`` in
``sys.modules`` (an import then fails and a spec lookup finds nothing, as in a venv without the package).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.extras import EXTRAS, extra_installed, missing_extras
from app.settings import Settings
from tools.errors import ToolUnavailableError

from tests.helpers import ROOT, cli_environment, run_chatops, seed_embedding_cache

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

CASES = {
    "teams": ({"MicrosoftAppId": "00000000-0000-0000-0000-000000000001", "MicrosoftAppPassword": "pw"},
              ["botbuilder"], "MicrosoftAppId needs the teams extra"),
    "llm": ({"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, ["openai"], "OPENAI_BASE_URL needs the llm extra"),
    "microsoft": ({"CALENDAR_BACKEND": "microsoft"}, ["msal"], "CALENDAR_BACKEND=microsoft needs the microsoft extra"),
    "google": ({"CALENDAR_BACKEND": "google"}, ["googleapiclient"],
               "CALENDAR_BACKEND=google needs the google extra"),
    "postgres": ({"DATABASE_URL": "postgresql+psycopg://bot:s3cret@db.invalid:5432/chatops"}, ["psycopg"],
                 "DATABASE_URL=postgresql+psycopg://... needs the postgres extra"),
    "otel": ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9/"}, ["opentelemetry.sdk"],
             "OTEL_EXPORTER_OTLP_ENDPOINT needs the otel extra"),
}


def _without(tmp_path: Path, modules: list[str]) -> str:
    """A PYTHONPATH whose sitecustomize hides ``modules`` (then the project root, as the CLI tests use)."""
    site = tmp_path / "hide"
    site.mkdir()
    lines = ["import sys"] + [f"sys.modules[{m!r}] = None" for m in modules]
    (site / "sitecustomize.py").write_text("\n".join(lines) + "\n")
    return f"{site}{os.pathsep}{ROOT}"


@pytest.mark.parametrize("extra", sorted(CASES))
def test_a_setting_whose_extra_is_missing_stops_chatops_serve_with_one_line(extra: str, tmp_path: Path) -> None:
    env, modules, message = CASES[extra]
    proc = run_chatops(["serve", "--port", "0"], tmp_path / "data", cwd=tmp_path, timeout=60,
                       PYTHONPATH=_without(tmp_path, modules), **env)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith(f"chatops: {message}"), lines[0]
    assert f"pip install 'chatops-bot[{extra}]'" in lines[0] and "make install-extras" in lines[0]
    assert "s3cret" not in proc.stderr  # the database URL's password is not repeated


def test_the_same_command_gets_past_the_check_with_the_extra_installed(tmp_path: Path) -> None:
    proc = run_chatops(["ask", "how do I ask for time off?"], tmp_path / "data", cwd=tmp_path, timeout=120,
                       CALENDAR_BACKEND="google")
    assert "extra" not in proc.stderr, proc.stderr


def test_the_test_environment_has_every_extra_and_the_check_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    assert all(extra_installed(e) for e in EXTRAS)
    for env, _, _ in CASES.values():
        for k, v in env.items():
            monkeypatch.setenv(k, v)
    settings = Settings(_env_file=None)
    assert missing_extras(settings) == []
    monkeypatch.setitem(sys.modules, "googleapiclient", None)
    assert [m.split(" needs")[0] for m in missing_extras(settings)] == ["CALENDAR_BACKEND=google"]
    monkeypatch.setitem(sys.modules, "openai", None)
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.setenv("EMBEDDING_MODEL", "text-embedding-3-small")
    assert "EMBEDDING_MODEL=text-embedding-3-small needs the llm extra" in missing_extras(Settings(_env_file=None))[0]


def test_the_calendar_factory_names_the_extra_to_a_library_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    from tools.calendar.factory import calendar_backend

    monkeypatch.delitem(sys.modules, "tools.calendar.google", raising=False)
    monkeypatch.setitem(sys.modules, "googleapiclient", None)
    monkeypatch.setitem(sys.modules, "googleapiclient.discovery", None)
    with pytest.raises(ToolUnavailableError, match=r"pip install 'chatops-bot\[google\]'"):
        calendar_backend("google", service_account_file="/nonexistent.json")
    monkeypatch.delitem(sys.modules, "tools.calendar.microsoft", raising=False)
    monkeypatch.setitem(sys.modules, "msal", None)
    with pytest.raises(ToolUnavailableError, match=r"pip install 'chatops-bot\[microsoft\]'"):
        calendar_backend("microsoft", graph={"tenant_id": "t", "client_id": "c", "client_secret": "s"})


def test_tracing_names_the_extra_when_the_sdk_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from telemetry import tracing

    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    with pytest.raises(ValueError, match=r"chatops-bot\[otel\]"):
        tracing.configure_tracing("http://127.0.0.1:9")
    assert not tracing.tracing_enabled()


#: What the optional extras install (make demo's runtime has none of it): hidden, the test environment is that runtime.
EXTRA_MODULES = ["botbuilder", "botframework", "msal", "msrest", "jwt", "cryptography", "openai", "googleapiclient",
                 "httplib2", "google.auth", "google.oauth2", "google.api_core", "psycopg", "opentelemetry", "scipy",
                 "mcp", "mcp_types", "starlette", "uvicorn", "sse_starlette"]


def test_the_runtime_without_any_extra_indexes_answers_proposes_and_serves_slack(
        tmp_path: Path, session_wiki: Path, embedding_cache_dir: Path) -> None:
    pythonpath = _without(tmp_path, EXTRA_MODULES)
    data = tmp_path / "data"
    if (embedding_cache_dir / "embeddings.sqlite").exists():
        seed_embedding_cache(data, embedding_cache_dir / "embeddings.sqlite")
    proc = run_chatops(["index", f"folder:{session_wiki}"], data, cwd=tmp_path, timeout=600, PYTHONPATH=pythonpath)
    assert proc.returncode == 0, proc.stderr
    proc = run_chatops(["ask", "how do I ask for time off?"], data, cwd=tmp_path, PYTHONPATH=pythonpath)
    assert proc.returncode == 0 and "Sources:" in proc.stdout, proc.stderr
    proc = run_chatops(["ask", "--json", "--history", "book a meeting called Sprint planning with bob@example.com",
                        "tomorrow at 3pm"], data, cwd=tmp_path, PYTHONPATH=pythonpath)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["pending_action"]["args"]["title"] == "Sprint planning"  # the local calendar
    code = ("import sys, bot.server, bot.slack.bot, bot.worker, app.report, app.wiring; "
            "hidden = [m for m in sys.argv[1:] if sys.modules.get(m) is not None]; "
            "assert not hidden, hidden")
    proc = subprocess.run([sys.executable, "-c", code, *EXTRA_MODULES], capture_output=True, text=True, timeout=120,
                          env=cli_environment(data, PYTHONPATH=pythonpath))
    assert proc.returncode == 0, proc.stderr
