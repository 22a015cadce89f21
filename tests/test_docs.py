"""The documentation site (docs/, mkdocs.yml) builds with ``mkdocs build --strict`` and its reference pages
are generated from the code (docs/hooks/reference.py), so they cannot drift from it.

- The real ``mkdocs build --strict`` (a broken link, a missing page or a failing generator fails it).
- The built settings page names every setting's environment variable with its description; a setting
  without a description fails the generator (so the build).
- The built CLI page shows every ``chatops`` command of the real parser; the chatops.yml page every field
  of the sources file's models; the metrics page every metric the process registers.
- Every how-to guide has prerequisites, numbered steps, a check that it works and common failures.
"""

from __future__ import annotations

import html
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import Field

from tests.helpers import ROOT

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

DOCS = ROOT / "docs"


def _hook():
    spec = importlib.util.spec_from_file_location("docs_reference_hook", DOCS / "hooks" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


def _page(site: Path, path: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", (site / path / "index.html").read_text(encoding="utf-8")))


def test_every_setting_is_in_the_settings_reference_with_its_description(site: Path) -> None:
    from app.settings import Settings

    hook = _hook()
    text = " ".join(_page(site, "reference/settings").split())
    for name, field in Settings.model_fields.items():
        assert field.description and field.description.strip(), f"{name} has no description"
        for variable in hook.setting_variables(name, field):
            assert variable in text, f"{variable} is missing from the settings reference"
        assert " ".join(field.description.split())[:60] in text, f"{name}'s description is not shown"


def test_a_setting_without_a_description_fails_the_build(monkeypatch: pytest.MonkeyPatch) -> None:
    import app.settings
    from app.settings import Settings

    class Undocumented(Settings):
        brand_new_setting: int = Field(3)

    monkeypatch.setattr(app.settings, "Settings", Undocumented)
    hook = _hook()
    with pytest.raises(hook.ReferenceError, match="brand_new_setting"):
        hook.on_page_markdown("<!-- reference:settings -->", None, None, None)


def test_every_cli_command_is_in_the_cli_reference(site: Path) -> None:
    text = _page(site, "reference/cli")
    commands = _hook().cli_commands()
    assert "report" in commands and "serve" in commands
    missing = [c for c in commands if f"chatops {c}" not in text]
    assert not missing, f"commands the CLI reference never shows: {missing}"


def test_every_sources_file_field_is_in_the_chatops_yml_reference(site: Path) -> None:
    from app.config import ChatopsConfig

    hook = _hook()
    text = _page(site, "reference/chatops-yml")
    for model in hook._models_under(ChatopsConfig):
        for name in model.model_fields:
            assert name in text, f"{model.__name__}.{name} is missing from the chatops.yml reference"


def test_every_metric_is_in_the_metrics_reference(site: Path) -> None:
    from telemetry.metrics import REGISTRY

    text = _page(site, "reference/metrics")
    for family in REGISTRY.collect():
        assert family.name in text, f"{family.name} is missing from the metrics reference"
    assert "chatops_index_pages" in text and "chatops_pending_actions" in text


def test_every_how_to_has_prerequisites_steps_a_check_and_common_failures() -> None:
    guides = sorted((DOCS / "how-to").glob("*.md"))
    assert len(guides) >= 10
    for guide in guides:
        text = guide.read_text(encoding="utf-8")
        if guide.stem not in {"upgrade", "backup"}:
            assert "## Prerequisites" in text, f"{guide.name} has no prerequisites"
        assert "## Steps" in text and re.search(r"^1\. ", text, flags=re.M), f"{guide.name} has no numbered steps"
        assert re.search(r"check that it works", text, flags=re.I), f"{guide.name} has no check that it works"
        assert "## Common failures" in text, f"{guide.name} has no common failures"


def test_the_docs_say_what_works_offline_and_what_each_source_needs() -> None:
    home = (DOCS / "index.md").read_text(encoding="utf-8")
    assert "What works offline, what needs an LLM" in home
    for source in ("Confluence Cloud", "Confluence Data Center", "MediaWiki", "Folders"):
        assert source in home


def test_no_page_holds_a_merge_conflict_marker() -> None:
    """``mkdocs build --strict`` renders a left-over ``<<<<<<<`` block as text; a merge must not ship one."""
    marker = re.compile(r"^(?:<{7}|>{7}) |^={7}$", re.M)
    pages = [ROOT / "README.md", *DOCS.rglob("*.md")]
    assert [str(p.relative_to(ROOT)) for p in pages if marker.search(p.read_text(encoding="utf-8"))] == []
