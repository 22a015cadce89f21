"""The agent's ``Turn`` is built in one place (:func:`app.turns.build_turn`) from the inbound value.

- outside the tests, no module but ``app/turns.py`` constructs ``Turn(...)`` (read from the source with
  ``ast``, so an alias such as ``models.Turn(...)`` counts too);
- the builder fills every field of the turn from :class:`app.inbound.InboundMessage`;
- the inbound value refuses what would make a wrong turn (a naive time, an unknown channel kind,
  history without authors), and the Slack helpers give it its parts (``ts`` as UTC, mentions).
"""

from __future__ import annotations

import ast
import dataclasses
from datetime import datetime, timezone
from pathlib import Path

import pytest

from agent.models import HistoryMessage, Turn
from app.inbound import InboundMessage, Mention, utc_from_epoch
from app.turns import build_turn
from bot.slack.inbound import command_channel_kind, event_channel_kind, mentioned_users, to_plain

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("bot", "app", "agent", "tools", "index", "connectors", "state", "screening")


def _turn_calls(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if name == "Turn":
                lines.append(node.lineno)
    return lines


def test_turn_is_constructed_only_in_app_turns() -> None:
    found = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if lines := _turn_calls(path):
                found[str(path.relative_to(ROOT))] = lines
    assert set(found) == {"app/turns.py"}, f"Turn(...) built outside app/turns.py: {found}"


def test_the_ast_check_sees_a_turn_built_elsewhere(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from agent import models\nt = models.Turn(text='x')\nu = Turn('y')\n")
    assert _turn_calls(bad) == [2, 3]


def test_build_turn_fills_every_field_of_the_turn() -> None:
    sent = datetime(2026, 5, 4, 3, 2, 1, tzinfo=timezone.utc)
    msg = InboundMessage(
        platform="slack", text="sync with bob@example.com", user_id="U1", user_email="ann@example.com",
        channel_id="C1", channel_kind="channel", thread_id="111.1", message_id="111.2", sent_at=sent,
        history=(HistoryMessage("earlier", "U1", True),), mentions=(Mention("U2", "Bob", "bob@example.com"),),
        is_admin=True, locale="fr-FR", timezone="Europe/Paris", thread_link="https://acme.slack.com/archives/C1/p1111")
    turn = build_turn(msg)
    defaults = Turn(text="")
    unfilled = [f.name for f in dataclasses.fields(Turn) if getattr(turn, f.name) == getattr(defaults, f.name)]
    assert unfilled == [], f"build_turn leaves these Turn fields at their defaults: {unfilled}"
    assert (turn.message_id, turn.sent_at, turn.user_email, turn.channel_kind) == ("111.2", sent, "ann@example.com",
                                                                                     "channel")
    assert turn.mention_emails == {"U2": "bob@example.com"} and turn.own_history == ("earlier",)


def test_the_inbound_value_refuses_what_would_make_a_wrong_turn() -> None:
    with pytest.raises(ValueError, match="aware"):
        InboundMessage(platform="slack", text="x", sent_at=datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="channel_kind"):
        InboundMessage(platform="slack", text="x", channel_kind="thread")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="HistoryMessage"):
        InboundMessage(platform="slack", text="x", history=("plain",))  # type: ignore[arg-type]
    assert Mention("U9").as_text == "@U9" and Mention("U9", "Zed").as_text == "@Zed"
    assert Mention("U9", "Zed", "z@example.com").as_text == "z@example.com"


def test_slack_parts_of_the_inbound_value() -> None:
    assert utc_from_epoch("1700000000.000100") == datetime(2023, 11, 14, 22, 13, 20, 100, tzinfo=timezone.utc)
    assert utc_from_epoch("") is None and utc_from_epoch(None) is None and utc_from_epoch("nan") is None
    text = "<@UBOT> ask <@U2|bob> and <@U3> about <#C1|general>"
    assert mentioned_users([text, "<@U2> again"], "UBOT") == ["U2", "U3"]
    assert to_plain(text, "UBOT", {"U2": "bob@example.com"}) == "ask bob@example.com and @U3 about #general"
    assert to_plain(text, "UBOT") == "ask @bob and @U3 about #general"  # unresolved: as before
    assert [event_channel_kind(e) for e in ({"channel_type": "im"}, {"channel_type": "mpim"},
                                             {"channel_type": "group"}, {"channel_type": "channel"},
                                             {"channel": "D1"}, {"channel": "C1"}, {"channel": "G1"})] == [
        "dm", "group", "channel", "channel", "dm", "channel", ""]
    assert [command_channel_kind(c) for c in ({"channel_name": "directmessage", "channel_id": "D1"},
                                               {"channel_name": "mpdm-a--b-1", "channel_id": "G1"},
                                               {"channel_name": "privategroup", "channel_id": "G2"},
                                               {"channel_name": "general", "channel_id": "C1"}, {})] == [
        "dm", "group", "channel", "channel", ""]
