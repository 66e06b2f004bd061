"""What every command shares: the root, the errors and exit codes, progress, output.

**The root is never created.** :meth:`Cli.memory` refuses a root that does
not exist (and, on the embedded backend, a directory without the
``sessions.sqlite`` every opened memory has) with exit code 3, before
:class:`~agentmem.Memory` would create it. An existing root is opened the
way the library opens it: agentmem has no read-only mode, so what opening
normally does still happens (a damaged sessions database is moved aside and
reported, a damaged recall index rebuilt); the commands that only read add
nothing else (``tests/test_cli.py`` compares the root's files before and
after).

**One line per error.** :func:`error_exit` maps an exception to its exit
code and one ``agentmem: error: <what> (<hint>)`` line; the traceback is
printed only with ``AGENTMEM_DEBUG=1``.

**Progress only on a terminal.** :class:`Progress` is the memory's
:class:`~agentmem.protocols.ProgressReporter`; it draws one line on stderr
(rewritten in place, cleared at the end) when stderr is a terminal, and
writes nothing at all otherwise, so piped output stays clean.
"""

from __future__ import annotations

import json
import os
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from agentmem import Memory
from agentmem._storage.backend import SESSIONS_FILE
from agentmem.errors import (
    AgentMemError,
    CorruptStoreError,
    FormatVersionError,
    SessionNotFoundError,
    StoreLockedError,
)
from agentmem.session_store import SessionInfo

__all__ = [
    "DEBUG_ENV",
    "DEFAULT_ROOT",
    "EXIT_ERROR",
    "EXIT_LOCKED",
    "EXIT_OK",
    "EXIT_PROBLEMS",
    "EXIT_ROOT",
    "EXIT_USAGE",
    "ROOT_ENV",
    "Cli",
    "CliError",
    "Output",
    "Progress",
    "error_exit",
    "info_json",
    "iso",
    "render_json",
    "terminal_text",
]

EXIT_OK = 0
EXIT_PROBLEMS = 1
"""The command ran and found problems (``doctor`` found damage)."""
EXIT_USAGE = 2
EXIT_ROOT = 3
EXIT_LOCKED = 4
EXIT_ERROR = 5

ROOT_ENV = "AGENTMEM_ROOT"
DEFAULT_ROOT = ".agentmem"
DEBUG_ENV = "AGENTMEM_DEBUG"


class CliError(Exception):
    """A refusal of the CLI itself (not the library's): its exit code, what, a hint."""

    def __init__(self, code: int, what: str, hint: str = "") -> None:
        super().__init__(what)
        self.code = code
        self.what = what
        self.hint = hint


@dataclass(frozen=True)
class Output:
    """What a command produced: the JSON document, its text form, the exit code."""

    data: Any
    text: str
    code: int = EXIT_OK


def iso(timestamp: float | None) -> str:
    """``2026-11-27T03:24:45Z`` (UTC, seconds), or ``-`` for no time."""
    if timestamp is None or not timestamp:
        return "-"
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(timestamp))


def render_json(data: Any) -> str:
    """``data`` as one indented JSON document (paths and the like as strings)."""
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False, default=str)


def info_json(info: SessionInfo) -> dict[str, Any]:
    """A session's metadata as ``session list`` prints it (times in epoch seconds)."""
    return {
        "id": info.id,
        "name": info.name,
        "created_at": info.created_at,
        "updated_at": info.updated_at,
        "working_directory": info.working_directory,
        "model": info.model,
        "context_window": info.context_window,
        "message_count": info.message_count,
        "damaged": list(info.damaged),
    }


# ---------------------------------------------------------------------- progress

_CLEAR = "\r\x1b[K"


def _describe(event: str, data: Mapping[str, Any]) -> str:
    """One short line for a progress event (docs/progress.md lists them)."""
    if event == "export.started":
        return f"exporting session {data.get('session_id')} to {data.get('path')} ..."
    if event == "export.progress":
        return f"exporting to {data.get('path')}: {data.get('done')}/{data.get('total')} messages"
    if event == "export.finished":
        return f"exported {data.get('bytes') or 0} bytes to {data.get('path')}"
    if event == "recall.index_rebuild.started":
        return f"rebuilding the recall index ({data.get('reason')}) ..."
    if event == "recall.index_rebuild.finished":
        return "recall index rebuilt" if data.get("ok") else "recall index rebuild failed"
    if event == "context.trim":
        return (
            f"trimming the window: {data.get('tokens_before')} -> "
            f"{data.get('target_tokens')} tokens, {data.get('evicted_messages')} messages out"
        )
    if event == "doctor.store":
        return f"checking {data.get('store')} ({data.get('index')}/{data.get('total')}) ..."
    if event.endswith(".finished"):
        return ""  # the result follows; the line is cleared
    if event.endswith(".started"):
        return f"{event.removesuffix('.started').replace('_', ' ')} ..."
    shown = [f"{k}={v}" for k, v in data.items() if isinstance(v, str | int | float) and v != ""]
    return " ".join([event, *shown[:4]])


class Progress:
    """A :class:`~agentmem.protocols.ProgressReporter` drawing one line on a terminal.

    Writes nothing unless ``stream.isatty()``; the line is rewritten in place
    and cleared by :meth:`clear` before the command's output.
    """

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        try:
            self.active = bool(stream.isatty())
        except (AttributeError, ValueError, OSError):
            self.active = False
        self._shown = False

    def report(self, event: str, data: Mapping[str, Any]) -> None:
        self.note(_describe(event, data))

    def note(self, text: str) -> None:
        """Show ``text`` as the progress line (on a terminal only; ``""`` changes nothing)."""
        if not self.active or not text:
            return
        width = 100
        text = terminal_text(_one_line(text))  # event data may carry stored text
        line = text if len(text) <= width else text[: width - 3] + "..."
        self.stream.write(_CLEAR + line)
        self.stream.flush()
        self._shown = True

    def clear(self) -> None:
        if self._shown:
            self.stream.write(_CLEAR)
            self.stream.flush()
            self._shown = False


# ---------------------------------------------------------------------- the root


def resolve_root(value: str | None) -> Path:
    """``--root``, else ``AGENTMEM_ROOT``, else ``.agentmem``; absolute (from the cwd)."""
    chosen = value or os.environ.get(ROOT_ENV) or DEFAULT_ROOT
    return Path(chosen).expanduser().absolute()


def resolve_backend(value: str | None) -> str | None:
    """``--backend``, else ``AGENTMEM_BACKEND`` (read by :class:`Memory`), else embedded."""
    return value or None


def embedded(backend: str | None) -> bool:
    chosen = backend if backend is not None else os.environ.get("AGENTMEM_BACKEND", "")
    return not chosen or chosen in ("embedded", "sqlite")


def check_root(root: Path, backend: str | None) -> None:
    """Refuse (exit 3) a root that is missing, or on the embedded backend not a memory root."""
    if not root.exists():
        raise CliError(
            EXIT_ROOT, f"no agentmem root at {root}", f"pass --root DIR or set {ROOT_ENV}"
        )
    if not root.is_dir():
        raise CliError(EXIT_ROOT, f"{root} is not a directory", "pass the memory root with --root")
    if embedded(backend) and not (root / SESSIONS_FILE).is_file():
        raise CliError(
            EXIT_ROOT,
            f"{root} is not an agentmem root (no {SESSIONS_FILE})",
            "pass the directory a Memory(root=...) wrote, or --backend for PostgreSQL",
        )
    if not embedded(backend):
        dsn = backend if backend is not None else os.environ.get("AGENTMEM_BACKEND", "")
        if not _postgres_has_memory(dsn):
            raise CliError(
                EXIT_ROOT,
                "no agentmem memory in this database",
                "check the --backend DSN (or AGENTMEM_BACKEND); nothing was created",
            )


PG_MARKER = "agentmem.agentmem_meta"
"""The table every agentmem memory in PostgreSQL has (its schema's bookkeeping)."""


def _postgres_has_memory(dsn: str) -> bool:
    """Whether the database at ``dsn`` holds agentmem's tables (one read-only query), so
    that an inspection never creates a memory in an empty database (a DSN typo). A
    database that cannot be reached, or no psycopg, answers ``True``: opening the memory
    then reports that error as the library words it."""
    try:
        import psycopg
    except ImportError:
        return True
    try:
        with psycopg.connect(dsn, connect_timeout=5, autocommit=True) as conn:
            row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (PG_MARKER,)).fetchone()
    except psycopg.Error:
        return True
    return bool(row and row[0])


class Cli:
    """One command's run: the root, the backend, the output mode, the memory it opened."""

    def __init__(
        self,
        *,
        root: str | None,
        backend: str | None,
        as_json: bool,
        stdout: TextIO,
        stderr: TextIO,
        stdin: TextIO,
    ) -> None:
        self.root = resolve_root(root)
        self.backend = resolve_backend(backend)
        self.as_json = as_json
        self.stdout = stdout
        self.stderr = stderr
        self.stdin = stdin
        self.progress = Progress(stderr)
        self._memory: Memory | None = None

    def checked_root(self) -> Path:
        """The root, after :func:`check_root`."""
        check_root(self.root, self.backend)
        return self.root

    def memory(self, working_dir: str | Path | None = None) -> Memory:
        """The memory at the root, opened once (closed by :meth:`close`); never creates the root.

        ``working_dir``: the project a session's time machine works in (default: the cwd,
        which only matters to commands that open a session). Asking for another one
        closes the memory and opens it again there.
        """
        wanted = Path(working_dir if working_dir is not None else Path.cwd()).resolve()
        if self._memory is not None:
            if working_dir is None or self._memory.working_dir == wanted:
                return self._memory
            self.close()
        root = self.checked_root()
        mem = Memory(
            root=root,
            working_dir=wanted,
            reporter=self.progress,
            memory_update=False,
            backend=self.backend,
        )
        self._memory = mem
        recovery = mem.sessions.recovery
        if recovery is not None:
            self.warn(
                f"the sessions database was unreadable ({recovery.reason}); moved to "
                f"{recovery.moved_to}, {recovery.outcome or 'started an empty one'}"
            )
        return mem

    def warn(self, text: str) -> None:
        """One ``agentmem: warning: ...`` line on stderr (after the progress line)."""
        self.progress.clear()
        self.stderr.write(f"agentmem: warning: {terminal_text(_one_line(text))}\n")

    def close(self) -> None:
        self.progress.clear()
        mem, self._memory = self._memory, None
        if mem is not None:
            mem.close()


# ---------------------------------------------------------------------- errors

_HINTS: tuple[tuple[type[BaseException], int, str], ...] = (
    (StoreLockedError, EXIT_LOCKED, "close the agent that has it open, or wait for it"),
    (SessionNotFoundError, EXIT_ERROR, "`agentmem session list` shows the stored ids"),
    (FormatVersionError, EXIT_ERROR, ""),  # its message says: upgrade agentmem
    (CorruptStoreError, EXIT_ERROR, "`agentmem doctor` reports every damaged store"),
    (AgentMemError, EXIT_ERROR, ""),
)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def error_exit(exc: BaseException, stderr: TextIO) -> int:
    """Print ``exc`` as one ``agentmem: error:`` line (its traceback with AGENTMEM_DEBUG=1)
    and return its exit code."""
    if os.environ.get(DEBUG_ENV, "") not in ("", "0"):
        traceback.print_exception(exc, file=stderr)
    if isinstance(exc, CliError):
        code, what, hint = exc.code, exc.what, exc.hint
    else:
        code, what, hint = EXIT_ERROR, f"{type(exc).__name__}: {exc}", ""
        for kind, kind_code, kind_hint in _HINTS:
            if isinstance(exc, kind):
                code, hint = kind_code, kind_hint
                what = str(exc)
                break
        else:
            hint = f"an unexpected error; set {DEBUG_ENV}=1 for the traceback"
    line = _one_line(what) + (f" ({hint})" if hint else "")
    stderr.write(f"agentmem: error: {terminal_text(line)}\n")
    return code


_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
_CONTROLS = {
    c: f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"
    for c in (*range(0x20), *range(0x7F, 0xA0), *_BIDI)
    if chr(c) not in "\n\t"
}
"""Characters shown escaped on the terminal: C0 and C1 controls (escape sequences, CSI
U+009B) and the bidi controls (which reorder what is shown). Stored text (a tool's
output, a session name, a file name) must not drive the terminal (JSON escapes the
C0 controls itself; ``--json`` output is data, not shown text)."""


def terminal_text(text: str) -> str:
    """``text`` with every character in :data:`_CONTROLS` escaped (``\\x1b``, ``\\u202e``):
    everything the CLI writes to the terminal goes through this."""
    return text.translate(_CONTROLS)


def print_out(cli: Cli, output: Output) -> None:
    """The command's output on stdout: one JSON document with ``--json``, else its text."""
    cli.progress.clear()
    text = render_json(output.data) if cli.as_json else terminal_text(output.text)
    if text and not text.endswith("\n"):
        text += "\n"
    cli.stdout.write(text)
    cli.stdout.flush()
