"""The deployment files parse and say what the README promises, checked by maintained validators.

No image is built and no container runs here (no Docker engine, no registry): these tests check syntax
and the promises that can be read from the files.

- ``Dockerfile``: parsed by ``dockerfile-parse``; pinned slim Python base (no ``latest``), the lock with the
  optional extras installed with ``--require-hashes``, every package of ``pyproject.toml`` copied in, the embedding model
  loaded at build time, a non-root ``USER``, ``EXPOSE 3000``, a ``HEALTHCHECK`` on ``/healthz`` with
  python (no curl in the image), ``CMD chatops serve``; ``.dockerignore`` keeps the packages. The image's
  ``requirements-extras.lock`` is ``requirements.lock`` without the test extra, and ``requirements-runtime.lock``
  (``make demo``) without the optional extras either: same pins, same hashes.
- ``deploy/compose.yaml``: valid against the Compose specification's JSON schema (the copy vendored by
  ``check-jsonschema``), and ``docker compose config`` accepts it where the Compose plugin is installed.
- ``deploy/kubernetes/*.yaml``: valid against the official Kubernetes schemas (``kubernetes-validate``,
  strict: unknown fields fail), with the probes, securityContext and resources the README describes.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import tomllib
from importlib import resources
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml
from dockerfile_parse import DockerfileParser

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "kubernetes"


# -- Dockerfile --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def dockerfile() -> DockerfileParser:
    return DockerfileParser(str(ROOT / "Dockerfile"))


def _instructions(df: DockerfileParser, name: str) -> list[str]:
    return [i["value"] for i in df.structure if i["instruction"] == name]


def _final_stage(df: DockerfileParser) -> list[dict]:
    starts = [n for n, i in enumerate(df.structure) if i["instruction"] == "FROM"]
    return df.structure[starts[-1]:]


def test_dockerfile_bases_are_pinned_slim_python(dockerfile: DockerfileParser) -> None:
    assert dockerfile.is_multistage
    for image in dockerfile.parent_images:  # ARGs resolved by the parser
        name, _, tag = image.partition(":")
        assert name == "python" and tag and tag != "latest" and "slim" in tag, image
        assert tuple(int(x) for x in tag.split("-")[0].split(".")[:2]) >= (3, 11), image


def test_dockerfile_installs_the_lock_with_hashes_and_every_package(dockerfile: DockerfileParser) -> None:
    runs = _instructions(dockerfile, "RUN")
    args = {k: v for k, v in (a.partition("=")[::2] for a in _instructions(dockerfile, "ARG"))}
    assert args.get("LOCK") == "requirements-extras.lock"
    assert any("--require-hashes -r ${LOCK}" in r for r in runs)
    copied = {shlex.split(v)[0] for v in _instructions(dockerfile, "COPY") if not v.startswith("--from")}
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    wanted = {p.rstrip("*") for p in packages}
    assert wanted <= copied, f"packages not copied into the image: {wanted - copied}"
    ignore = (ROOT / ".dockerignore").read_text().split()
    assert all(f"!{p}/" in ignore for p in wanted) and "!requirements-extras.lock" in ignore
    assert "!requirements-runtime.lock" in ignore  # docker build --build-arg LOCK=requirements-runtime.lock


def _pins(lock: Path) -> dict[str, tuple[str, frozenset[str]]]:
    """name -> (version, hashes) of a requirements lock."""
    pins, name = {}, None
    for line in lock.read_text().splitlines():
        if m := re.match(r"^([A-Za-z0-9_.-]+)==(\S+)", line):
            name = m.group(1).lower()
            pins[name] = (m.group(2), frozenset())
        if name and (h := re.search(r"--hash=(sha256:[0-9a-f]{64})", line)):
            pins[name] = (pins[name][0], pins[name][1] | {h.group(1)})
    return pins


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=\[ ;]", r, maxsplit=1)[0].lower() for r in requirements}


def test_the_image_lock_is_the_full_lock_without_the_test_extra() -> None:
    full = _pins(ROOT / "requirements.lock")
    image, runtime = _pins(ROOT / "requirements-extras.lock"), _pins(ROOT / "requirements-runtime.lock")
    for lock in (image, runtime):
        assert {n: full.get(n) for n in lock} == lock  # same pins, same hashes: `make lock` wrote them all
        assert all(hashes for _, hashes in lock.values())
    assert set(runtime) < set(image)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    test_only = _names(extras["test"])
    runtime_direct = _names(project["dependencies"])
    optional = _names([r for name, reqs in extras.items() if name != "test" for r in reqs])
    assert runtime_direct | optional <= set(image)  # every dependency of the project and of its features...
    assert not (test_only - runtime_direct - optional) & set(image)  # ...and none of the test tools
    assert runtime_direct <= set(runtime) and not optional & set(runtime)  # make demo: no optional extra


def test_dockerfile_build_fails_without_the_embedding_model(dockerfile: DockerfileParser) -> None:
    build_stage = dockerfile.structure[:len(dockerfile.structure) - len(_final_stage(dockerfile))]
    checks = [i["value"] for i in build_stage if i["instruction"] == "RUN" and "OnnxMiniLMEmbedder" in i["value"]]
    assert checks and "embed(" in checks[0] and "assert" in checks[0]


def test_dockerfile_runs_as_non_root_with_healthcheck_on_healthz(dockerfile: DockerfileParser) -> None:
    final = _final_stage(dockerfile)
    users = [i["value"] for i in final if i["instruction"] == "USER"]
    assert users, "the final stage sets no USER (it would run as root)"
    user = users[-1].split(":")[0]
    assert user not in {"root", "0"} and user.isdigit(), users  # numeric: Kubernetes runAsNonRoot can check it
    health = [i["value"] for i in final if i["instruction"] == "HEALTHCHECK"]
    assert len(health) == 1 and "/healthz" in health[0]
    cmd = json.loads(health[0].split("CMD", 1)[1])
    assert cmd[0] == "python"  # a tool the image has: slim images have no curl
    assert "3000" in _instructions(dockerfile, "EXPOSE")
    assert json.loads(_instructions(dockerfile, "CMD")[-1])[:2] == ["chatops", "serve"]
    env = dockerfile.envs
    assert env["CHATOPS_DATA_DIR"] == "/data" and '["/data"]' in _instructions(dockerfile, "VOLUME")


# -- Compose -----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def test_compose_file_is_valid_against_the_compose_specification(compose: dict) -> None:
    schema_file = resources.files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json"
    schema = json.loads(schema_file.read_text())
    jsonschema.validators.validator_for(schema).check_schema(schema)
    jsonschema.validate(compose, schema)
    broken = {**compose, "services": {"bot": {**compose["services"]["bot"], "helthcheck": {}}}}
    with pytest.raises(jsonschema.ValidationError):  # the schema rejects a misspelt key: it does check
        jsonschema.validate(broken, schema)


def test_compose_runs_the_bot_with_postgres_and_qdrant(compose: dict) -> None:
    services = compose["services"]
    bot = services["bot"]
    assert set(services) == {"bot", "postgres", "qdrant"}
    assert bot["environment"]["DATABASE_URL"].startswith("postgresql+psycopg://")
    assert "@postgres:5432/" in bot["environment"]["DATABASE_URL"]
    assert bot["environment"]["QDRANT_URL"] == "http://qdrant:6333"
    server = services["qdrant"]["image"].removeprefix("qdrant/qdrant:v").split(".")
    client = re.search(r"^qdrant-client==(\d+)\.(\d+)\.", (ROOT / "requirements.lock").read_text(), re.M).groups()
    assert server[:2] == list(client), "qdrant-client warns when its minor differs from the server's: keep them equal"
    for name, svc in services.items():
        assert "healthcheck" in svc, name
        image = svc.get("image", "")
        assert ":" in image and not image.endswith(":latest"), image
    assert {d: c["condition"] for d, c in bot["depends_on"].items()} == {"postgres": "service_healthy",
                                                                         "qdrant": "service_healthy"}
    assert bot["env_file"] == ".env" and "/data" in bot["volumes"][0]
    example = (DEPLOY / "chatops.env.example").read_text()
    assert "POSTGRES_PASSWORD=" in example and "QDRANT_API_KEY=" in example
    assert "compose.scale.yaml" in (DEPLOY / "compose.yaml").read_text()  # where the worker and web replicas are


@pytest.mark.parametrize("name", ["compose.yaml", "compose.scale.yaml"])
def test_docker_compose_config_accepts_it(tmp_path: Path, name: str) -> None:
    docker = shutil.which("docker")
    if not docker:
        pytest.skip("no docker client installed; the schema tests still check the file")
    probe = subprocess.run([docker, "compose", "version"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"the docker client has no Compose plugin: {(probe.stderr or probe.stdout).strip()[:120]}")
    # A copy beside a filled-in .env (the bot's env_file and the ${...} values), the repository untouched.
    (tmp_path / "deploy").mkdir()
    shutil.copy(DEPLOY / name, tmp_path / "deploy" / name)
    shutil.copy(DEPLOY / "chatops.env.example", tmp_path / "deploy" / ".env")
    shutil.copy(ROOT / "Dockerfile", tmp_path / "Dockerfile")
    proc = subprocess.run([docker, "compose", "-f", str(tmp_path / "deploy" / name), "config", "--quiet"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


# -- Kubernetes ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def manifests() -> dict[str, dict]:
    docs = {}
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            docs[doc["kind"]] = doc
    return docs


def test_kubernetes_manifests_are_valid_against_the_official_schemas(manifests: dict[str, dict]) -> None:
    assert set(manifests) == {"Deployment", "Service", "PersistentVolumeClaim", "Secret"}
    version = kubernetes_validate.latest_version()
    for kind, doc in manifests.items():
        kubernetes_validate.validate(doc, version, strict=True)
    bad = json.loads(json.dumps(manifests["Deployment"]))
    bad["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {"httpGet": {"path": "/healthz"}}
    with pytest.raises(kubernetes_validate.ValidationError):  # strict: a misspelt field fails, not ignored
        kubernetes_validate.validate(bad, version, strict=True)


def test_kubernetes_deployment_probes_security_and_wiring(manifests: dict[str, dict], dockerfile) -> None:
    dep = manifests["Deployment"]
    pod = dep["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert str(pod["securityContext"]["runAsUser"]) == _instructions(dockerfile, "USER")[-1].split(":")[0]
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert {"cpu", "memory"} <= set(container["resources"]["requests"])
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["http"] == 3000 and manifests["Service"]["spec"]["ports"][0]["targetPort"] == "http"
    assert manifests["Service"]["spec"]["selector"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    refs = [e["secretRef"]["name"] for e in container["envFrom"]]
    assert refs == [manifests["Secret"]["metadata"]["name"]]
    claims = [v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v]
    assert claims == [manifests["PersistentVolumeClaim"]["metadata"]["name"]]
    data = next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == "data")
    env = {e["name"]: e["value"] for e in container["env"]}
    assert data == env["CHATOPS_DATA_DIR"] == "/data"
    assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"]["type"] == "Recreate"
    assert not container["image"].endswith(":latest") and ":" in container["image"]


# -- The shared topology: one worker, N web replicas (issue 12) -------------------------------------------

@pytest.fixture(scope="module")
def compose_scale() -> dict:
    return yaml.safe_load((DEPLOY / "compose.scale.yaml").read_text())


def _compose_schema() -> dict:
    schema_file = resources.files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json"
    return json.loads(schema_file.read_text())


def test_compose_scale_file_is_valid_against_the_compose_specification(compose_scale: dict) -> None:
    schema = _compose_schema()
    jsonschema.validate(compose_scale, schema)
    broken = {**compose_scale, "services": {**compose_scale["services"],
                                            "web": {**compose_scale["services"]["web"], "scael": 3}}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_compose_scale_runs_one_worker_and_scalable_web_replicas(compose_scale: dict, compose: dict) -> None:
    services = compose_scale["services"]
    assert set(services) == {"worker", "web", "proxy", "postgres", "qdrant"}
    worker, web = services["worker"], services["web"]
    assert worker["command"] == ["chatops", "worker"]
    assert "ports" not in worker and "expose" not in worker  # the worker opens no port
    assert worker.get("deploy", {}).get("replicas", 1) == 1
    assert "/healthz" not in json.dumps(worker["healthcheck"])  # the image's check would fail without a port
    assert web["command"][:4] == ["chatops", "serve", "--role", "web"]
    # --scale web=N: a fixed host port would let only one replica start; the proxy publishes the one port.
    assert "ports" not in web and "container_name" not in web
    assert "/readyz" in json.dumps(web["healthcheck"])
    assert services["proxy"]["ports"] == ["3000:3000"]
    assert "dynamic a web 3000" in compose_scale["configs"]["caddyfile"]["content"]
    for name in ("worker", "web"):
        env = services[name]["environment"]
        assert env["QDRANT_URL"] == "http://qdrant:6333" and "@postgres:5432/" in env["DATABASE_URL"], name
        assert {d: c["condition"] for d, c in services[name]["depends_on"].items()
                if d in {"postgres", "qdrant"}} == {"postgres": "service_healthy", "qdrant": "service_healthy"}
    for name, svc in services.items():
        assert "healthcheck" in svc, name
        image = svc.get("image", "")
        assert ":" in image and not image.endswith(":latest"), image
    # The same project, databases and volumes as compose.yaml: switching keeps the index.
    assert compose_scale["name"] == compose["name"]
    assert services["postgres"] == compose["services"]["postgres"]
    assert services["qdrant"] == compose["services"]["qdrant"]
    assert services["qdrant"]["image"].startswith("qdrant/qdrant:v")


@pytest.fixture(scope="module")
def scale_manifests() -> dict[tuple[str, str], dict]:
    docs = {}
    for path in sorted((K8S / "scale").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            docs[(doc["kind"], doc["metadata"]["name"])] = doc
    return docs


def test_kubernetes_scale_manifests_are_valid_against_the_official_schemas(scale_manifests: dict) -> None:
    assert set(scale_manifests) == {("Deployment", "chatops-worker"), ("Deployment", "chatops-web"),
                                    ("Service", "chatops-web"), ("PodDisruptionBudget", "chatops-web")}
    version = kubernetes_validate.latest_version()
    for doc in scale_manifests.values():
        kubernetes_validate.validate(doc, version, strict=True)


def _pod(dep: dict) -> tuple[dict, dict]:
    pod = dep["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return pod, container


def _secret_env(container: dict) -> dict[str, tuple[str, str]]:
    return {e["name"]: (e["valueFrom"]["secretKeyRef"]["name"], e["valueFrom"]["secretKeyRef"]["key"])
            for e in container["env"] if "valueFrom" in e}


def _assert_locked_down(pod: dict, container: dict, dockerfile: DockerfileParser) -> None:
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert str(pod["securityContext"]["runAsUser"]) == _instructions(dockerfile, "USER")[-1].split(":")[0]
    sc = container["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert {"cpu", "memory"} <= set(container["resources"]["requests"])
    assert not container["image"].endswith(":latest") and ":" in container["image"]


def test_kubernetes_worker_is_one_replica_with_no_port_or_service(scale_manifests: dict, manifests: dict,
                                                                  dockerfile: DockerfileParser) -> None:
    dep = scale_manifests[("Deployment", "chatops-worker")]
    pod, container = _pod(dep)
    assert container["args"] == ["chatops", "worker"]
    assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"]["type"] == "Recreate"
    assert "ports" not in container and "readinessProbe" not in container
    labels = dep["spec"]["template"]["metadata"]["labels"]
    for (kind, _), doc in scale_manifests.items():  # no Service of this topology selects the worker
        if kind == "Service":
            assert not doc["spec"]["selector"].items() <= labels.items()
    assert container["livenessProbe"]["exec"]["command"][0] == "python"
    secret = manifests["Secret"]["metadata"]["name"]
    assert _secret_env(container) == {"DATABASE_URL": (secret, "DATABASE_URL"), "QDRANT_URL": (secret, "QDRANT_URL")}
    claims = [v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v]
    assert claims == [manifests["PersistentVolumeClaim"]["metadata"]["name"]]  # the embedding cache survives
    _assert_locked_down(pod, container, dockerfile)


def test_kubernetes_web_replicas_read_the_secret_and_route_on_readyz(scale_manifests: dict, manifests: dict,
                                                                     dockerfile: DockerfileParser) -> None:
    dep = scale_manifests[("Deployment", "chatops-web")]
    pod, container = _pod(dep)
    assert container["args"][:4] == ["chatops", "serve", "--role", "web"]
    assert dep["spec"]["replicas"] >= 2 and dep["spec"]["strategy"]["type"] == "RollingUpdate"
    assert dep["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    secret = manifests["Secret"]["metadata"]["name"]
    assert _secret_env(container) == {"DATABASE_URL": (secret, "DATABASE_URL"), "QDRANT_URL": (secret, "QDRANT_URL")}
    assert {"DATABASE_URL", "QDRANT_URL"} <= set(manifests["Secret"]["stringData"])
    assert not any("persistentVolumeClaim" in v for v in pod["volumes"])
    data = next(m for m in container["volumeMounts"] if m["name"] == "data")
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    assert data["mountPath"] == env["CHATOPS_DATA_DIR"] == "/data"
    assert "emptyDir" in next(v for v in pod["volumes"] if v["name"] == "data")
    service = scale_manifests[("Service", "chatops-web")]
    assert service["spec"]["selector"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    assert {p["name"]: p["containerPort"] for p in container["ports"]}["http"] == 3000
    pdb = scale_manifests[("PodDisruptionBudget", "chatops-web")]
    assert pdb["spec"]["selector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"]
    _assert_locked_down(pod, container, dockerfile)


def _worker_probes(compose_scale: dict, scale_manifests: dict) -> list[str]:
    compose_probe = compose_scale["services"]["worker"]["healthcheck"]["test"]
    k8s_probe = scale_manifests[("Deployment", "chatops-worker")]["spec"]["template"]["spec"]["containers"][0][
        "livenessProbe"]["exec"]["command"]
    assert compose_probe[0] == "CMD" and compose_probe[1:] == k8s_probe  # one probe in both files
    assert k8s_probe[:2] == ["python", "-c"]
    return k8s_probe


def test_the_worker_probe_fails_when_the_worker_is_gone(compose_scale: dict, scale_manifests: dict) -> None:
    """The probe reads PID 1 in the container; here it runs against real processes by their own pid."""
    import sys
    import time

    code = _worker_probes(compose_scale, scale_manifests)[2]

    def probe(pid: int) -> int:
        return subprocess.run([sys.executable, "-c", code.replace("/proc/1/", f"/proc/{pid}/")],
                              capture_output=True).returncode

    sleeper = "import time; time.sleep(60)"
    worker = subprocess.Popen([sys.executable, "-c", sleeper, "worker"])  # argv as `chatops worker` has it
    other = subprocess.Popen([sys.executable, "-c", sleeper, "serve"])
    try:
        time.sleep(0.2)
        assert probe(worker.pid) == 0
        assert probe(other.pid) == 1  # another process as PID 1: not the worker
    finally:
        other.kill()
        other.wait()
        worker.kill()
    assert probe(worker.pid) != 0  # a zombie, not yet reaped
    worker.wait()
    assert probe(worker.pid) != 0  # gone
