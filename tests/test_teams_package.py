"""The Teams app package: ``make teams-package`` fills the manifest from the settings and zips it with the icons.

The filled manifest is validated offline against Microsoft's Teams app manifest schema (v1.17, the
template's ``manifestVersion``; ``tests/teams_schema/README.md`` says where the copy comes from and its
licence). The icons are checked as Teams checks them: a 192 x 192 colour icon with a glyph, a 32 x 32
outline that is white on a transparent background. The command list shown to everyone offers only what
anyone may run, and each command listed gets an answer through the real adapter.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import zipfile
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from PIL import Image

from app.settings import Settings
from bot.teams.package import TEMPLATE_DIR, PackageError, fill_manifest

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((Path(__file__).parent / "teams_schema" / "MicrosoftTeams.schema.json").read_text())
APP_ID = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
ADMIN_ONLY = {"status", "reindex"}


def make_package(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith(("MICROSOFT", "TEAMS_"))}
    return subprocess.run(["make", "--no-print-directory", "teams-package", f"TEAMS_PACKAGE={tmp_path / 'app.zip'}"],
                          cwd=ROOT, env={**clean, **env}, capture_output=True, text=True, timeout=300)


def test_make_teams_package_writes_a_manifest_that_the_official_schema_accepts(tmp_path) -> None:
    proc = make_package(tmp_path, MicrosoftAppId=APP_ID, TEAMS_BOT_DOMAIN="chatops.example.com",
                        TEAMS_APP_NAME="Handbook bot", TEAMS_DEVELOPER_NAME="Example Corp")
    assert proc.returncode == 0, proc.stderr
    with zipfile.ZipFile(tmp_path / "app.zip") as zf:
        assert sorted(zf.namelist()) == ["color.png", "manifest.json", "outline.png"]
        manifest = json.loads(zf.read("manifest.json"))
        assert zf.read("color.png") == (TEMPLATE_DIR / "color.png").read_bytes()
    validator = jsonschema.Draft4Validator(SCHEMA, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(manifest)]
    assert errors == []
    assert manifest["id"] == APP_ID and manifest["bots"][0]["botId"] == APP_ID
    assert manifest["validDomains"] == ["chatops.example.com"]
    assert manifest["developer"]["name"] == "Example Corp"
    assert manifest["developer"]["websiteUrl"] == "https://chatops.example.com/"
    assert manifest["name"]["short"] == "Handbook bot"
    assert "{{" not in json.dumps(manifest)


def test_the_template_and_icons_ship_with_the_installed_package() -> None:
    """The template lives in the Teams adapter (``bot/teams/manifest/``) and setuptools' package data ships
    every file the package needs, so an installed chatops (the Docker image) can build it too."""
    import fnmatch
    import tomllib

    from bot.teams import package

    assert TEMPLATE_DIR == Path(package.__file__).resolve().parent / "manifest"
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["bot.teams"]
    for name in package._FILES:
        assert (TEMPLATE_DIR / name).is_file(), name
        assert any(fnmatch.fnmatch(f"manifest/{name}", g) for g in globs), f"{name} is not package data"
    assert not (ROOT / "teams").exists(), "the template moved into bot/teams/manifest/"


def test_the_schema_catches_a_broken_manifest() -> None:
    """The validation has teeth: what Teams would refuse, the schema refuses."""
    manifest = json.loads((TEMPLATE_DIR / "manifest.json").read_text())
    manifest["bots"][0]["commandLists"][0]["commands"].append({"title": "x" * 40, "description": "too long"})
    del manifest["accentColor"]
    messages = [e.message for e in jsonschema.Draft4Validator(SCHEMA).iter_errors(manifest)]
    assert any("accentColor" in m for m in messages) and any("x" * 40 in m for m in messages)


@pytest.mark.parametrize("settings, needs", [
    ({"TEAMS_BOT_DOMAIN": "chatops.example.com"}, "MicrosoftAppId must be"),
    ({"MicrosoftAppId": APP_ID}, "TEAMS_BOT_DOMAIN must be"),
    ({"MicrosoftAppId": APP_ID, "TEAMS_BOT_DOMAIN": "https://chatops.example.com/api"}, "TEAMS_BOT_DOMAIN must be"),
])
def test_a_missing_or_malformed_setting_says_what_to_set(tmp_path, settings, needs) -> None:
    proc = make_package(tmp_path, **settings)
    assert proc.returncode != 0 and needs in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "app.zip").exists()


def test_a_name_over_teams_30_characters_is_refused() -> None:
    with pytest.raises(ValueError, match="at most 30 characters"):
        Settings(MicrosoftAppId=APP_ID, teams_bot_domain="chatops.example.com", teams_app_name="n" * 31)
    template = json.loads((TEMPLATE_DIR / "manifest.json").read_text())
    with pytest.raises(PackageError, match="1 to 30 characters"):
        fill_manifest(template, app_id=APP_ID, domain="chatops.example.com", name="n" * 31)


def test_the_colour_icon_is_192_px_with_a_glyph() -> None:
    icon = Image.open(TEMPLATE_DIR / "color.png").convert("RGBA")
    assert icon.size == (192, 192)
    background, glyph = icon.getpixel((96, 30)), icon.getpixel((60, 80))
    assert background[3] == 255 and glyph[3] == 255 and background[:3] != glyph[:3], "a glyph on the background"
    px = np.asarray(icon)
    assert len({tuple(p) for p in px[px[..., 3] == 255]}) > 10, "not a flat square"


def test_the_outline_icon_is_32_px_white_on_transparent() -> None:
    icon = Image.open(TEMPLATE_DIR / "outline.png")
    assert icon.size == (32, 32) and icon.mode == "RGBA"
    px = np.asarray(icon)
    drawn = px[px[..., 3] > 0]
    assert len(drawn) and (drawn[:, :3] == 255).all(), "only white is drawn"
    transparent = float((px[..., 3] == 0).mean())
    assert 0.3 < transparent < 0.95, transparent
    assert {icon.getpixel(c)[3] for c in [(0, 0), (31, 0), (0, 31), (31, 31)]} == {0}


def test_the_icon_script_draws_the_committed_icons(tmp_path) -> None:
    """The committed PNGs are what ``bot/teams/manifest/make_icons.py`` draws (change them by changing it)."""
    import runpy

    runpy.run_path(str(TEMPLATE_DIR / "make_icons.py"), run_name="make_icons")["main"](tmp_path)
    for name in ("color.png", "outline.png"):
        drawn = Image.open(io.BytesIO((tmp_path / name).read_bytes())).convert("RGBA")
        committed = Image.open(TEMPLATE_DIR / name).convert("RGBA")
        assert drawn.size == committed.size and drawn.tobytes() == committed.tobytes(), name


def test_the_command_list_shown_to_everyone_has_no_admin_command() -> None:
    manifest = json.loads((TEMPLATE_DIR / "manifest.json").read_text())
    listed = {c["title"] for lst in manifest["bots"][0]["commandLists"] for c in lst["commands"]}
    assert listed and not listed & ADMIN_ONLY
    assert listed == {"help", "sources"}, "each listed command is one the bot answers (test_teams.py)"
