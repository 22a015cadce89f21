"""The ``ticket.create`` tool: a Jira ticket filed from chat, once (the :mod:`tools.actions` contract).

**Reading** (:mod:`.intent`, :mod:`.read`): an imperative filing verb with a ticket noun ("open a ticket
for this", "file a jira bug in OPS: VPN drops every hour"); a question about how to open one is a
knowledge question. The project and the issue type are **checked against Jira before the preview**
(:meth:`JiraClient.project`): an unknown project, or a type the project does not have, is a question
back that names what exists, and nothing is proposed.

**Filing** (:meth:`TicketCreate.execute`): the ticket gets the summary, the description (the request,
its background, the link to the chat thread as the adapter gave it in the request, and who asked), the
issue type, and as reporter the Jira
user with the requester's e-mail (Cloud ``accountId``, Data Center ``name``); when there is none, or
the bot's account may not set the reporter (Jira answers ``400`` on ``reporter``: it lacks *Modify
Reporter*), the bot's account is the reporter and the description names the requester.

**Exactly once.** Jira's create has no idempotency key, so this tool makes one out of a label:

1. The action service records the action's idempotency key and moves it ``pending -> executing``
   with one conditional update *before* calling :meth:`execute`: of two clicks, two replicas or a
   retried click only one executes (``app.actions``).
2. The ticket carries the label ``chatops-<key>`` (:func:`label_for`), and every attempt to create it,
   the retries inside one confirmation (``429`` with ``Retry-After``, ``5xx``, a timeout) and a later
   confirmation after a retryable failure, first searches for that label with JQL and returns the
   ticket it finds instead of filing another (:meth:`JiraClient.file_once`). A create whose answer was
   lost (the request timed out after Jira stored it) is found by the next attempt.
3. What remains: Jira's search index lags the database by a moment, so a lost answer followed by a
   retry faster than the index could file twice; the retry waits the backoff first (at least half a
   second, longer with ``Retry-After``), and Atlassian indexes a new issue well within that in
   ordinary operation.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, ClassVar

import httpx
from pydantic import ValidationError

from tools.actions import ActionRequest, ActionResult, ActionToolBase, ActionWords, Clarification, Preview, Proposal
from tools.arg_checks import problems
from tools.base import ToolContext

from .adf import to_adf
from .args import MAX_DESCRIPTION, TicketCreateArgs
from .client import JiraAuthError, JiraClient, JiraError, JiraRefusedError, Project
from .intent import ticket_intent
from .read import read_ticket

__all__ = ["TicketCreate", "label_for", "LABEL_PREFIX"]

log = logging.getLogger(__name__)

#: The label that marks a ticket as filed for one action (the idempotency key follows).
LABEL_PREFIX = "chatops-"

_PLATFORMS = {"slack": "Slack", "teams": "Microsoft Teams", "cli": "the chatops CLI", "console": "the chatops console"}


def label_for(key: str) -> str:
    """The Jira label of the ticket filed for the action ``key``: ``chatops-<key>``."""
    return f"{LABEL_PREFIX}{key}"


class TicketCreate(ActionToolBase):
    """``ticket.create``: file one Jira ticket after the requester confirms the preview.

    Args:
        client: the Jira client, or a function building it on first use (wiring reads no credentials
            and opens no connection until a request needs Jira).
        default_project: the project key used when a request names none ("" : the tool asks).
        default_issue_type: the type of a "ticket" or an "issue" (``Task``).
    """

    name: ClassVar[str] = "ticket.create"
    description: ClassVar[str] = (
        "File a ticket (issue) in Jira: project key, issue type, a one-line summary and a plain-text description. "
        "The link to the chat thread and the requester (as reporter, matched by e-mail) are added when it is "
        "filed. It cannot edit, comment on, assign or close tickets. Side effect: it is shown to the requester as "
        "a preview and runs only after they confirm.")
    Args: ClassVar[type[TicketCreateArgs]] = TicketCreateArgs
    words: ClassVar[ActionWords] = ActionWords(
        verb="file", past="filed", done="Filed in Jira", lead="I can file this ticket in Jira:",
        undo_hint="close or delete the ticket in Jira if you don't need it")

    def __init__(self, client: JiraClient | Callable[[], JiraClient], *, default_project: str = "",
                 default_issue_type: str = "Task") -> None:
        self._client: JiraClient | None = client if isinstance(client, JiraClient) else None
        self._factory: Callable[[], JiraClient] | None = None if isinstance(client, JiraClient) else client
        self.default_project = default_project.strip().upper()
        self.default_issue_type = default_issue_type.strip() or "Task"
        self._lock = threading.Lock()

    @property
    def client(self) -> JiraClient:
        """The Jira client (built on first use when a factory was given)."""
        with self._lock:
            if self._client is None:
                assert self._factory is not None
                self._client = self._factory()
            return self._client

    def close(self) -> None:
        """Close the Jira client if it was built."""
        if self._client is not None:
            self._client.close()

    # -- the action-tool contract ---------------------------------------------------------------
    def intent(self, text: str) -> float:
        """0.8 for a ticket request (:func:`.intent.ticket_intent`), else 0.0."""
        return ticket_intent(text)

    def propose(self, request: ActionRequest) -> Proposal | Clarification:
        """Read the request, check the project and issue type in Jira, or ask (nothing is filed)."""
        draft = read_ticket(request.text, request.history)
        project_key = draft.project or self.default_project
        wanted_type = draft.issue_type or self.default_issue_type
        trace: dict[str, Any] = {"project": project_key, "issue_type": wanted_type, "summary": draft.summary,
                                 "summary_from_history": draft.from_history, **draft.notes}
        if not project_key:
            return Clarification("Nothing has been filed yet. Which Jira project should the ticket go in "
                                 "(its key, like OPS)?", trace)
        if not draft.summary:
            return Clarification("Nothing has been filed yet. What should the ticket's one-line summary be "
                                 "(for example \u201ccreate a ticket: laptop screen broken\u201d)?", trace)
        try:
            project = self.client.project(project_key)
        except JiraError as exc:
            trace["jira_error"] = str(exc)
            return Clarification(f"I couldn't check the project {project_key} in Jira ({exc}), so nothing has been "
                                 "filed. Could you ask me again in a moment?", trace)
        if project is None:
            hint = (f" The default is {self.default_project}." if self.default_project
                    and self.default_project != project_key else "")
            return Clarification(f"Jira has no project {project_key} that I can file in (or the bot's account may not "
                                 f"browse it), so nothing has been filed.{hint} Which project key should I use?", trace)
        issue_type = project.issue_type(wanted_type)
        if issue_type is None:
            kinds = ", ".join(project.type_names) or "none"
            return Clarification(f"The Jira project {project.key} has no issue type \u201c{wanted_type}\u201d (it has: "
                                 f"{kinds}), so nothing has been filed. Which type should it be?", trace)
        trace["project_name"] = project.name
        try:
            args = TicketCreateArgs(project=project.key, issue_type=issue_type.name, summary=draft.summary,
                                    description=request.background[:MAX_DESCRIPTION], thread_link=request.thread_link)
        except ValidationError as exc:
            return Clarification(f"I can't file that ticket as asked ({problems(exc)}), so nothing has been filed. "
                                 "Could you rephrase it?", trace)
        return Proposal(args, _summary(args), trace)

    def preview(self, args: TicketCreateArgs, viewer_tz: str | None = None) -> Preview:
        """Title: the summary; Project, Type, Reporter, Where; the description."""
        project = self._project_cached(args.project)
        where = httpx.URL(self._base_url()).host if self._base_url() else "Jira"
        fields = (("Project", f"{args.project} \u2013 {project.name}" if project and project.name != args.project
                   else args.project),
                  ("Type", args.issue_type),
                  ("Reporter", "you (your Jira account, matched by your e-mail)"),
                  ("Jira", where or "Jira"))
        return Preview(args.summary, fields, _summary(args), args.description)

    def execute(self, args: TicketCreateArgs, key: str, ctx: ToolContext) -> ActionResult:
        """File the ticket once for ``key`` (see the module docstring: the label and the search before
        every attempt), with the thread's link and the requester as reporter when Jira knows them.

        Returns:
            ok with the ticket's key and link (also when an earlier attempt filed it); not ok and
            retryable when Jira is unreachable or throttling; not ok otherwise (refused fields, credentials).
        """
        label = label_for(key)
        try:
            client = self.client
            reporter = self._reporter(client, ctx.user_email)
            link = args.thread_link  # the adapter's, through the request: this tool knows no chat platform
            text = _description(args, link, ctx, reporter is not None)
            fields: dict[str, Any] = {
                "project": {"key": args.project}, "issuetype": self._issue_type_ref(client, args),
                "summary": args.summary, "labels": [label],
                "description": to_adf(text) if client.deployment == "cloud" else text}
            if reporter:
                fields["reporter"] = reporter
            try:
                filed = client.file_once(label, fields)
            except JiraRefusedError as exc:
                if not reporter or "reporter" not in exc.errors:
                    raise
                log.info("Jira refused the reporter for %s (%s); filing as the bot's account", key, exc.errors)
                fields.pop("reporter")
                fields["description"] = (to_adf(_description(args, link, ctx, False))
                                         if client.deployment == "cloud" else _description(args, link, ctx, False))
                reporter = None
                filed = client.file_once(label, fields)
        except JiraAuthError as exc:
            return ActionResult(False, f"Jira refused the bot: {exc}.", details={"error": str(exc)})
        except JiraError as exc:
            return ActionResult(False, str(exc), retryable=exc.retryable, details={"error": str(exc)})
        verb = "Filed" if filed.created else "Already filed"
        return ActionResult(True, f"{verb} {filed.key}: {args.summary} ({filed.link}).",
                            links=((f"Open {filed.key} in Jira", filed.link),),
                            details={"issue_key": filed.key, "issue_id": filed.id, "created": filed.created,
                                     "project": args.project, "issue_type": args.issue_type, "label": label,
                                     "thread_link": link, "reporter": "requester" if reporter else "bot account"})

    # -- helpers -----------------------------------------------------------------------------------
    def _base_url(self) -> str:
        return self._client.base_url if self._client is not None else ""

    def _project_cached(self, key: str) -> Project | None:
        """The project from the client's cache (the preview makes no call of its own)."""
        return self._client.cached_project(key) if self._client is not None else None

    @staticmethod
    def _issue_type_ref(client: JiraClient, args: TicketCreateArgs) -> dict[str, str]:
        """``{"id"}`` of the type when the project's types are known (names may be translated), else ``{"name"}``."""
        try:
            project = client.project(args.project)
        except JiraError:
            project = None
        found = project.issue_type(args.issue_type) if project else None
        return {"id": found.id} if found and found.id else {"name": args.issue_type}

    @staticmethod
    def _reporter(client: JiraClient, email: str) -> dict[str, str] | None:
        try:
            return client.find_user(email)
        except JiraAuthError:
            raise
        except JiraError as exc:  # the ticket matters more than its reporter
            log.info("Jira user search failed (%s); filing as the bot's account", exc)
            return None


def _summary(args: TicketCreateArgs) -> str:
    return f"{args.issue_type} in {args.project}: {args.summary}"


def _description(args: TicketCreateArgs, link: str, ctx: ToolContext, reporter_mapped: bool) -> str:
    """The ticket's text: the request and its background, then where and by whom it was asked."""
    where = _PLATFORMS.get(ctx.platform, ctx.platform or "chat")
    lines = [f"Chat thread: {link}" if link else f"Asked in {where} (no link to the conversation)."]
    who = ctx.user_email or ctx.user_id
    if who and not reporter_mapped:
        lines.append(f"Requested by: {who} ({where})")
    body = args.description.strip() or f"Requested in chat: \u201c{args.summary}\u201d"
    return f"{body}\n\n" + "\n".join(lines) + "\n\nFiled by chatops after the requester confirmed."
