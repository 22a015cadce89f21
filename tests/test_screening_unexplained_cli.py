"""The fail-closed credential tier (:mod:`screening.unexplained`) through the real CLI: on by default.

A small folder wiki holds a passphrase given in a phrasing the construction rules do not read ("got swapped for
..."); ``chatops index`` indexes it and ``chatops ask`` asks for it. By default the value is never printed; with
``CHATOPS_SCREEN_UNEXPLAINED=0`` (the setting ``chatops_screen_unexplained`` turned off) the rules alone screen the
reply and quote it, as before the tier, which shows the sentence is one the rules miss. The same switch in a ``.env``
file is honoured too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import run_chatops

pytestmark = pytest.mark.server  # starts processes: not in make test-fast

VALUE = "qorvantel"
PAGE = f"""# Print server admin access

The print server admin passphrase got swapped for {VALUE} after the audit.

Only the IT team uses the print server admin passphrase; everyone else prints through the normal print queue.

Ask IT in #it-help when the print server admin console refuses the passphrase.
"""
OTHER = """# Printers

Every floor has a colour printer by the kitchen and a plotter in the copy room.

Toner and paper are in the supply cupboard next to the copy room; tell facilities when a box runs out.
"""
QUESTION = "what was the print server admin passphrase swapped for after the audit?"


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The data dir after ``chatops index folder:WIKI`` of the two pages."""
    root = tmp_path_factory.mktemp("unexplained")
    wiki = root / "wiki"
    (wiki / "it").mkdir(parents=True)
    (wiki / "it" / "print-server.md").write_text(PAGE, encoding="utf-8")
    (wiki / "it" / "printers.md").write_text(OTHER, encoding="utf-8")
    data = root / "data"
    proc = run_chatops(["index", f"folder:{wiki}"], data, cwd=root)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return data


def ask(data: Path, cwd: Path, **env: str) -> dict:
    proc = run_chatops(["ask", QUESTION, "--json", "--no-worker"], data, cwd=cwd, **env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_value_the_rules_miss_is_withheld_by_default_and_quoted_with_the_tier_off(
        indexed: Path, tmp_path: Path) -> None:
    reply = ask(indexed, tmp_path)
    shown = json.dumps([reply["text"], reply["citations"]], ensure_ascii=False)
    assert VALUE not in shown, reply["text"]
    assert "I left out a part that looks like a credential" in reply["text"]  # the rest of the page still answers
    assert VALUE not in json.dumps(reply, ensure_ascii=False)  # nor in the trace
    off = ask(indexed, tmp_path, CHATOPS_SCREEN_UNEXPLAINED="0")
    assert VALUE in off["text"], off["text"]  # the rules alone: the old behaviour


def test_a_dotenv_file_turns_the_tier_off_too(indexed: Path, tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("CHATOPS_SCREEN_UNEXPLAINED=0\n", encoding="utf-8")
    assert VALUE in ask(indexed, tmp_path)["text"]
