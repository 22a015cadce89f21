"""The ``chatops`` command line: ``index``, ``ask``, ``chat``, ``eval``, ``calibrate`` and more.

Exit codes: 0 success, 1 a run that finished with errors worth a look (e.g. eval targets are the
caller's business, so eval exits 0), 2 bad usage or configuration (the message says what to do).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import uuid
from typing import TYPE_CHECKING

from core.errors import ChatopsError
from index.faults import is_disk_full, is_sqlite_damage, storage_error

if TYPE_CHECKING:
    from app.settings import Settings

# Everything heavy (the index, the embedding model, the agent, Slack and Teams) is imported by the
# command that needs it, so `chatops --help` and argument errors answer at once.

__all__ = ["main", "build_parser"]

log = logging.getLogger("chatops")


class ConfigError(Exception):
    """Bad settings; the CLI prints the message and exits with status 2."""


def _settings(answers_on_stdout: bool = False, terminal: bool = False) -> Settings:
    """The settings, with logging and tracing configured from them.

    ``answers_on_stdout``: a command whose output is the answer itself (``ask``, ``chat``, ``eval``) logs at
    WARNING unless ``CHATOPS_LOG_LEVEL`` is set, so each turn's INFO line does not interleave with the
    answer a person is reading; the server and the worker keep INFO.

    ``terminal``: a command a person runs for themselves (``ask``, ``chat``, ``actions``, ``reminders``)
    reads and shows times in the machine's zone when ``DEFAULT_TIMEZONE`` is not set
    (:func:`app.settings.at_a_terminal`); the servers and ``eval`` keep ``DEFAULT_TIMEZONE``, else UTC.

    Raises:
        ConfigError: when a setting is invalid, or asks for a feature whose extra is not installed
            (:func:`app.extras.missing_extras`); the message says which and what to fix.
    """
    from pydantic import ValidationError

    from app.settings import Settings

    try:
        s = Settings()
    except ValidationError as exc:
        raise ConfigError(_settings_errors(exc)) from None
    if terminal:
        from app.settings import at_a_terminal

        s = at_a_terminal(s)
    from app.extras import missing_extras

    if missing := missing_extras(s):  # e.g. CALENDAR_BACKEND=google without the google extra
        raise ConfigError("; ".join(missing))
    from .logs import configure_logging

    level = s.chatops_log_level
    if answers_on_stdout and "chatops_log_level" not in s.model_fields_set:
        level = "WARNING"
    configure_logging(level, s.chatops_log_format, s.secret_values)
    from telemetry.tracing import configure_tracing  # imports OpenTelemetry only when the endpoint is set

    try:
        configure_tracing(s.otel_exporter_otlp_endpoint, s.otel_service_name)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    return s


def _settings_errors(exc) -> str:
    """A pydantic ``ValidationError`` of :class:`Settings` as one line: each variable and what is wrong with it."""
    problems = []
    for err in exc.errors(include_url=False, include_input=False):
        name = str(err["loc"][0]).upper() if err.get("loc") else "a setting"
        msg = str(err.get("msg", "")).removeprefix("Value error, ")
        problems.append(msg if msg.startswith(name) else f"{name}: {msg}")
    return (f"invalid setting{'s' if len(problems) > 1 else ''}: {'; '.join(problems)} "
            "(fix the environment variable or .env file; every setting: docs/reference/settings.md, or make docs)")


def _index_sources(settings: Settings, specs: list[str], full: bool, index=None, quiet: bool = False,
                   out=None) -> int:
    """Index each source spec, recording each run, then refit the gate; reports go to ``out`` (a
    :class:`app.layout.SectionPrinter`, one section) unless ``quiet``."""
    from index.indexer import Indexer
    from connectors.sources import parse_source_spec

    from .console import render_report
    from .progress import progress_bar
    from app.jobs import RunLog
    from app.layout import SectionPrinter
    from app.wiring import open_index

    out = out or SectionPrinter()
    sources = [parse_source_spec(s) for s in specs]
    own = index is None
    index = index or open_index(settings, repair=True, full=full)  # an indexing run rebuilds a damaged store
    runs = RunLog.open(settings, index.index_id)  # each run is recorded like a sync, so `chatops status` shows it
    try:
        indexer = Indexer(index)
        for src in sources:
            with runs.run(src.name) as record, progress_bar(f"index {src.name}", "pages") as bar:
                rep = indexer.run(src, full=full, progress=lambda r, bar=bar: bar.update(_pages_done(r) - bar.n))
                record(rep, pages=len(index.manifest.pages_of(src.name)))
            stats = index.stats()
            if not quiet:
                out(render_report(rep, stats["pages"], stats["chunks"]))
        _recalibrate(index, quiet, out=out)
    finally:
        runs.close()
        if own:
            index.close()
    return 0


def _pages_done(rep) -> int:
    """Pages an index run has been through so far (its progress bar's count)."""
    return rep.added + rep.updated + rep.unchanged + rep.skipped


def _recalibrate(index, quiet: bool, force: bool = False, out=print) -> dict | None:
    """Refit the evidence gate on the index when it changed substantially (see :mod:`agent.calibration`)."""
    from agent.calibration import calibrate_index, describe

    record = calibrate_index(index, force=force)
    if record and not quiet:
        out(describe(record))
    return record


def cmd_calibrate(args: argparse.Namespace) -> int:
    """``chatops calibrate [--json]``: fit the evidence gate's operating point on the indexed corpus."""
    from agent.calibration import calibrate, describe, store_calibration

    from app.wiring import build_agent

    settings = _settings()
    rt = build_agent(settings)
    try:
        if rt.index.stats()["chunks"] == 0:
            print("chatops: the index is empty; run `chatops index folder:PATH` first", file=sys.stderr)
            return 2
        record = calibrate(rt.search)
        store_calibration(rt.index, record)
    finally:
        rt.close()
    print(json.dumps(record, ensure_ascii=False) if args.json else describe(record))
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    """``chatops index SOURCE... [--full]``."""
    return _index_sources(_settings(), args.sources, args.full)


def cmd_ask(args: argparse.Namespace) -> int:
    """``chatops ask QUESTION [--history H]... [--json]``."""
    from agent.models import HistoryMessage

    from .cli_actions import cli_propose, cli_user
    from .console import render_reply
    from app.inbound import InboundMessage
    from app.layout import sections
    from app.turns import build_turn
    from app.wiring import build_agent

    settings = _settings(answers_on_stdout=True, terminal=True)
    rt = build_agent(settings, retriever=args.retriever, lazy_model=True)  # a cached question needs no model
    try:
        empty = rt.index.stats()["pages"] == 0
        user = cli_user()
        access = _cli_access(settings, rt.access, args.as_user)
        # --history is the user's own earlier questions: they may complete a request.
        # No message id: the same `chatops ask` run again proposes the same action (keyed on the words).
        # The answer is the asker's alone (a DM): --as EMAIL's own access, or public pages only without it.
        turn = build_turn(InboundMessage(platform="cli", text=args.question, user_id=user, channel_kind="dm",
                                         user_email=args.as_user or "",
                                         history=tuple(HistoryMessage.own(h, user) for h in args.history or ())),
                          access)
        reply = rt.agent.answer(turn)
        pending = cli_propose(settings, rt.tools, reply.pending_action, turn) if reply.pending_action else ""
    finally:
        rt.close()
    if empty and not reply.pending_action and reply.route in {"knowledge", "followup"}:
        # Nothing to answer from: say so and how to fix it (a meeting request still works without an index).
        raise ConfigError(empty_index_message(settings))
    if args.json:
        print(json.dumps(reply.as_dict(), ensure_ascii=False))
    else:
        print(sections(render_reply(reply), pending))
    return 0


def _cli_access(settings: Settings, policy, as_user: str | None):
    """The access policy of ``chatops ask``/``chat``: with ``--as EMAIL``, the groups the sources
    reported for that person (the state store's) join the static ones; without it the asker has no
    e-mail, so public pages only (fail closed: the CLI runs on the server, but is not an admin bypass)."""
    import dataclasses

    if not as_user:
        return policy
    if "@" not in as_user or any(c.isspace() for c in as_user.strip()):
        raise ConfigError(f"--as needs an e-mail address, got {as_user!r}")
    from state import StateStore

    def groups(email: str) -> frozenset[str]:
        store = StateStore(settings.state_url)
        try:
            return store.groups_of(email)
        finally:
            store.close()

    return dataclasses.replace(policy, groups_of=groups)


def empty_index_message(settings: Settings) -> str:
    """What to do about an empty index, naming the data dir in use (a relative ``CHATOPS_DATA_DIR``
    run from another folder opens a new, empty one)."""
    return (f"the index in {settings.chatops_data_dir} is empty: run `chatops index folder:PATH` (or `chatops sync` "
            "for the sources in chatops.yml) first, or set CHATOPS_DATA_DIR to the data dir you indexed into")


def cmd_chat(args: argparse.Namespace) -> int:
    """``chatops chat``: a console conversation; earlier questions are the thread history."""
    from agent.models import HistoryMessage

    from .cli_actions import cli_action, cli_propose, cli_user
    from .console import render_reply
    from app.inbound import InboundMessage
    from app.turns import build_turn
    from app.wiring import build_agent

    settings = _settings(answers_on_stdout=True, terminal=True)
    rt = build_agent(settings, retriever=args.retriever)
    access = _cli_access(settings, rt.access, args.as_user)
    if rt.index.stats()["pages"] == 0:
        print(f"chatops: {empty_index_message(settings)}; only meeting requests can be answered now", file=sys.stderr)
    history: list[str] = []
    pending_key = ""
    print("chatops console: ask a question; /new starts a new thread, /quit or Ctrl-D ends.")
    try:
        while True:
            try:
                text = input("you> ")
            except EOFError:
                print()
                break
            if text.strip() in {"/quit", "/exit"}:
                break
            if text.strip() == "/new":
                history.clear()
                print("(new thread)")
                continue
            if text.strip() in {"/confirm", "/cancel"}:
                op = text.strip()[1:]
                if not pending_key:
                    print("bot> There is nothing to confirm or cancel.")
                    continue
                print("bot> ", end="")
                cli_action(settings, op, pending_key)
                pending_key = ""
                continue
            turn = build_turn(InboundMessage(
                platform="console", text=text, user_id=cli_user(), channel_kind="dm", user_email=args.as_user or "",
                history=tuple(HistoryMessage.own(h, cli_user()) for h in history),
                message_id=f"console-{uuid.uuid4().hex}"), access)
            reply = rt.agent.answer(turn)
            print("bot> " + render_reply(reply).replace("\n", "\n     "))
            if reply.pending_action:
                preview = cli_propose(settings, rt.tools, reply.pending_action, turn,
                                      confirm_hint="Type /confirm to confirm it or /cancel to drop it.")
                pending_key = reply.pending_action.idempotency_key
                print("     " + preview.replace("\n", "\n     "))
            if text.strip():
                history.append(text.strip())
    finally:
        rt.close()
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    """``chatops eval --questions FILE [--source SPEC]... | --set NAME=QUESTIONS::SOURCE... [--retriever R] [--k K]
    [--json]``: one eval (its full table) or several sets, each on its own index (one table, a row per set).

    Raises:
        ConfigError: neither or both of ``--questions`` and ``--set``; ``--set`` with a shared index (``QDRANT_URL``).
        ValueError: a bad ``--set`` or eval file (the message names it), before anything is indexed.
    """
    from .eval_sets import format_sets_table, parse_set, set_data_dir
    from .evaluate import format_table, load_questions
    from app.layout import SectionPrinter

    if bool(args.questions) == bool(args.set):
        raise ConfigError("eval needs either --questions FILE (with --source SPEC to index) or one or more "
                          "--set NAME=QUESTIONS::SOURCE, not both; see `chatops eval --help`")
    if args.source and args.set:
        raise ConfigError("--source goes with --questions; a --set names its own sources (NAME=QUESTIONS::SOURCE)")
    settings = _settings(answers_on_stdout=True)
    out = SectionPrinter()
    if args.questions:
        result = _eval_one(settings, load_questions(args.questions), args.source or [], args, out, "eval")
        result["retriever"] = args.retriever
        if args.json:
            print(json.dumps(result, ensure_ascii=False))
        else:
            out.section(format_table(result, label=f"({args.retriever})"))
        return 0
    sets = [parse_set(spec) for spec in args.set]
    if len({s.name for s in sets}) < len(sets):
        raise ConfigError("each --set needs its own NAME (it names the set's row and its folder under the data dir)")
    if settings.qdrant_url:
        raise ConfigError("--set builds an index per set under the data dir; unset QDRANT_URL (a shared index would "
                          "mix the sets' pages)")
    questions = {s.name: load_questions(s.questions) for s in sets}  # every file checked before any indexing
    results: dict[str, dict] = {}
    for s in sets:
        own = settings.model_copy(update={"chatops_data_dir": set_data_dir(settings.chatops_data_dir, s.name),
                                          "chatops_cache_dir": settings.embedding_cache_path.parent})
        if not args.json:
            out.section(f"set {s.name}: {len(questions[s.name])} questions from {s.questions}, "
                        f"index in {own.chatops_data_dir}")
        results[s.name] = _eval_one(own, questions[s.name], list(s.sources), args, out, f"eval {s.name}")
        results[s.name].update(questions_file=str(s.questions), sources=list(s.sources))
    if args.json:
        print(json.dumps({"retriever": args.retriever, "sets": results}, ensure_ascii=False))
    else:
        out.section(format_sets_table(results, label=f"({args.retriever})"))
    return 0


def _eval_one(settings: Settings, questions: list, sources: list[str], args: argparse.Namespace, out,
              bar_label: str) -> dict:
    """Index ``sources`` (incrementally) into the settings' index, then ask ``questions`` of it: the eval object
    of :func:`bot.evaluate.run_eval` (indexing reports go to ``out`` unless ``--json``)."""
    from .evaluate import doc_chunks, run_eval
    from .progress import progress_bar
    from app.wiring import build_agent, open_index

    index = open_index(settings, repair=bool(sources))
    try:
        for spec in sources:
            _index_sources(settings, [spec], full=False, index=index, quiet=args.json, out=out)
        rt = build_agent(settings, index=index, retriever=args.retriever)
        with progress_bar(bar_label, "questions", total=len(questions)) as bar:
            return run_eval(rt.agent, questions, lookup=index.dense.get, k=args.k, access=rt.access,
                            doc_chunks=doc_chunks(index), progress=lambda *_: bar.update(1),
                            tools=rt.tools.names())
    finally:
        index.close()


def cmd_serve(args: argparse.Namespace) -> int:
    """``chatops serve [--host H] [--port P] [--socket-mode] [--no-sync] [--role all|web]``: the bot's web server."""
    from .server import serve

    return serve(_settings(), host=args.host, port=args.port, socket_mode=args.socket_mode,
                 initial_sync=not args.no_sync, role=args.role)


def cmd_worker(args: argparse.Namespace) -> int:
    """``chatops worker [--no-sync]``: run the schedules, the queued re-index jobs and the purge; write the index."""
    from .worker import run_worker

    return run_worker(_settings(), initial_sync=not args.no_sync)


def cmd_sync(args: argparse.Namespace) -> int:
    """``chatops sync [--source NAME] [--full] [--json]``: the scheduled sync job, run once from the shell."""
    from app.jobs import cli_sync

    return cli_sync(_settings(), args.source, args.full, as_json=args.json)


def cmd_status(args: argparse.Namespace) -> int:
    """``chatops status [--json]``: per source, pages, chunks, the last run's summary and the schedule."""
    from app.jobs import cli_status

    return cli_status(_settings(), as_json=args.json)


def cmd_sources(args: argparse.Namespace) -> int:
    """``chatops sources list [--json]`` and ``chatops sources remove NAME --yes``."""
    from app.jobs import cli_sources_list, cli_sources_remove

    settings = _settings()
    if args.op == "list":
        return cli_sources_list(settings, as_json=args.json)
    if not args.name:
        raise ConfigError("name the source to remove: `chatops sources remove NAME --yes` (see `chatops sources list`)")
    return cli_sources_remove(settings, args.name, yes=args.yes)


def cmd_actions(args: argparse.Namespace) -> int:
    """``chatops actions confirm|cancel|show KEY [--json]``: settle a pending action from the shell."""
    from .cli_actions import cli_action

    return cli_action(_settings(terminal=True), args.op, args.key, as_json=args.json)


def cmd_reminders(args: argparse.Namespace) -> int:
    """``chatops reminders [--json]``: show your due reminders once, list the ones to come."""
    from .cli_reminders import cli_reminders

    return cli_reminders(_settings(terminal=True), as_json=args.json)


def cmd_db(args: argparse.Namespace) -> int:
    """``chatops db upgrade|current [--json]``: migrate the state database now, or show its revision."""
    from app.database import cli_db

    return cli_db(_settings(), args.op, as_json=args.json)


def cmd_purge(args: argparse.Namespace) -> int:
    """``chatops purge [--json]``: the daily retention purge, once."""
    from app.retention import cli_purge

    return cli_purge(_settings(), as_json=args.json)


def cmd_forget(args: argparse.Namespace) -> int:
    """``chatops forget --user ID --yes [--json]``: delete one person's stored messages and records."""
    from app.retention import cli_forget

    return cli_forget(_settings(), args.user, yes=args.yes, as_json=args.json)


def cmd_report(args: argparse.Namespace) -> int:
    """``chatops report [--since 7d] [--json | --html FILE]``: the knowledge-gap report (:mod:`app.report`)."""
    from datetime import datetime, timezone
    from pathlib import Path

    from app.report import report_from_settings, parse_since
    from app.report_render import render_html, render_text

    settings = _settings()
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
    from .mcp.command import McpUsageError, serve_mcp, token_command

    try:
        if args.mcp_op == "token":
            return token_command(_settings(), args.token_op, args.user, args.token_id, args.label, args.json)
        settings = _settings()
        out = sys.stdout
        if not args.http:  # stdout is the protocol's: the SDK writes it, nothing else may
            sys.stdout = sys.__stdout__
        try:
            return serve_mcp(settings, args.as_user, args.http, args.host, args.port, tuple(args.allow_host))
        finally:
            sys.stdout = out
    except McpUsageError as exc:
        raise ConfigError(str(exc)) from None


SOURCE_SPECS = """source specs:
  folder:PATH[?name=NAME&url_base=URL&url_template=T&exclude=GLOB]
      Markdown/HTML files under PATH; NAME defaults to the folder's name; with url_base, pages
      link to their front matter's permalink or URL/<path without suffix> (url_template, e.g.
      {url_base}/{jekyll_path}, for sites that rewrite paths), else to file:// paths (shown by the
      CLI only); README.md, SOURCE.md, LICENSE* and CONTRIBUTING.md at the root are left out
      (exclude=GLOB, repeated or |-separated, sets the list; an empty exclude= indexes every file)
  confluence:URL?space=KEY[,KEY2][&name=&deployment=cloud|datacenter&timezone=&email_env=&token_env=]
  mediawiki:API_URL[?name=&namespaces=0,4&username_env=&password_env=]
  (credentials are read from the named environment variables; see docs/how-to/)"""


def _command(sub, name: str, summary: str, description: str, examples: list[str]) -> argparse.ArgumentParser:
    """One subcommand with a one-line summary (``chatops --help``), a description and examples."""
    epilog = "examples:\n" + "\n".join(f"  {e}" for e in examples)
    return sub.add_parser(name, help=summary, description=description, epilog=epilog,
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("chatops-bot")
    except PackageNotFoundError:  # pragma: no cover - running from a checkout that was never installed
        return "unknown (not installed: run make install)"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for tests and docs)."""
    p = argparse.ArgumentParser(prog="chatops", description="Answers from your wiki, with verified citations, "
                                "and books meetings. Settings come from the environment (see docs/reference/settings.md).",
                                epilog="Run `chatops COMMAND --help` for a command's options and examples.")
    p.add_argument("--version", action="version", version=f"chatops {_version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    pi = _command(sub, "index", "index sources (incremental)",
                  "Index one or more sources into the data dir (CHATOPS_DATA_DIR): new and changed pages are "
                  "chunked and embedded, unchanged ones skipped, pages gone from a folder deleted.\n\n"
                  + SOURCE_SPECS,
                  ["chatops index folder:./examples/wiki", "chatops index --full folder:./docs?name=handbook",
                   "chatops index confluence:https://acme.atlassian.net/wiki?space=ENG"])
    pi.add_argument("sources", nargs="+", metavar="SOURCE", help="a source spec (see the list above)")
    pi.add_argument("--full", action="store_true", help="drop the sources' pages and index them again")
    pi.set_defaults(func=cmd_index)
    pa = _command(sub, "ask", "ask one question",
                  "Answer one question from the index, with numbered citations, or refuse when the sources do "
                  "not support an answer; a meeting or reminder request gets a preview and the key to confirm it "
                  "(its times read in DEFAULT_TIMEZONE, else this machine's zone: TZ or /etc/localtime). --as "
                  "EMAIL answers with that person's own access (as in a DM); without it only public pages are used.",
                  ['chatops ask "how do I declare an incident?"',
                   'chatops ask "remind me tomorrow at 9am to send the weekly report"',
                   'chatops ask --as ana@acme.com "what are the salary bands?"',
                   'chatops ask --history "when do minor releases go out?" "and the branch cut?"',
                   'chatops ask --json "what is the home office budget?"'])
    pa.add_argument("question")
    pa.add_argument("--history", action="append", metavar="EARLIER_QUESTION", help="earlier question(s) of the thread")
    pa.add_argument("--json", action="store_true", help="print one JSON object")
    pa.add_argument("--retriever", choices=["hybrid", "bm25", "dense"], default="hybrid")
    pa.add_argument("--as", dest="as_user", metavar="EMAIL", help="answer as this person would see it in a DM "
                    "(their own access); without it, public pages only")
    pa.set_defaults(func=cmd_ask)
    pc = _command(sub, "chat", "a console conversation with thread memory",
                  "A conversation in the terminal: earlier messages are the thread's history. /new starts a new "
                  "thread, /confirm and /cancel settle a proposed meeting, /quit or Ctrl-D ends.",
                  ["chatops chat", "chatops chat --as ana@acme.com", "chatops chat --retriever dense"])
    pc.add_argument("--retriever", choices=["hybrid", "bm25", "dense"], default="hybrid")
    pc.add_argument("--as", dest="as_user", metavar="EMAIL", help="converse as this person (their own access, "
                    "as in a DM); without it, public pages only")
    pc.set_defaults(func=cmd_chat)
    pe = _command(sub, "eval", "score the bot on an eval file, or on several sets in one table",
                  "Run every question of a JSONL eval file through the agent and print retrieval (recall@k, MRR, "
                  "nDCG), answer (expected strings, citation validity, citation precision: cited pages that are "
                  "gold pages, refusals, answer length) and latency figures. --json adds each question's row with "
                  "the reply text and its citations.\n\n"
                  "With --set NAME=QUESTIONS::SOURCE[::SOURCE...] (repeatable) each set is indexed into its own "
                  "folder, DATA_DIR/eval/NAME (incremental on re-runs; the embedding cache is shared), and one "
                  "table with a row per set is printed (--json: {\"retriever\", \"sets\": {NAME: result}}).\n\n"
                  + SOURCE_SPECS,
                  ["chatops eval --questions examples/eval.jsonl --source folder:examples/wiki",
                   "chatops eval --questions dev.jsonl --source folder:./handbook --retriever bm25 --json",
                   "chatops eval --set wiki=examples/eval.jsonl::folder:examples/wiki \\\n"
                   "               --set dev2=../shared/eval/dev2.jsonl::folder:../shared/corpus/meltano-handbook"])
    pe.add_argument("--questions", help="JSONL eval file (asked of the data dir's index)")
    pe.add_argument("--source", action="append", help="source spec to index first (if needed), with --questions")
    pe.add_argument("--set", action="append", metavar="NAME=QUESTIONS::SOURCE", help="an eval set on its own index "
                    "(repeatable; instead of --questions): one table with a row per set")
    pe.add_argument("--retriever", choices=["hybrid", "bm25", "dense"], default="hybrid")
    pe.add_argument("--k", type=int, default=10, help="also report recall@K (K documents)")
    pe.add_argument("--json", action="store_true", help="print exactly one JSON object")
    pe.set_defaults(func=cmd_eval)
    ps = _command(sub, "serve", "serve Slack and Teams (POST /slack/events, /api/messages, GET /healthz, /readyz)",
                  "Run the bot's web server for the configured platforms (Slack: SLACK_BOT_TOKEN and "
                  "SLACK_SIGNING_SECRET; Teams: MicrosoftAppId and MicrosoftAppPassword), sync the configured "
                  "sources at start-up and on their schedules. SIGINT or SIGTERM stops it cleanly.",
                  ["chatops serve --port 3000", "chatops serve --socket-mode", "chatops serve --no-sync"])
    ps.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    ps.add_argument("--port", type=int, default=3000, help="port to listen on (default 3000; 0 picks a free one)")
    ps.add_argument("--socket-mode", action="store_true", help="receive Slack over Socket Mode (SLACK_APP_TOKEN) "
                    "instead of HTTP; /healthz and /readyz are still served")
    ps.add_argument("--no-sync", action="store_true", help="skip the start-up sync of CHATOPS_SOURCES")
    ps.add_argument("--role", choices=["all", "web"], default="all",
                    help="all (default): answer and write the index; web: answer only, /kb reindex queues a job "
                         "for `chatops worker` (needs QDRANT_URL)")
    ps.set_defaults(func=cmd_serve)
    pw = _command(sub, "worker", "write the index: run the syncs on their schedules and the queued re-index jobs",
                  "Run the schedules of the configured sources (content and permission syncs), the re-index jobs "
                  "that `chatops serve --role web` replicas queued for this index, and the daily retention purge. "
                  "Serves no chat platform. SIGINT or SIGTERM stops it cleanly.",
                  ["chatops worker", "chatops worker --no-sync"])
    pw.add_argument("--no-sync", action="store_true", help="skip the start-up sync of CHATOPS_SOURCES")
    pw.set_defaults(func=cmd_worker)
    py = _command(sub, "sync", "sync the configured sources once (chatops.yml / CHATOPS_SOURCES)",
                  "Run the scheduled sync job once for every configured source (or one): fetch what changed "
                  "since the cursor, index it, then move the cursor. Exit 1 when a source's run failed.",
                  ["chatops sync", "chatops sync --source handbook --full", "chatops sync --json"])
    py.add_argument("--source", metavar="NAME", help="only this source (default: all)")
    py.add_argument("--full", action="store_true", help="re-list and re-fetch every page (prunes; drops nothing first)")
    py.add_argument("--json", action="store_true", help="print one JSON array of run results")
    py.set_defaults(func=cmd_sync)
    pt = _command(sub, "status", "the data dir, and per source: pages, chunks, last run, schedule",
                  "Show the data dir in use and, per source, the pages and chunks indexed, the last index or "
                  "sync run and its summary, the schedule, the gate's calibration and the pages flagged for "
                  "secrets or planted instructions. Works while `chatops serve` runs.",
                  ["chatops status", "chatops status --json"])
    pt.add_argument("--json", action="store_true", help="print one JSON array")
    pt.set_defaults(func=cmd_status)
    pr = _command(sub, "sources", "list the indexed and configured sources, or remove one's pages",
                  "list: every source in the index or the configuration, with its pages and chunks. remove NAME "
                  "--yes: delete that source's pages from both indexes and forget its cursor and runs (a source "
                  "still configured is indexed again by its next sync).",
                  ["chatops sources list", "chatops sources remove old-wiki --yes"])
    pr.add_argument("op", choices=["list", "remove"])
    pr.add_argument("name", nargs="?", help="the source to remove")
    pr.add_argument("--yes", action="store_true", help="confirm the removal (nothing is removed without it)")
    pr.add_argument("--json", action="store_true", help="list: print one JSON array")
    pr.set_defaults(func=cmd_sources)
    pb = _command(sub, "calibrate", "fit the evidence gate on the indexed corpus (self-made probes)",
                  "Fit the evidence gate's operating point on the indexed corpus from self-made answerable and "
                  "near-miss probes (no labelled data) and store it with the index; indexing runs do this "
                  "when the corpus changed substantially.",
                  ["chatops calibrate", "chatops calibrate --json"])
    pb.add_argument("--json", action="store_true", help="print the calibration record as one JSON object")
    pb.set_defaults(func=cmd_calibrate)
    pk = _command(sub, "actions", "confirm, cancel or show a pending action (e.g. a meeting or a reminder `ask` proposed)",
                  "Settle a pending action from the shell: confirm runs it exactly once, cancel drops it, show "
                  "prints it. The key is printed with the preview.",
                  ["chatops actions confirm 0123456789abcdefghijklmnopqrstuv", "chatops actions show KEY --json"])
    pk.add_argument("op", choices=["confirm", "cancel", "show"])
    pk.add_argument("key", help="the pending action's key (printed with its preview)")
    pk.add_argument("--json", action="store_true", help="print one JSON object")
    pk.set_defaults(func=cmd_actions)
    pm = _command(sub, "reminders", "show your reminders that are due (once) and list the ones to come",
                  "Reminders scheduled from `chatops ask` or `chatops chat` cannot be pushed to a shell: this shows "
                  "the ones that are due, each once, then lists the ones still to come (soonest first).",
                  ["chatops reminders", "chatops reminders --json"])
    pm.add_argument("--json", action="store_true", help="print one JSON object")
    pm.set_defaults(func=cmd_reminders)
    pd = _command(sub, "db", "the state database's schema: upgrade it now, or show its revision",
                  "upgrade: bring the state database (DATABASE_URL, or state.sqlite in the data dir) to the schema "
                  "this chatops needs; start-up does the same, this runs it ahead (back up the database first). "
                  "current: its revision and whether it is the newest (exit 1 when not).",
                  ["chatops db current", "chatops db upgrade", "chatops db current --json"])
    pd.add_argument("op", choices=["upgrade", "current"])
    pd.add_argument("--json", action="store_true", help="print one JSON object")
    pd.set_defaults(func=cmd_db)
    pu = _command(sub, "purge", "delete what is past its retention (the daily job, once)",
                  "Delete conversation histories and the turn log older than RETENTION_DAYS_CONVERSATIONS, feedback "
                  "older than RETENTION_DAYS_FEEDBACK, and the audit log, old runs, settled actions and messages and "
                  "ended local-calendar events older than RETENTION_DAYS_AUDIT; prints the rows deleted per table "
                  "and records the run (chatops status shows it). chatops serve runs it daily.",
                  ["chatops purge", "RETENTION_DAYS_CONVERSATIONS=7 chatops purge --json"])
    pu.add_argument("--json", action="store_true", help="print one JSON object")
    pu.set_defaults(func=cmd_purge)
    pf = _command(sub, "forget", "delete one person's stored messages, turn log, feedback and actions",
                  "Delete what the state store keeps of one Slack or Teams user: their messages in stored "
                  "conversations (others' stay), their turn log, feedback, pending actions and scheduled messages. "
                  "The audit log keeps what was done, under a random pseudonym instead of the id. Needs --yes.",
                  ["chatops forget --user U0123ABCD --yes", "chatops forget --user 29:1a2b3c --yes --json"])
    pf.add_argument("--user", required=True, metavar="ID", help="the Slack (U...) or Teams user id, or mcp:EMAIL for "
                    "an AI assistant's user (chatops mcp; their tokens are deleted too)")
    pf.add_argument("--yes", action="store_true", help="confirm (nothing is deleted without it)")
    pf.add_argument("--json", action="store_true", help="print one JSON object")
    pf.set_defaults(func=cmd_forget)
    pq = _command(sub, "mcp", "serve the knowledge base to AI assistants (Model Context Protocol; read-only)",
                  "Serve the Model Context Protocol for AI assistants (Claude Desktop, VS Code, Cursor, any MCP "
                  "client): the tools `search` (passages with title, section, link, last update and quote) and "
                  "`ask` (a cited answer, or a refusal naming the closest page), and the resource "
                  "chatops://sources (each source's freshness). Read-only: no action tool. Retrieval uses the "
                  "caller's own access, as in a DM.\n\n"
                  "stdio (one person's assistant starts it): --as EMAIL says whose access applies.\n"
                  "Streamable HTTP (--http, its own port; one server for everyone): each request carries a bearer "
                  "token an admin issued for one person (`chatops mcp token create --user EMAIL`, shown once, "
                  "stored hashed; `list`, `revoke ID`); no, unknown or revoked token: 401.\n\n"
                  "Claude Desktop (claude_desktop_config.json):\n"
                  '  {"mcpServers": {"chatops": {"command": "chatops", "args": ["mcp", "--as", "ana@acme.com"],\n'
                  '                              "env": {"CHATOPS_DATA_DIR": "/srv/chatops/.chatops"}}}}\n'
                  "VS Code (.vscode/mcp.json), over HTTP:\n"
                  '  {"servers": {"chatops": {"type": "http", "url": "https://chatops.acme.com:3001/mcp",\n'
                  '                           "headers": {"Authorization": "Bearer ${input:chatops-token}"}}}}\n'
                  "More: docs/how-to/mcp.md. Serving needs the mcp extra: pip install 'chatops-bot[mcp]'.",
                  ["chatops mcp --as ana@acme.com", "chatops mcp --http --port 3001",
                   "chatops mcp --http --host 0.0.0.0 --port 3001",
                   "chatops mcp token create --user ana@acme.com --label 'VS Code on ana-laptop'",
                   "chatops mcp token list", "chatops mcp token revoke 3f9a0c1d2e4b"])
    pq.add_argument("--as", dest="as_user", metavar="EMAIL", help="stdio: serve as this person (their own access, "
                    "as in a DM)")
    pq.add_argument("--http", action="store_true", help="serve Streamable HTTP on --host/--port instead of stdio "
                    "(bearer tokens required)")
    pq.add_argument("--host", default="127.0.0.1", help="--http: address to listen on (default 127.0.0.1; 0.0.0.0 "
                    "for every interface, behind TLS)")
    pq.add_argument("--port", type=int, default=3001, help="--http: port (default 3001; 0 picks a free one)")
    pq.add_argument("--allow-host", action="append", default=[], metavar="NAME", help="--http: also serve requests "
                    "whose Host header is NAME (the name clients or a reverse proxy use; repeatable); on 127.0.0.1 "
                    "only loopback names are served otherwise (DNS-rebinding protection)")
    pq.set_defaults(func=cmd_mcp, mcp_op=None)
    pqs = pq.add_subparsers(dest="mcp_op", metavar="token")
    pqt = pqs.add_parser("token", help="issue, list or revoke the bearer tokens of --http",
                         description="Bearer tokens of `chatops mcp --http`, one per person: create prints the "
                         "token once (only its SHA-256 digest is stored), list shows ids, people, state and last "
                         "use, revoke ID refuses it from the next request on. Every change is audited.")
    pqt.add_argument("token_op", choices=["create", "list", "revoke"])
    pqt.add_argument("token_id", nargs="?", metavar="ID", help="revoke: the token's id (from list)")
    pqt.add_argument("--user", metavar="EMAIL", help="create: the person it acts for; list: only theirs")
    pqt.add_argument("--label", default="", help="create: a note, e.g. the device or assistant")
    pqt.add_argument("--json", action="store_true", help="print one JSON object (create, revoke) or array (list)")
    pqt.set_defaults(func=cmd_mcp)
    pg = _command(sub, "report", "the knowledge-gap report: refused questions, unhelpful answers, page use",
                  "What the wiki could not answer and which pages carry it, for a period: refused questions grouped "
                  "by similar wording (most frequent first), answers marked not helpful with their citations and "
                  "comments, and per source the most cited pages, the pages never cited and the stale ones (cited, "
                  "not updated for STALE_AFTER_DAYS), with the answer rate. Reads the turn log that `chatops serve` "
                  "keeps; works while it runs. Text by default.",
                  ["chatops report", "chatops report --since 30d", "chatops report --since 2026-11-01 --json",
                   "chatops report --html gaps.html"])
    pg.add_argument("--since", default="7d", metavar="PERIOD", help="a period back from now (7d, 24h, 2w) or a "
                    "date (2026-11-01); default 7d")
    out = pg.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print one JSON object")
    out.add_argument("--html", metavar="FILE", help="write a self-contained HTML page to FILE")
    pg.set_defaults(func=cmd_report)
    return p


def _storage_failure(exc: BaseException) -> str | None:
    """The message for a full disk or a damaged SQLite file that no store mapped itself, else ``None``.

    (The manifest and the stores name their own files; this catches the rest, e.g. the state store.)
    """
    import os

    data_dir = os.environ.get("CHATOPS_DATA_DIR", ".chatops")
    if not (is_disk_full(exc) or is_sqlite_damage(exc)):
        return None
    err = storage_error(exc, "a file in the data dir", data_dir,
                        "move the damaged file away and run the command again (the index can be rebuilt with "
                        "`chatops sync --full`; state.sqlite holds cursors, pending actions and the audit log: "
                        "restore it from a backup if you have one)", damage=lambda e: False)
    return str(err) if err is not None else None


def _undecodable_argument(args: argparse.Namespace) -> str | None:
    """The message for an argument that is not valid UTF-8 text, else ``None``.

    Python hands a byte that is not UTF-8 to the program as a lone surrogate (``surrogateescape``); a
    caller of :func:`main` can pass one directly. Neither can be stored, searched or sent anywhere.
    """
    for name, value in vars(args).items():
        for item in value if isinstance(value, list) else [value]:
            if not isinstance(item, str):
                continue
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                what = "the question" if name == "question" else f"--{name.replace('_', '-')}"
                char = item[exc.start]
                raw = char.encode("utf-8", "surrogateescape") if "\udc80" <= char <= "\udcff" else b""
                detail = f"the byte 0x{raw[0]:02x}" if raw else f"a lone surrogate U+{ord(char):04X}"
                return (f"{what} is not valid UTF-8 text ({detail} at character {exc.start + 1}); "
                        "check the terminal's or the script's encoding (e.g. LANG=C.UTF-8) and try again")
    return None


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``chatops`` console script.

    Everything the command prints passes :mod:`bot.terminal` (no escape sequences or control characters
    from stored text reach the terminal; ``--json`` output keeps them as JSON escapes), argparse's usage
    errors and help included.
    """
    from .terminal import install

    with install():  # argparse's own messages (a usage error echoes the arguments it rejects) pass it too
        args = build_parser().parse_args(argv)
    with install(as_json=bool(getattr(args, "json", False))):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    """Run the parsed command; map the errors a user can fix to a one-line message and exit 2."""
    bad = _undecodable_argument(args)
    if bad is not None:
        print(f"chatops: {bad}", file=sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except (ChatopsError, ConfigError) as exc:
        print(f"chatops: {exc}", file=sys.stderr)
        return 2
    except (ValueError, FileNotFoundError) as exc:
        print(f"chatops: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        from state import StateStoreError  # loaded by any command that got this far with the state store

        if isinstance(exc, StateStoreError):  # unreachable database, failed or refused migration
            print(f"chatops: {exc}", file=sys.stderr)
            return 2
        message = _storage_failure(exc)
        if message is None:
            raise
        log.debug("storage failure", exc_info=True)
        print(f"chatops: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("chatops: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
