"""The ``semantic.sqlite`` schema: memories, their full-text index, vectors and history.

Format ``agentmem.semantic``, version :data:`FORMAT_VERSION`, built by named,
append-only migrations (:class:`~agentmem._storage.sqlite.Migration`), the
same way as the sessions database. Tables:

* ``memories``: one row per remembered fact. ``docid`` is the integer key
  the index uses; ``id`` the public id (a ``uuid4`` hex). The scope is
  ``user_id`` plus ``agent_id``/``run_id`` stored as ``''`` when absent
  (so the unique index below treats "no agent" as one value; SQL ``NULL``
  would make every row distinct). ``hash`` is the SHA-256 of the
  case-folded, whitespace-normalised text: the unique index on
  ``(user_id, agent_id, run_id, hash)`` makes "the same fact is never
  stored twice in a scope" a property of the database, which holds across
  processes whatever the code above it does. ``metadata`` is a JSON
  object; ``vector`` an optional float32 blob from the host's embedder.
* ``memories_fts``: an FTS5 index over ``text`` (porter stemming over
  unicode61, diacritics folded), an external-content table kept by three
  triggers, so every insert, update and delete of a memory changes the
  index in the same statement, hence the same transaction: the index
  cannot drift from the rows, even across ``kill -9``.
* ``history``: one row per change (``ADD``, ``UPDATE``, ``DELETE``) with
  the old and new text and the time, written in the transaction that makes
  the change. It is never cascaded: a deleted memory keeps its history.

On PostgreSQL (format ``agentmem.semantic``, version :data:`PG_FORMAT_VERSION`,
migrations :data:`PG_MIGRATIONS` run by :func:`agentmem._storage.postgres.migrate`)
the same tables are ``semantic_memories`` and ``semantic_history`` (prefixed: one
database holds every agentmem store), typed the PostgreSQL way (``BIGINT``
identities, ``BYTEA`` vectors), with the same unique index on the fact. FTS5 has
no counterpart there: ``semantic_terms`` holds each memory's index terms (the very
terms FTS5's tokenizer makes, :func:`agentmem.semantic._pg_sql.terms`) with their
counts, and ``semantic_memories.terms`` its length, written by the client in the
transaction that writes the memory, deleted with it by ``ON DELETE CASCADE``;
``semantic_stats`` (one row) counts the memories and their terms, for BM25 (kept in
the same transactions; writers hold the store's lock, so the row is no contention).
"""

from __future__ import annotations

from typing import Final

from agentmem._storage import postgres
from agentmem._storage.fts import fts_sync_triggers, fts_table
from agentmem._storage.sqlite import Migration

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "MIGRATIONS", "PG_FORMAT_VERSION", "PG_MIGRATIONS"]

FORMAT_NAME: Final = "agentmem.semantic"
FORMAT_VERSION: Final = 1

_INITIAL: Final = (
    """
    CREATE TABLE memories (
        docid INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        user_id TEXT NOT NULL,
        agent_id TEXT NOT NULL DEFAULT '',
        run_id TEXT NOT NULL DEFAULT '',
        text TEXT NOT NULL,
        hash TEXT NOT NULL,
        metadata TEXT NOT NULL DEFAULT '{}',
        vector BLOB,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    )
    """,
    "CREATE UNIQUE INDEX memories_fact ON memories (user_id, agent_id, run_id, hash)",
    "CREATE INDEX memories_by_update ON memories (user_id, updated_at)",
    fts_table("memories_fts", "memories"),
    *fts_sync_triggers("memories_fts", "memories"),
    """
    CREATE TABLE history (
        seq INTEGER PRIMARY KEY,
        memory_id TEXT NOT NULL,
        event TEXT NOT NULL CHECK (event IN ('ADD', 'UPDATE', 'DELETE')),
        old_text TEXT,
        new_text TEXT,
        at TEXT NOT NULL
    )
    """,
    "CREATE INDEX history_by_memory ON history (memory_id, seq)",
)

MIGRATIONS: Final = (Migration("0001_initial", _INITIAL),)
"""Every migration, oldest first. Never edit a released one; append."""

PG_FORMAT_VERSION: Final = 1
"""The PostgreSQL schema this code writes and the newest it reads. Bump it with every
migration."""

_PG_INITIAL: Final = (
    """
    CREATE TABLE semantic_memories (
        docid BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        user_id TEXT NOT NULL,
        agent_id TEXT NOT NULL DEFAULT '',
        run_id TEXT NOT NULL DEFAULT '',
        text TEXT NOT NULL,
        hash TEXT NOT NULL,
        metadata TEXT NOT NULL DEFAULT '{}',
        vector BYTEA,
        terms INTEGER NOT NULL DEFAULT 0,
        created_at TEXT COLLATE "C" NOT NULL,
        updated_at TEXT COLLATE "C" NOT NULL
    )
    """,
    "CREATE UNIQUE INDEX semantic_memories_fact "
    "ON semantic_memories (user_id, agent_id, run_id, hash)",
    "CREATE INDEX semantic_memories_by_update ON semantic_memories (user_id, updated_at)",
    """
    CREATE TABLE semantic_terms (
        term TEXT NOT NULL,
        docid BIGINT NOT NULL REFERENCES semantic_memories (docid) ON DELETE CASCADE,
        tf INTEGER NOT NULL,
        PRIMARY KEY (term, docid)
    )
    """,
    "CREATE INDEX semantic_terms_by_docid ON semantic_terms (docid)",
    """
    CREATE TABLE semantic_history (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        memory_id TEXT NOT NULL,
        event TEXT NOT NULL CHECK (event IN ('ADD', 'UPDATE', 'DELETE')),
        old_text TEXT,
        new_text TEXT,
        at TEXT NOT NULL
    )
    """,
    "CREATE INDEX semantic_history_by_memory ON semantic_history (memory_id, seq)",
    """
    CREATE TABLE semantic_stats (
        one INTEGER PRIMARY KEY CHECK (one = 1),
        memories BIGINT NOT NULL,
        terms BIGINT NOT NULL
    )
    """,
    "INSERT INTO semantic_stats (one, memories, terms) VALUES (1, 0, 0)",
)

PG_MIGRATIONS: Final = (postgres.Migration("0001_initial", _PG_INITIAL),)
"""Every PostgreSQL migration, oldest first. Never edit a released one; append."""
