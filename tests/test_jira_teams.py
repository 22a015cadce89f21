"""``ticket.create`` on Microsoft Teams end to end: activities POSTed to ``/api/messages`` of the real Bot
Framework ``CloudAdapter`` behind the real aiohttp server, replies going to the Bot Connector stand-in
(``tests/standins/teams.py``), the real agent with the action tools registered from settings (``JIRA_URL``
pointing at ``tests/standins/jira.py`` as Jira **Data Center** under ``/jira``, a bearer PAT), the real
state store and action service.

A channel mention asking for a ticket gets the Adaptive Card preview with Confirm / Cancel; the card's
Confirm (an ``Action.Submit``) files one ticket, whose plain-text description links the Teams thread
(the adapter's link, carried by the request) and whose reporter is the asker's Jira account (found by the
e-mail ``TeamsInfo.get_member`` gives for the clicker), and the card is updated with the ticket's key and link; a second Confirm and a Universal Action invoke
of the same Confirm file nothing new.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.settings import Settings
from tests.standins.jira import DC_PAT, JiraStandIn
from tests.teams_actions import channel_message, post, teams_bot
from tools.jira import label_for

BOT = {"id": "28:bot-app-id", "name": "chatops"}
USER = "aad-user-1"
CHANNEL = {"isGroup": True, "conversationType": "channel", "tenantId": "t1",
           "id": "19:general@thread.tacv2;messageid=1700000000000"}


def message(service_url: str, text: str, **kw) -> dict:
    return channel_message(service_url, text, user=f"29:{USER}", name="Ada Lovelace",
                           timestamp="2026-11-21T10:00:00.000Z", **kw)


@pytest.fixture
def teams(tmp_path: Path, wiki_index):
    jira = JiraStandIn("datacenter", context_path="/jira").start()
    jira.add_project("OPS", "Operations")
    jira.add_user("ada@example.com", "ada")  # the asker's Jira account, found by the e-mail the roster gives
    settings = Settings(chatops_data_dir=tmp_path / "data", jira_url=jira.url, jira_pat=DC_PAT,
                        jira_default_project="OPS")
    members = {f"29:{USER}": {"name": "Ada Lovelace", "email": "ada@example.com", "aadObjectId": USER,
                              "userPrincipalName": "ada@example.com", "tenantId": "t1"}}
    try:
        with teams_bot(settings, wiki_index, tmp_path, members) as t:
            t.jira = jira
            yield t
    finally:
        jira.stop()


def test_a_ticket_is_filed_once_from_teams_with_its_link(teams) -> None:
    jira: JiraStandIn = teams.jira
    post(teams, message(teams.connector.url, "<at>chatops</at> create a ticket: laptop screen broken",
                        activity_id="1700000000100", mention=True))
    [preview] = teams.connector.messages()
    card = preview.body["attachments"][0]["content"]
    shown = json.dumps(card, ensure_ascii=False)
    assert "I can file this ticket in Jira:" in shown and "Laptop screen broken" in shown and "OPS" in shown
    confirm = next(a for a in card["actions"] if a["title"] == "Confirm")
    key = confirm["data"]["key"]
    assert not jira.issues  # nothing before Confirm

    post(teams, message(teams.connector.url, "", activity_id="c1", value=confirm["data"], reply_to="card-1"))
    [issue] = jira.issues
    assert issue["key"] == "OPS-1" and issue["fields"]["labels"] == [label_for(key)]
    link = f"{jira.url}/browse/OPS-1"
    thread = "https://teams.microsoft.com/l/message/19%3Ageneral%40thread.tacv2/1700000000000"
    description = issue["fields"]["description"]
    assert isinstance(description, str) and f"Chat thread: {thread}" in description  # Data Center: plain text
    assert "create a ticket: laptop screen broken" in description
    [create] = jira.calls("POST", "/rest/api/2/issue")
    assert create.auth == f"Bearer {DC_PAT}"
    # the reporter is the asker, mapped by the e-mail Teams' roster gives for the clicker (not the bot's account)
    assert issue["fields"]["reporter"] == {"name": "ada"} and "Requested by" not in description
    assert any(c.activity_id == f"29:{USER}" for c in teams.connector.lookups)  # (member id in that slot)
    updates = [c for c in teams.connector.calls if c.method == "PUT"]
    assert updates and updates[-1].activity_id == "card-1"
    updated = json.dumps(updates[-1].body, ensure_ascii=False)
    assert "Filed in Jira" in updated and link in updated and "Open OPS-1 in Jira" in updated

    post(teams, message(teams.connector.url, "", activity_id="c2", value=confirm["data"], reply_to="card-1"))
    invoke = message(teams.connector.url, "", activity_id="i1")
    invoke.update({"type": "invoke", "name": "adaptiveCard/action",
                   "value": {"action": {"type": "Action.Execute", "verb": "confirm", "data": confirm["data"]}}})
    r = post(teams, invoke)
    assert link in json.dumps(r.json())  # the settled card again, with the same ticket
    assert len(jira.issues) == 1 and len(jira.calls("POST", "/rest/api/2/issue")) == 1
    assert teams.store.get_pending(key).status == "done"


def test_a_universal_action_confirm_files_the_ticket(teams) -> None:
    jira: JiraStandIn = teams.jira
    post(teams, message(teams.connector.url, "<at>chatops</at> file a jira bug in OPS: VPN drops every hour",
                        activity_id="1700000000200", mention=True))
    card = teams.connector.messages()[-1].body["attachments"][0]["content"]
    data = next(a for a in card["actions"] if a["title"] == "Confirm")["data"]
    invoke = message(teams.connector.url, "", activity_id="i2")
    invoke.update({"type": "invoke", "name": "adaptiveCard/action",
                   "value": {"action": {"type": "Action.Execute", "verb": "confirm", "data": data}}})
    body = post(teams, invoke).json()
    assert body["type"] == "application/vnd.microsoft.card.adaptive"
    [issue] = jira.issues
    assert issue["fields"]["issuetype"]["name"] == "Bug" and issue["fields"]["summary"] == "VPN drops every hour"
    assert f"{jira.url}/browse/{issue['key']}" in json.dumps(body)
