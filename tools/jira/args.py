"""The arguments of ``ticket.create``.

Validation makes a ticket Jira would refuse impossible to store: the project is a Jira project key
(``OPS``: a capital letter, then capitals, digits or ``_``), the issue type a name (``Bug``,
``Task``), the summary one line of 1-255 characters (Jira's limit), the description plain text of at
most 30,000 characters (below Jira's 32,767).
"""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

__all__ = ["TicketCreateArgs", "PROJECT_KEY", "MAX_SUMMARY", "MAX_DESCRIPTION"]

#: A Jira project key as Jira allows it by default (``OPS``, ``IT2``, ``WEB_APP``).
PROJECT_KEY = r"^[A-Z][A-Z0-9_]{0,254}$"
MAX_SUMMARY = 255
MAX_DESCRIPTION = 30000


class TicketCreateArgs(BaseModel):
    """Arguments of ``ticket.create``.

    Attributes:
        project: the Jira project key (``OPS``).
        issue_type: the issue type's name as Jira shows it (``Task``, ``Bug``, ``Story``).
        summary: the ticket's title, one line.
        description: what the ticket says, plain text (the request and its background); the link to
            the chat thread and the requester are added when it is filed.
        thread_link: the web link of the chat thread the request was made in, as the chat adapter gave it
            (:attr:`tools.actions.ActionRequest.thread_link`); an ``http(s)`` URL or "" (none).
    """

    project: str = Field(pattern=PROJECT_KEY, description="The Jira project key, e.g. OPS.")
    issue_type: str = Field(default="Task", min_length=1, max_length=60,
                            description="The issue type's name in that project, e.g. Task, Bug, Story.")
    summary: str = Field(min_length=1, max_length=MAX_SUMMARY,
                         description="The ticket's title: one line in the requester's words.")
    description: str = Field(default="", max_length=MAX_DESCRIPTION,
                             description="Plain text: what the requester asked and any background.")

    thread_link: str = Field(default="", max_length=2000, pattern=r"^(https?://\S+)?$",
                             description="Leave empty: the bot fills in the chat thread's link itself.")

    @field_validator("project", mode="before")
    @classmethod
    def _project(cls, v: object) -> object:
        return v.strip().upper() if isinstance(v, str) else v

    @field_validator("issue_type", "summary")
    @classmethod
    def _one_line(cls, v: str) -> str:
        v = " ".join(v.split())
        if not v:
            raise ValueError("must not be empty")
        return v
