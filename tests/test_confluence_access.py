"""Confluence's effective read access, group memberships and the permission sync (issue 11).

Against the stand-in Confluence (Cloud REST v2/v1 and Data Center REST v1 wire formats on 127.0.0.1),
real indexes, the real embedder and a real SQLite state store. Covers: the intersection rule
(:func:`connectors.confluence_access.intersect`); a space readable by a group and a user, by a public
group and anonymously; restrictions on a page and on its parent (inherited by every descendant,
intersected with the page's own); a user who hides their e-mail; group members read page by page and
stored so that ``groups_of`` matches askers; a role grant left out and an unknown principal type failing
closed; 403 and 5xx on the space permissions and on a parent's restrictions (the pages readable by
nobody, the run ok, a later permission sync resolving them); a restriction change without a new version
(missed by the incremental sync, applied by the permission sync); a user removed from a group no longer
matched after one permission sync; reads cached per run (siblings share their parent's); the permission
sync recorded as a run of mode ``permissions``, under the source's lock, and scheduled every
``permissions_interval``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.jobs import IndexJobs
from app.settings import Settings
from app.wiring import build_agent
from bot.scheduler import PERMISSIONS_PREFIX, build_scheduler, run_scheduled_permissions
from core.access import Access
from app.config import parse_config
from connectors.config_file import ConfigFileError
from connectors.confluence import ConfluenceSource
from connectors.confluence_access import Gate, intersect
from connectors.factory import build_source
from connectors.folder import FolderSource
from connectors.http import RetryPolicy
from index.sync import SyncEngine
from state import StateStore
from state.store import sqlite_url

from tests.standins.confluence import CLOUD_EMAIL, CLOUD_TOKEN, DC_TOKEN, ConfluenceStandIn

FAST = RetryPolicy(attempts=3, backoff_initial=0.01, backoff_max=0.05, retry_after_max=1.0)
DEPLOYMENTS = ["cloud", "datacenter"]


def make(s: ConfluenceStandIn, deployment: str, **overrides) -> ConfluenceSource:
    cloud = deployment == "cloud"
    entry = {"name": "eng", "type": "confluence", "base_url": s.cloud_url if cloud else s.dc_url,
             "deployment": deployment, "spaces": ["ENG", "PUB"], "page_size": 3,
             "public_groups": ["confluence-users"], **overrides}
    env = {"CONFLUENCE_EMAIL": CLOUD_EMAIL, "CONFLUENCE_API_TOKEN": CLOUD_TOKEN} if cloud else {"CONFLUENCE_TOKEN": DC_TOKEN}
    return build_source(parse_config({"sources": [entry]}).sources[0], environ=env, policy=FAST)


def g(deployment: str, name: str) -> str:
    """The principal of a stand-in group: Cloud keys groups by id (``id-<name>``), Data Center by name."""
    return f"group:eng/{'id-' if deployment == 'cloud' else ''}{name}"


def u(name: str) -> str:
    return f"user:{name}@example.com"


def seed(s: ConfluenceStandIn) -> dict[str, str]:
    """ENG: readable by the group ``staff``, the user dave and a role; PUB: by ``confluence-users`` (public).

    PUB holds a tree: ``Top`` (unrestricted) and ``Parent`` (restricted to ``hr``) with the children ``Child``
    (restricted to alice and bob) and ``Sibling`` (unrestricted), and ``Grandchild`` under ``Child``. ENG holds
    ``Open`` (unrestricted) and ``Payroll`` (restricted to ``hr``). erin hides her e-mail.
    """
    s.add_space("ENG")
    s.add_space("PUB")
    for name in ("alice", "bob", "carol", "dave", "frank"):
        s.add_user(name, f"{name.capitalize()}@Example.com")
    s.add_user("erin", None)
    s.add_group("staff", ["alice", "bob", "carol", "erin"])
    s.add_group("hr", ["alice", "carol", "erin", "frank"])
    s.grant("ENG", ("group", "staff"), ("user", "dave"), ("role", "space-admins"))
    ids = {"Top": s.add_page("PUB", "Top", "<p>The canteen opens at noon.</p>")}
    ids["Parent"] = s.add_page("PUB", "Parent", "<p>Salary bands are reviewed in March.</p>", groups=["hr"])
    ids["Child"] = s.add_page("PUB", "Child", "<p>The band of a senior engineer is B5.</p>", users=["alice", "bob"],
                              parent=ids["Parent"])
    ids["Sibling"] = s.add_page("PUB", "Sibling", "<p>Bonuses are paid in April.</p>", parent=ids["Parent"])
    ids["Grandchild"] = s.add_page("PUB", "Grandchild", "<p>B5 starts at level 7.</p>", parent=ids["Child"])
    ids["Open"] = s.add_page("ENG", "Open", "<p>The build farm has forty machines.</p>")
    ids["Payroll"] = s.add_page("ENG", "Payroll", "<p>Payroll runs on the 25th.</p>", groups=["hr"])
    return ids


def expected(deployment: str) -> dict[str, Access]:
    staff_and_hr = {u("alice"), u("carol"), "user:erin"}  # members of both; erin by id (hidden e-mail)
    return {
        "Top": Access.everyone(),
        "Parent": Access.only({g(deployment, "hr")}),
        "Sibling": Access.only({g(deployment, "hr")}),  # inherits its parent's restriction
        "Child": Access.only({u("alice")}),  # alice and bob, of whom only alice is in hr (the parent's)
        "Grandchild": Access.only({u("alice")}),  # both ancestors' restrictions
        "Open": Access.only({g(deployment, "staff"), u("dave")}),  # the space's readers (the role left out)
        "Payroll": Access.only(staff_and_hr),
    }


def access_by_title(src: ConfluenceSource) -> dict[str, Access]:
    return {d.title: d.access for d in src.scan()}


@pytest.fixture
def standin():
    with ConfluenceStandIn() as s:
        yield s


@pytest.fixture
def store(tmp_path: Path):
    st = StateStore(sqlite_url(tmp_path / "state.sqlite"))
    yield st
    st.close()


class Spy:
    """Records ``set_access`` calls on an index, then does them."""

    def __init__(self, index) -> None:
        self.calls: list[tuple[str, str, Access]] = []
        self._orig = index.set_access
        index.set_access = self

    def __call__(self, source: str, doc_id: str, access: Access) -> int:
        self.calls.append((source, doc_id, access))
        return self._orig(source, doc_id, access)

    def last(self) -> dict[str, Access]:
        return {doc_id: access for _, doc_id, access in self.calls}


# -- the rule -------------------------------------------------------------------------------------------

def test_the_intersection_keeps_exactly_who_passes_both_gates() -> None:
    members = {"hr": frozenset({"user:a", "user:c"}), "eng": frozenset({"user:a", "user:b"}),
               "ops": frozenset({"user:d"})}.get
    m = lambda k: members(k) or frozenset()  # noqa: E731 - a tiny lookup
    everyone = Gate(everyone=True)
    hr = Gate(groups=frozenset({"hr"}))
    # Everyone changes nothing, in either order.
    assert intersect(everyone, hr, m) == hr and intersect(hr, everyone, m) == hr
    # A group both name stays a group.
    assert intersect(Gate(groups=frozenset({"hr", "ops"})), Gate(groups=frozenset({"hr"})), m) == hr
    # Users on one side, a group on the other: the users who are members.
    assert intersect(Gate(users=frozenset({"user:a", "user:b"})), hr, m) == Gate(users=frozenset({"user:a"}))
    # Two different groups: their common members, one by one (never either group as a whole).
    assert intersect(hr, Gate(groups=frozenset({"eng"})), m) == Gate(users=frozenset({"user:a"}))
    # Nobody in common: nobody.
    assert intersect(hr, Gate(groups=frozenset({"ops"})), m) == Gate()
    # A group whose members could not be read (empty) only narrows.
    assert intersect(Gate(groups=frozenset({"unknown"})), hr, m) == Gate()


# -- resolving access -------------------------------------------------------------------------------------

@pytest.mark.parametrize("deployment", DEPLOYMENTS)
def test_space_permission_and_restrictions_of_the_page_and_its_ancestors(standin, deployment, index_factory,
                                                                         store) -> None:
    seed(standin)
    src = make(standin, deployment)
    assert access_by_title(src) == expected(deployment)
    assert src.access.stats["hidden_emails"] >= 1 and src.access.stats["roles_skipped"] == 1
    assert src.access.stats["unresolved"] == 0

    # The sync stores the members of the groups the pages and spaces name (hidden e-mails left out),
    # read page by page (two members a page here).
    res = SyncEngine(index_factory(), store).run(make(standin, deployment))
    assert res.status == "ok", res.error
    assert store.group_members_of("eng", g(deployment, "staff").split("/", 1)[1]) == \
        {"alice@example.com", "bob@example.com", "carol@example.com"}
    assert store.groups_of("frank@example.com") == {g(deployment, "hr")}
    assert store.groups_of("alice@example.com") == {g(deployment, "hr"), g(deployment, "staff")}
    member_path = "/membersByGroupId" if deployment == "cloud" else "/group/hr/member"
    assert standin.count(member_path) >= 2


@pytest.mark.parametrize("deployment", DEPLOYMENTS)
def test_anonymous_access_makes_a_space_public_and_without_public_groups_nothing_is(standin, deployment) -> None:
    seed(standin)
    standin.grant("ENG", ("anonymous", ""), ("group", "staff"))
    got = access_by_title(make(standin, deployment))
    assert got["Open"] == Access.everyone() and got["Payroll"] == Access.only({g(deployment, "hr")})
    # No public_groups: confluence-users is a group like another (its members are whom it names).
    standin.add_group("confluence-users", ["bob"])
    got = access_by_title(make(standin, deployment, public_groups=[]))
    assert got["Top"] == Access.only({g(deployment, "confluence-users")})
    assert got["Child"] == Access.nobody(got["Child"].unresolved) and not got["Child"].resolved  # alice not in both


@pytest.mark.parametrize("deployment", DEPLOYMENTS)
def test_an_unknown_principal_type_fails_closed(standin, deployment) -> None:
    seed(standin)
    standin.grant("ENG", ("group", "staff"), ("app", "some-bot"))
    got = access_by_title(make(standin, deployment))
    assert not got["Open"].resolved and not got["Payroll"].resolved
    assert "unknown type" in got["Open"].unresolved
    assert got["Top"] == Access.everyone()  # the other space is not affected


@pytest.mark.parametrize("status", [403, 503])
@pytest.mark.parametrize("deployment", DEPLOYMENTS)
def test_unreadable_space_permissions_leave_the_space_readable_by_nobody(standin, deployment, status,
                                                                         index_factory, store) -> None:
    seed(standin)
    path = (rf"/wiki/api/v2/spaces/{standin.spaces['ENG']}/permissions" if deployment == "cloud"
            else r"/rest/api/space/ENG/permissions")
    standin.fail(path, status, times=100)
    index = index_factory()
    res = SyncEngine(index, store).run(make(standin, deployment))
    assert res.status == "ok", res.error  # the run goes on: the pages are indexed, readable by nobody
    assert res.summary.added == 7
    got = access_by_title(make(standin, deployment))
    assert not got["Open"].resolved and not got["Payroll"].resolved and str(status) in got["Open"].unresolved
    assert got["Top"] == Access.everyone()
    # Cached per run, failure included: the space is asked once per run (times the retries of a 5xx).
    standin.clear_faults()
    spy = Spy(index)
    res = SyncEngine(index, store).run_permissions(make(standin, deployment))
    assert res.status == "ok" and res.summary.mode == "permissions"
    assert {d: a for d, a in spy.last().items() if not a.resolved} == {}


@pytest.mark.parametrize("deployment", DEPLOYMENTS)
def test_a_parent_whose_restrictions_cannot_be_read_closes_its_descendants(standin, deployment, index_factory,
                                                                            store) -> None:
    ids = seed(standin)
    index = index_factory()
    engine = SyncEngine(index, store)
    assert engine.run(make(standin, deployment)).status == "ok"
    standin.edit_page(ids["Grandchild"], body="<p>B5 starts at level 8.</p>")
    # The incremental sync fetches only the Grandchild; its ancestors' restrictions are read for it.
    parent_read = (rf"/content/{ids['Parent']}/restriction" if deployment == "cloud"
                   else rf"/rest/api/content/{ids['Parent']}\?")
    standin.fail(parent_read, 403, times=100)
    src = make(standin, deployment)
    res = engine.run(src)
    assert res.status == "ok" and res.summary.updated == 1, res
    [doc] = [d for d in _fetched(src, ids["Grandchild"])]
    assert not doc.access.resolved and "403" in doc.access.unresolved
    # A later permission sync resolves it.
    standin.clear_faults()
    spy = Spy(index)
    assert engine.run_permissions(make(standin, deployment)).status == "ok"
    assert spy.last()[f"page/{ids['Grandchild']}"] == Access.only({u("alice")})


def _fetched(src: ConfluenceSource, pid: str) -> list:
    src.access.reset()
    return [src.pages.fetch(pid)]


# -- the permission sync ------------------------------------------------------------------------------------

@pytest.mark.parametrize("deployment", DEPLOYMENTS)
def test_a_restriction_change_without_a_new_version_is_applied_by_the_permission_sync(standin, deployment,
                                                                                      index_factory, store) -> None:
    ids = seed(standin)
    index = index_factory()
    engine = SyncEngine(index, store)
    assert engine.run(make(standin, deployment)).status == "ok"
    version = standin.pages[ids["Top"]].version
    standin.restrict(ids["Top"], groups=["hr"])
    assert standin.pages[ids["Top"]].version == version  # Confluence does not bump the version
    spy = Spy(index)
    before = len(standin.requests)
    res = engine.run(make(standin, deployment))
    assert res.status == "ok" and res.summary.updated == 0 and res.summary.fetched == 0  # the sync cannot see it
    assert spy.calls == [] and len(standin.requests) > before

    res = engine.run_permissions(make(standin, deployment))
    assert res.status == "ok", res.error
    s = res.summary
    assert (s.mode, s.pages, s.skipped, s.errors) == ("permissions", 7, 0, [])
    assert s.updated + s.unchanged == 7 and s.calls > 0
    got = spy.last()
    assert got[f"page/{ids['Top']}"] == Access.only({g(deployment, "hr")})
    assert {k: got[f"page/{ids[k]}"] for k in expected(deployment) if k != "Top"} == \
        {k: v for k, v in expected(deployment).items() if k != "Top"}
    # Recorded as a run, so status shows it.
    [last] = store.last_runs("eng", limit=1)
    assert last.status == "ok" and last.summary["mode"] == "permissions"


@pytest.mark.parametrize("deployment", DEPLOYMENTS)
def test_a_user_removed_from_a_group_stops_matching_after_one_permission_sync(standin, deployment, index_factory,
                                                                              store) -> None:
    seed(standin)
    index = index_factory()
    engine = SyncEngine(index, store)
    assert engine.run(make(standin, deployment)).status == "ok"
    assert g(deployment, "hr") in store.groups_of("frank@example.com")
    standin.add_group("hr", ["alice", "carol", "erin"])  # frank leaves hr
    assert engine.run_permissions(make(standin, deployment)).status == "ok"
    assert g(deployment, "hr") not in store.groups_of("frank@example.com")
    assert g(deployment, "hr") in store.groups_of("carol@example.com")


def test_the_permission_sync_takes_the_source_lock_and_refuses_other_sources(standin, index_factory, store,
                                                                             tmp_path) -> None:
    seed(standin)
    engine = SyncEngine(index_factory(), store)
    assert store.acquire_lock(engine.lock_name("eng"), "someone-else:1:x")
    res = engine.run_permissions(make(standin, "cloud"))
    assert res.status == "busy" and "already running" in res.error
    store.release_lock(engine.lock_name("eng"), "someone-else:1:x")
    (tmp_path / "docs").mkdir()
    res = engine.run_permissions(FolderSource(tmp_path / "docs", name="docs"))
    assert res.status == "failed" and "no per-page permissions" in res.error
    assert store.last_runs("docs", limit=1)[0].summary["mode"] == "permissions"


def test_reads_are_cached_per_run_so_siblings_share_their_parent(standin, index_factory, store) -> None:
    standin.add_space("PUB")
    parent = standin.add_page("PUB", "Parent", "<p>Team pages.</p>", groups=["hr"])
    kids = [standin.add_page("PUB", f"Kid {i}", f"<p>Page number {i} of the team.</p>", parent=parent)
            for i in range(6)]
    standin.add_group("hr", ["alice"])
    standin.add_user("alice", "alice@example.com")
    src = make(standin, "cloud", spaces=["PUB"])
    docs = {d.title: d.access for d in src.scan()}
    assert set(docs.values()) == {Access.only({"group:eng/id-hr"})}
    stats = src.access.stats
    # One restriction read per page (the parent's is shared by its six children), no ancestor read (the
    # parent chain is known from the listing), one read of the space's permissions.
    assert (stats["restrictions"], stats["ancestors"], stats["space_permissions"]) == (7, 0, 1), stats
    assert standin.count(rf"/content/{parent}/restriction") == 1 and len(kids) == 6


# -- settings and the schedule ------------------------------------------------------------------------------

def test_public_groups_and_permissions_interval_settings() -> None:
    base = {"name": "eng", "type": "confluence", "base_url": "https://acme.atlassian.net/wiki", "spaces": ["ENG"]}
    cfg = parse_config({"sources": [base]}).sources[0]
    assert cfg.public_groups == [] and cfg.permissions_interval == "1h" and cfg.permissions_every().total_seconds() == 3600
    cfg = parse_config({"sources": [{**base, "public_groups": ["confluence-users", "staff"],
                                     "permissions_interval": "15m"}]}).sources[0]
    assert cfg.public_groups == ["confluence-users", "staff"] and cfg.permissions_every().total_seconds() == 900
    assert parse_config({"sources": [{**base, "permissions_interval": "off"}]}).sources[0].permissions_every() is None
    with pytest.raises(ConfigFileError, match="permissions_interval"):
        parse_config({"sources": [{**base, "permissions_interval": "soon"}]})
    with pytest.raises(ConfigFileError, match="public_groups"):
        parse_config({"sources": [{**base, "public_groups": [" "]}]})


def test_the_scheduler_runs_a_permission_sync_per_confluence_source(standin, tmp_path, index_factory, store,
                                                                    monkeypatch) -> None:
    seed(standin)
    monkeypatch.setenv("CONFLUENCE_TOKEN", DC_TOKEN)
    cfg = tmp_path / "chatops.yml"
    cfg.write_text(f"""sources:
  - {{name: eng, type: confluence, deployment: datacenter, base_url: '{standin.dc_url}', spaces: [ENG, PUB],
      public_groups: [confluence-users], schedule: {{interval: 30m}}}}
  - {{name: quiet, type: confluence, deployment: datacenter, base_url: '{standin.dc_url}', spaces: [PUB],
      permissions_interval: 'off'}}
""", encoding="utf-8")
    settings = Settings(chatops_data_dir=tmp_path / "data", chatops_config=cfg, chatops_sync_interval="off")
    jobs = IndexJobs.from_settings(build_agent(settings, index=index_factory()), store, settings)
    try:
        sched = build_scheduler(jobs)
        by_id = {j.id: j for j in sched.get_jobs()}
        assert set(by_id) == {"sync:eng", PERMISSIONS_PREFIX + "eng"}
        job = by_id[PERMISSIONS_PREFIX + "eng"]
        assert job.trigger.interval.total_seconds() == 3600 and (job.max_instances, job.coalesce) == (1, True)
        assert set(jobs.next_runs()) == {"eng"}  # the content sync's next run is what status shows
        assert jobs.run("eng")[0].status == "ok"

        async def main() -> str:
            return await asyncio.get_running_loop().run_in_executor(None, run_scheduled_permissions, jobs, "eng")

        assert asyncio.run(main()) == "ok"
        assert store.last_runs("eng", limit=1)[0].summary["mode"] == "permissions"
        assert jobs.run_permissions("nope").status == "unknown"
    finally:
        jobs.close()
