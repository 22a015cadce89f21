"""Build ``ticket.create`` from plain settings values (the composition root passes them in)."""

from __future__ import annotations

from .client import JiraClient, deployment_for
from .tool import TicketCreate

__all__ = ["jira_tool", "jira_configured"]


def jira_configured(url: str | None, *, email: str = "", api_token: str = "", pat: str = "") -> bool:
    """True when there is a Jira site and credentials for it (Cloud: e-mail and API token; Data Center: a PAT)."""
    return bool(url) and (bool(email and api_token) or bool(pat))


def jira_tool(url: str, *, deployment: str | None = None, email: str = "", api_token: str = "", pat: str = "",
              default_project: str = "", default_issue_type: str = "Task", timeout_seconds: float = 20.0) -> TicketCreate:
    """``ticket.create`` over the Jira site ``url``; the client is built on first use (Cloud or Data Center by
    ``deployment``, else by the host: ``*.atlassian.net`` is Cloud)."""
    kind = deployment_for(url, deployment)

    def client() -> JiraClient:
        return JiraClient(url, kind, email=email, api_token=api_token, pat=pat, timeout=timeout_seconds)

    return TicketCreate(client, default_project=default_project, default_issue_type=default_issue_type)
