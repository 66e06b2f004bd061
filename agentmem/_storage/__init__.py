"""Private storage building blocks shared by agentmem's stores.

* :mod:`agentmem._storage.files`: atomic, fsync'd file replacement, moving
  unreadable files aside (``<name>.corrupt-<timestamp>``), removing the temp
  files of killed writers, and the one check every writer makes that a path
  stays under the root without passing through a symlink (:func:`check_inside`).
* :mod:`agentmem._storage.locks`: the cross-process lock around one
  read-modify-write cycle (its lock file checked the same way).
* :mod:`agentmem._storage.formats`: the ``{"format", "version"}`` header check
  every versioned structure goes through when it is read back.
* :mod:`agentmem._storage.recovery`: recovery on open, shared by every
  SQLite store: a damaged database (or write-ahead log) is moved aside,
  reported, and what can be read is recovered into a fresh one.
* :mod:`agentmem._storage.wal`: reading a ``-wal`` by hand to find the
  damage SQLite would silently skip.
* :mod:`agentmem._storage.gc`: the cyclic collector paused around large
  loads (a session's rows, a whole resume).
* :mod:`agentmem._storage.fts`: the one FTS5 index shape (tokenizer, external-content
  table, sync triggers) the sessions database and the semantic memory share.
* :mod:`agentmem._storage.sqlite`: WAL connections with a chosen
  durability, explicit transactions that roll back on any exception, and
  named append-only migrations checked against one format version.
* :mod:`agentmem._storage.documents`: the ``Documents`` interface long-term
  memory, notes and topics keep their bytes through (files, in memory);
  :mod:`agentmem._storage.pg_documents` its PostgreSQL implementation;
  :mod:`agentmem._storage.backend` which backend a memory runs on and the
  embedded file layout; :mod:`agentmem._storage.keys` the one rule for note
  keys and topic names.

Nothing here is public API: the stores built on it (:mod:`agentmem.session_store`
and friends) are. The rules these helpers implement are DESIGN section 8.
"""

from __future__ import annotations

from agentmem._storage.files import (
    SQLITE_COMPANIONS,
    atomic_write_bytes,
    atomic_write_text,
    check_inside,
    fsync_directory,
    make_dirs,
    move_aside,
    remove_stale_temps,
)
from agentmem._storage.sqlite import (
    DURABILITIES,
    Durability,
    Migration,
    connect,
    enable_wal,
    header_problem,
    is_corruption,
    migrate,
    transaction,
)

__all__ = [
    "DURABILITIES",
    "SQLITE_COMPANIONS",
    "Durability",
    "Migration",
    "atomic_write_bytes",
    "atomic_write_text",
    "check_inside",
    "connect",
    "enable_wal",
    "fsync_directory",
    "header_problem",
    "is_corruption",
    "make_dirs",
    "migrate",
    "move_aside",
    "remove_stale_temps",
    "transaction",
]
