"""The MCP server over Streamable HTTP: the SDK's Starlette app on its own port, served by uvicorn.

``POST/GET/DELETE /mcp`` (the MCP endpoint, bearer tokens required: :mod:`bot.mcp.auth`), ``GET /healthz`` and
``GET /metrics`` (Prometheus text, the same registry as ``chatops serve``'s, so assistant turns show as
``platform="mcp"``). A request body over :data:`MAX_REQUEST_BYTES` gets ``413`` and a JSON-RPC error, a body
that is not JSON-RPC gets ``400`` with a parse or invalid-request error; the server keeps serving.

Not mounted in ``chatops serve``: that server is aiohttp and the SDK's transport is ASGI (Starlette); running
one inside the other needs a bridge of our own or another dependency, for no gain over a second port.
"""

from __future__ import annotations

import socket
import sys

from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

__all__ = ["http_app", "serve_http", "MAX_REQUEST_BYTES", "MCP_PATH", "auth_settings"]

MAX_REQUEST_BYTES = 256 * 1024
"""The largest request body accepted (a question is at most MAX_QUESTION_CHARS; the SDK's default is 4 MiB)."""

MCP_PATH = "/mcp"


def auth_settings(base_url: str) -> AuthSettings:
    """The SDK's auth settings for bearer tokens this server verifies itself: ``issuer_url`` is this server's
    own URL (no authorization server is advertised: no protected-resource metadata route is added)."""
    return AuthSettings(issuer_url=base_url, resource_server_url=None, required_scopes=None)


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def transport_security(host: str, allow_hosts: tuple[str, ...] = ()):
    """The SDK's DNS-rebinding check: on a loopback address only ``Host: 127.0.0.1|localhost|[::1]:PORT`` (and
    their origins) are served, plus each of ``allow_hosts`` (the name a reverse proxy or the clients use, e.g.
    ``chatops.acme.com``); on another address with no ``allow_hosts``, None (the SDK checks nothing: the
    address itself is the operator's choice)."""
    from mcp.server.transport_security import TransportSecuritySettings

    loopback = host in LOOPBACK
    if not loopback and not allow_hosts:
        return None
    hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*"] if loopback else []
    origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"] if loopback else []
    for h in allow_hosts:
        hosts += [h, f"{h}:*"]
        origins += [f"https://{h}", f"https://{h}:*", f"http://{h}", f"http://{h}:*"]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


def http_app(server: MCPServer, host: str, registry=None, allow_hosts: tuple[str, ...] = ()) -> Starlette:
    """The Starlette app of ``server`` (built with an ``auth`` and a token verifier) plus ``/healthz`` and
    ``/metrics`` (from ``registry``, a Prometheus registry; none: no ``/metrics``); the ``Host`` header is
    checked as :func:`transport_security` says."""

    @server.custom_route("/healthz", methods=["GET"])
    async def healthz(_request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    if registry is not None:
        @server.custom_route("/metrics", methods=["GET"])
        async def metrics(request: Request) -> Response:
            from prometheus_client.exposition import choose_encoder

            encoder, content_type = choose_encoder(request.headers.get("accept", ""))
            return Response(encoder(registry), headers={"Content-Type": content_type})

    return server.streamable_http_app(streamable_http_path=MCP_PATH, max_request_body_size=MAX_REQUEST_BYTES,
                                      host=host, transport_security=transport_security(host, allow_hosts))


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: a free one).

    Raises:
        OSError: the address cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def serve_http(app: Starlette, sock: socket.socket, host: str) -> None:
    """Serve ``app`` on ``sock`` with uvicorn until SIGINT/SIGTERM, then return (uvicorn drains the open
    requests first; the caller then closes the index and the state store, and the process exits 0)."""
    import contextlib

    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self):
            # uvicorn re-raises the signal it stopped for once it has shut down, which would kill the process
            # before the index and the state store are closed: the stop is ours to finish.
            with super().capture_signals():
                yield
                self._captured_signals.clear()

    port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    print(f"chatops: MCP over Streamable HTTP on http://{shown}:{port}{MCP_PATH} (bearer tokens: "
          "`chatops mcp token create --user EMAIL`; /healthz, /metrics); Ctrl-C stops", file=sys.stderr, flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", log_config=None)
    Server(config).run(sockets=[sock])
