"""The admin service's own promises, with a real SQLite state store (the platforms' tests, ``test_slack_app``
and ``test_teams``, cover status, sources and re-index end to end through Slack and Teams):

- a status that cannot be read is ``failed``, audited, and told as "couldn't read", not raised;
- without index jobs every command says no sources are configured, and a re-index is ``invalid``;
- permission is checked inside the service: a non-admin's re-index is ``denied`` and audited, and
  :meth:`run_reindex` refuses to run anything that was not accepted for an admin.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.admin import AUDIT_REINDEX, AUDIT_STATUS, AdminResult, AdminService
from app.inbound import InboundMessage
from state import StateStore


class BrokenJobs:
    """Index jobs whose status read fails (a damaged manifest, say)."""

    def names(self) -> list[str]:
        return ["wiki"]

    def status(self) -> list[dict]:
        raise OSError("manifest unreadable")


@pytest.fixture
def store(tmp_path: Path):
    s = StateStore(f"sqlite:///{tmp_path / 'state.sqlite'}")
    yield s
    s.close()


def msg(is_admin: bool, platform: str = "teams") -> InboundMessage:
    return InboundMessage(platform=platform, text="reindex wiki", user_id="admin-1" if is_admin else "user-1",
                          channel_id="a:chat", is_admin=is_admin)


def test_an_unreadable_status_is_failed_audited_and_told_plainly(store: StateStore) -> None:
    service = AdminService(BrokenJobs(), store)  # type: ignore[arg-type]
    result = asyncio.run(service.status(msg(False)))
    assert result.outcome == "failed" and "OSError" in result.error
    assert result.text == "Sorry, I couldn't read the status right now."
    [entry] = store.audit_entries(action=AUDIT_STATUS)
    assert (entry.actor, entry.platform, entry.outcome) == ("user-1", "teams", "failed")


def test_without_jobs_nothing_is_configured(store: StateStore) -> None:
    service = AdminService(None, store)
    assert asyncio.run(service.status(msg(False))).text == "No sources are configured."
    assert asyncio.run(service.sources(msg(False))).text == "No sources are configured."
    started = asyncio.run(service.request_reindex(msg(True), None))
    assert started.outcome == "invalid" and started.text.startswith("No sources are configured.")


def test_permission_is_the_services(store: StateStore) -> None:
    service = AdminService(BrokenJobs(), store)  # type: ignore[arg-type]
    denied = asyncio.run(service.request_reindex(msg(False, "slack"), "wiki", full=True))
    assert denied.outcome == "denied" and "only admins" in denied.text
    [entry] = store.audit_entries(action=AUDIT_REINDEX)
    assert (entry.actor, entry.platform, entry.target, entry.outcome) == ("user-1", "slack", "wiki", "denied")
    assert entry.detail["full"] is True
    forged = AdminResult("reindex", "started", source="wiki")
    with pytest.raises(ValueError):
        asyncio.run(service.run_reindex(msg(False), forged))  # accepted for someone who is not an admin
    with pytest.raises(ValueError):
        asyncio.run(service.run_reindex(msg(True), denied))  # not accepted at all
