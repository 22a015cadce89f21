"""``chatops ask`` and ``chatops chat``: questions from the shell, with the asker's access."""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from typing import TYPE_CHECKING

from .settings import ConfigError, load_settings

if TYPE_CHECKING:
    from app.settings import Settings
    from index.embeddings import Embedder

__all__ = ["cmd_ask", "ask_here", "cmd_chat", "cli_access", "empty_index_message"]

def cmd_ask(args: argparse.Namespace) -> int:
    """``chatops ask QUESTION [--history H]... [--json] [--no-worker]``, or ``chatops ask --start-worker``.

    With the warm ask worker enabled (``ASK_WORKER``, :func:`.warm.enabled`: by default only at a terminal), the
    worker of this data dir answers first, before anything heavy is imported here (one that is still starting is
    waited for); when none answers (none running, other settings or code, a timeout, anything unexpected) this
    process answers itself, exactly as without a worker, and then starts one in the background for the next question.

    Raises:
        ConfigError: no question (and no ``--start-worker``), a question with ``--start-worker``, or
            ``--start-worker`` with ``ASK_WORKER=off``.
    """
    from . import warm

    if args.start_worker:
        return _start_worker(args)
    if args.question is None:
        raise ConfigError("ask needs a question: chatops ask \"how do I declare an incident?\"")
    if warm.enabled(args.no_worker):
        served = warm.ask_worker({"question": args.question, "history": list(args.history or ()),
                                  "json": bool(args.json), "retriever": args.retriever, "as_user": args.as_user})
        if served is not None:
            sys.stdout.write(served.stdout)
            sys.stderr.write(served.stderr)
            return served.rc
    settings = load_settings(answers_on_stdout=True, terminal=True)
    rc = ask_here(args, settings)
    if warm.enabled(args.no_worker, settings.ask_worker):
        warm.start_worker()
    return rc


def _start_worker(args: argparse.Namespace) -> int:
    """``chatops ask --start-worker``: start the worker (whatever the terminal; not with ``ASK_WORKER=off``) and say
    so on stderr; 0 also when one is running or starting already (it holds the data dir's lock)."""
    from . import warm

    if args.question is not None:
        raise ConfigError("--start-worker asks nothing: run it without a question")
    if warm.mode(args.no_worker) == "off":
        raise ConfigError("the ask worker is off (ASK_WORKER=off or --no-worker): nothing to start")
    where = warm.place()
    if not where.make():
        raise ConfigError(f"{where.folder} is not a folder of this user that only they may enter (mode 0700): "
                          "the ask worker's socket is not put there")
    if warm.start_worker(where):
        print(f"chatops: starting the ask worker for {where.folder.parent} (log: {where.log})", file=sys.stderr)
    else:
        print(f"chatops: an ask worker is running or starting for {where.folder.parent} already", file=sys.stderr)
    return 0


def ask_here(args: argparse.Namespace, settings: Settings, model: Embedder | None = None) -> int:
    """Answer ``chatops ask``'s question in this process, with these settings, and print it: what ``chatops ask``
    runs, and what the warm worker runs for it (``model``: its embedding model, loaded once; the embedding cache
    and the index are opened for this question and closed after it).

    Raises:
        ConfigError: the index is empty (and the question needed it), or ``--as`` is not an e-mail address.
    """
    from agent.models import HistoryMessage
    from app.inbound import InboundMessage
    from app.layout import sections
    from app.turns import build_turn
    from app.wiring import build_agent, build_embedder, open_index

    from ..cli_actions import cli_propose, cli_user
    from ..console import render_reply

    embedder = build_embedder(settings, lazy_model=True, model=model)  # a cached question needs no model
    try:
        rt = build_agent(settings, open_index(settings, embedder), retriever=args.retriever)
    except BaseException:
        embedder.cache.close()
        raise
    try:
        empty = rt.index.stats()["pages"] == 0
        user = cli_user()
        access = cli_access(settings, rt.access, args.as_user)
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
        embedder.cache.close()  # (the worker lives on: nothing stays open from one question to the next)
    if empty and not reply.pending_action and reply.route in {"knowledge", "followup"}:
        # Nothing to answer from: say so and how to fix it (a meeting request still works without an index).
        raise ConfigError(empty_index_message(settings))
    if args.json:
        print(json.dumps(reply.as_dict(), ensure_ascii=False))
    else:
        print(sections(render_reply(reply), pending))
    return 0


def cli_access(settings: Settings, policy, as_user: str | None):
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
    from app.inbound import InboundMessage
    from app.turns import build_turn
    from app.wiring import build_agent

    from ..cli_actions import cli_action, cli_propose, cli_user
    from ..console import render_reply

    settings = load_settings(answers_on_stdout=True, terminal=True)
    rt = build_agent(settings, retriever=args.retriever)
    access = cli_access(settings, rt.access, args.as_user)
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

