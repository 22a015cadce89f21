"""``ticket.create`` against the Jira stand-in (``tests/standins/jira.py``), Cloud (REST v3) and Data Center (REST v2).

The tool and its client are the real ones, talking HTTP to 127.0.0.1: reading a request (and not a
question), the project and issue type checked before the preview (an unknown one is a question and no
ticket), the wire formats (Cloud: basic auth, ``/rest/api/3``, an ADF description with the thread's link
as a link mark, the reporter's ``accountId``; Data Center: a context path, a bearer PAT, ``/rest/api/2``,
a plain-text description, the reporter's ``name``), exactly once (the same key twice, a create whose
answer was lost, a 429 with ``Retry-After``), and the failures (credentials refused, Jira down, a
reporter the account may not set).
"""

from __future__ import annotations

import base64
from datetime import datetime, timezone

import pytest

from app.settings import Settings
from app.wiring import register_action_tools
from connectors.http import RetryPolicy
from tests.standins.jira import CLOUD_EMAIL, CLOUD_TOKEN, DC_PAT, JiraStandIn
from tools.actions import ActionRequest, Clarification, Proposal
from tools.base import ToolContext, ToolRegistry
from tools.jira import TicketCreate, TicketCreateArgs, label_for
from tools.jira.adf import adf_text
from tools.jira.client import JiraClient
from tools.jira.intent import ticket_intent
from tools.jira.read import read_ticket

NOW = datetime(2030, 3, 4, 9, 0, tzinfo=timezone.utc)
KEY = "0123456789abcdefghijklmnopqrstuv"
THREAD = "https://acme.slack.com/archives/C0OPS/p1700000000000100"  # the adapter's link to the thread


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def _standin(deployment: str) -> JiraStandIn:
    s = JiraStandIn(deployment, context_path="/jira" if deployment == "datacenter" else "").start()
    s.add_project("OPS", "Operations")
    s.add_project("IT", "IT Helpdesk", [("1", "Service request", False), ("2", "Incident", False)])
    s.add_user("alice@example.com", "alice")
    return s


@pytest.fixture(params=["cloud", "datacenter"])
def jira(request):
    s = _standin(request.param)
    yield s
    s.stop()


@pytest.fixture
def cloud():
    s = _standin("cloud")
    yield s
    s.stop()


def _tool(s: JiraStandIn, sleeps: Sleeps | None = None, **kw) -> TicketCreate:
    policy = RetryPolicy(attempts=4, backoff_initial=0.01, backoff_max=0.05, retry_after_max=30.0,
                         sleep=sleeps if sleeps is not None else Sleeps())
    client = JiraClient(s.url, s.deployment, email=CLOUD_EMAIL, api_token=CLOUD_TOKEN, pat=DC_PAT, policy=policy)
    return TicketCreate(client, default_project=kw.pop("default_project", "OPS"), **kw)


def _request(text: str, history: tuple[str, ...] = (), thread_link: str = THREAD) -> ActionRequest:
    return ActionRequest(text=text, sent_at=NOW, history=history, platform="slack", requester_id="UALICE",
                         background=f"Requested in chat: \u201c{text}\u201d", thread_link=thread_link)


def _ctx(email: str = "alice@example.com", platform: str = "slack") -> ToolContext:
    thread = "1700000000.000100" if platform == "slack" else "19:general@thread.tacv2;messageid=1700000000000"
    return ToolContext(user_id="UALICE", platform=platform, channel_id="C0OPS", user_email=email,
                       extra={"idempotency_key": KEY, "thread_id": thread})


# -- reading ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["open a ticket for this", "file a jira bug in OPS: VPN drops every hour",
                                  "create a ticket: laptop screen broken", "please raise an issue about the printer",
                                  "the VPN is down, can you open a ticket", "log a bug in IT: printer jams"])
def test_requests_are_recognised(text: str) -> None:
    assert ticket_intent(text) >= 0.5


@pytest.mark.parametrize("text", ["how do I open a ticket?", "where can I report a bug?", "can I file an issue for VPN?",
                                  "what is the VPN issue", "make sure the issue is fixed",
                                  "book a meeting tomorrow at 3pm about the bug", "is there a known issue with VPN?"])
def test_questions_and_other_requests_are_not_ticket_requests(text: str) -> None:
    assert ticket_intent(text) == 0.0


def test_the_request_is_read_into_project_type_and_summary() -> None:
    d = read_ticket("file a jira bug in OPS: VPN drops every hour")
    assert (d.project, d.issue_type, d.summary) == ("OPS", "Bug", "VPN drops every hour")
    d = read_ticket("open a ticket in project HR to update the holiday calendar")
    assert (d.project, d.issue_type, d.summary) == ("HR", "", "Update the holiday calendar")
    d = read_ticket("open a ticket for this", ("the printer on floor 3 is jammed again",))
    assert d.summary == "The printer on floor 3 is jammed again" and d.from_history
    assert read_ticket("open a ticket for this").summary == ""


# -- preview-time checks -----------------------------------------------------------------------------
def test_the_project_and_type_are_checked_in_jira_before_the_preview(jira: JiraStandIn) -> None:
    tool = _tool(jira)
    p = tool.propose(_request("file a jira bug in OPS: VPN drops every hour"))
    assert isinstance(p, Proposal)
    assert p.args.model_dump() == {"project": "OPS", "issue_type": "Bug", "summary": "VPN drops every hour",
                                   "description": "Requested in chat: \u201cfile a jira bug in OPS: VPN drops every hour\u201d",
                                   "thread_link": THREAD}
    preview = tool.preview(p.args)
    assert preview.title == "VPN drops every hour" and preview.value("Project") == "OPS \u2013 Operations"
    assert preview.value("Type") == "Bug"
    v = jira.version
    assert jira.calls("GET", f"/rest/api/{v}/project/OPS")
    if jira.deployment == "cloud":  # the types the account may create, every page (the stand-in pages by 2)
        assert len(jira.calls("GET", "/rest/api/3/issue/createmeta/OPS/issuetypes")) == 2


def test_an_unknown_project_or_type_is_a_question_and_nothing_is_filed(jira: JiraStandIn) -> None:
    tool = _tool(jira)
    q = tool.propose(_request("file a ticket in OPX: VPN drops every hour"))
    assert isinstance(q, Clarification)
    assert "no project OPX" in q.question and "nothing has been filed" in q.question and q.question.endswith("?")
    q = tool.propose(_request("log a bug in IT: printer jams"))
    assert isinstance(q, Clarification)
    assert "no issue type \u201cBug\u201d" in q.question and "Service request, Incident" in q.question
    q = tool.propose(_request("create an issue with type Sub-task in OPS: a child"))
    assert isinstance(q, Clarification) and "Sub-task" in q.question  # a subtask needs a parent: not offered
    assert not jira.calls("POST")


def test_no_summary_and_no_project_are_asked_for(cloud: JiraStandIn) -> None:
    assert isinstance(q := _tool(cloud).propose(_request("open a ticket for this")), Clarification)
    assert "summary" in q.question
    q = _tool(cloud, default_project="").propose(_request("create a ticket: laptop screen broken"))
    assert isinstance(q, Clarification) and "Which Jira project" in q.question
    assert not cloud.requests  # nothing asked of Jira before the request is complete


# -- filing: wire formats ---------------------------------------------------------------------------
def test_a_ticket_is_filed_in_the_deployments_wire_format(jira: JiraStandIn) -> None:
    tool = _tool(jira)
    args = TicketCreateArgs(project="OPS", issue_type="Bug", summary="VPN drops every hour",
                            description="Requested in chat: \u201cfile a jira bug\u201d", thread_link=THREAD)
    result = tool.execute(args, KEY, _ctx())
    assert result.ok, result.message
    [issue] = jira.issues
    link = f"{jira.url}/browse/OPS-1"
    assert result.links == (("Open OPS-1 in Jira", link),) and "OPS-1" in result.message
    assert result.details["created"] is True and result.details["issue_key"] == "OPS-1"
    fields = issue["fields"]
    thread = THREAD
    assert fields["labels"] == [label_for(KEY)] and fields["summary"] == "VPN drops every hour"
    assert fields["issuetype"]["name"] == "Bug"
    [post] = jira.calls("POST")
    if jira.deployment == "cloud":
        assert post.path == "/rest/api/3/issue"
        assert post.auth == "Basic " + base64.b64encode(f"{CLOUD_EMAIL}:{CLOUD_TOKEN}".encode()).decode()
        doc = post.body["fields"]["description"]
        assert doc["type"] == "doc" and thread in adf_text(doc)
        marks = [n["marks"] for para in doc["content"] for n in para["content"] if n.get("text") == thread]
        assert marks == [[{"type": "link", "attrs": {"href": thread}}]]
        assert post.body["fields"]["reporter"] == {"accountId": jira.users[0]["accountId"]}
        assert jira.calls("GET", "/rest/api/3/search/jql") and jira.calls("GET", "/rest/api/3/user/search")
    else:
        assert post.path == "/rest/api/2/issue" and post.auth == f"Bearer {DC_PAT}"
        text = post.body["fields"]["description"]
        assert isinstance(text, str) and f"Chat thread: {thread}" in text
        assert post.body["fields"]["reporter"] == {"name": "alice"}
        assert jira.calls("GET", "/rest/api/2/search") and jira.calls("GET", "/rest/api/2/user/search")
        assert link.startswith("http://127.0.0.1:") and "/jira/browse/OPS-1" in link


def test_the_threads_link_is_the_one_the_adapter_put_in_the_request(cloud: JiraStandIn) -> None:
    teams = "https://teams.microsoft.com/l/message/19%3Ageneral%40thread.tacv2/1700000000000"
    p = _tool(cloud).propose(_request("create a ticket: laptop screen broken", thread_link=teams))
    assert isinstance(p, Proposal) and p.args.thread_link == teams
    # the ids alone (a Slack channel and thread, a Teams conversation) build no link: the tool knows no platform
    assert _tool(cloud).execute(p.args, KEY, _ctx(platform="teams")).ok
    assert f"Chat thread: {teams}" in adf_text(cloud.issues[0]["fields"]["description"])
    bare = _tool(cloud).propose(_request("create a ticket: printer jams", thread_link=""))
    assert isinstance(bare, Proposal) and bare.args.thread_link == ""
    assert _tool(cloud).execute(bare.args, "v" * 32, _ctx()).ok
    text = adf_text(cloud.issues[1]["fields"]["description"])
    assert "Chat thread" not in text and "Asked in Slack (no link to the conversation)." in text


@pytest.mark.parametrize("link", ["javascript:alert(1)", "file:///etc/passwd", "https://a b"])
def test_a_thread_link_that_is_no_web_link_is_refused(link: str) -> None:
    with pytest.raises(ValueError):
        TicketCreateArgs(project="OPS", summary="x", thread_link=link)


# -- exactly once -----------------------------------------------------------------------------------
def test_the_same_key_twice_files_one_ticket(jira: JiraStandIn) -> None:
    tool = _tool(jira)
    args = TicketCreateArgs(project="OPS", summary="Laptop screen broken")
    first, second = tool.execute(args, KEY, _ctx()), tool.execute(args, KEY, _ctx())
    assert first.ok and second.ok and len(jira.issues) == 1
    assert second.details["created"] is False and second.link == first.link
    assert len(jira.calls("POST")) == 1
    assert tool.execute(args, "v" * 32, _ctx()).ok and len(jira.issues) == 2  # another action, another ticket


def test_a_create_whose_answer_was_lost_is_found_not_filed_again(jira: JiraStandIn) -> None:
    sleeps = Sleeps()
    jira.fail(r"^POST /rest/api/\d/issue$", 502, lose_answer=True)
    result = _tool(jira, sleeps).execute(TicketCreateArgs(project="OPS", summary="Badge reader broken"), KEY, _ctx())
    assert result.ok and result.details["issue_key"] == "OPS-1"
    assert len(jira.issues) == 1 and len(jira.calls("POST")) == 1 and len(sleeps) == 1


def test_429_waits_retry_after_then_files_once(cloud: JiraStandIn) -> None:
    sleeps = Sleeps()
    cloud.fail(r"^POST /rest/api/3/issue$", 429, headers={"Retry-After": "7"})
    result = _tool(cloud, sleeps).execute(TicketCreateArgs(project="OPS", summary="Printer jams"), KEY, _ctx())
    assert result.ok and len(cloud.issues) == 1 and sleeps == [7.0]


def test_jira_down_is_retryable_and_a_later_confirm_files_once(cloud: JiraStandIn) -> None:
    tool = _tool(cloud)
    args = TicketCreateArgs(project="OPS", summary="Printer jams")
    cloud.fail(r"^POST /rest/api/3/issue$", 503, times=4)
    down = tool.execute(args, KEY, _ctx())
    assert not down.ok and down.retryable and not cloud.issues
    again = tool.execute(args, KEY, _ctx())
    assert again.ok and len(cloud.issues) == 1


# -- failures ---------------------------------------------------------------------------------------
def test_refused_credentials_are_not_retried_and_say_what_to_check(cloud: JiraStandIn) -> None:
    client = JiraClient(cloud.url, "cloud", email=CLOUD_EMAIL, api_token="wrong")
    result = TicketCreate(client).execute(TicketCreateArgs(project="OPS", summary="x"), KEY, _ctx())
    assert not result.ok and not result.retryable and "JIRA_API_TOKEN" in result.message and not cloud.issues


def test_a_reporter_the_account_may_not_set_files_as_the_bot_and_names_the_requester(jira: JiraStandIn) -> None:
    jira.reporter_settable = False
    result = _tool(jira).execute(TicketCreateArgs(project="OPS", summary="VPN drops"), KEY, _ctx())
    assert result.ok and result.details["reporter"] == "bot account" and len(jira.issues) == 1
    fields = jira.issues[0]["fields"]
    text = adf_text(fields["description"]) if jira.deployment == "cloud" else fields["description"]
    assert "reporter" not in fields and "Requested by: alice@example.com (Slack)" in text


def test_an_unknown_requester_files_as_the_bot(cloud: JiraStandIn) -> None:
    result = _tool(cloud).execute(TicketCreateArgs(project="OPS", summary="VPN drops"), KEY, _ctx("nobody@example.com"))
    assert result.ok and "reporter" not in cloud.issues[0]["fields"]


# -- wiring ------------------------------------------------------------------------------------------
def test_the_tool_is_registered_only_when_jira_is_configured(tmp_path) -> None:
    names = lambda s: [t.name for t in register_action_tools(ToolRegistry(), s).actions()]  # noqa: E731
    assert "ticket.create" not in names(Settings(chatops_data_dir=tmp_path))
    assert "ticket.create" not in names(Settings(chatops_data_dir=tmp_path, jira_url="https://acme.atlassian.net"))
    assert "ticket.create" in names(Settings(chatops_data_dir=tmp_path, jira_url="https://acme.atlassian.net",
                                             jira_email="bot@acme.com", jira_api_token="t"))
    assert "ticket.create" in names(Settings(chatops_data_dir=tmp_path, jira_url="https://jira.acme.com",
                                             jira_pat="p"))
