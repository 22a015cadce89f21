"""``chatops mcp`` (issue 28): the knowledge base for AI assistants over the Model Context Protocol.

Driven with the MCP SDK's own client (``mcp.Client``) against real ``chatops mcp`` subprocesses over
tests/acl_corpus (the permission fixture of tests/test_access_cli.py: a public handbook and an HR folder that
only the static group ``hr``, i.e. hana@example.com, may read), with real Whoosh, Qdrant (local) and SQLite:

- over stdio (``--as EMAIL``) and over Streamable HTTP (``--http``, a bearer token per person): the restricted
  page reaches its reader through ``search`` and ``ask`` and never anyone else (no passage, citation, title or
  figure of it); the answer's citations validate (every marker has a citation, every quote is a verbatim span of
  the cited page); a near miss is refused naming the closest page; an action request is not proposed;
- HTTP without a token, with an unknown one or a revoked one gets 401 and no content (a token revoked during a
  session stops working at its next request);
- a malformed or huge request gets a protocol error (HTTP 400 parse error, 413) or a tool error, and the server
  keeps serving; a garbage line over stdio is skipped and the session goes on;
- every call is audited and counted in the metrics as platform ``mcp``; ``ask`` goes to the turn log;
- ``chatops mcp token create|list|revoke`` keep only the token's digest; bad usage is one line, exit 2.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from state import StateStore

from tests.helpers import ROOT, chatops_command, cli_environment, run_chatops, indexed_data_dir, wait_for

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

CORPUS = ROOT / "tests" / "acl_corpus"
CONFIG = str(CORPUS / "chatops.yml")
SOURCES = [f"folder:{CORPUS / 'handbook'}?name=handbook", f"folder:{CORPUS / 'hr'}?name=hr&audience=hr"]
RESTRICTED = "The salary band for a senior engineer at Quillfeather is 98,000"
QUESTION = "what is the salary band for a senior engineer?"
NEAR_MISS = "how many sick days do employees get per year?"
ACTION = "book a meeting called Sync with bob@example.com tomorrow at 3pm"
HR_MARKS = ("salary-bands", "Salary bands", "98,000", "121,000", "Radford")


@pytest.fixture(scope="module")
def acl_data(tmp_path_factory: pytest.TempPathFactory, embedding_cache_dir: Path) -> Path:
    return indexed_data_dir(tmp_path_factory.mktemp("mcp") / "data", embedding_cache_dir / "embeddings.sqlite",
                            *SOURCES, cwd=ROOT, CHATOPS_CONFIG=CONFIG)


def _env(data: Path) -> dict[str, str]:
    return cli_environment(data, CHATOPS_CONFIG=CONFIG, CHATOPS_LOG_LEVEL="WARNING")


def _leaks(obj) -> list[str]:
    text = json.dumps(obj, ensure_ascii=False)
    return [m for m in HR_MARKS if m in text]


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _check_citations(answer: dict) -> None:
    """Every ``[n]`` marker has a citation, and every citation's quote is a verbatim span of its page."""
    markers = {int(n) for n in re.findall(r"\[(\d+)\]", answer["text"])}
    numbers = {c["n"] for c in answer["citations"]}
    assert markers and markers <= numbers, answer
    pages = {p.name: _squash(p.read_text()) for p in CORPUS.rglob("*.md")}
    for c in answer["citations"]:
        assert c["quote"] and _squash(c["quote"]) in pages[c["doc_id"]], c
        assert c["url"].endswith(f"{c['doc_id']}#" + c["url"].rsplit("#", 1)[-1]) and c["title"], c


async def _session(client: Client) -> dict:
    """The calls every caller makes, their structured results by name."""
    out: dict = {"tools": sorted(t.name for t in (await client.list_tools()).tools)}
    out["search"] = (await client.call_tool("search", {"query": "salary band senior engineer", "limit": 5})).structured_content
    out["ask"] = (await client.call_tool("ask", {"question": QUESTION})).structured_content
    out["near_miss"] = (await client.call_tool("ask", {"question": NEAR_MISS})).structured_content
    out["action"] = (await client.call_tool("ask", {"question": ACTION})).structured_content
    res = await client.read_resource("chatops://sources")
    out["sources"] = json.loads(res.contents[0].text)
    bad = await client.call_tool("search", {"query": "x" * 5000})
    out["too_long"] = (bad.is_error, bad.content[0].text)
    wrong = await client.call_tool("search", {"query": 42})
    out["wrong_type"] = (wrong.is_error, wrong.content[0].text)
    out["after"] = (await client.call_tool("search", {"query": "vacation days", "limit": 2})).structured_content
    return out


def _stdio(data: Path, email: str) -> dict:
    cmd = chatops_command()
    params = StdioServerParameters(command=cmd[0], args=[*cmd[1:], "mcp", "--as", email], env=_env(data), cwd=str(ROOT))

    async def go() -> dict:
        async with Client(params, read_timeout_seconds=240) as client:
            return await _session(client)

    return asyncio.run(go())


@pytest.fixture(scope="module")
def stdio_results(acl_data: Path) -> dict[str, dict]:
    return {email: _stdio(acl_data, email) for email in ("hana@example.com", "bob@example.com")}


def _assert_reader_and_others(results: dict[str, dict]) -> None:
    hana, bob = results["hana@example.com"], results["bob@example.com"]
    assert hana["tools"] == ["ask", "search"] == bob["tools"]  # no action tool
    top = hana["search"]["passages"][0]
    assert top["doc_id"] == "salary-bands.md" and top["title"] == "Salary bands", top
    assert top["section"] == "Engineering salary bands" and top["url"].endswith("salary-bands.md#engineering-salary-bands")
    assert top["updated_at"] and RESTRICTED in top["quote"] and top["rank"] == 1
    assert not hana["ask"]["refused"] and "98,000" in hana["ask"]["text"]
    assert "salary-bands.md" in {c["doc_id"] for c in hana["ask"]["citations"]}
    _check_citations(hana["ask"])
    assert bob["search"]["passages"] and not _leaks(bob["search"]), bob["search"]  # public passages only
    assert bob["ask"]["refused"] and not bob["ask"]["citations"] and not _leaks(bob["ask"]), bob["ask"]
    assert "closest page" in bob["ask"]["text"]


def test_stdio_the_restricted_page_reaches_its_reader_and_nobody_else(stdio_results: dict) -> None:
    _assert_reader_and_others(stdio_results)


def test_stdio_near_misses_are_refused_with_the_closest_page_and_actions_are_not_proposed(
        stdio_results: dict, acl_data: Path) -> None:
    for who in stdio_results.values():
        miss = who["near_miss"]
        assert miss["refused"] and not miss["citations"] and "Vacation policy" in miss["text"], miss
        assert who["action"]["route"] == "action" and "read-only" in who["action"]["text"]
    store = StateStore(f"sqlite:///{acl_data / 'state.sqlite'}")
    try:
        assert store.pending_counts().get("pending", 0) == 0  # nothing was proposed
    finally:
        store.close()


def test_stdio_bad_arguments_are_tool_errors_and_the_session_goes_on(stdio_results: dict) -> None:
    for who in stdio_results.values():
        assert who["too_long"][0] and "shorten it to 4,000" in who["too_long"][1]
        assert who["wrong_type"][0] and "query" in who["wrong_type"][1]
        assert who["after"]["passages"][0]["doc_id"] == "vacation.md"
        assert [s["name"] for s in who["sources"]["sources"]] == ["handbook", "hr"]
        assert all(s["last_indexed_at"] and s["age_seconds"] >= 0 for s in who["sources"]["sources"])


def test_stdio_skips_a_garbage_line_and_keeps_serving(acl_data: Path) -> None:
    proc = subprocess.Popen([*chatops_command(), "mcp", "--as", "bob@example.com"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=_env(acl_data))

    def send(obj) -> None:
        assert proc.stdin is not None
        proc.stdin.write((obj if isinstance(obj, str) else json.dumps(obj)) + "\n")
        proc.stdin.flush()

    try:
        send("{this is not json")
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": HANDSHAKE_PROTOCOL_VERSIONS[-1], "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())
        assert first["id"] == 1 and "result" in first, first
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "search", "arguments": {"query": "vacation days", "limit": 1}}})
        second = json.loads(proc.stdout.readline())
        assert second["id"] == 2 and second["result"]["structuredContent"]["passages"][0]["doc_id"] == "vacation.md"
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(60) == 0
    err = proc.stderr.read() if proc.stderr else ""
    assert "Traceback" not in err, err


# -- Streamable HTTP ---------------------------------------------------------------------------------------
def _token(data: Path, email: str) -> dict:
    proc = run_chatops(["mcp", "token", "create", "--user", email, "--label", "test", "--json"], data, cwd=ROOT,
                       CHATOPS_CONFIG=CONFIG)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


class HttpServer:
    """``chatops mcp --http --port 0`` in a subprocess; ``url`` read from its start-up line."""

    def __init__(self, data: Path, log: Path) -> None:
        self.log_path = log
        with open(log, "w") as out:
            self.proc = subprocess.Popen([*chatops_command(), "mcp", "--http", "--port", "0"], cwd=ROOT,
                                         env=_env(data), stdout=out, stderr=subprocess.STDOUT)
        found = wait_for(lambda: re.search(r"on (http://127\.0\.0\.1:\d+)/mcp", self.log()) or self.proc.poll() is not None,
                         120, "the MCP server's start-up line")
        assert self.proc.poll() is None, self.log()
        self.base = found.group(1)
        self.url = self.base + "/mcp"

    def log(self) -> str:
        return self.log_path.read_text()


@pytest.fixture(scope="module")
def http_server(acl_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    server = HttpServer(acl_data, tmp_path_factory.mktemp("mcp-http") / "server.log")
    yield server
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(30) == 0, server.log()


def _http(url: str, token: str, work, statuses: list[int] | None = None) -> object:
    """Run ``work(client)`` in a session of the SDK's client with ``token``; ``statuses`` collects the HTTP
    status of every response the client received."""
    async def seen(response) -> None:
        if statuses is not None:
            statuses.append(response.status_code)

    async def go():
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=240,
                                      event_hooks={"response": [seen]}) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                return await work(client)

    return asyncio.run(go())


@pytest.fixture(scope="module")
def http_results(acl_data: Path, http_server: HttpServer) -> dict[str, dict]:
    tokens = {email: _token(acl_data, email) for email in ("hana@example.com", "bob@example.com")}
    out = {email: _http(http_server.url, t["token"], _session) for email, t in tokens.items()}
    out["_tokens"] = tokens
    return out


def test_http_the_restricted_page_reaches_its_reader_and_nobody_else(http_results: dict) -> None:
    _assert_reader_and_others(http_results)
    assert http_results["bob@example.com"]["near_miss"]["refused"]


def _raw(url: str, headers: dict[str, str], body: bytes | None = None) -> httpx2.Response:
    payload = body if body is not None else json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "search", "arguments": {"query": "salary band"}}}).encode()
    return httpx2.post(url, content=payload, timeout=60, headers={
        "Accept": "application/json, text/event-stream", "Content-Type": "application/json",
        "MCP-Protocol-Version": HANDSHAKE_PROTOCOL_VERSIONS[-1], **headers})


def test_http_without_a_valid_token_is_401_and_no_content(acl_data: Path, http_server: HttpServer,
                                                           http_results: dict) -> None:
    revoked = _token(acl_data, "hana@example.com")
    proc = run_chatops(["mcp", "token", "revoke", revoked["id"]], acl_data, cwd=ROOT, CHATOPS_CONFIG=CONFIG)
    assert proc.returncode == 0 and f"revoked {revoked['id']}" in proc.stdout, proc.stderr
    for headers in ({}, {"Authorization": "Bearer chatops_unknown-token"}, {"Authorization": "Basic aGFuYTpwdw=="},
                    {"Authorization": f"Bearer {revoked['token']}"}, {"Authorization": "Bearer " + "x" * 5000}):
        resp = _raw(http_server.url, headers)
        assert resp.status_code == 401, (headers, resp.text)
        assert resp.headers["www-authenticate"].startswith('Bearer error="invalid_token"')
        assert not _leaks(resp.text) and "passages" not in resp.text and "Vacation" not in resp.text
    statuses: list[int] = []
    try:  # the SDK's own client cannot even open a session
        opened = _http(http_server.url, revoked["token"], lambda c: c.list_tools(), statuses)
    except Exception as exc:  # noqa: BLE001 - the SDK reports the 401 as an error response of its transport
        opened = exc
    assert isinstance(opened, Exception) and statuses and set(statuses) == {401}, (repr(opened), statuses)


def test_http_a_token_revoked_during_a_session_stops_at_the_next_request(acl_data: Path, http_server: HttpServer) -> None:
    issued = _token(acl_data, "hana@example.com")

    async def work(client: Client):
        first = await client.call_tool("search", {"query": "salary band", "limit": 1})
        assert first.structured_content["passages"][0]["doc_id"] == "salary-bands.md"
        proc = await asyncio.to_thread(run_chatops, ["mcp", "token", "revoke", issued["id"]], acl_data, ROOT, 120,
                                       CHATOPS_CONFIG=CONFIG)
        assert proc.returncode == 0, proc.stderr
        try:
            second = await client.call_tool("search", {"query": "salary band", "limit": 1})
        except Exception as exc:  # noqa: BLE001 - the transport reports the 401
            return repr(exc)
        return second

    statuses: list[int] = []
    outcome = _http(http_server.url, issued["token"], work, statuses)
    assert isinstance(outcome, str) or outcome.is_error, outcome  # type: ignore[union-attr]
    assert statuses[-1] == 401 and 200 in statuses, statuses
    assert not _leaks(outcome if isinstance(outcome, str) else outcome.model_dump())  # type: ignore[union-attr]


def test_http_malformed_and_huge_requests_get_protocol_errors_and_it_keeps_serving(
        http_server: HttpServer, http_results: dict) -> None:
    token = http_results["_tokens"]["bob@example.com"]["token"]
    auth = {"Authorization": f"Bearer {token}"}
    bad = _raw(http_server.url, auth, b"{this is not json")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == -32700, bad.text
    huge = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "ask", "arguments": {"question": "a" * 400_000}}}).encode()
    too_big = _raw(http_server.url, auth, huge)
    assert too_big.status_code == 413, too_big.text
    wrong = _raw(http_server.url, auth, b'{"jsonrpc": "2.0", "id": 7, "method": 12}')
    assert wrong.status_code == 400 and "error" in wrong.json(), wrong.text
    rebound = _raw(http_server.url, {**auth, "Host": "chatops.attacker.test"})  # DNS rebinding: not a loopback name
    assert rebound.status_code in (400, 403, 421) and "passages" not in rebound.text, (rebound.status_code, rebound.text)
    assert httpx2.get(http_server.base + "/healthz", timeout=10).json() == {"status": "ok"}
    after = _http(http_server.url, token, lambda c: c.call_tool("search", {"query": "vacation days", "limit": 1}))
    assert after.structured_content["passages"][0]["doc_id"] == "vacation.md"  # type: ignore[union-attr]
    assert "Traceback" not in http_server.log(), http_server.log()[-3000:]


def test_every_call_is_audited_counted_and_asked_questions_are_in_the_turn_log(
        stdio_results: dict, acl_data: Path, http_server: HttpServer, http_results: dict) -> None:
    revoked = _token(acl_data, "bob@example.com")
    assert run_chatops(["mcp", "token", "revoke", revoked["id"]], acl_data, cwd=ROOT).returncode == 0
    assert _raw(http_server.url, {"Authorization": f"Bearer {revoked['token']}"}).status_code == 401
    store = StateStore(f"sqlite:///{acl_data / 'state.sqlite'}")
    try:
        entries = store.audit_entries(limit=500)
        turns = store.turn_records()
    finally:
        store.close()
    mcp = [e for e in entries if e.platform == "mcp"]
    hana_id = http_results["_tokens"]["hana@example.com"]["id"]
    asks = [e for e in mcp if e.action == "mcp.ask" and e.actor == "mcp:hana@example.com"]
    assert {e.detail["transport"] for e in asks} == {"stdio", "http"}
    assert any(e.detail.get("token") == hana_id and e.outcome == "ok" for e in asks)
    assert {e.action for e in mcp} >= {"mcp.search", "mcp.ask", "mcp.sources", "mcp.auth"}
    assert any(e.action == "mcp.search" and e.outcome == "invalid" for e in mcp)
    assert any(e.action == "mcp.auth" and e.outcome == "denied" for e in mcp)  # the revoked token
    assert all(QUESTION not in json.dumps(e.detail) for e in mcp)  # the audit keeps no question
    assert any(t.platform == "mcp" and t.question == QUESTION and t.user_id == "mcp:hana@example.com" for t in turns)
    metrics = httpx2.get(http_server.base + "/metrics", timeout=10).text
    assert re.search(r'chatops_turns_total\{outcome="answered",platform="mcp",route="knowledge"\} [1-9]', metrics)
    assert re.search(r'chatops_turns_total\{outcome="refused",platform="mcp",route="knowledge"\} [1-9]', metrics)
    assert re.search(r'chatops_turns_total\{outcome="answered",platform="mcp",route="search"\} [1-9]', metrics)


def test_forgetting_an_assistant_user_deletes_their_questions_and_tokens_and_hides_them_in_the_audit(
        acl_data: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    src, dst = sqlite3.connect(acl_data / "state.sqlite"), sqlite3.connect(data / "state.sqlite")
    try:
        src.backup(dst)  # a copy (WAL included): the module's database stays as it is
    finally:
        src.close()
        dst.close()
    store = StateStore(f"sqlite:///{data / 'state.sqlite'}")
    try:
        before = [t for t in store.turn_records() if t.user_id == "mcp:hana@example.com"]
        tokens = store.mcp_tokens_list("hana@example.com")
    finally:
        store.close()
    assert before and tokens
    proc = run_chatops(["forget", "--user", "mcp:hana@example.com", "--yes", "--json"], data, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["deleted"]["turn_log"] == len(before) and out["deleted"]["mcp_tokens"] == len(tokens)
    assert out["audit_pseudonymised"] > 0
    store = StateStore(f"sqlite:///{data / 'state.sqlite'}")
    try:
        assert not store.mcp_tokens_list("hana@example.com")
        assert not [t for t in store.turn_records() if t.user_id == "mcp:hana@example.com"]
        assert not [e for e in store.audit_entries(limit=1000) if "mcp:hana@example.com" in (e.actor + json.dumps(e.detail))]
    finally:
        store.close()


def test_token_commands_keep_only_the_digest(acl_data: Path) -> None:
    issued = run_chatops(["mcp", "token", "create", "--user", "Carol@Example.com"], acl_data, cwd=ROOT)
    assert issued.returncode == 0, issued.stderr
    token = issued.stdout.strip()
    assert token.startswith("chatops_") and len(token) > 40 and "not shown again" in issued.stderr
    listed = run_chatops(["mcp", "token", "list", "--user", "carol@example.com", "--json"], acl_data, cwd=ROOT)
    rows = json.loads(listed.stdout)
    assert [r["user"] for r in rows] == ["carol@example.com"] and rows[0]["state"] == "active"
    assert token not in listed.stdout
    db = sqlite3.connect(acl_data / "state.sqlite")
    try:
        dump = "\n".join(db.iterdump())
    finally:
        db.close()
    assert token not in dump and token[8:] not in dump
    table = run_chatops(["mcp", "token", "list"], acl_data, cwd=ROOT)
    assert rows[0]["id"] in table.stdout and "carol@example.com" in table.stdout
    for args, message in ((["mcp", "token", "revoke", "nosuchid"], "no MCP token has the id"),
                          (["mcp", "token", "create"], "name the person"),
                          (["mcp", "token", "create", "--user", "carol"], "needs the person's e-mail"),
                          (["mcp"], "add --as EMAIL"),
                          (["mcp", "--as", "hana"], "--as needs an e-mail address"),
                          (["mcp", "--http", "--as", "hana@example.com"], "--as is for stdio")):
        proc = run_chatops(args, acl_data, cwd=ROOT)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, (args, proc.stderr)
        assert message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_without_the_mcp_extra_chatops_mcp_says_how_to_install_it(tmp_path: Path) -> None:
    site = tmp_path / "hide"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['mcp'] = None\n")
    proc = run_chatops(["mcp", "--as", "hana@example.com"], tmp_path / "data", cwd=tmp_path, timeout=60,
                       PYTHONPATH=f"{site}:{ROOT}")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("chatops: chatops mcp needs the mcp extra"), proc.stderr
    assert "pip install 'chatops-bot[mcp]'" in lines[0] and "make install-extras" in lines[0]


def test_help_shows_how_to_connect_an_assistant() -> None:
    proc = subprocess.run([*chatops_command(), "mcp", "--help"], capture_output=True, text=True, timeout=60,
                          env=cli_environment(ROOT / ".unused"))
    assert proc.returncode == 0
    for needle in ("claude_desktop_config.json", '"mcpServers"', ".vscode/mcp.json", "Authorization", "Bearer",
                   "chatops mcp token create --user", "docs/how-to/mcp.md"):
        assert needle in proc.stdout, needle


def test_a_token_check_that_cannot_read_the_database_refuses(tmp_path: Path) -> None:
    from app.assistant_tokens import issue, verify

    path = tmp_path / "state.sqlite"
    store = StateStore(f"sqlite:///{path}")
    try:
        issued = issue(store, "Ana@Example.com", created_by="admin")
        assert verify(store, issued.token).email == "ana@example.com"  # type: ignore[union-attr]
        assert verify(store, issued.token + "x") is None and verify(store, "") is None
        store.engine.dispose()
        for leftover in tmp_path.glob("state.sqlite*"):
            leftover.write_bytes(b"this is not a database " * 200)
        assert verify(store, issued.token) is None  # fail closed: no caller, never "let it through"
    finally:
        store.engine.dispose()


def test_a_request_without_a_caller_never_reaches_a_tool() -> None:
    """The server middleware's own check (behind the SDK's 401): no caller, a protocol error, no tool call."""
    from mcp.shared.exceptions import MCPError

    from bot.mcp.server import build_server

    class Untouchable:
        def __getattr__(self, name: str):
            raise AssertionError(f"the service was reached ({name})")

    server = build_server(Untouchable(), lambda _ctx: None)  # type: ignore[arg-type]

    async def go() -> list[str]:
        errors = []
        async with Client(server) as client:
            for call in (client.list_tools(), client.call_tool("search", {"query": "salary"}),
                         client.read_resource("chatops://sources")):
                try:
                    await call
                except MCPError as exc:
                    errors.append(str(exc))
        return errors

    assert asyncio.run(go()) == ["no authenticated caller"] * 3
