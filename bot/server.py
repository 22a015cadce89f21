"""``chatops serve``: one aiohttp web server for every chat platform.

The app always has ``GET /healthz`` (the process is up), ``GET /readyz`` (the state store answers,
the index is open, and every adapter is ready; 503 otherwise, with a JSON body saying which check
failed) and ``GET /metrics`` (Prometheus text: :mod:`telemetry.metrics`, :mod:`app.metrics`);
:func:`serve` adds ``GET /privacy`` and ``GET /terms`` (:mod:`bot.legal`).
Platforms plug in as **web adapters** (:class:`WebAdapter`): each brings its routes (Slack:
``POST /slack/events``; Teams will add ``POST /api/messages``), a readiness check, and start/stop hooks
run with the server. Adding a platform means writing an adapter and passing it to :func:`create_app`;
nothing here changes.

:func:`serve` wires settings -> index, agent, state store, index jobs -> Slack bot -> adapters -> server,
starts the scheduler (:mod:`bot.scheduler`: the syncs, and the outbox's delivery of scheduled messages
through each served platform's sender), runs an incremental sync of every source in the
background at start-up (unless ``--no-sync``), and runs until SIGINT/SIGTERM, then drains background
work and closes everything. Index jobs (start-up sync, ``/kb reindex``) share one worker thread.

Roles (issue 12, step 3): the default (``role="all"``) answers and writes the index (the syncs, ``/kb
reindex``, and the re-index jobs web replicas of its index queued). ``role="web"`` (``chatops serve --role
web``) answers and never writes: no start-up sync, no scheduled sync, and ``/kb reindex`` queues a job in
the state store for the worker (``chatops worker``, :mod:`bot.worker`). A web replica needs ``QDRANT_URL``:
an embedded index is one process's (its local Qdrant is locked by the process that opened it), so a web
replica beside a worker on one data dir could not open it, and on its own data dir nobody would write it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from app.settings import Settings

if TYPE_CHECKING:  # prometheus_client is imported when the metrics are set up
    from prometheus_client import CollectorRegistry
    from prometheus_client.registry import Collector

__all__ = ["WebAdapter", "ReadinessCheck", "create_app", "serve", "ServeError", "ServerThread", "ADAPTERS_KEY",
           "metrics_registry"]

log = logging.getLogger(__name__)

ReadinessCheck = Callable[[], Awaitable[tuple[bool, str]]]
_T = TypeVar("_T")

READINESS_TIMEOUT = 5.0


class ServeError(ValueError):
    """``chatops serve`` cannot start; the message says what to fix (the CLI exits with status 2)."""


class WebAdapter(Protocol):
    """A chat platform's presence in the web server.

    Attributes:
        name: a short name, used in ``/readyz`` (``slack``, ``teams``...).
    """

    name: str

    def routes(self) -> Sequence[web.RouteDef]:
        """The routes this adapter serves (may be empty, e.g. Socket Mode)."""
        ...

    async def start(self) -> None:
        """Called once the server starts (connect, check credentials); should log, not raise."""
        ...

    async def stop(self) -> None:
        """Called when the server stops (drain work, close connections)."""
        ...

    async def ready(self) -> tuple[bool, str]:
        """``(ok, detail)`` for ``/readyz``."""
        ...


ADAPTERS_KEY: web.AppKey[list[WebAdapter]] = web.AppKey("chatops_adapters", list)
CHECKS_KEY: web.AppKey[dict[str, ReadinessCheck]] = web.AppKey("chatops_checks", dict)
METRICS_KEY: web.AppKey[CollectorRegistry] = web.AppKey("chatops_metrics")


class _ClientErrorsWithoutTrace(logging.Filter):
    """aiohttp logs a malformed HTTP request (a header line over 8 KB, a bad method, broken framing) with a
    full traceback at ERROR, though the fault is the client's and aiohttp already answered 400: such
    records become one WARNING line saying what was wrong."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            record.exc_info = None
            record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.msg = f"{record.msg} (answered {exc.code}: %s)"
            record.args = (*(record.args or ()), str(exc.message)[:200])
        return True


def _quiet_client_errors() -> None:
    server_log = logging.getLogger("aiohttp.server")
    if not any(isinstance(f, _ClientErrorsWithoutTrace) for f in server_log.filters):
        server_log.addFilter(_ClientErrorsWithoutTrace())


@web.middleware
async def _errors(request: web.Request, handler):
    """Unexpected exceptions become a JSON 500 without a trace (the trace goes to the log)."""
    try:
        return await handler(request)
    except web.HTTPException:
        raise
    except Exception:  # noqa: BLE001
        log.exception("unhandled error serving %s %s", request.method, request.path)
        return web.json_response({"ok": False, "error": "internal error"}, status=500)


async def _healthz(_request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def _run_check(check: ReadinessCheck) -> tuple[bool, str]:
    try:
        return await asyncio.wait_for(check(), READINESS_TIMEOUT)
    except asyncio.TimeoutError:
        return False, f"timed out after {READINESS_TIMEOUT:.0f} s"
    except Exception as exc:  # noqa: BLE001
        return False, f"{type(exc).__name__}: {exc}"


async def _readyz(request: web.Request) -> web.Response:
    configured = request.app[CHECKS_KEY]
    checks = dict(configured)
    for adapter in request.app[ADAPTERS_KEY]:
        checks[adapter.name] = adapter.ready
    names = list(checks)
    results = await asyncio.gather(*(_run_check(checks[n]) for n in names))
    body = {n: {"ok": ok, "detail": detail} for n, (ok, detail) in zip(names, results)}
    ready = all(ok for ok, _ in results)
    return web.json_response({"status": "ready" if ready else "not ready", "checks": body},
                             status=200 if ready else 503)


def metrics_registry(collectors: Sequence[Collector] = ()) -> CollectorRegistry:
    """A :class:`prometheus_client.CollectorRegistry` for one app: the process-wide ``chatops_*`` metrics
    (:data:`telemetry.metrics.PROCESS_METRICS`), the process and Python runtime collectors, and ``collectors``
    (e.g. :class:`app.metrics.StoreCollector`, bound to this app's index and store).

    One registry per app, not ``prometheus_client``'s default: a scrape-time collector belongs to one
    index and one store, and a second app in the same process (tests, embedding) must not collide with it.
    """
    from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector

    from telemetry.metrics import PROCESS_METRICS

    registry = CollectorRegistry(auto_describe=True)
    for collector in (PROCESS_METRICS, *collectors):
        registry.register(collector)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry


async def _metrics(request: web.Request) -> web.Response:
    """Prometheus text exposition (OpenMetrics when the scraper asks for it); collected off the event loop,
    since the scrape-time collectors run database queries."""
    from prometheus_client.exposition import choose_encoder

    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    body = await asyncio.to_thread(encoder, request.app[METRICS_KEY])
    resp = web.Response(body=body)
    resp.headers["Content-Type"] = content_type
    return resp


def create_app(adapters: Sequence[WebAdapter] = (), checks: Mapping[str, ReadinessCheck] | None = None,
               client_max_size: int = 1024 ** 2, collectors: Sequence[Any] = (),
               routes: Sequence[web.RouteDef] = ()) -> web.Application:
    """The web application: ``/healthz``, ``/readyz``, ``/metrics``, ``routes`` (``/privacy`` and ``/terms``,
    :mod:`bot.legal`) and every adapter's routes and hooks.

    Unexpected errors in a handler are a JSON 500 (the trace goes to the log); a request aiohttp cannot
    parse (e.g. a header line over 8 KB) is aiohttp's 400, logged as one line without a trace.

    Args:
        adapters: the platforms to serve; their ``start`` runs at start-up, ``stop`` at clean-up (reverse order).
        checks: extra readiness checks by name (e.g. ``state``, ``index``).
        client_max_size: the largest request body accepted (bigger gets 413).
        collectors: scrape-time Prometheus collectors added to ``GET /metrics`` (see :func:`metrics_registry`).
        routes: further routes of the server itself (not a platform's).

    Raises:
        ValueError: when two adapters claim the same route.
    """
    _quiet_client_errors()
    app = web.Application(middlewares=[_errors], client_max_size=client_max_size)
    app[ADAPTERS_KEY] = list(adapters)
    app[CHECKS_KEY] = dict(checks or {})
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/readyz", _readyz)
    app[METRICS_KEY] = metrics_registry(collectors)
    app.router.add_get("/metrics", _metrics)
    app.router.add_routes(routes)
    seen: dict[tuple[str, str], str] = {}
    for adapter in adapters:
        for route in adapter.routes():
            key = (route.method, route.path)
            if key in seen:
                raise ValueError(f"{adapter.name} and {seen[key]} both serve {key[0]} {key[1]}")
            seen[key] = adapter.name
        app.router.add_routes(adapter.routes())

    async def start(_app: web.Application) -> None:
        for adapter in adapters:
            await adapter.start()

    async def stop(_app: web.Application) -> None:
        for adapter in reversed(list(adapters)):
            try:
                await adapter.stop()
            except Exception:  # noqa: BLE001 - stop the others anyway
                log.exception("stopping the %s adapter failed", adapter.name)

    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    return app


class ServerThread:
    """Runs a web app on a background thread with its own event loop (tests, benchmarks, embedding).

    Args:
        app: the application, or a function building it (called on the server's loop, so objects that
            bind to a loop bind to the right one).
        host, port: where to listen (port 0 picks a free one; see :attr:`port`).
    """

    def __init__(self, app: web.Application | Callable[[], web.Application], host: str = "127.0.0.1",
                 port: int = 0) -> None:
        self._app = app
        self.host = host
        self.port = port
        self.app: web.Application | None = None
        self.loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self.loop.run_forever, name="chatops-server", daemon=True)

    @property
    def url(self) -> str:
        """``http://HOST:PORT``."""
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 30) -> "ServerThread":
        """Start the loop thread and the server; returns self once it listens.

        Raises:
            OSError: when the port cannot be bound.
        """
        self._thread.start()
        self.call(self._start(), timeout)
        return self

    async def _start(self) -> None:
        self.app = self._app() if callable(self._app) and not isinstance(self._app, web.Application) else self._app
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]

    def call(self, coro: Coroutine[Any, Any, _T], timeout: float | None = 30) -> _T:
        """Run ``coro`` on the server's loop and return its result (raises what it raises)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self, timeout: float = 30) -> None:
        """Run the app's clean-up, stop the loop and join the thread."""
        if self._runner is not None:
            self.call(self._runner.cleanup(), timeout)
            self._runner = None
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
        self.loop.close()


ROLES = ("all", "web")


def serve(settings: Settings, host: str = "0.0.0.0", port: int = 3000, socket_mode: bool = False,
          initial_sync: bool = True, role: str = "all") -> int:
    """Run ``chatops serve`` until SIGINT/SIGTERM (see the module docstring); returns the exit status.

    Args:
        role: ``all`` (answer and write the index) or ``web`` (answer only; see the module docstring).

    Raises:
        ServeError: when no platform is configured, for incomplete Slack settings, an unreachable state store,
            an unknown role, or the web role without ``QDRANT_URL``.
        core.errors.ChatopsError: for a bad sources file or spec, or a locked or corrupt index.
    """
    from core.errors import ChatopsError
    from state import StateStore, StateStoreError

    from app.actions import build_action_service
    from bot.slack.pending import use_actions
    from .index_guard import FirstSync, IndexGuardedAgent, index_readiness
    from app.jobs import IndexJobs
    from .slack import SlackBot, SlackConfig, SlackConfigError
    from .slack.http import SlackHttpAdapter
    from .logsafe import install_redaction
    from .slack.socket_mode import SlackSocketModeAdapter
    from app.wiring import build_agent
    from app.outbox import Outbox
    from .slack.outbox import SlackDmSender

    from .legal import LegalPageError, legal_pages, legal_routes

    if role not in ROLES:
        raise ServeError(f"unknown role {role!r}: use all (answer and write the index) or web (answer only)")
    try:
        pages = legal_pages(settings)  # GET /privacy and /terms (the Teams app package links them)
    except LegalPageError as exc:
        raise ServeError(str(exc)) from exc
    writes = role != "web"
    if not writes and not settings.qdrant_url:
        raise ServeError("`chatops serve --role web` reads a shared index: set QDRANT_URL (with the embedded "
                         "index one process both writes and answers: run `chatops serve` without --role)")
    slack_wanted = socket_mode or bool(settings.slack_bot_token or settings.slack_signing_secret)
    teams_wanted = bool(settings.microsoft_app_id or settings.teams_allow_unauthenticated)
    if not (slack_wanted or teams_wanted):
        raise ServeError("no chat platform is configured: set SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET for Slack "
                         "and/or MicrosoftAppId and MicrosoftAppPassword for Teams (see the README)")
    config = None
    if slack_wanted:
        try:
            config = SlackConfig.from_settings(settings, socket_mode=socket_mode)
        except SlackConfigError as exc:
            raise ServeError(str(exc)) from exc
        install_redaction(config.secrets)
    try:
        store = StateStore(settings.state_url)
    except StateStoreError as exc:
        raise ServeError(str(exc)) from exc
    try:
        runtime = build_agent(settings)
    except ChatopsError:
        store.close()
        raise
    # Who sees what: the groups the sources reported (the state store's, issue 11) join the static ones.
    runtime.access = dataclasses.replace(runtime.access, groups_of=store.groups_of)
    # Every knowledge question, its outcome and cited pages go to the turn log (the knowledge-gap report's input).
    from app.turnlog import TurnJournal

    runtime.agent.observe(TurnJournal(store))
    # Every turn counts in the Prometheus metrics (GET /metrics).
    from app.metrics import StoreCollector, TurnMetrics

    runtime.agent.observe(TurnMetrics())
    # A store that fails while serving (damaged, disk full) gets users a short reply, not an error.
    # IndexGuardedAgent answers and observes like the agent it wraps; Runtime.agent is typed as the Agent class
    runtime.agent = IndexGuardedAgent(runtime.agent)  # type: ignore[assignment]
    try:
        jobs = IndexJobs.from_settings(runtime, store, settings, writes=writes)
    except Exception:
        runtime.close()
        store.close()
        raise
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chatops-jobs")
    action_service = build_action_service(settings, runtime.tools, store)
    # The platforms served, each one adapter: Slack (POST /slack/events, or Socket Mode), Teams (POST /api/messages).
    adapters: list[WebAdapter] = []
    if config is not None:
        bot = SlackBot(config, runtime, store, jobs, job_executor=executor)
        # Side-effect actions (calendar events, reminders): previews stored in the state store, Confirm / Cancel executed once.
        # ... and the local calendar's invitations: a DM with the .ics to each attendee in the workspace.
        use_actions(bot, action_service, default_timezone=settings.default_timezone)
        adapters.append(SlackSocketModeAdapter(bot) if socket_mode else SlackHttpAdapter(bot))
    # The outbox (scheduled messages, e.g. reminders): delivered by the scheduler through these senders,
    # one per platform served: Slack's as DMs, Teams' into the user's personal chat (app/outbox.py).
    senders: dict[str, Any] = {}
    if config is not None:
        senders["slack"] = SlackDmSender(bot.client)
    if teams_wanted:
        from .teams.adapter import build_teams_adapter
        from .teams.outbox import TeamsSender

        teams = build_teams_adapter(settings, runtime.agent, store, actions=action_service, jobs=jobs,
                                    job_executor=executor, access=runtime.access)
        adapters.append(teams)
        senders["teams"] = TeamsSender(teams.adapter, store, settings.microsoft_app_id)
    outbox = Outbox(store, senders)

    async def state_ready() -> tuple[bool, str]:
        ok = await asyncio.to_thread(store.ping)
        return ok, "database answers" if ok else "database unreachable (check DATABASE_URL)"

    first_sync = FirstSync(runtime.index, store, jobs.names)

    async def index_ready() -> tuple[bool, str]:
        return await asyncio.to_thread(index_readiness, runtime.index, first_sync)

    app = create_app(adapters, checks={"state": state_ready, "index": index_ready},
                     collectors=[StoreCollector(runtime.index.manifest, store, index_id=runtime.index.index_id)],
                     routes=legal_routes(pages))
    try:
        mode = ", ".join(filter(None, ["Slack: socket mode" if socket_mode else ("Slack: /slack/events" if config else ""),
                                       "Teams: /api/messages" if teams_wanted else ""]))
        from app.retention import Retention

        retention = Retention.from_settings(store, settings)  # the daily purge (RETENTION_DAYS_*)
        if not writes:
            mode += "; web role: syncs and re-indexes are the worker's"
        asyncio.run(_run(app, host, port, executor, jobs, initial_sync and writes, mode, outbox, retention))
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
        jobs.close()
        runtime.close()
        store.close()
    return 0


def _listen_error(host: str, port: int, exc: OSError) -> str:
    """What to do when the server cannot listen on ``host:port`` (one line)."""
    import errno

    where = f"{host}:{port}"
    if exc.errno == errno.EADDRINUSE:
        return (f"cannot listen on {where}: the port is already in use (another chatops serve, or another server); "
                "stop that process or choose a free port with `chatops serve --port N`")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return (f"cannot listen on {where}: not allowed to use port {port} (ports below 1024 need privileges); "
                "choose a port from 1024 up with `chatops serve --port N`")
    if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT) or isinstance(exc, socket.gaierror):
        return (f"cannot listen on {where}: {host} is not an address of this machine; use `--host 0.0.0.0` "
                "(every interface) or `--host 127.0.0.1` (this machine only)")
    return f"cannot listen on {where} ({exc.strerror or exc}); choose another `--host` or `--port`"


async def _run(app: web.Application, host: str, port: int, executor: Executor, jobs: Any, initial_sync: bool,
               mode: str, outbox: Any = None, retention: Any = None) -> None:
    from .lifecycle import log_startup_sync, stop_on_signals
    from .scheduler import add_outbox_job, add_queue_job, add_retention_job, start_scheduler, stop_scheduler

    stop = stop_on_signals()
    loop = asyncio.get_running_loop()
    runner = web.AppRunner(app)
    await runner.setup()
    scheduler = None
    try:
        try:
            await web.TCPSite(runner, host, port).start()
        except OSError as exc:
            raise ServeError(_listen_error(host, port, exc)) from None
        bound = runner.addresses[0][1] if runner.addresses else port
        print(f"chatops: serving on http://{host}:{bound} ({mode}; /healthz, /readyz, /metrics); Ctrl-C stops",
              file=sys.stderr, flush=True)
        scheduler = start_scheduler(jobs)  # the scheduled syncs (CHATOPS_SYNC_INTERVAL, the sources file)
        if outbox is not None:
            add_outbox_job(scheduler, outbox)  # scheduled messages (reminders), every 30 s
        if retention is not None:
            add_retention_job(scheduler, retention)  # the retention purge, daily
        if jobs.writes:
            add_queue_job(scheduler, jobs)  # re-index jobs queued by web replicas of this index
        if initial_sync and jobs.names():
            fut = loop.run_in_executor(executor, jobs.run)
            fut.add_done_callback(log_startup_sync)
        await stop.wait()
        print("chatops: stopping", file=sys.stderr, flush=True)
    finally:
        if scheduler is not None:
            await stop_scheduler(scheduler, outbox)  # a delivery in flight records its outcome first
        await runner.cleanup()


