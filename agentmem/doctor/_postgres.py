"""The PostgreSQL backend, read through connections whose every transaction is read-only.

The DSN gets ``-c default_transaction_read_only=on``, so nothing the stores' code
tries can change the database: a migration, a quarantine or a set-aside fails with
PostgreSQL's read-only error instead, and that failure is how the doctor learns
that opening would make that change. The sessions store and its recall index are
checked with the same code and SQL the store uses (its schema check, its
:meth:`~agentmem.session_store.SessionStore.check_recall_index`, and
:func:`~agentmem.session_store.loading.check_rows` over every session's rows); the
document stores are made to read everything they hold.
"""

from __future__ import annotations

from collections.abc import Callable

from agentmem._storage.backend import mask_dsn
from agentmem._storage.pg_documents import PgDocumentStore
from agentmem._storage.postgres import PgDatabase
from agentmem.doctor._documents import read_store
from agentmem.doctor._report import Finding, Sink, failure
from agentmem.doctor._sessions import store_findings
from agentmem.errors import AgentMemError, ConfigurationError, FormatVersionError, StorageError
from agentmem.session_store import SessionStore
from agentmem.session_store.loading import RowsCheck, check_rows
from agentmem.session_store.pg import PgEngine

__all__ = ["check_postgres", "read_only_dsn"]

_READ_ONLY = "read-only transaction"


def read_only_dsn(dsn: str) -> str:
    """``dsn`` with every transaction read-only (``default_transaction_read_only=on``).

    Raises:
        ConfigurationError: ``dsn`` cannot be parsed.
    """
    import psycopg

    try:
        params = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.Error:  # its message may quote the DSN, password included
        raise ConfigurationError(
            f"cannot parse the PostgreSQL DSN {mask_dsn(dsn)} (expected postgresql://... "
            "or key=value pairs)"
        ) from None
    options = str(params.get("options") or "")
    return psycopg.conninfo.make_conninfo(
        dsn, options=f"{options} -c default_transaction_read_only=on".strip()
    )


def check_postgres(dsn: str, add: Sink, step: Callable[[str], None]) -> None:
    """Check every store kept in the PostgreSQL database ``dsn`` (read only)."""
    target = mask_dsn(dsn)
    read_only = read_only_dsn(dsn)  # an unparsable DSN raises ConfigurationError
    try:
        db = PgDatabase(read_only)
    except AgentMemError as exc:
        add(Finding("root", target, "damaged", f"cannot connect: {exc}", "nothing"))
        return
    try:
        step("sessions")
        _sessions(db, target, add)
        _documents(dsn, target, add, step)
    finally:
        db.close()


def _opening_error(store: str, target: str, exc: AgentMemError, add: Sink) -> None:
    if not isinstance(exc, FormatVersionError) and _READ_ONLY in str(exc):
        add(
            Finding(
                store,
                target,
                "warning",
                "its schema is not current (opening has migrations to apply)",
                "opening applies the pending migrations",
            )
        )
    else:
        add(failure(store, target, exc, str(exc)))


def _sessions(db: PgDatabase, target: str, add: Sink) -> None:
    try:
        engine = PgEngine(db)
    except AgentMemError as exc:
        _opening_error("sessions", target, exc, add)
        return
    store = SessionStore.postgres(db)
    try:
        store_findings(store, f"{target} (sessions)", add)
        sessions = store.list()
        damaged = 0
        for info in sessions:
            with engine.read(f"check session {info.id}") as sql:
                checks = {"": check_rows(sql.message_rows(info.id))}
                by_thread: dict[str, list[tuple[object, bytes, object]]] = {}
                for thread, seq, body, crc in sql.thread_rows(info.id):
                    by_thread.setdefault(str(thread), []).append((seq, body, crc))
            checks.update({t: check_rows(rows) for t, rows in by_thread.items()})
            found = sum(_rows(info.id, thread, check, add) for thread, check in checks.items())
            damaged += bool(found)
        add(
            Finding(
                "sessions",
                f"{target} (sessions)",
                "ok" if not damaged else "damaged",
                f"{len(sessions)} sessions, {damaged} with damaged rows; every row checksum "
                "verified",
                "nothing" if not damaged else "see the findings for each session",
            )
        )
    finally:
        store.close()


def _rows(sid: str, thread: str, check: RowsCheck, add: Sink) -> int:
    where = f"session {sid}" + (f" thread {thread}" if thread else "")
    found = 0
    if check.quarantine:
        found += 1
        seqs = ", ".join(str(s) for s in check.quarantined_seqs)
        add(
            Finding(
                "sessions",
                sid,
                "damaged",
                f"{where}: rows seq {seqs} do not parse or fail validation",
                "loading the session moves them to the quarantine table and renumbers the "
                "later messages",
            )
        )
    if check.mismatched:
        found += 1
        seqs = ", ".join(str(s) for s in check.mismatched)
        add(
            Finding(
                "sessions",
                sid,
                "damaged",
                f"{where}: rows seq {seqs} changed after they were written (checksum "
                "mismatch) but are still valid messages",
                "loading the session keeps them and copies them to the quarantine table",
            )
        )
    if check.moved:
        found += 1
        add(
            Finding(
                "sessions",
                sid,
                "damaged",
                f"{where}: damaged positions (seq {', '.join(str(s) for s in check.moved)})",
                "loading the session renumbers the messages in order",
            )
        )
    return found


def _documents(dsn: str, target: str, add: Sink, step: Callable[[str], None]) -> None:
    try:
        docs = PgDocumentStore(read_only_dsn(dsn))
    except AgentMemError as exc:
        _opening_error("ltm", f"{target} (documents)", exc, add)
        return
    try:
        for store in ("ltm", "notes", "topics", "items"):
            step(store)
            where = f"{target} ({store})"
            try:
                problems = read_store(store, docs.documents(store))
            except StorageError as exc:
                if _READ_ONLY not in str(exc):
                    _opening_error(store, where, exc, add)
                    continue
                add(
                    Finding(
                        store,
                        where,
                        "damaged",
                        "a document cannot be read as it is",
                        "opening sets it aside (into agentmem_set_aside) and continues without it",
                    )
                )
                continue
            except AgentMemError as exc:
                _opening_error(store, where, exc, add)
                continue
            for line in problems:
                add(Finding(store, where, "warning", line, "nothing: it is reported"))
            if not problems:
                add(Finding(store, where, "ok", "every document read", "nothing"))
    finally:
        docs.close()
