"""The doctor: open a memory root read-only, check every store, say what recovery would do.

:func:`diagnose` looks at everything a memory keeps (the root itself, the sessions
database and its recall index, long-term memory, notes, topics, items, semantic
memory, and the time machine's records and blobs) and returns a
:class:`DoctorReport`: one :class:`Finding` per problem (or per store, when it is
healthy), each naming the store, the file or session it is about, how bad it is,
and what opening the memory normally would do about it.

**It never writes under the root.** No recovery, quarantine, migration, lock file,
``-wal`` or ``-shm`` file. To predict what opening would do without doing it, each
store's files are copied into a private scratch directory and the store's own
opening and loading code runs on the copy (:mod:`._scratch`): the prediction is
the library's real behaviour, not a second implementation of it. The time
machine's blobs, which can be large, are verified in place by reading them. The
scratch copy needs free temporary space about the size of the stores (not of the
blobs), and is removed afterwards.

What it checks beyond what opening does: ``PRAGMA integrity_check`` of the whole
sessions database, every row checksum of every session (each session is loaded
on the copy), the full recall-index check, every referenced blob's hash, and the
locks live processes hold. On PostgreSQL (``backend=`` a DSN) it reads through
connections whose transactions are read-only (:mod:`._postgres`).

Errors: a root that does not exist, or is not an agentmem root, raises
:class:`RootNotFoundError` (a :class:`~agentmem.errors.ConfigurationError`);
everything found inside a root is a finding, never an exception.
"""

from __future__ import annotations

import os
import re
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path

from agentmem._events import emit, operation
from agentmem._storage.backend import (
    ITEMS_DIR,
    LTM_FILE,
    NOTES_DIR,
    SESSIONS_FILE,
    PostgresBackend,
    mask_dsn,
    open_backend,
)
from agentmem._storage.keys import TOPICS_DIR
from agentmem.doctor._documents import check_documents
from agentmem.doctor._others import check_semantic, check_time_machine
from agentmem.doctor._report import STORES, DoctorReport, Finding, Sink
from agentmem.doctor._scratch import quiet_logs, scratch_full
from agentmem.doctor._sessions import check_sessions
from agentmem.errors import ConfigurationError, StorageError
from agentmem.protocols import ProgressReporter
from agentmem.semantic.local import SEMANTIC_FILE
from agentmem.session.wiring import SNAPSHOTS_DIR

__all__ = ["DoctorReport", "Finding", "RootNotFoundError", "ScratchSpaceError", "diagnose"]

ROOT_MARKERS = (
    SESSIONS_FILE,
    LTM_FILE,
    NOTES_DIR,
    TOPICS_DIR,
    ITEMS_DIR,
    SEMANTIC_FILE,
    SNAPSHOTS_DIR,
    "locks",
)
"""What a directory holds once agentmem used it as a root (any one of them marks it)."""

_EMBEDDED_STEPS = ("sessions", "ltm", "notes", "topics", "items", "semantic", "time-machine")
_PG_STEPS = ("sessions", "ltm", "notes", "topics", "items", "time-machine")


class ScratchSpaceError(StorageError):
    """The doctor's scratch copy (under ``TMPDIR``) ran out of space: nothing was found
    about the root, and the copy is removed."""


class RootNotFoundError(ConfigurationError):
    """The memory root does not exist, or is not an agentmem root."""

    def __init__(self, message: str, *, path: Path) -> None:
        super().__init__(message)
        self.path = path


def diagnose(
    root: str | os.PathLike[str],
    *,
    backend: str | None = None,
    progress: ProgressReporter | None = None,
) -> DoctorReport:
    """Check a memory root without writing to it (see the module docstring).

    Args:
        root: The memory root (``Memory(root=...)``).
        backend: ``None`` (read ``AGENTMEM_BACKEND``; unset: embedded), ``"embedded"``,
            or a PostgreSQL DSN: the stores are checked there, the time machine under
            ``root``.
        progress: Receives ``doctor.started``, one ``doctor.store`` per store checked,
            and ``doctor.finished`` (docs/progress.md).

    Returns:
        The findings; :attr:`DoctorReport.ok` is ``False`` when any is ``"damaged"``.

    Raises:
        RootNotFoundError: ``root`` does not exist, is not a directory, or (embedded)
            holds nothing agentmem writes.
        ConfigurationError: ``backend`` is not ``"embedded"`` or a PostgreSQL DSN (or
            the DSN cannot be parsed).
        ScratchSpaceError: the scratch copy ran out of space (it names the directory;
            set ``TMPDIR``); no finding is reported and the copy is removed.
    """
    path = Path(os.fspath(root)).absolute()
    dsn = _dsn(backend)
    shown = "embedded" if dsn is None else mask_dsn(dsn)
    with operation(progress, "doctor", root=str(path), backend=shown):
        _check_root_exists(path, embedded=dsn is None)
        findings: list[Finding] = []
        steps = _EMBEDDED_STEPS if dsn is None else _PG_STEPS

        def step(store: str) -> None:
            emit(
                progress,
                "doctor.store",
                {"store": store, "index": steps.index(store) + 1, "total": len(steps)},
            )

        _root_findings(path, findings.append)
        with tempfile.TemporaryDirectory(prefix="agentmem-doctor-") as tmp:
            scratch = Path(tmp)
            try:
                with quiet_logs(scratch):
                    if dsn is None:
                        _embedded(path, scratch, findings.append, step)
                    else:
                        from agentmem.doctor._postgres import check_postgres

                        check_postgres(dsn, findings.append, step)
                    step("time-machine")
                    check_time_machine(path, findings.append)
            except (OSError, sqlite3.Error) as exc:
                if not (scratch_full(exc) or scratch_full(exc.__cause__ or exc)):
                    raise
                raise ScratchSpaceError(
                    f"the doctor's scratch copy in {scratch.parent} ran out of space ({exc}); "
                    "it needs free space about the size of the stores: set TMPDIR to a "
                    "directory with more room",
                    path=scratch.parent,
                ) from exc
        findings = [_outside(f, scratch, path) for f in findings]
    findings.sort(key=lambda f: STORES.index(f.store))  # stable: each store's in its order
    return DoctorReport(str(path), shown, tuple(findings))


def _outside(finding: Finding, scratch: Path, root: Path) -> Finding:
    """``finding`` with any path into the scratch copy said of the root instead (each
    check names the real files itself; this is the net under it)."""
    if str(scratch) not in finding.problem + finding.recovery + finding.target:
        return finding
    copies = re.compile(re.escape(str(scratch)) + r"/[^/\s]+")
    return Finding(
        finding.store,
        copies.sub(str(root), finding.target),
        finding.severity,
        copies.sub(str(root), finding.problem),
        copies.sub(str(root), finding.recovery),
    )


def _dsn(backend: str | None) -> str | None:
    """The PostgreSQL DSN to check, or ``None`` for the embedded files (the rule of
    :func:`~agentmem._storage.backend.open_backend`, which connects to nothing)."""
    chosen = open_backend(Path("."), backend)
    return chosen.dsn if isinstance(chosen, PostgresBackend) else None


def _check_root_exists(path: Path, *, embedded: bool) -> None:
    if not path.exists():
        raise RootNotFoundError(f"memory root {path} does not exist", path=path)
    if not path.is_dir():
        raise RootNotFoundError(f"memory root {path} is not a directory", path=path)
    if embedded and not any((path / m).exists() for m in ROOT_MARKERS):
        raise RootNotFoundError(
            f"{path} is not an agentmem root (it holds none of {', '.join(ROOT_MARKERS)})",
            path=path,
        )


def _root_findings(path: Path, add: Sink) -> None:
    present = [m for m in ROOT_MARKERS if (path / m).exists()]
    add(
        Finding(
            "root",
            str(path),
            "ok",
            f"an agentmem root holding {', '.join(present) or 'nothing yet'}",
            "nothing",
        )
    )
    leftovers: list[Path] = []
    for folder in (path, path / NOTES_DIR, path / TOPICS_DIR, path / ITEMS_DIR):
        if folder.is_dir():
            leftovers += sorted(p for p in folder.iterdir() if ".corrupt-" in p.name)
    for item in leftovers:
        add(
            Finding(
                "root",
                str(item),
                "warning",
                "a file an earlier recovery moved aside (kept for you to inspect)",
                "nothing: it stays until you delete it",
            )
        )


def _embedded(path: Path, scratch: Path, add: Sink, step: Callable[[str], None]) -> None:
    step("sessions")
    check_sessions(path, scratch, add, lambda _sid: None)
    check_documents(path, scratch, add, step)
    step("semantic")
    check_semantic(path, scratch, add)
