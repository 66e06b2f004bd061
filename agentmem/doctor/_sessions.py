"""The sessions database and its recall index, checked on a scratch copy.

The copy is opened by :class:`~agentmem.session_store.SessionStore` itself, so
what its recovery on open does to the copy (a damaged file moved aside and
salvaged, a recall index rebuilt) is what opening the real file would do; every
session is then loaded, which checks every row's checksum and quarantines what
does not parse, again on the copy. Four more looks, none of which opening makes:
the migrations still pending (before the copy is opened and upgraded),
``PRAGMA integrity_check``, the full recall-index check
(:meth:`SessionStore.check_recall_index` with ``repair=False``), and the session
locks other processes hold.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from agentmem._storage.backend import LTM_FILE, SESSIONS_FILE
from agentmem._storage.sqlite import header_problem, pending_migrations
from agentmem.doctor._report import Finding, Sink, failure
from agentmem.doctor._scratch import (
    copy_database,
    holder_pids,
    integrity_problems,
    is_locked,
    lenient_text,
    scratch_full,
)
from agentmem.errors import AgentMemError, StorageError
from agentmem.session.wiring import SNAPSHOTS_DIR
from agentmem.session_store import FORMAT_NAME, FORMAT_VERSION, SessionRecord, SessionStore
from agentmem.session_store.sql import MIGRATIONS

__all__ = ["check_sessions", "record_findings", "store_findings"]

Progress = Callable[[str], None]

STORE_LOCKS = frozenset({f"{LTM_FILE}.lock", "notes.lock", "memories.lock", "items.lock"})
"""The lock files in ``<root>/locks`` that are not sessions' (agentmem._storage.backend's
layout); ``@...`` names are the databases' own."""


def check_sessions(root: Path, scratch: Path, add: Sink, progress: Progress) -> None:
    """Check ``<root>/sessions.sqlite`` (see the module docstring)."""
    path = root / SESSIONS_FILE
    target = str(path)
    if not path.exists():
        leftovers = [s for s in ("-wal", "-shm") if path.with_name(path.name + s).exists()]
        if not leftovers:
            add(Finding("sessions", target, "ok", "no session database yet", "nothing"))
            return
    if any(path.with_name(path.name + s).is_symlink() for s in ("", "-wal", "-shm")):
        add(
            Finding(
                "sessions",
                target,
                "damaged",
                "it (or its -wal/-shm) is a symbolic link",
                "nothing: opening refuses it with StorageError (a store never follows links)",
            )
        )
        return
    if path.exists() and not path.is_file():
        add(
            Finding(
                "sessions",
                target,
                "damaged",
                "it is not a regular file",
                "nothing: opening fails with StorageError",
            )
        )
        return
    work = scratch / "sessions"
    work.mkdir()
    copy = work / SESSIONS_FILE
    if path.exists() and path.stat().st_size == 0:
        _empty_file(root, target, add)
        return
    try:
        live = copy_database(path, copy)
    except (OSError, sqlite3.Error) as exc:
        if scratch_full(exc):
            raise
        add(
            Finding(
                "sessions",
                target,
                "damaged",
                f"it cannot be read while another process has it open ({exc})",
                "nothing until that process closes it; then opening checks it again",
            )
        )
        return
    if live:
        holders = holder_pids(path.parent / "locks" / f"@open-{path.name}.lock")
        add(
            Finding(
                "sessions",
                target,
                "warning",
                "it is open in another process"
                + (f" (pid {', '.join(map(str, holders))})" if holders else "")
                + "; checked a consistent snapshot of it",
                "nothing: a process opening it alongside does not inspect its write-ahead log",
            )
        )
    # Read the version and the pending migrations on a second copy: a plain sqlite3
    # connection checkpoints (or drops) the -wal when it closes, so on ``copy`` it would
    # hide a damaged log from the store's own check on open.
    probe = work / "probe"
    probe.mkdir()
    copy_database(copy, probe / SESSIONS_FILE)
    pending = _pending(probe / SESSIONS_FILE)
    stored = _stored_version(probe / SESSIONS_FILE)
    try:
        store = SessionStore(copy)
    except AgentMemError as exc:
        if scratch_full(exc.__cause__ or exc):
            raise
        add(failure("sessions", target, exc, _real(str(exc), copy, path)))
        return
    if store.recovery is not None:
        # What follows describes the recovered copy: its damage still counts, its "ok"s
        # would read as if the damaged file were fine.
        add = _without_ok(add)
    try:
        store_findings(store, target, add, pending=pending, copy=copy, real=path)
        checks = (
            functools.partial(_check_locks, store, root, add),
            functools.partial(
                _check_rows,
                store,
                target,
                add,
                progress,
                version=stored,
                here=functools.partial(_real, copy=copy, real=path),
            ),
        )
        for check in checks:
            try:
                check()
            except AgentMemError as exc:
                add(
                    Finding(
                        "sessions",
                        target,
                        "damaged",
                        f"reading it fails: {_real(str(exc), copy, path)}",
                        f"nothing on open; the reads that reach it fail with {type(exc).__name__}",
                    )
                )
    finally:
        store.close()


def _without_ok(add: Sink) -> Sink:
    def sink(finding: Finding) -> None:
        if finding.severity != "ok":
            add(finding)

    return sink


def _empty_file(root: Path, target: str, add: Sink) -> None:
    """A 0-byte ``sessions.sqlite``: SQLite reads it as an empty database, so opening starts
    an empty store; the session locks and time-machine records say whether sessions were lost."""
    locks = root / "locks"
    sids = {
        p.name[: -len(".lock")]
        for p in (locks.glob("*.lock") if locks.is_dir() else ())
        if p.name not in STORE_LOCKS and not p.name.startswith("@")
    }
    records = root / SNAPSHOTS_DIR / "sessions"
    recorded = {p.stem for p in records.glob("*.json")} if records.is_dir() else set()
    problem = "empty database file (0 bytes)"
    if recorded:
        problem += f"; {len(recorded)} sessions have time-machine records but no rows"
    if sids - recorded:
        problem += f"; {len(sids - recorded)} more sessions have lock files but no rows"
    add(
        Finding(
            "sessions",
            target,
            "damaged" if sids or recorded else "warning",
            problem,
            "opening starts an empty store in it (the sessions it held are not recovered)",
        )
    )


def _real(text: str, copy: Path, real: Path) -> str:
    """``text`` with the scratch copy's path replaced by the real file's."""
    return text.replace(str(copy), str(real))


def _stored_version(copy: Path) -> str:
    """The ``meta.version`` the copy holds before opening upgrades it (``"?"``: unreadable)."""
    try:
        conn = sqlite3.connect(f"file:{quote(str(copy))}?mode=ro", uri=True)
        conn.text_factory = lenient_text
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
        finally:
            conn.close()
    except (sqlite3.Error, UnicodeDecodeError):
        return "?"
    return str(row[0]) if row is not None else "?"


def _pending(copy: Path) -> list[str] | str:
    """The migrations a copy still needs, or why that could not be read (opening says more)."""
    if header_problem(copy) is not None:
        return "unreadable"
    try:
        conn = sqlite3.connect(copy)
    except sqlite3.Error as exc:
        return str(exc)
    try:
        todo = pending_migrations(
            conn, format_name=FORMAT_NAME, format_version=FORMAT_VERSION, migrations=MIGRATIONS
        )
        return [m.name for m in todo]
    except (sqlite3.Error, AgentMemError, UnicodeDecodeError) as exc:
        return str(exc)
    finally:
        conn.close()


def store_findings(
    store: SessionStore,
    target: str,
    add: Sink,
    *,
    pending: list[str] | str | None = None,
    copy: Path | None = None,
    real: Path | None = None,
) -> None:
    """Findings about an opened store: its recovery on open, its version, its integrity, and
    its recall index (shared by the SQLite and the PostgreSQL checks)."""

    def here(text: str) -> str:
        return _real(text, copy, real) if copy is not None and real is not None else text

    recovery = store.recovery
    if recovery is not None:
        name = real.name if real is not None else SESSIONS_FILE
        add(
            Finding(
                "sessions",
                target,
                "damaged",
                f"it is not a readable SQLite database ({here(recovery.reason)})",
                f"opening moves it aside to {name}.corrupt-<timestamp> (with its -wal and "
                f"-shm) and {recovery.outcome or 'starts an empty one'}",
            )
        )
    elif isinstance(pending, list) and pending:
        add(
            Finding(
                "sessions",
                target,
                "warning",
                f"it is an older version; migrations {', '.join(pending)} are not applied yet",
                f"opening applies them (upgrading it to {FORMAT_NAME} version {FORMAT_VERSION})",
            )
        )
    if copy is not None:
        for problem in integrity_problems(copy):
            add(
                Finding(
                    "sessions",
                    target,
                    "damaged",
                    f"PRAGMA integrity_check: {problem}",
                    "nothing on open (it reads only what it needs); a read that reaches the "
                    "damaged pages fails with CorruptStoreError and the file is left in place",
                )
            )
    for repair in store.recall_repairs:
        add(
            Finding(
                "recall-index",
                target,
                "damaged",
                here(repair.split(": ", 1)[-1]),
                "opening rebuilds the recall index from the messages (nothing else changes)",
            )
        )
    try:
        deep = store.check_recall_index(repair=False)
    except StorageError as exc:
        deep = [str(exc)]
    for problem in deep:
        add(
            Finding(
                "recall-index",
                target,
                "damaged",
                here(problem),
                "nothing on open (its open-time check is cheaper); "
                "SessionStore.check_recall_index() rebuilds it from the messages",
            )
        )
    if not store.recall_repairs and not deep:
        add(
            Finding(
                "recall-index", target, "ok", "the recall index matches the messages", "nothing"
            )
        )


def _check_locks(store: SessionStore, root: Path, add: Sink) -> None:
    locks = root / "locks"
    known = {info.id for info in store.list()}
    names = sorted(p.name for p in locks.glob("*.lock")) if locks.is_dir() else []
    for name in names:
        sid = name[: -len(".lock")]
        lock = locks / name
        if sid in known or name in STORE_LOCKS or name.startswith("@") or is_locked(lock):
            continue
        add(
            Finding(
                "sessions",
                str(lock),
                "warning",
                f"a stale lock file of session {sid}, which does not exist (nobody holds it)",
                "nothing: it is harmless; a session created with that id reuses it",
            )
        )
    for sid in sorted(known):
        info_id = sid
        lock = locks / f"{info_id}.lock"
        if lock.exists() and is_locked(lock):
            pids = holder_pids(lock)
            add(
                Finding(
                    "sessions",
                    info_id,
                    "warning",
                    f"session {info_id} is open"
                    + (f" in pid {', '.join(map(str, pids))}" if pids else " in another process"),
                    "nothing: opening it elsewhere fails with StoreLockedError until that "
                    "process closes it or dies (the lock dies with it)",
                )
            )


def _check_rows(
    store: SessionStore,
    target: str,
    add: Sink,
    progress: Progress,
    *,
    version: str,
    here: Callable[[str], str],
) -> None:
    sessions = store.list()
    damaged = 0
    for info in sessions:
        progress(info.id)
        try:
            record = store.load(info.id)
        except AgentMemError as exc:
            damaged += 1
            add(
                Finding(
                    "sessions",
                    info.id,
                    "damaged",
                    f"session {info.id} cannot be loaded: {here(str(exc))}",
                    f"nothing: loading it fails with {type(exc).__name__}",
                )
            )
            continue
        found = record_findings(record, add)
        damaged += bool(found)
    add(
        Finding(
            "sessions",
            target,
            "ok" if not damaged else "damaged",
            f"{FORMAT_NAME} version {version}: {len(sessions)} sessions, {damaged} with "
            "damaged rows; every row checksum verified",
            "nothing" if not damaged else "see the findings for each session",
        )
    )


def record_findings(record: SessionRecord, add: Sink) -> int:
    """Findings for what loading a session repaired (on the copy); returns how many."""
    sid = record.info.id
    before = 0

    def found(problem: str, recovery: str, severity: str = "damaged") -> None:
        nonlocal before
        before += 1
        add(Finding("sessions", sid, severity, problem, recovery))

    if record.quarantined:
        found(
            f"session {sid}: message rows seq {_seqs(record.quarantined)} do not parse or fail "
            "validation",
            "loading the session moves them to the quarantine table and renumbers the later "
            "messages",
        )
    if record.checksum_failed:
        found(
            f"session {sid}: message rows seq {_seqs(record.checksum_failed)} changed after they "
            "were written (checksum mismatch) but are still valid messages",
            "loading the session keeps them and copies them to the quarantine table",
        )
    if record.repaired:
        found(
            f"session {sid}: damaged message positions (seq {_seqs(record.repaired)})",
            "loading the session renumbers the messages in order",
        )
    for thread, seqs in record.quarantined_threads.items():
        found(
            f"session {sid}: thread {thread} rows seq {_seqs(seqs)} do not parse",
            "loading the session moves them to the quarantine table",
        )
    if record.billing_quarantined:
        found(
            f"session {sid}: {record.billing_quarantined} billing rows are unreadable",
            "loading the session moves them to the quarantine table",
        )
    if record.state_quarantined:
        found(
            f"session {sid}: its state does not parse",
            "loading the session moves it to the quarantine table and resets it to {}",
        )
    if record.info.damaged:
        found(
            f"session {sid}: unreadable columns {', '.join(record.info.damaged)}",
            "nothing: they are shown as empty and the row is kept",
            "warning",
        )
    return before


def _seqs(values: list[int] | list[object]) -> str:
    return ", ".join(str(v) for v in values)
