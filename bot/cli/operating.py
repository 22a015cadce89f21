"""The commands that run or look after a deployment: serve, worker, sync, status, sources, actions,
reminders, db, purge, forget, report and mcp; each hands its arguments to the module that does the work."""

from __future__ import annotations

import argparse
import json
import sys

from .settings import ConfigError, load_settings

__all__ = ["cmd_serve", "cmd_worker", "cmd_sync", "cmd_status", "cmd_sources", "cmd_actions", "cmd_reminders", "cmd_db",
           "cmd_purge", "cmd_forget", "cmd_report", "cmd_mcp"]

def cmd_serve(args: argparse.Namespace) -> int:
    """``chatops serve [--host H] [--port P] [--socket-mode] [--no-sync] [--role all|web]``: the bot's web server."""
    from ..server import serve

    return serve(load_settings(), host=args.host, port=args.port, socket_mode=args.socket_mode,
                 initial_sync=not args.no_sync, role=args.role)


def cmd_worker(args: argparse.Namespace) -> int:
    """``chatops worker [--no-sync]``: run the schedules, the queued re-index jobs and the purge; write the index."""
    from ..worker import run_worker

    return run_worker(load_settings(), initial_sync=not args.no_sync)


def cmd_sync(args: argparse.Namespace) -> int:
    """``chatops sync [--source NAME] [--full] [--json]``: the scheduled sync job, run once from the shell; then, as
    ``chatops index``, starts the warm ask worker when it is enabled (``ASK_WORKER``: by default at a terminal)."""
    from app.jobs import cli_sync

    from . import warm

    settings = load_settings()
    rc = cli_sync(settings, args.source, args.full, as_json=args.json)
    warm.warm_up(settings.ask_worker)
    return rc


def cmd_status(args: argparse.Namespace) -> int:
    """``chatops status [--json]``: per source, pages, chunks, the last run's summary and the schedule."""
    from app.jobs import cli_status

    return cli_status(load_settings(), as_json=args.json)


def cmd_sources(args: argparse.Namespace) -> int:
    """``chatops sources list [--json]`` and ``chatops sources remove NAME --yes``."""
    from app.jobs import cli_sources_list, cli_sources_remove

    settings = load_settings()
    if args.op == "list":
        return cli_sources_list(settings, as_json=args.json)
    if not args.name:
        raise ConfigError("name the source to remove: `chatops sources remove NAME --yes` (see `chatops sources list`)")
    return cli_sources_remove(settings, args.name, yes=args.yes)


def cmd_actions(args: argparse.Namespace) -> int:
    """``chatops actions confirm|cancel|show KEY [--json]``: settle a pending action from the shell."""
    from ..cli_actions import cli_action

    return cli_action(load_settings(terminal=True), args.op, args.key, as_json=args.json)


def cmd_reminders(args: argparse.Namespace) -> int:
    """``chatops reminders [--json]``: show your due reminders once, list the ones to come."""
    from ..cli_reminders import cli_reminders

    return cli_reminders(load_settings(terminal=True), as_json=args.json)


def cmd_db(args: argparse.Namespace) -> int:
    """``chatops db upgrade|current [--json]``: migrate the state database now, or show its revision."""
    from app.database import cli_db

    return cli_db(load_settings(), args.op, as_json=args.json)


def cmd_purge(args: argparse.Namespace) -> int:
    """``chatops purge [--json]``: the daily retention purge, once."""
    from app.retention import cli_purge

    return cli_purge(load_settings(), as_json=args.json)


def cmd_forget(args: argparse.Namespace) -> int:
    """``chatops forget --user ID --yes [--json]``: delete one person's stored messages and records."""
    from app.retention import cli_forget

    return cli_forget(load_settings(), args.user, yes=args.yes, as_json=args.json)


def cmd_report(args: argparse.Namespace) -> int:
    """``chatops report [--since 7d] [--json | --html FILE]``: the knowledge-gap report (:mod:`app.report`)."""
    from datetime import datetime, timezone
    from pathlib import Path

    from app.report import parse_since, report_from_settings
    from app.report_render import render_html, render_text

    settings = load_settings()
    now = datetime.now(timezone.utc)
    report = report_from_settings(settings, parse_since(args.since, now), now)
    if args.json:
        print(json.dumps(report.as_dict(), ensure_ascii=False))
    elif args.html:
        path = Path(args.html)
        try:
            path.write_text(render_html(report), encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot write the HTML report to {path}: {exc.strerror or exc}") from None
        print(f"wrote {path.resolve()}: {report.questions} questions, {len(report.refused_groups)} refused groups, "
              f"{len(report.unhelpful)} unhelpful answers")
    else:
        print(render_text(report))
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    """``chatops mcp [--as EMAIL | --http [--host H] [--port P]]`` and ``chatops mcp token create|list|revoke``."""
    from ..mcp.command import McpUsageError, serve_mcp, token_command

    try:
        if args.mcp_op == "token":
            return token_command(load_settings(), args.token_op, args.user, args.token_id, args.label, args.json)
        settings = load_settings()
        out = sys.stdout
        if not args.http:  # stdout is the protocol's: the SDK writes it, nothing else may
            sys.stdout = sys.__stdout__
        try:
            return serve_mcp(settings, args.as_user, args.http, args.host, args.port, tuple(args.allow_host))
        finally:
            sys.stdout = out
    except McpUsageError as exc:
        raise ConfigError(str(exc)) from None

