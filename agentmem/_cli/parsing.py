"""The parser's pieces: one-line usage errors, the shared options, command groups.

``--root``, ``--backend`` and ``--json`` are accepted before the command
(``agentmem --json session list``) and after it (``agentmem session list
--json``): every parser shares :func:`shared_options`; below the top level
their defaults are ``SUPPRESS``, so a value given before the command is not
overwritten by the subcommand's default.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any, NoReturn

from agentmem._cli.common import EXIT_USAGE, Cli, Output
from agentmem.session.wiring import MAX_CONTEXT_WINDOW, MIN_CONTEXT_WINDOW

__all__ = [
    "MAX_COUNT",
    "Commands",
    "Handler",
    "Parser",
    "confidence",
    "non_negative",
    "positive_int",
    "shared_options",
    "window_size",
]

Handler = Callable[[Cli, argparse.Namespace], Output]
"""A command: reads the parsed arguments, returns what to print."""


class Parser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` whose usage errors are one line (exit 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"agentmem: error: {message} (see `{self.prog} --help`)\n")


def shared_options(*, top: bool) -> argparse.ArgumentParser:
    """``--root``, ``--backend``, ``--json``: with defaults at the top, suppressed below."""
    parent = argparse.ArgumentParser(add_help=False)
    keep: Any = None if top else argparse.SUPPRESS
    parent.add_argument(
        "--root",
        metavar="DIR",
        default=keep,
        help="the memory root (default: $AGENTMEM_ROOT, else .agentmem); never created",
    )
    parent.add_argument(
        "--backend",
        metavar="DSN",
        default=keep,
        help="a postgresql:// DSN (default: $AGENTMEM_BACKEND, else the embedded files)",
    )
    parent.add_argument(
        "--json",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="print one JSON document on stdout instead of text",
    )
    return parent


class Commands:
    """Adds commands (and groups of them) under one parser's subcommands."""

    def __init__(self, parser: argparse.ArgumentParser, title: str, dest: str) -> None:
        self._sub = parser.add_subparsers(title=title, metavar="COMMAND", dest=dest)
        self._sub.required = True
        self._shared = shared_options(top=False)

    def _parser(self, name: str, help: str, examples: str) -> argparse.ArgumentParser:
        lines = "\n".join(f"  {line}" for line in examples.splitlines())
        parser: argparse.ArgumentParser = self._sub.add_parser(
            name,
            parents=[self._shared],
            help=help,
            description=help[:1].upper() + help[1:] + ".",
            epilog=f"examples:\n{lines}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        return parser

    def command(
        self, name: str, handler: Handler, help: str, examples: str
    ) -> argparse.ArgumentParser:
        """A command run by ``handler``; returns its parser for its own arguments."""
        parser = self._parser(name, help, examples)
        parser.set_defaults(handler=handler)
        return parser

    def group(self, name: str, help: str, examples: str) -> Commands:
        """A command with subcommands (``agentmem memory list``)."""
        return Commands(self._parser(name, help, examples), f"{name} commands", f"{name}_command")


MAX_COUNT = 2**31 - 1
"""The largest count (``--limit``, ``--tail``, ``--max-results``) a command accepts."""


def positive_int(text: str) -> int:
    """An int from 1 to :data:`MAX_COUNT` (argparse ``type``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 1 <= value <= MAX_COUNT:
        raise argparse.ArgumentTypeError(f"expected a number from 1 to {MAX_COUNT}, got {text}")
    return value


def window_size(text: str) -> int:
    """A context window in tokens: what a session accepts (256 to 2**31-1)."""
    value = positive_int(text)
    if not MIN_CONTEXT_WINDOW <= value <= MAX_CONTEXT_WINDOW:
        raise argparse.ArgumentTypeError(
            f"a context window is {MIN_CONTEXT_WINDOW} to {MAX_CONTEXT_WINDOW} tokens, got {value}"
        )
    return value


def non_negative(text: str) -> float:
    """A finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text}")
    return value


def confidence(text: str) -> float:
    """A confidence in 0..1."""
    value = non_negative(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"a confidence is between 0 and 1, got {text}")
    return value
