"""The evidence gate's topic rule, end to end over the example wiki (:mod:`agent.gate`): a topic of the passages
closest to the question that heads a section beside the support, which does not mention it, makes a near miss."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent.models import Reply, Turn
from app.wiring import Runtime
from index.embeddings import CachedEmbedder

from tests.helpers import agent_over_wiki, public_viewer

DENVER = """# Working from Denver

## Getting there

Most of us fly into DEN and take the A Line train downtown; it runs every 15 minutes.

## How do people dress?

Wear what you like: jeans and a T-shirt are fine in the co-working space. When you meet people from a customer, you
may want to dress up a little.
"""

AUSTIN = """# Working from Austin

## Getting there

The airport bus stops two blocks from the co-working space.

## How do people dress?

Most folks dress casually. Summers are hot, so shorts are common; bring a sweater for the air conditioning.
"""

CONDUCT = """# Code of Conduct

## Our Code of Conduct

This Code of Conduct sets out how we treat each other and the people we work with, online and in person.

## Reporting a Code of Conduct concern

Report a concern about conduct to People Ops or anonymously through the ethics form; we answer within 2 days.

## Code of Conduct at events

At meetups and conferences we sponsor, the organiser's code of conduct applies as well as ours.

## Code of Conduct training

Everyone completes the Code of Conduct training in their first month.
"""


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory, embedder: CachedEmbedder) -> Iterator[Runtime]:
    pages = {"company/denver.md": DENVER, "company/austin.md": AUSTIN, "people/code-of-conduct.md": CONDUCT}
    with agent_over_wiki(tmp_path_factory.mktemp("topics"), embedder, pages) as rt:
        yield rt


def ask(runtime: Runtime, text: str) -> Reply:
    return runtime.agent.answer(Turn(viewer=public_viewer(), text=text, platform="test"))


def test_a_topic_of_the_closest_passages_beside_the_support_is_a_near_miss(runtime: Runtime) -> None:
    reply = ask(runtime, "whats the dress code when we visit a customer office?")
    # "dress" is quoted by the two sections on dressing; "code" heads four Code of Conduct sections retrieved
    # beside them (half of the closest passages hold it), which do not answer
    assert reply.refused, reply.text
    reasons = [s.get("reason", "") for s in reply.trace.steps if s.get("step") == "gate"]
    assert any("a section on 'code', a topic of the closest passages" in r for r in reasons), reasons


def test_the_same_question_without_the_second_topic_is_answered(runtime: Runtime) -> None:
    reply = ask(runtime, "how do people dress when they meet a customer?")
    assert not reply.refused, reply.text
