"""The ``chatops`` argument parser: every command, its help, its examples and the function it runs."""

from __future__ import annotations

import argparse

from .asking import cmd_ask, cmd_chat
from .evaluating import cmd_eval
from .indexing import cmd_calibrate, cmd_index
from .operating import (cmd_actions, cmd_db, cmd_forget, cmd_mcp, cmd_purge, cmd_reminders, cmd_report, cmd_serve,
                        cmd_sources, cmd_status, cmd_sync, cmd_worker)

__all__ = ["build_parser", "SOURCE_SPECS"]

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
                   'chatops ask --json "what is the home office budget?"',
                   "chatops ask --start-worker"])
    pa.add_argument("question", nargs="?")
    pa.add_argument("--history", action="append", metavar="EARLIER_QUESTION", help="earlier question(s) of the thread")
    pa.add_argument("--json", action="store_true", help="print one JSON object")
    pa.add_argument("--retriever", choices=["hybrid", "bm25", "dense"], default="hybrid")
    pa.add_argument("--as", dest="as_user", metavar="EMAIL", help="answer as this person would see it in a DM "
                    "(their own access); without it, public pages only")
    pa.add_argument("--no-worker", action="store_true", help="answer in this process: do not ask or start the warm "
                    "ask worker (ASK_WORKER=auto|on|off; auto uses one when stdin and stdout are a terminal)")
    pa.add_argument("--start-worker", action="store_true", help="ask nothing: start the warm ask worker for this data "
                    "dir and settings in the background and return at once, so that the first question of a session "
                    "finds it warm (unless ASK_WORKER=off; chatops index and sync start it too, at a terminal)")
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

