"""The README documents what the code reads and offers: every setting in its one Settings table, every CLI
command, and the placeholders the integrator fills.

- Every field of :class:`app.settings.Settings` has a row in the README's "Settings" table, under its
  environment variable (the field name upper-cased, or one of its aliases, e.g. ``MicrosoftAppId``).
- Every variable the table names is a setting (or a tests-only ``CHATOPS_TEST_*`` variable), so a removed
  setting does not stay documented.
- Every ``chatops`` sub-command of the real argument parser is shown as ``chatops NAME`` in the README.
- The "Operating it" section sits between "Security" and "Settings" with its subsections, in order.
"""

from __future__ import annotations

import re

from helpers import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def _section(title: str, level: str = "## ") -> str:
    """The README's text under the heading ``level + title``, up to the next heading of that level."""
    start = README.index(f"\n{level}{title}\n")
    end = README.find(f"\n{level}", start + 1)
    return README[start:end if end != -1 else None]


def _table_variables() -> set[str]:
    """The variables named in the first column of the Settings table (``A`` / ``B`` rows give both)."""
    names = set()
    for line in _section("Settings").splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            names.update(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", first))
    return names


def _setting_names() -> dict[str, set[str]]:
    """Each setting's field name -> the environment variable names it is read from."""
    from app.settings import Settings

    names: dict[str, set[str]] = {}
    for field_name, field in Settings.model_fields.items():
        choices = {field_name.upper()}
        alias = field.validation_alias
        for choice in getattr(alias, "choices", [alias] if isinstance(alias, str) else []):
            if isinstance(choice, str):
                choices.add(choice)
        names[field_name] = choices
    return names


def test_every_setting_has_a_row_in_the_settings_table() -> None:
    table = _table_variables()
    missing = sorted(field for field, names in _setting_names().items() if not names & table)
    assert not missing, f"settings missing from the README's Settings table: {missing}"


def test_the_settings_table_names_only_settings() -> None:
    known = {name for names in _setting_names().values() for name in names}
    extra = sorted(v for v in _table_variables() if v not in known and not v.startswith("CHATOPS_TEST_"))
    assert not extra, f"the README's Settings table names variables no setting reads: {extra}"


def test_every_cli_command_is_in_the_readme() -> None:
    from bot.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")  # argparse keeps sub-parsers here
    commands = sorted(sub.choices)
    assert "report" in commands
    missing = [c for c in commands if f"chatops {c}" not in README]
    assert not missing, f"commands the README never shows: {missing}"


def test_operating_it_sits_before_settings_with_its_subsections() -> None:
    headings = re.findall(r"^(#{2,3}) (.+)$", README, flags=re.M)
    top = [title for level, title in headings if level == "##"]
    assert top.index("Security") + 1 == top.index("Operating it") == top.index("Settings") - 1
    operating = _section("Operating it")
    subs = re.findall(r"^### (.+)$", operating, flags=re.M)
    wanted = ["Deploying", "Running at scale", "Metrics and traces", "Logs", "The knowledge-gap report", "Upgrades",
              "Retention and forgetting"]
    assert [t for t in subs if t in wanted] == wanted
