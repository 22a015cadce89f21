"""What an answer quotes (issue 22), through the real agent over a real index: the example wiki plus three pages
written for these tests.

- A list item of several sentences is quoted whole (the figure in its second sentence with it), and a sentence
  that continues an item is never taken for the lead-in of the next list.
- A second page is quoted only for what the first did not say: the same fact on another page is not cited.
- A lead-in ending in ":" is quoted with the fenced code block right below it (the command it introduces), shown as
  a code block.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent.models import Reply, Turn
from app.wiring import Runtime
from index.embeddings import CachedEmbedder

from tests.helpers import agent_over_wiki, public_viewer

PHONES = """# Work phones

## Rules

- **Set a screen lock passcode.** It must be longer than 11 digits and mix letters with numbers. Never share the
  passcode with anyone, including IT.
- **Turn on remote wipe.** On Android phones, turn on the device manager instead.
- **Install updates.** Apply each system update within a week of its release.
"""

DINNERS = """# Team dinners

Team dinners are reimbursed up to $65 per person, drinks included, when a manager books them for the whole team.
"""

OFFSITES = """# Offsite planning

## Meals

Team dinners during an offsite are reimbursed up to $65 per person, drinks included.
"""

VPN = """# Office VPN

## Connecting from a terminal

The office VPN gives access to the build farm and the staging hosts. To connect from a terminal, run this command:

```
vpnctl connect --profile office-eu
```

The session ends after twelve hours.
"""


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory, embedder: CachedEmbedder) -> Iterator[Runtime]:
    pages = {"it/work-phones.md": PHONES, "finance/team-dinners.md": DINNERS, "company/offsites.md": OFFSITES,
             "it/office-vpn.md": VPN}
    with agent_over_wiki(tmp_path_factory.mktemp("spans"), embedder, pages) as rt:
        yield rt


def ask(runtime: Runtime, text: str) -> Reply:
    return runtime.agent.answer(Turn(viewer=public_viewer(), text=text, platform="test"))


def test_a_list_item_of_several_sentences_is_quoted_whole(runtime: Runtime) -> None:
    reply = ask(runtime, "what are the rules for the passcode on a work phone?")
    assert not reply.refused, reply.text
    # the item's sentences are quoted together: its statement and the figure its second sentence states
    assert ("Set a screen lock passcode. It must be longer than 11 digits and mix letters with numbers. Never "
            "share the passcode with anyone, including IT.") in reply.text
    # a sentence of an item is never shown as the lead-in of the list below it
    assert "including IT.\n- Turn on remote wipe." in reply.text or "Turn on remote wipe" not in reply.text
    assert all(c.doc_id == "it/work-phones.md" for c in reply.citations)


def test_a_second_page_saying_the_same_thing_is_not_cited(runtime: Runtime) -> None:
    reply = ask(runtime, "how much can we spend per person on a team dinner?")
    assert not reply.refused, reply.text
    assert "$65 per person" in reply.text
    assert len({c.doc_id for c in reply.citations}) == 1, reply.citations


def test_a_lead_in_is_quoted_with_the_command_in_the_code_block_below_it(runtime: Runtime) -> None:
    reply = ask(runtime, "whats the command to connect to the office vpn from a terminal?")
    assert not reply.refused, reply.text
    assert "To connect from a terminal, run this command: [1]\n```\nvpnctl connect --profile office-eu\n```" \
        in reply.text, reply.text
    # the command is cited verbatim, as its own quote (the agent re-checks every quote against the passage)
    assert "vpnctl connect --profile office-eu" in {c.quote for c in reply.citations}, reply.citations
