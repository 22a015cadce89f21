"""Stored user and page text reaches the terminal without escape sequences or control characters
(issue 24 item 3), through ``chatops`` itself (:func:`bot.cli.main`, in process, its stdout captured).

A page carrying escape sequences (a window-title OSC, colours, an 8-bit CSI, a carriage return, a
right-to-left override) is indexed with ``chatops index``; a refused ``/kb`` question carrying the same is
in the turn log, as the server stores it. ``report``, ``ask``, ``chat``, ``status`` and ``sources list``
print no control character but newline and tab; their ``--json`` forms stay valid JSON that decodes to
the stored text.
"""

from __future__ import annotations

import io
import json
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

from app.settings import Settings
from bot.cli import main
from state import StateStore, TurnRecord

HOSTILE = "\x1b]0;pwned\x07\x1b[31;1mred\x1b[0m \x9b2J\rover\u202eevil\x08"
QUESTION = f"where do I park my bike? {HOSTILE}" + "\x1b[A" * 50
PAGE = f"""# Bike parking {HOSTILE}

Bikes are parked in the basement garage, level -1, next to the showers {HOSTILE}. The racks hold 40 bikes
and the garage opens at 6:00. Ask facilities for a badge to the bike room.
"""
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedding_cache_dir: Path, capsys) -> Path:
    """A data dir holding an index of one hostile page and a refused question in the turn log."""
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    (wiki / "bikes.md").write_text(PAGE, encoding="utf-8")
    monkeypatch.setenv("CHATOPS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("EMBEDDING_MODEL", "local")
    monkeypatch.setenv("CHATOPS_CACHE_DIR", str(embedding_cache_dir))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    assert main(["index", f"folder:{wiki}?name=handbook"]) == 0
    capsys.readouterr()
    store = StateStore(Settings().state_url)
    store.record_turn(TurnRecord(trace_id="hostile", platform="slack", user_id="U1", channel_id="C1",
                                 question=QUESTION, route="knowledge", outcome="refused",
                                 reason=f"no passage was close enough; not found: {HOSTILE}", citations=(),
                                 created_at=datetime.now(timezone.utc)))
    store.close()
    return wiki


def shown(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """What ``chatops ARGV`` printed on stdout and stderr, checked free of control characters."""
    main(list(argv))
    out = capsys.readouterr()
    for stream in (out.out, out.err):
        assert CONTROL.findall(stream) == [], (argv, stream[:500])
    return out.out


def test_report_text_has_no_control_characters_and_json_keeps_them_escaped(cli: Path, capsys) -> None:
    text = shown(capsys, "report")
    assert "where do I park my bike?" in text and "red 2Jovereevil" not in text
    raw = shown(capsys, "report", "--json")
    report = json.loads(raw)
    [group] = report["refused_groups"]
    assert group["examples"][0].startswith(f"where do I park my bike? {HOSTILE}")  # the stored words, decoded
    assert "\\u001b" in raw and "\\u009b" in raw and "\\u202e" in raw


def test_ask_chat_status_and_sources_show_page_text_without_control_characters(cli: Path, capsys,
                                                                              monkeypatch) -> None:
    answer = shown(capsys, "ask", "where are bikes parked?")
    assert "basement" in answer
    as_json = json.loads(shown(capsys, "ask", "--json", "where are bikes parked?"))
    assert "basement" in as_json["text"]
    monkeypatch.setattr("sys.stdin", io.StringIO("where are bikes parked?\n/quit\n"))
    assert "basement" in shown(capsys, "chat")
    shown(capsys, "status")
    json.loads(shown(capsys, "status", "--json"))
    shown(capsys, "sources", "list")
    json.loads(shown(capsys, "sources", "list", "--json"))


@pytest.mark.parametrize("argv", [["ask", "--retriever", HOSTILE, "hello"],  # an invalid choice
                                  ["ask", "hello", f"--bogus{HOSTILE}"],  # argparse echoes it raw
                                  [f"ask{HOSTILE}"]])
def test_argument_errors_printed_by_argparse_have_no_control_characters(argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "error:" in err and "red" in err  # the message still names what was rejected
    assert not CONTROL.search(err), repr(err)
