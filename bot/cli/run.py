"""``chatops``'s entry point: parse, run the command, and turn the errors a user can fix into one line
and exit status 2."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable

from core.errors import ChatopsError
from index.faults import is_disk_full, is_sqlite_damage, storage_error

from .parser import build_parser
from .settings import ConfigError

__all__ = ["main", "run_command"]

log = logging.getLogger("chatops")


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
    from ..terminal import install

    with install():  # argparse's own messages (a usage error echoes the arguments it rejects) pass it too
        args = build_parser().parse_args(argv)
    with install(as_json=bool(getattr(args, "json", False))):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    return run_command(args, args.func)


def run_command(args: argparse.Namespace, func: Callable[[argparse.Namespace], int | None]) -> int:
    """Run ``func(args)`` (the parsed command's function; the ask worker passes its own, :mod:`.warm_worker`); map
    the errors a user can fix to a one-line message and exit 2."""
    bad = _undecodable_argument(args)
    if bad is not None:
        print(f"chatops: {bad}", file=sys.stderr)
        return 2
    try:
        return int(func(args) or 0)
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

