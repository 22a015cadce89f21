"""``manifest.yml`` against Slack's official app manifest schema (``slackapi/manifest-schema``).

The schema files are kept unchanged in ``tests/slack_schema/`` (its README names the source, commit and
licence). ``manifest.schema.json`` picks the versioned schema by ``_metadata.major_version`` through
absolute ``$ref`` URLs; they are resolved offline, from the local copies, through a ``referencing``
registry, so the test never touches the network. ``tests/test_slack_manifest.py`` checks the manifest
against the code (events, scopes); this file checks it against what Slack accepts.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import jsonschema
import pytest
import yaml
from referencing import Registry, Resource

from tests.helpers import ROOT

SCHEMA_DIR = Path(__file__).parent / "slack_schema"
#: Where ``manifest.schema.json`` says its versioned schemas are (its ``$ref`` targets).
REF_BASE = "https://raw.githubusercontent.com/slackapi/manifest-schema/v0.0.0/schemas/"


@cache
def validator() -> jsonschema.protocols.Validator:
    """A Draft 7 validator of the top-level schema, its ``$ref`` targets served from the local copies."""
    main = json.loads((SCHEMA_DIR / "manifest.schema.json").read_text())
    resources = []
    for path in sorted((SCHEMA_DIR / "schemas").glob("manifest.schema.*.json")):
        resources.append((REF_BASE + path.name, Resource.from_contents(json.loads(path.read_text()))))
    registry = Registry().with_resources(resources)
    cls = jsonschema.validators.validator_for(main)
    cls.check_schema(main)
    return cls(main, registry=registry)


def manifest() -> dict:
    """``manifest.yml`` as the JSON object Slack receives (YAML -> JSON round trip: only JSON types)."""
    return json.loads(json.dumps(yaml.safe_load((ROOT / "manifest.yml").read_text())))


def leaf_errors(errors) -> Iterator[jsonschema.ValidationError]:
    """The innermost errors (``oneOf`` nests the versioned schema's errors in ``context``)."""
    for error in errors:
        if error.context:
            yield from leaf_errors(error.context)
        else:
            yield error


def problems(document: dict) -> list[str]:
    """Every schema violation of ``document`` as ``path: message`` (empty when Slack's schema accepts it)."""
    return sorted(f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
                  for e in leaf_errors(validator().iter_errors(document)))


def test_the_local_copies_are_the_files_the_top_level_schema_refers_to() -> None:
    main = (SCHEMA_DIR / "manifest.schema.json").read_text()
    referenced = {ref.removeprefix(REF_BASE) for ref in _refs(json.loads(main)) if ref.startswith(REF_BASE)}
    assert referenced == {p.name for p in (SCHEMA_DIR / "schemas").glob("manifest.schema.*.json")}


def _refs(node) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def test_manifest_yml_validates_against_slacks_manifest_schema() -> None:
    assert problems(manifest()) == []


@pytest.mark.parametrize("breakage, expected", [
    (lambda m: m["features"]["slash_commands"][0].update(command="kb"), "does not match '^\\\\/'"),
    (lambda m: m["display_information"].update(name="c" * 36), "is too long"),
    (lambda m: m["settings"].update(socket_mode=True), "'socket_mode' was unexpected"),
    (lambda m: m["settings"]["interactivity"].pop("is_enabled"), "'is_enabled' is a required property"),
    (lambda m: m["oauth_config"]["scopes"].update(bot="chat:write"), "is not of type 'array'"),
    (lambda m: m.pop("display_information"), "'display_information' is a required property"),
], ids=["command-without-slash", "name-too-long", "misspelt-setting", "interactivity-without-is_enabled",
        "scopes-not-a-list", "no-display-information"])
def test_the_schema_rejects_a_broken_manifest(breakage, expected) -> None:
    """The validation has teeth: each breakage is what Slack's app configuration page would refuse."""
    broken = copy.deepcopy(manifest())
    breakage(broken)
    found = problems(broken)
    assert any(expected in p for p in found), found


def test_a_manifest_declaring_major_version_2_is_checked_against_the_version_2_schema() -> None:
    """The top-level schema routes by ``_metadata.major_version``: version 2 is resolved from its local copy."""
    v2 = {**manifest(), "_metadata": {"major_version": 2}}
    assert problems(v2) == []
    v2["functions"] = {"f": {"title": "t", "description": "d", "input_parameters": {}, "output_parameters": {}}}
    assert any("'properties' is a required property" in p for p in problems(v2))
