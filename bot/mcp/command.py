"""``chatops mcp``: serve the MCP server (stdio or Streamable HTTP), and issue, list and revoke its tokens.

Serving needs the mcp extra (:func:`app.extras.command_needs`: one line saying how to install it, exit 2); the
token commands need only the state store.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.settings import Settings

__all__ = ["serve_mcp", "token_command", "McpUsageError"]


class McpUsageError(ValueError):
    """``chatops mcp`` was called in a way it cannot run; the message says what to do (exit 2)."""


def serve_mcp(settings: Settings, as_user: str | None, http: bool, host: str, port: int,
              allow_hosts: tuple[str, ...] = ()) -> int:
    """Serve MCP over stdio as ``as_user``, or over HTTP on ``host:port`` (bearer tokens; ``allow_hosts``: further
    ``Host`` names served, :func:`bot.mcp.http.transport_security`); returns 0 when stopped.

    Raises:
        McpUsageError: the mcp extra is missing, ``--as`` is missing or malformed over stdio, ``--as`` is
            given over HTTP, or the port cannot be bound.
        StateStoreError, ChatopsError: the state store or the index cannot be opened.
    """
    from app.extras import command_needs

    if (missing := command_needs("mcp", "chatops mcp")) is not None:
        raise McpUsageError(missing)
    if http and as_user:
        raise McpUsageError("--as is for stdio; over --http each request's bearer token says who is asking "
                            "(`chatops mcp token create --user EMAIL`)")
    if not http and not as_user:
        raise McpUsageError("over stdio the server runs as one person: add --as EMAIL (their access applies), or "
                            "serve several people with --http and a token each")
    from app.assistants import CallerError

    from .auth import stdio_caller

    caller_of = None
    if not http:
        try:
            caller_of = stdio_caller(as_user or "")
        except CallerError:
            raise McpUsageError(f"--as needs an e-mail address, got {as_user!r}") from None
    sock = None
    if http:
        from .http import bind

        try:
            sock = bind(host, port)
        except OSError as exc:
            raise McpUsageError(f"cannot listen on {host}:{port} ({exc.strerror or exc}); choose another --host or "
                                "--port") from None
    from app.assistants import open_assistant_service

    service = open_assistant_service(settings)
    if service.runtime.index.stats()["pages"] == 0:  # it still serves: the assistant gets refusals until then
        print(f"chatops: the index in {settings.chatops_data_dir} is empty: every question will be refused until "
              "`chatops index folder:PATH` or `chatops sync` fills it (or set CHATOPS_DATA_DIR to the data dir you "
              "indexed into)", file=sys.stderr, flush=True)
    try:
        if caller_of is not None:  # stdio (set above exactly when not http)
            import anyio

            from .server import build_server

            anyio.run(build_server(service, caller_of).run_stdio_async)
            return 0
        from bot.server import metrics_registry
        from app.metrics import StoreCollector

        from .auth import StoreTokenVerifier, http_caller
        from .http import auth_settings, http_app, serve_http
        from .server import build_server

        assert sock is not None
        bound = sock.getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        server = build_server(service, http_caller, token_verifier=StoreTokenVerifier(service.store),
                              auth=auth_settings(f"http://{shown}:{bound}"))
        registry = metrics_registry([StoreCollector(service.runtime.index.manifest, service.store,
                                                    index_id=service.runtime.index.index_id)])
        serve_http(http_app(server, host, registry, allow_hosts), sock, host)
        return 0
    finally:
        if sock is not None:
            sock.close()
        service.close()


def token_command(settings: Settings, op: str, user: str | None, token_id: str | None, label: str,
                  as_json: bool) -> int:
    """``chatops mcp token create --user EMAIL [--label L] | list [--user EMAIL] | revoke ID`` (``--json``: one
    JSON object or array). ``create`` prints the token once: it is not stored, only its digest.

    Raises:
        McpUsageError: a missing ``--user`` or id.
        ValueError: a malformed e-mail, or an unknown id (the message says what to do).
    """
    import getpass

    from state import StateStore

    from app.assistant_tokens import issue, revoke

    if op == "create" and not user:
        raise McpUsageError("name the person: `chatops mcp token create --user EMAIL`")
    if op == "revoke" and not token_id:
        raise McpUsageError("name the token: `chatops mcp token revoke ID` (`chatops mcp token list` shows the ids)")
    try:
        operator = getpass.getuser()
    except Exception:  # noqa: BLE001 - no login name (a container): the audit says "cli"
        operator = "cli"
    store = StateStore(settings.state_url)
    try:
        if op == "create":
            issued = issue(store, user or "", label=label, created_by=operator)
            if as_json:
                print(json.dumps({"token": issued.token, **_row(issued.record)}))
            else:
                print(issued.token)
                print(f"chatops: token {issued.record.token_id} for {issued.record.email}: give it to them now, it is "
                      "not shown again (only its digest is kept); `chatops mcp token revoke "
                      f"{issued.record.token_id}` ends it", file=sys.stderr)
            return 0
        if op == "revoke":
            record = revoke(store, token_id or "", revoked_by=operator)
            print(json.dumps(_row(record)) if as_json else f"revoked {record.token_id} ({record.email})")
            return 0
        rows = [_row(r) for r in store.mcp_tokens_list(user)]
        if as_json:
            print(json.dumps(rows))
        elif not rows:
            print("no MCP tokens yet: `chatops mcp token create --user EMAIL` issues one")
        else:
            print(f"{'ID':<13} {'USER':<32} {'STATE':<8} {'CREATED':<20} {'LAST USED':<20} LABEL")
            for r in rows:
                print(f"{r['id']:<13} {r['user']:<32} {r['state']:<8} {(r['created_at'] or '')[:19]:<20} "
                      f"{(r['last_used_at'] or '-')[:19]:<20} {r['label']}")
        return 0
    finally:
        store.close()


def _row(record) -> dict:
    iso = (lambda d: d.isoformat(timespec="seconds") if d else None)
    return {"id": record.token_id, "user": record.email, "state": "active" if record.active else "revoked",
            "label": record.label, "created_by": record.created_by, "created_at": iso(record.created_at),
            "last_used_at": iso(record.last_used_at), "revoked_at": iso(record.revoked_at)}
