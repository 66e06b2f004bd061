"""SessionStore: durable, resumable agent sessions in one SQLite database.

A session is everything needed to resume an agent where it stopped: its
messages, a small JSON *state* (window position, thread summary,
counters), billing records, YaRN side threads, and metadata (name,
working directory, model, context window, timestamps). All sessions of a
project live in one SQLite file (WAL mode, see :mod:`agentmem._storage.sqlite`
and ``docs/storage.md`` for why SQLite and not an append-only journal).

How writes reach the store. A :class:`SessionWriter` implements
:class:`~agentmem.history.HistoryObserver`: a
:class:`~agentmem.history.MessageHistory` calls it *before* changing its
list in memory, and if the write raises, the history is left unchanged.
So memory never runs ahead of disk, and every change is one transaction:

* ``on_append`` inserts the new rows at the next sequence numbers. Its cost
  is O(size of the new messages): earlier rows are never read or
  rewritten, whatever the length of the session.
* ``on_replace`` updates one row; ``on_rewrite`` deletes the rows from
  ``start`` on and inserts the new tail (truncate, undo, rollback), all or
  nothing.

Guarantees.

* **Durable on return.** With ``durability="full"`` (the default) a call
  that returned has been fsynced and survives power loss; with
  ``"normal"`` it survives a crash or ``kill -9`` of the process but the
  last commits may be lost on power loss (measured costs in
  ``docs/storage.md``). Either way a process killed at any instant leaves
  the database readable and every acknowledged write present.
* **Contiguous order.** Message ``seq`` numbers are 0..n-1 with no gap, so
  index ``i`` of the history is ``seq`` ``i`` of the store.
* **Nothing unreadable is hidden or overwritten.** A file that is not a
  readable SQLite database, a schema that differs from its fingerprint, or
  a ``-wal`` that SQLite would silently cut short is moved aside
  (``<name>.corrupt-<timestamp>``, with its ``-wal``/``-shm``), a warning
  names both paths on the ``agentmem.storage`` logger,
  :attr:`SessionStore.recovery` records it, and what SQLite can read is
  recovered into a fresh database (see :mod:`agentmem._storage.recovery`).
  The recall index is the exception: it is derived data, so damage to it (its
  own tables, triggers or pages) is repaired by rebuilding it from the messages
  and reported in :attr:`SessionStore.recall_repairs`, never by moving the
  database aside (:mod:`.recall_index`).
  On :meth:`SessionStore.load` every row is checked (:mod:`.loading`): a row
  that does not parse or fails validation is moved to a ``quarantine``
  table, damaged ``seq`` values are repaired, unreadable columns are
  reported; all of it logged and reported on the record.
* **Versioned.** The database carries ``format = "agentmem.sessions"`` and
  :data:`FORMAT_VERSION`; older databases are upgraded by named
  migrations, newer ones are refused with a
  :class:`~agentmem.errors.FormatVersionError`.
* **One agent per session.** :meth:`SessionStore.lock` takes an exclusive
  file lock (``flock``) per session, released by the kernel when the
  process dies, so a killed agent never wedges its session.

What it does not do: it does not coordinate two writers on one session
(take :meth:`SessionStore.lock`). Messages are validated on the way in
(:func:`~agentmem.messages.normalize_message`, so nothing stored is
quarantined on load) but stored as given, not normalised.

Thread safety: one connection per store, guarded by a lock; writers share it.

Layout: :mod:`.records` (records, checks, row codecs), :mod:`.sql` (schema,
migrations and every statement, behind :class:`~.sql.SessionsSQL`),
:mod:`.engine` (the seam between the store and its database),
:mod:`.sqlite_engine` (the SQLite file), :mod:`.pg` (the same store on
PostgreSQL: :meth:`SessionStore.postgres`), :mod:`.lock`, :mod:`.writer`,
:mod:`.loading` (rows checked on the way out), :mod:`.recall_index` (the recall
index's schema, rules, checks and rebuild), :mod:`.sessions` (the store)
and :mod:`.export` (JSON and HTML; the page itself in :mod:`.html_page`). Recovery on
open lives in :mod:`agentmem._storage.recovery`, shared with other stores.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from agentmem._storage.sqlite import Durability
from agentmem.errors import SessionNotFoundError
from agentmem.session_store.export import export_data, export_html, export_json
from agentmem.session_store.lock import SessionLock
from agentmem.session_store.records import (
    EXPORT_FORMAT,
    EXPORT_VERSION,
    FORMAT_NAME,
    FORMAT_VERSION,
    BillingRecord,
    SessionInfo,
    SessionRecord,
)
from agentmem.session_store.sessions import SessionStore
from agentmem.session_store.writer import SessionWriter

if TYPE_CHECKING:
    from agentmem._storage.postgres import PgDatabase
    from agentmem.protocols import ProgressReporter
    from agentmem.time_machine import TaskTreeView

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "BillingRecord",
    "Durability",
    "SessionInfo",
    "SessionLock",
    "SessionNotFoundError",
    "SessionRecord",
    "SessionStore",
    "SessionWriter",
    "export_data",
    "export_html",
    "export_json",
    "open_session_store",
]


def open_session_store(
    where: Path | PgDatabase,
    *,
    durability: Durability = "full",
    reporter: ProgressReporter | None = None,
    purge: Callable[[str], object] | None = None,
    task_tree: Callable[[str], TaskTreeView] | None = None,
) -> SessionStore:
    """The store where a backend keeps its sessions (``Backend.sessions_database()``): a
    SQLite file, or a PostgreSQL database shared with the backend's other stores."""
    if isinstance(where, Path):
        return SessionStore(
            where, durability=durability, reporter=reporter, purge=purge, task_tree=task_tree
        )
    return SessionStore.postgres(
        where, durability=durability, reporter=reporter, purge=purge, task_tree=task_tree
    )
