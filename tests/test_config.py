"""The sources file (:mod:`app.config`; its sources' part :mod:`connectors.config`) and source spec strings
(:mod:`connectors.sources`).

Covers: a valid file with every source type and schedule kind; every problem of a bad file listed
with its place and what to write instead (inline secrets, unknown keys and types, bad schedules,
URLs, names, time zones, duplicate names); a missing or non-YAML file; credentials read from the
environment variables the file names, with a clear error when one is unset; spec strings for
Confluence and MediaWiki; ``CHATOPS_SOURCES`` merged with the file; and the retry policy's waits.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from app.jobs import load_sources_config, split_specs
from app.settings import Settings
from app.config import load_config, parse_config
from connectors.config import (
    ConfluenceConfig, FolderConfig, MediaWikiConfig, MissingCredentialError, SourcesConfig, parse_interval,
)
from connectors.config_file import ConfigFileError, read_config, validate_config
from connectors.factory import build_source
from connectors.confluence import ConfluenceSource
from connectors.errors import SourceSpecError
from connectors.folder import FolderSource
from connectors.http import RetryPolicy, parse_retry_after
from connectors.mediawiki import MediaWikiSource
from connectors.sources import parse_source_spec, spec_to_config

GOOD = """
scheduler:
  misfire_grace_seconds: 120
  timezone: Europe/Berlin
sources:
  - name: eng
    type: confluence
    base_url: https://acme.atlassian.net/wiki/
    spaces: [ENG, OPS]
    schedule: {interval: 30m}
  - name: dc
    type: confluence
    base_url: https://confluence.acme.com/confluence
    spaces: [HR]
    timezone: America/New_York
    auth: {token_env: DC_PAT}
    schedule: {cron: "15 * * * 1-5"}
  - name: wiki
    type: mediawiki
    api_url: https://wiki.acme.com/w/api.php
    namespaces: [0, 4]
    auth: {username_env: WIKI_USER, password_env: WIKI_PASSWORD}
  - name: handbook
    type: folder
    path: ./docs
    url_base: https://docs.acme.com/
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "chatops.yml"
    p.write_text(text, encoding="utf-8")
    return p


def test_a_valid_file_gives_typed_sources_and_triggers(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, GOOD))
    eng, dc, wiki, folder = cfg.sources
    assert isinstance(eng, ConfluenceConfig) and eng.resolved_deployment == "cloud"
    assert eng.base_url == "https://acme.atlassian.net/wiki" and eng.spaces == ["ENG", "OPS"]
    assert isinstance(dc, ConfluenceConfig) and dc.resolved_deployment == "datacenter" and dc.timezone == "America/New_York"
    assert isinstance(wiki, MediaWikiConfig) and wiki.namespaces == [0, 4]
    assert isinstance(folder, FolderConfig) and folder.schedule is None
    assert cfg.scheduler.misfire_grace_seconds == 120
    interval = eng.schedule.trigger(cfg.scheduler.timezone)
    assert isinstance(interval, IntervalTrigger) and interval.interval == timedelta(minutes=30)
    cron = dc.schedule.trigger(cfg.scheduler.timezone)
    assert isinstance(cron, CronTrigger)
    fire = cron.get_next_fire_time(None, datetime(2026, 3, 6, 10, 20, tzinfo=timezone.utc))  # a Friday
    assert fire.minute == 15 and fire.weekday() == 4
    assert cfg.missing_credentials({"CONFLUENCE_EMAIL": "a@b", "CONFLUENCE_API_TOKEN": "t", "DC_PAT": "p",
                                    "WIKI_USER": "u", "WIKI_PASSWORD": "w"}) == []
    missing = cfg.missing_credentials({})
    assert any("CONFLUENCE_API_TOKEN" in m and "'eng'" in m for m in missing)
    assert any("DC_PAT" in m for m in missing) and any("WIKI_PASSWORD" in m for m in missing)


def test_the_sources_part_reads_the_sources_alone_and_the_app_reads_the_whole_file(tmp_path: Path) -> None:
    """connectors/ validates the sources' part (``SourcesConfig``) without the app's keys; the app's model of
    the same file (``ChatopsConfig``) is that part plus its own keys, with the same sources."""
    sources_only = "\n".join(line for line in GOOD.splitlines() if not line.startswith(("scheduler", "  misfire",
                                                                                        "  timezone: Europe")))
    part = validate_config(read_config(write(tmp_path, sources_only)), SourcesConfig)
    whole = load_config(write(tmp_path, GOOD))
    assert isinstance(whole, SourcesConfig) and whole.sources == part.sources
    with pytest.raises(ConfigFileError, match=r"scheduler: unknown key"):
        validate_config(read_config(write(tmp_path, GOOD)), SourcesConfig)


def test_every_problem_of_a_bad_file_is_listed_with_its_place(tmp_path: Path) -> None:
    bad = """
sources:
  - name: eng
    type: confluence
    base_url: acme.atlassian.net
    spaces: []
    auth: {token: s3cr3t-value}
    schedule: {interval: 5 minutes}
  - name: wiki
    type: mediawiki
    api_url: https://wiki.acme.com/wiki/Main_Page
    auth: {username_env: WIKI_USER, password_env: "hunter2 hunter2"}
    refresh: daily
  - name: eng
    type: sharepoint
  - name: Bad Name
    type: folder
    path: ./x
    schedule: {cron: "every monday", interval: 1h}
  - name: tz
    type: confluence
    base_url: https://c.acme.com
    spaces: [A]
    timezone: Mars/Olympus
"""
    with pytest.raises(ConfigFileError) as info:
        load_config(write(tmp_path, bad))
    msg = str(info.value)
    for fragment in [
        "sources[0] (eng).base_url: base_url must be an http(s) URL",
        "sources[0] (eng).spaces",
        "sources[0] (eng).auth: credentials are never written in the config file (found token)",
        "token_env",
        "sources[0] (eng).schedule: interval '5 minutes' is not like 30m",
        "sources[1] (wiki).api_url: api_url must point at the Action API",
        "sources[1] (wiki).auth.password_env: password_env must be the NAME of an environment variable",
        "sources[1] (wiki).refresh: unknown key",
        "sources[2] (eng): type must be confluence, mediawiki or folder",
        "sources[3] (Bad Name).name: source name 'Bad Name' must be",
        "sources[3] (Bad Name).schedule: give exactly one of interval",
        "sources[4] (tz).timezone: unknown time zone 'Mars/Olympus'",
    ]:
        assert fragment in msg, (fragment, msg)
    assert "s3cr3t-value" not in msg and "hunter2" not in msg  # secrets are never echoed


def test_duplicate_names_and_bad_cron_are_rejected(tmp_path: Path) -> None:
    text = """
sources:
  - {name: a, type: folder, path: x}
  - {name: a, type: folder, path: y, schedule: {cron: "61 * * * *"}}
"""
    with pytest.raises(ConfigFileError) as info:
        load_config(write(tmp_path, text))
    assert "cron '61 * * * *' is not a 5-field crontab" in str(info.value)
    with pytest.raises(ConfigFileError, match="several sources are named a"):
        parse_config({"sources": [{"name": "a", "type": "folder", "path": "x"},
                                  {"name": "a", "type": "folder", "path": "y"}]})


@pytest.mark.parametrize("text, fragment", [
    ("sources: [\n  - name: a\n", "is not valid YAML"),
    ("- just a list\n", "must be a mapping with a 'sources' list"),
    ("sources:\n  - {name: a, path: x}\n", "every source needs a type"),
])
def test_unreadable_files_say_what_is_wrong(tmp_path: Path, text: str, fragment: str) -> None:
    with pytest.raises(ConfigFileError) as info:
        load_config(write(tmp_path, text))
    assert fragment in str(info.value)


def test_a_missing_file_says_how_to_fix_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigFileError) as info:
        load_config(tmp_path / "nope.yml")
    assert "not found" in str(info.value) and "CHATOPS_CONFIG" in str(info.value)


def test_credentials_come_from_the_named_environment_variables(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, GOOD))
    eng, dc, wiki, folder = cfg.sources
    with pytest.raises(MissingCredentialError) as info:
        build_source(eng, environ={"CONFLUENCE_EMAIL": "bot@acme.com"})
    assert "CONFLUENCE_API_TOKEN" in str(info.value) and "'eng'" in str(info.value) and "export" in str(info.value)
    src = build_source(eng, environ={"CONFLUENCE_EMAIL": "bot@acme.com", "CONFLUENCE_API_TOKEN": "tok"})
    assert isinstance(src, ConfluenceSource) and src.deployment == "cloud"
    assert src.http.base_url == "https://acme.atlassian.net"  # API paths carry /wiki themselves
    src.close()
    dcs = build_source(dc, environ={"DC_PAT": "pat"})
    assert dcs.http._headers["Authorization"] == "Bearer pat"
    dcs.close()
    with pytest.raises(MissingCredentialError, match="WIKI_USER"):
        build_source(wiki, environ={})
    w = build_source(wiki, environ={"WIKI_USER": "Bot@app", "WIKI_PASSWORD": "x" * 32})
    assert isinstance(w, MediaWikiSource) and w.username == "Bot@app"
    w.close()
    f = build_source(folder)
    assert isinstance(f, FolderSource) and f.name == "handbook"


def test_spec_strings_for_every_type() -> None:
    c = spec_to_config("confluence:https://acme.atlassian.net/wiki?space=ENG,OPS&space=HR&name=eng")
    assert isinstance(c, ConfluenceConfig) and c.spaces == ["ENG", "OPS", "HR"] and c.name == "eng"
    d = spec_to_config("confluence:https://c.acme.com/confluence?space=HR&deployment=datacenter&token_env=PAT&timezone=UTC")
    assert d.resolved_deployment == "datacenter" and d.auth.token_env == "PAT" and d.timezone == "UTC"
    m = spec_to_config("mediawiki:https://wiki.acme.com/w/api.php?namespaces=0,4&username_env=U&password_env=P")
    assert isinstance(m, MediaWikiConfig) and m.namespaces == [0, 4] and m.name == "mediawiki"
    assert m.auth is not None and m.auth.username_env == "U"
    src = parse_source_spec("mediawiki:https://wiki.acme.com/w/api.php")
    assert isinstance(src, MediaWikiSource)
    src.close()


@pytest.mark.parametrize("spec, fragments", [
    ("confluence:https://acme.atlassian.net/wiki", ["names no space", "?space=KEY"]),
    ("confluence:https://x/wiki?space=ENG&token=abc", ["unknown option", "token", "token_env="]),
    ("mediawiki:https://wiki.acme.com/w/api.php?namespaces=main", ["namespaces", "numbers"]),
    ("mediawiki:wiki.acme.com/api.php", ["api_url must be an http(s) URL"]),
    ("sharepoint:https://x", ["unknown source type", "confluence:URL?space=KEY", "mediawiki:API_URL"]),
])
def test_bad_specs_say_what_is_accepted(spec: str, fragments: list[str]) -> None:
    with pytest.raises(SourceSpecError) as info:
        spec_to_config(spec)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_confluence_spec_without_credentials_names_the_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONFLUENCE_TOKEN", raising=False)
    with pytest.raises(MissingCredentialError, match="CONFLUENCE_TOKEN"):
        parse_source_spec("confluence:https://c.acme.com?space=HR")


def test_chatops_sources_merge_with_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "sources:\n  - {name: docs, type: folder, path: ./docs}\n")
    s = Settings(chatops_config=path, chatops_sources="folder:./a?name=a, confluence:https://x.atlassian.net?space=A,B")
    cfg = load_sources_config(s)
    assert [x.name for x in cfg.sources] == ["docs", "a", "confluence"]
    assert cfg.sources[2].spaces == ["A", "B"]
    with pytest.raises(ConfigFileError, match="several sources are named docs"):
        load_sources_config(Settings(chatops_config=path, chatops_sources="folder:./b?name=docs"))
    assert split_specs("folder:a;folder:b?name=b folder:c") == ["folder:a", "folder:b?name=b", "folder:c"]


def test_intervals() -> None:
    assert parse_interval("1h30m") == timedelta(hours=1, minutes=30)
    assert parse_interval("45") == timedelta(minutes=45)
    assert parse_interval("1d") == timedelta(days=1)
    for bad in ("5s", "soon", "-1m"):
        with pytest.raises(ValueError):
            parse_interval(bad)


def test_retry_after_parsing_and_clamping() -> None:
    now = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after("Thu, 01 Jan 2026 12:00:30 GMT", now=now) == 30.0
    assert parse_retry_after("Thu, 01 Jan 2026 11:00:00 GMT", now=now) == 0.0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None
    policy = RetryPolicy(retry_after_min=1, retry_after_max=60, backoff_initial=2, backoff_max=10)
    assert policy.wait(1, 9223372036854775807.0) == 60
    assert policy.wait(1, 0.0) == 1
    waits = [policy.wait(n, None) for n in (1, 2, 3, 4, 5)]
    assert 1 <= waits[0] <= 2 and 2 <= waits[1] <= 4 and 4 <= waits[2] <= 8 and all(5 <= w <= 10 for w in waits[3:])
