"""Invitations of the local calendar on Microsoft Teams, end to end: activities POSTed to ``/api/messages``
of the real Bot Framework ``CloudAdapter`` behind the real aiohttp server, replies, roster look-ups and new
personal chats going to the Bot Connector stand-in (``tests/standins/teams.py``), the real agent with the
default calendar backend (``CALENDAR_BACKEND=local``), the real state store and action service.

The preview card names who will get the invitation (members of the conversation, looked up by e-mail)
and who is not in it; Confirm books the event and offers each member the ``.ics`` in a file consent card
in their personal chat with the bot (``POST /v3/conversations``); the member's Accept (``fileConsent/invoke``)
uploads the file to the URL Teams gives and shows it as a file info card; someone else's Accept uploads
nothing; a member without the app is reported in the thread as not reached, never as sent.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import icalendar
import pytest

from app.settings import Settings
from bot.teams.invites import FILE_CONSENT, FILE_INFO
from bot.teams.package import TEMPLATE_DIR
from tests.teams_actions import channel_message, post, teams_bot

BOT = {"id": "28:bot-app-id", "name": "chatops"}
ADA, BOB, DANA, MALLORY = "29:aad-ada", "29:aad-bob", "29:aad-dana", "29:aad-mallory"
CHANNEL = {"isGroup": True, "conversationType": "channel", "tenantId": "t1",
           "id": "19:general@thread.tacv2;messageid=1700000000000"}


def activity(service_url: str, *, activity_id: str, text: str = "", user: str = ADA, **kw) -> dict:
    return channel_message(service_url, text, activity_id=activity_id, user=user, name=user, mention=bool(text), **kw)


@pytest.fixture
def teams(tmp_path: Path, wiki_index):
    settings = Settings(chatops_data_dir=tmp_path / "data")
    assert settings.calendar_backend == "local"
    members = {member: {"name": name, "email": email, "userPrincipalName": email,
                        "aadObjectId": member.removeprefix("29:"), "tenantId": "t1"}
               for member, name, email in ((ADA, "Ada Lovelace", "ada@example.com"),
                                           (BOB, "Bob Builder", "bob@example.com"),
                                           (DANA, "Dana Scully", "dana@example.com"),
                                           (MALLORY, "Mallory", "mallory@example.com"))}
    with teams_bot(settings, wiki_index, tmp_path, members, timeout=60) as t:
        yield t


def preview_card(t) -> dict:
    return next(a["content"] for m in reversed(t.connector.messages()) for a in m.body.get("attachments") or []
                if any(x.get("title") == "Confirm" for x in (a.get("content") or {}).get("actions") or []))


def facts(card: dict) -> dict[str, str]:
    return {f["title"]: f["value"] for b in card["body"] if b["type"] == "FactSet" for f in b["facts"]}


def confirm(t, card: dict, reply_to: str) -> str:
    data = next(a for a in card["actions"] if a["title"] == "Confirm")["data"]
    post(t, activity(t.connector.url, activity_id=f"c-{reply_to}", value=data, reply_to=reply_to))
    assert t.store.get_pending(data["key"]).status == "done", t.store.get_pending(data["key"]).result
    update = [c for c in t.connector.calls if c.method == "PUT" and c.activity_id == reply_to][-1]
    return json.dumps(update.body, ensure_ascii=False)


def consent(t, user: str, card: dict, filename: str, act_id: str) -> httpx.Response:
    act = activity(t.connector.url, activity_id=act_id, user=user,
                   conversation={"conversationType": "personal", "tenantId": "t1", "id": f"a:personal-{user}"})
    act.update({"type": "invoke", "name": "fileConsent/invoke", "value": {
        "type": "fileUpload", "action": "accept", "context": card["content"]["acceptContext"],
        "uploadInfo": {"contentUrl": f"https://contoso-my.sharepoint.com/personal/{filename}", "name": filename,
                       "uploadUrl": t.connector.upload_url(filename), "uniqueId": "1150D938", "fileType": "ics"}}})
    return post(t, act)


def test_members_get_the_ics_as_a_file_card_only_they_can_save(teams) -> None:
    t = teams
    post(t, activity(t.connector.url, activity_id="1700000000300", text="<at>chatops</at> set up a release review "
                                                                        "with bob@example.com and carol@outside.org "
                                                                        "tomorrow at 3pm"))
    card = preview_card(t)
    assert facts(card)["Invitations"] == ("Bob Builder will get the invitation in a DM; carol@outside.org is not in "
                                          "the workspace and will not be invited")
    assert not t.connector.created  # nothing before Confirm

    done = confirm(t, card, "card-1")
    assert "Booked" in done and "Bob Builder got the invitation in a DM." in done
    assert "Not invited (not in the workspace): carol@outside.org." in done
    [opened] = t.connector.created
    assert opened["members"] == [{"id": BOB}] and not opened.get("isGroup"), opened
    assert opened.get("tenantId") == "t1" or (opened.get("channelData") or {}).get("tenant", {}).get("id") == "t1", opened
    [offer] = [m for m in t.connector.messages() if m.conversation_id == f"a:personal-{BOB}"]
    [file_card] = offer.body["attachments"]
    assert file_card["contentType"] == FILE_CONSENT and file_card["name"] == "release-review.ics"
    assert "Release review" in offer.body["text"] and file_card["content"]["sizeInBytes"] > 0

    assert consent(t, MALLORY, file_card, "release-review.ics", "fc-mallory").status_code == 200
    assert not t.connector.uploads  # an Accept by anyone else uploads nothing
    assert consent(t, BOB, file_card, "release-review.ics", "fc-bob").status_code == 200
    data = t.connector.uploads["release-review.ics"]
    assert len(data) == file_card["content"]["sizeInBytes"]
    event = next(iter(icalendar.Calendar.from_ical(data).walk("VEVENT")))
    assert {str(a).removeprefix("mailto:") for a in event.get("attendee")} == {"bob@example.com", "carol@outside.org"}
    shown = [a for m in t.connector.messages() if m.conversation_id == f"a:personal-{BOB}"
             for a in m.body.get("attachments") or [] if a["contentType"] == FILE_INFO]
    assert shown and shown[0]["name"] == "release-review.ics" and shown[0]["content"]["uniqueId"] == "1150D938"


def test_a_member_without_the_app_is_reported_not_claimed(teams) -> None:
    t = teams
    t.connector.without_app.add(DANA)
    post(t, activity(t.connector.url, activity_id="1700000000400", text="<at>chatops</at> book a sync with "
                                                                        "dana@example.com tomorrow at 4pm"))
    done = confirm(t, preview_card(t), "card-2")
    assert "Booked" in done and "got the invitation" not in done
    assert "The invitation could not be sent to Dana Scully (the chat could not be opened (they don't have the app " \
           "in Teams)); share the .ics with them." in done
    assert not t.connector.created


def test_the_app_manifest_lets_the_bot_send_files() -> None:
    """File consent cards reach only an app whose manifest says the bot supports files."""
    manifest = json.loads((TEMPLATE_DIR / "manifest.json").read_text())
    assert manifest["bots"][0]["supportsFiles"] is True
