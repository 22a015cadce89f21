"""Per-channel scope in Slack, end to end: ``channels:`` of the sources file through the real Bolt app.

The bot runs behind the real HTTP adapter (``tests/standins/slack/``'s :class:`SlackHarness`: signed requests,
the Web API stand-in), over its own index of two folder sources written by ``chatops.yml`` and synced by the
real index jobs: ``handbook`` (the example wiki) and ``eng`` (one page about the deploy freeze). Channels:

- ``CENG0001``: ``sources: [eng]``; ``CHAND001``: ``sources: [handbook]``;
- ``CQUIET01``: ``reply_in_threads: mention_only`` (every source);
- ``CFREE001``: not listed (every source, thread replies answered).

What is checked is what reaches Slack: the cited sources (each citation's link names its folder), the refusal,
the thread replies that are (not) answered, and what ``/kb sources`` says where it is asked. The config errors
are checked on the file as ``chatops serve`` reads it (:func:`app.jobs.load_sources_config`).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from app.access import access_policy
from app.jobs import IndexJobs, load_sources_config
from app.settings import Settings
from app.wiring import build_agent
from connectors.config_file import ConfigFileError
from state import StateStore
from state.store import sqlite_url

from tests.helpers import WIKI
from tests.standins.slack import SlackHarness
from tests.test_slack_app import acked, mention, message, posts, responses, section_text, source_lines, wait_posts

ALICE = "UALICE01"
ENG, HANDBOOK, QUIET, FREE = "CENG0001", "CHAND001", "CQUIET01", "CFREE001"

FREEZE_PAGE = """# Deploy freeze

Production deploys are frozen from Friday 15:00 until Monday 09:00. During the deploy freeze only
hotfixes approved by the on-call lead may be deployed.

## Asking for an exception to the deploy freeze

Post in #deploys with the change, its risk and a rollback plan; the on-call lead answers within an hour.
"""


def chatops_yml(wiki: Path, eng: Path) -> str:
    return f"""
sources:
  - {{name: handbook, type: folder, path: "{wiki}", url_base: "https://handbook.example.com/"}}
  - {{name: eng, type: folder, path: "{eng}", url_base: "https://eng.example.com/"}}
channels:
  {ENG}: {{sources: [eng]}}
  {HANDBOOK}: {{sources: [handbook]}}
  {QUIET}: {{reply_in_threads: mention_only}}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory, embedder):
    from index.knowledge import KnowledgeIndex

    root = tmp_path_factory.mktemp("scope")
    wiki, eng = root / "handbook", root / "eng"
    shutil.copytree(WIKI, wiki)
    eng.mkdir()
    (eng / "deploy-freeze.md").write_text(FREEZE_PAGE)
    config = root / "chatops.yml"
    config.write_text(chatops_yml(wiki, eng))
    store = StateStore(sqlite_url(root / "state.sqlite"))
    index = KnowledgeIndex(root / "index", embedder)
    settings = Settings(chatops_data_dir=root / "data", chatops_config=config)
    runtime = build_agent(settings, index=index)
    jobs = IndexJobs.from_settings(runtime, store)
    assert sorted(r.status for r in jobs.run()) == ["ok", "ok"]
    h = SlackHarness(runtime, store, jobs)
    h.standin.add_user(ALICE)
    for cid in (ENG, HANDBOOK, QUIET, FREE):
        h.standin.add_conversation(cid, "channel", True)
    yield h
    h.close()
    index.close()
    store.close()


def cited_sites(blocks: list[dict]) -> set[str]:
    """The sources an answer cites, by the host of each citation's link (``<https://eng.example.com/...|...>``)."""
    return set(re.findall(r"https://(handbook|eng)\.example\.com/", "\n".join(source_lines(blocks))))


def ask(h: SlackHarness, channel: str, question: str) -> list[dict]:
    msg, _ = mention(h, channel, question)
    [post] = wait_posts(h, channel, msg["ts"])
    return post.params["blocks"]


def test_an_unlisted_channel_answers_from_every_source(harness: SlackHarness) -> None:
    """The control: without a scope each question is answered from the source that holds its best page."""
    freeze = ask(harness, FREE, "when are production deploys frozen?")
    assert "eng" in cited_sites(freeze) and "Friday 15:00" in section_text(freeze)
    incident = ask(harness, FREE, "how do I declare an incident?")
    assert "handbook" in cited_sites(incident) and "/declare-incident" in section_text(incident)


def test_a_scoped_channel_never_answers_from_another_source(harness: SlackHarness) -> None:
    """The best page is in ``eng``; the channel is scoped to ``handbook``: refused or answered from the
    handbook, never from ``eng``."""
    blocks = ask(harness, HANDBOOK, "when are production deploys frozen?")
    assert cited_sites(blocks) <= {"handbook"}
    assert "Friday 15:00" not in section_text(blocks) and "eng.example.com" not in str(blocks)


def test_a_channel_scoped_to_eng_refuses_a_handbook_question_and_answers_its_own(harness: SlackHarness) -> None:
    blocks = ask(harness, ENG, "how do I declare an incident?")
    assert cited_sites(blocks) <= {"eng"} and "handbook.example.com" not in str(blocks)
    assert "/declare-incident" not in section_text(blocks)
    own = ask(harness, ENG, "when are production deploys frozen?")
    assert cited_sites(own) == {"eng"} and "Friday 15:00" in section_text(own)


def test_mention_only_ignores_a_thread_reply_without_a_mention(harness: SlackHarness) -> None:
    h = harness
    first, _ = mention(h, QUIET, "how do I declare an incident?")
    wait_posts(h, QUIET, first["ts"], 1)
    message(h, QUIET, "and who is the incident commander?", "channel", thread_ts=first["ts"])
    h.idle()
    assert len(posts(h, QUIET, first["ts"])) == 1  # the reply without a mention got nothing
    assert not h.standin.calls_to("conversations.replies", channel=QUIET)  # not even a look at the thread
    # a mention in the same thread is answered
    mention(h, QUIET, "who is the incident commander?", thread_ts=first["ts"])
    wait_posts(h, QUIET, first["ts"], 2)
    # the default (answered_threads) still continues a thread without a mention
    start, _ = mention(h, FREE, "how do I declare an incident?")
    wait_posts(h, FREE, start["ts"], 1)
    message(h, FREE, "and who is the incident commander?", "channel", thread_ts=start["ts"])
    wait_posts(h, FREE, start["ts"], 2)


def test_kb_sources_shows_the_scope_where_it_is_asked(harness: SlackHarness) -> None:
    h = harness
    shown = {}
    for cid in (ENG, QUIET, FREE):
        acked(h.sender.command("sources", ALICE, cid, h.standin.response_url(f"src-{cid}")))
        [resp] = h.standin.wait_for(lambda s, cid=cid: responses(h, f"src-{cid}") or None)
        shown[cid] = section_text(resp.params["blocks"]) + "\n" + "\n".join(source_lines(resp.params["blocks"]))
    assert "In this channel I answer from: *eng*" in shown[ENG]
    assert "*handbook*" in shown[ENG] and "*eng*: 1 pages" in shown[ENG]  # the list of every source stays
    assert "answer from" not in shown[QUIET] and "only when I am mentioned" in shown[QUIET]
    assert "In this channel" not in shown[FREE]


def test_slash_kb_questions_follow_the_scope_too(harness: SlackHarness) -> None:
    h = harness
    acked(h.sender.command("when are production deploys frozen?", ALICE, HANDBOOK, h.standin.response_url("q")))
    answer = h.standin.wait_for(lambda s: [r for r in responses(h, "q") if r.params.get("replace_original")]
                                or None)[-1]
    assert "eng.example.com" not in str(answer.params) and "Friday 15:00" not in str(answer.params)


# -- the configuration ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("channels, expected", [
    ("{C0123ABCD: {sources: [engineering]}}",
     "channels.C0123ABCD.sources: names engineering, which is not a configured source (the sources are: eng, handbook)"),
    ("{'#general': {sources: [eng]}}", "channels.#general.[key]: '#general' is not a conversation id"),
    ("{C0123ABCD: {sources: []}}", "channels.C0123ABCD.sources: an empty list would answer nothing"),
    ("{C0123ABCD: {reply_in_threads: sometimes}}",
     "channels.C0123ABCD.reply_in_threads: Input should be 'answered_threads' or 'mention_only'"),
    ("{C0123ABCD: {source: [eng]}}", "channels.C0123ABCD.source: unknown key"),
])
def test_config_errors_name_their_place(tmp_path: Path, channels: str, expected: str) -> None:
    path = tmp_path / "chatops.yml"
    path.write_text(f"sources:\n  - {{name: handbook, type: folder, path: {tmp_path}}}\n"
                    f"  - {{name: eng, type: folder, path: {tmp_path}}}\nchannels: {channels}\n")
    with pytest.raises(ConfigFileError) as err:
        load_sources_config(Settings(chatops_config=path))
    assert expected in str(err.value)
    with pytest.raises(ConfigFileError):  # chatops serve builds its access policy from the same file
        access_policy(Settings(chatops_config=path))


def test_a_channel_may_name_a_source_given_in_chatops_sources(tmp_path: Path) -> None:
    path = tmp_path / "chatops.yml"
    path.write_text("channels: {C0123ABCD: {sources: [docs]}}\n")
    settings = Settings(chatops_config=path, chatops_sources=f"folder:{tmp_path}?name=docs")
    assert load_sources_config(settings).channels["C0123ABCD"].sources == ["docs"]
    scope = access_policy(settings).scope("C0123ABCD")
    assert scope is not None and scope.sources == ["docs"] and scope.reply_in_threads == "answered_threads"

