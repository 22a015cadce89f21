"""Who is asking and who will see the answer (app/access.py), and the folder/wiki audiences (issue 11).

Pure rules first: the viewer of every kind of conversation, guests, askers without an e-mail,
``CHANNEL_ACCESS=members`` (the intersection of the members' access, the size cap, a failed listing),
the members port's cache, the re-check of citations; then the sources file's ``groups:`` and a
source's ``audience`` (YAML and spec strings) down to the documents a folder source yields.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.access import AccessPolicy, ChannelMembersCache, principals_of, unreadable_citations, viewer_for
from app.inbound import AudienceMember, InboundMessage
from app.turns import build_turn
from core.access import Access, Viewer
from app.config import parse_config
from connectors.config_file import ConfigFileError
from connectors.errors import SourceSpecError
from connectors.factory import build_source
from connectors.sources import parse_source_spec

HR = {"hr": frozenset({"hana@example.com", "ivan@example.com"}), "eng": frozenset({"hana@example.com"})}


def msg(kind: str = "dm", email: str = "Hana@Example.com", **kw) -> InboundMessage:
    return InboundMessage(platform="slack", text="q", user_id="U1", user_email=email, channel_id="C1",
                          channel_kind=kind, **kw)


def view(m: InboundMessage, mode: str = "public", members=None, groups_of=None) -> Viewer:
    return viewer_for(m, groups_of=groups_of, static_groups=HR, channel_access=mode, channel_members=members)


def test_a_dm_uses_the_askers_own_principals_with_static_and_source_groups() -> None:
    v = view(msg("dm"), groups_of=lambda e: frozenset({"group:confluence/HR-Team"}) if e == "hana@example.com" else
             frozenset())
    assert v == Viewer(frozenset({"user:hana@example.com", "group:chatops/hr", "group:chatops/eng",
                                  "group:confluence/hr-team"}), False, "dm")


@pytest.mark.parametrize("kind", ["channel", "group", ""])
def test_channels_group_dms_and_unknown_kinds_are_public_only_by_default(kind: str) -> None:
    assert view(msg(kind)) == Viewer.public("channel")


def test_ephemeral_and_assistant_pane_answers_use_the_askers_access_in_a_channel() -> None:
    v = view(msg("channel", private_reply=True))
    assert not v.public_only and v.audience == "dm" and "user:hana@example.com" in v.principals


@pytest.mark.parametrize("m", [msg("dm", is_guest=True), msg("dm", email=""), msg("dm", email="   ")])
def test_guests_and_askers_without_an_email_see_public_pages_only(m: InboundMessage) -> None:
    assert view(m).public_only and view(m, "members", members=[AudienceMember("hana@example.com")]).public_only


def test_members_mode_intersects_every_members_access() -> None:
    m = msg("channel")
    both = [AudienceMember("hana@example.com"), AudienceMember("IVAN@example.com")]
    assert view(m, "members", both) == Viewer(frozenset({"group:chatops/hr"}), False, "channel")
    # someone outside hr: nothing in common but public
    assert view(m, "members", [*both, AudienceMember("zoe@example.com")]).tokens() == ("public",)
    # a guest member, or one without an e-mail, makes it public only
    assert view(m, "members", [*both, AudienceMember("g@example.com", is_guest=True)]).public_only
    assert view(m, "members", [*both, AudienceMember("")]).public_only
    # not listed (failed, too large) -> public only; CHANNEL_ACCESS=public ignores the members
    assert view(m, "members", None).public_only and view(m, "public", both).public_only


def test_the_policy_caps_the_members_and_build_turn_sets_the_viewer() -> None:
    members = tuple(AudienceMember("hana@example.com") for _ in range(3))
    m = msg("channel", audience_members=members)
    assert build_turn(m, AccessPolicy(static_groups=HR, channel_access="members")).viewer.principals
    assert build_turn(m, AccessPolicy(static_groups=HR, channel_access="members", channel_members_max=2)).viewer \
        == Viewer.public("channel")
    assert build_turn(msg("dm")).viewer == Viewer(frozenset({"user:hana@example.com"}), False, "dm")
    assert AccessPolicy(channel_access="members").wants_members(msg("channel"))
    assert not AccessPolicy(channel_access="members").wants_members(msg("dm"))
    assert not AccessPolicy().wants_members(msg("channel"))


def test_a_failing_groups_lookup_gives_fewer_principals_not_an_error() -> None:
    def broken(email: str) -> frozenset[str]:
        raise RuntimeError("database down")

    assert principals_of("a@x.com", groups_of=broken, static_groups={}) == frozenset({"user:a@x.com"})


def test_the_members_port_caches_answers_and_failures() -> None:
    calls: list[str] = []

    async def fetch(cid: str, limit: int):
        calls.append(cid)
        if cid == "CBAD":
            raise RuntimeError("boom")
        return [AudienceMember("a@x.com")] * (limit + 1 if cid == "CBIG" else 1)

    cache = ChannelMembersCache(fetch, limit=5)

    async def run():
        return [await cache.members(c) for c in ("C1", "C1", "CBAD", "CBAD", "CBIG")]

    one, again, bad, bad_again, big = asyncio.run(run())
    assert one == again == (AudienceMember("a@x.com"),) and bad is bad_again is None and big is None
    assert calls == ["C1", "CBAD", "CBIG"]


@dataclass
class _Cite:
    n: int
    chunk_id: str


@dataclass
class _Chunk:
    access: Access


def test_unreadable_citations_fail_closed() -> None:
    chunks = {"pub": _Chunk(Access.everyone()), "hr": _Chunk(Access.only(["group:chatops/hr"]))}
    cites = [_Cite(1, "pub"), _Cite(2, "hr"), _Cite(3, "gone")]
    channel = Viewer.public()
    hana = Viewer.person(["user:hana@example.com", "group:chatops/hr"])
    assert [c.n for c in unreadable_citations(cites, channel, chunks.get)] == [2, 3]
    assert [c.n for c in unreadable_citations(cites, hana, chunks.get)] == [3]

    def broken(cid: str):
        raise OSError("store down")

    assert len(unreadable_citations(cites, hana, broken)) == 3


# -- the sources file and spec strings -------------------------------------------------------------------
def test_audiences_and_groups_in_the_sources_file(tmp_path: Path) -> None:
    (tmp_path / "hr").mkdir()
    (tmp_path / "hr" / "bands.md").write_text("# Bands\n\nThe senior band is 98,000 euros.\n")
    cfg = parse_config({"groups": {"HR": ["Hana@Example.com"]}, "sources": [
        {"name": "hr", "type": "folder", "path": str(tmp_path / "hr"), "audience": ["hr", "ceo@example.com",
                                                                                   "group:confluence/board"]},
        {"name": "pub", "type": "folder", "path": str(tmp_path / "hr")}]})
    assert cfg.static_groups() == {"hr": frozenset({"hana@example.com"})}
    [doc] = list(build_source(cfg.source("hr")).scan())
    assert doc.access == Access.only(["group:chatops/hr", "user:ceo@example.com", "group:confluence/board"])
    [pub] = list(build_source(cfg.source("pub")).scan())
    assert pub.access == Access.everyone()


@pytest.mark.parametrize("data, words", [
    ({"sources": [{"name": "a", "type": "folder", "path": "x", "audience": ["hr"]}]}, "not declared under groups"),
    ({"sources": [{"name": "a", "type": "folder", "path": "x", "audience": []}]}, "empty audience"),
    ({"sources": [{"name": "a", "type": "folder", "path": "x", "audience": "everyone"}]}, "audience is public"),
    ({"groups": {"hr": ["not-an-email"]}}, "e-mail addresses"),
])
def test_bad_audiences_and_groups_are_refused_with_a_fix(data: dict, words: str) -> None:
    with pytest.raises(ConfigFileError, match=words):
        parse_config(data)


def test_spec_strings_take_an_audience(tmp_path: Path) -> None:
    src = parse_source_spec(f"folder:{tmp_path}?audience=hr|ceo@example.com&audience=group:confluence/board")
    assert src.access == Access.only(["group:chatops/hr", "user:ceo@example.com", "group:confluence/board"])
    assert parse_source_spec(f"folder:{tmp_path}?audience=public").access == Access.everyone()
    assert parse_source_spec(f"folder:{tmp_path}").access == Access.everyone()
    with pytest.raises(SourceSpecError):
        parse_source_spec(f"folder:{tmp_path}?audience=not%20a%20name")
