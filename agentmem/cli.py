"""The inspection CLI: ``agentmem`` (console script) and ``python -m agentmem``.

It inspects and maintains a memory; the library itself ships no agent UI.
Usage::

    agentmem [--root DIR] [--backend DSN] [--json] COMMAND ...

Commands (docs/cli.md has every option, the ``--json`` shapes and examples):
``memory list|search|stats|prune``, ``topics list|show``, ``notes list|show``,
``session list|show|export|trim|delete``, ``recall QUERY``,
``undo-history SESSION``, ``reindex`` and ``doctor``. ``--root``,
``--backend`` and ``--json`` go before or after the command.

Exit codes: 0 ok; 1 the command ran and found problems (``doctor`` found
damage; "no results" is never 1); 2 usage error; 3 the root is missing or
not an agentmem root (it is never created); 4 a session or store is locked
by another process; 5 a damaged store or any other error agentmem reported.
Every error is one line on stderr, ``agentmem: error: <what> (<hint>)``,
without a traceback unless ``AGENTMEM_DEBUG=1``. The library's warnings
(what it moved aside, repaired or could not read) come as
``agentmem: warning: ...`` lines. Long operations show one progress line
on stderr when it is a terminal, and nothing when it is piped.

The commands live in :mod:`agentmem._cli`; this module builds the parser and
runs one command.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from agentmem._cli import sessions, stores
from agentmem._cli.common import EXIT_ERROR, Cli, error_exit, print_out
from agentmem._cli.parsing import Commands, Handler, Parser, shared_options

__all__ = ["build_parser", "main"]

_EPILOG = """\
examples:
  agentmem session list
  agentmem session show 3f2a9c... --tail 20
  agentmem session export 3f2a9c...            # writes ./3f2a9c....html
  agentmem --json memory list --kind discovery
  agentmem recall "flaky test"
  agentmem --root /srv/agent/.agentmem doctor

exit codes: 0 ok, 1 problems found (doctor), 2 usage, 3 no agentmem root,
4 locked by another process, 5 damaged store or other error
(set AGENTMEM_DEBUG=1 for a traceback)
"""


def build_parser() -> argparse.ArgumentParser:
    """The ``agentmem`` argument parser (every command, with its help and examples)."""
    parser = Parser(
        prog="agentmem",
        description="Inspect and maintain an agentmem memory: long-term memory, topic files, "
        "notes, sessions, recall, the time machine's task tree and the stores' health.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[shared_options(top=True)],
    )
    commands = Commands(parser, "commands", "command")
    stores.register(commands)
    sessions.register(commands)
    return parser


class _WarningLines(logging.Handler):
    """The library's warnings as ``agentmem: warning: ...`` lines (after the progress line)."""

    def __init__(self, cli: Cli) -> None:
        super().__init__(logging.WARNING)
        self.cli = cli

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.cli.warn(" ".join(record.getMessage().split()))
        except Exception:
            self.handleError(record)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # not a real file (tests capture it)
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code (the console script exits with it).

    Args:
        argv: The arguments after the program name (default: ``sys.argv[1:]``).
    """
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2), already printed
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR
    cli = Cli(
        root=args.root,
        backend=args.backend,
        as_json=args.json,
        stdout=sys.stdout,
        stderr=sys.stderr,
        stdin=sys.stdin,
    )
    logger = logging.getLogger("agentmem")
    handler = _WarningLines(cli)
    logger.addHandler(handler)
    try:
        command: Handler = args.handler
        output = command(cli, args)
        cli.close()
        print_out(cli, output)
        return output.code
    except BrokenPipeError:  # the reader went away (`agentmem session show ID | head`)
        _silence_stdout()
        return 0
    except KeyboardInterrupt:
        cli.progress.clear()
        cli.stderr.write("agentmem: interrupted\n")
        return 130
    except Exception as exc:
        cli.progress.clear()
        return error_exit(exc, cli.stderr)
    finally:
        try:
            cli.close()
        finally:
            logger.removeHandler(handler)
