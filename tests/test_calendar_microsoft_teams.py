"""Microsoft 365 meetings from Microsoft Teams end to end: activities POSTed to ``/api/messages`` of the real
Bot Framework ``CloudAdapter`` behind the real aiohttp server, replies and the roster from the Bot Connector
stand-in (``tests/standins/teams.py``; the requester's roster e-mail is their mailbox), the real agent with the
action tools registered from settings (``CALENDAR_BACKEND=microsoft`` against ``tests/standins/graph.py``), the
real state store and action service.

A channel mention asking for a Teams meeting gets the Adaptive Card preview; its Confirm books ONE event in the
requester's Outlook calendar with the attendee invited, and the card is updated with the Teams join link; a
second Confirm and a Universal Action invoke of the same Confirm book nothing new.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.settings import Settings
from tests.standins.graph import CLIENT_ID, CLIENT_SECRET, TENANT, GraphStandIn
from tests.teams_actions import channel_message, post, teams_bot

USER = "29:aad-user-1"
ADA = "ada@contoso.com"


def message(service_url: str, text: str, **kw) -> dict:
    return channel_message(service_url, text, user=USER, name="Ada Lovelace", **kw)


@pytest.fixture
def teams(tmp_path: Path, wiki_index):
    graph = GraphStandIn({ADA, "grace@contoso.com"}, allowed={ADA})
    settings = Settings(chatops_data_dir=tmp_path / "data", calendar_backend="microsoft", graph_tenant_id=TENANT,
                        graph_client_id=CLIENT_ID, graph_client_secret=CLIENT_SECRET, graph_api_endpoint=graph.graph,
                        graph_authority_host=graph.url, graph_ca_bundle=graph.ca_file)
    members = {USER: {"name": "Ada Lovelace", "email": ADA, "userRole": "user", "tenantId": "t1",
                      "aadObjectId": USER.removeprefix("29:")}}
    try:
        with teams_bot(settings, wiki_index, tmp_path, members) as t:
            t.graph = graph
            yield t
    finally:
        graph.close()


def test_a_teams_meeting_is_booked_once_from_teams_with_its_join_link(teams) -> None:
    graph: GraphStandIn = teams.graph
    post(teams, message(teams.connector.url, "<at>chatops</at> schedule a teams meeting with grace@contoso.com "
                        "tomorrow at 3pm", activity_id="1700000000100", mention=True))
    [preview] = teams.connector.messages()
    card = preview.body["attachments"][0]["content"]
    assert "grace@contoso.com" in json.dumps(card, ensure_ascii=False)
    confirm = next(a for a in card["actions"] if a["title"] == "Confirm")
    key = confirm["data"]["key"]
    assert not graph.events  # nothing before Confirm

    post(teams, message(teams.connector.url, "", activity_id="c1", value=confirm["data"], reply_to="card-1"))
    [event] = graph.events[ADA]
    assert event["transactionId"] == key and graph.invitations == [("grace@contoso.com", event["id"])]
    join = event["onlineMeeting"]["joinUrl"]
    updates = [c for c in teams.connector.calls if c.method == "PUT"]
    assert updates and updates[-1].activity_id == "card-1"
    updated = json.dumps(updates[-1].body, ensure_ascii=False)
    assert "Booked" in updated and join in updated and "Join the Teams meeting" in updated

    post(teams, message(teams.connector.url, "", activity_id="c2", value=confirm["data"], reply_to="card-1"))
    invoke = message(teams.connector.url, "", activity_id="i1")
    invoke.update({"type": "invoke", "name": "adaptiveCard/action",
                   "value": {"action": {"type": "Action.Execute", "verb": "confirm", "data": confirm["data"]}}})
    r = post(teams, invoke)
    assert join in json.dumps(r.json())  # the settled card again, with the same meeting
    assert len(graph.events[ADA]) == 1 and len(graph.calls("POST", "/events")) == 1
    assert teams.store.get_pending(key).status == "done"
