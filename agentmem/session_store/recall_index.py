"""The recall index: derived data kept beside the messages, rebuilt from them when damaged.

The index (``recall_docs``, the FTS5 table ``recall_fts`` and its shadow tables,
``recall_pending``, ``recall_state``, the impact-ordered postings of
:mod:`.postings` and the triggers that keep them) is written
by triggers in the same statement as every message change (see
:mod:`agentmem.session_store.sql`), so it cannot drift from the messages through
the library. Everything in it can be derived again from ``messages``, and that is
how damage to it is repaired: never by setting the messages aside.

* **What is indexed** (:data:`INDEX_VERSION` 2): a message's text (its string
  content or the text of its parts) and the name and arguments of its tool calls,
  *except* what the memory itself put in the conversation, so recall never returns
  its own echoes: calls to the memory tool (:data:`MEMORY_TOOL`) and the tool
  messages answering them, messages flagged as injected (:data:`INJECTED_FLAGS`),
  injected blocks inside a message (:data:`INJECTED_TAGS`: a ``<memory-context>``
  block, a recovery note, a thread summary, a system reminder), and the trim
  checkpoint (a text that starts with :data:`CHECKPOINT_HEADER`). An assistant
  message with both text and a memory call is indexed by its text and its other
  calls. Every message keeps its ``recall_docs`` row (an excluded one with empty
  text), so row counts stay comparable with the messages.
* **Version.** ``recall_state.version`` records the rules the rows were indexed
  under; a store indexed under other rules is re-indexed on open (migration
  ``0004_recall_index_v2`` does it for a store of format 3).
* **Changes from outside are flagged.** A write to ``recall_docs`` or
  ``recall_pending`` that the indexer did not make (it raises ``recall_state.busy``
  while it works) sets ``recall_state.dirty``; ``recall_state.docs`` counts the rows
  the indexer wrote, and FTS5 keeps its own row count, so a write to the FTS5 table
  itself shows as a difference.
* **Open-time check** (:func:`quick_problems`, two single-row reads whatever the
  size of the store): the state row exists, has the current version, is clean, and
  FTS5's row count equals ``recall_state.docs``. What it cannot see (a byte changed
  inside a page that still parses) the full check,
  :meth:`~agentmem.session_store.SessionStore.check_recall_index`, O(messages), finds.
* **Postings** (migration ``0006_recall_postings``, :func:`add_postings`): a new
  ``recall_docs`` row is queued in ``recall_unposted`` by a trigger and posted by
  :func:`.postings.post` in Python (the tokenizer is Python): a few at the end of
  each write transaction (``SessionsSQL.recall_post``: the queue holds at most one
  batch), the rest by :func:`flush` before a search; a deleted row's postings go in
  the deleting statement.
* **Rebuild** (:func:`rebuild`): drop every index object and create them again
  from their one definition, then index and post every message. An index object whose
  pages are too damaged to drop is removed from the schema instead and the file
  is vacuumed, which leaves the messages' pages as they were.
"""

from __future__ import annotations

import sqlite3
from typing import Final

from agentmem._storage.fts import fts_sync_triggers, fts_table
from agentmem._storage.sqlite import record_schema, transaction
from agentmem.session_store import postings

__all__ = [
    "CHECKPOINT_HEADER",
    "INDEX_VERSION",
    "INJECTED_FLAGS",
    "INJECTED_TAGS",
    "MEMORY_TOOL",
    "RECALL_BATCH",
    "add_postings",
    "create_recall_index_v1",
    "flush",
    "is_recall_object",
    "quick_problems",
    "rebuild",
    "upgrade_to_v2",
]

INDEX_VERSION: Final = 2
"""The indexing rules ``recall_state.version`` records (1: format 3, everything indexed)."""

MEMORY_TOOL: Final = "memory_operations"
"""The memory tool's name (:data:`agentmem.tools.TOOL_NAME`): its calls and results are
not indexed."""

INJECTED_FLAGS: Final = (
    "system_injected",
    "session_context",
    "memory_update",
    "subagent_instructions",
    "compressed_summary",
    "synthesized",
    "transient",
)
"""Internal fields (:data:`agentmem.messages.INTERNAL_FIELDS`) that mark a message the
library or the host injected rather than a turn of the conversation: not indexed."""

INJECTED_TAGS: Final = ("memory-context", "context_recovery", "thread_summary", "system-reminder")
"""Tagged blocks cut out of a message's text before it is indexed (an unclosed one to the
end of the text; the first of each tag in a message)."""

CHECKPOINT_HEADER: Final = "# Session progress"
"""The first line of the trim checkpoint ``memory/session_progress.md``: a message whose
text starts with it (the checkpoint read back into the conversation) is not indexed."""

RECALL_BATCH: Final = 64
"""How many queued message changes are indexed together (see ``recall_pending_flush``)."""

_OBJECT_PREFIXES: Final = ("recall_", "messages_recall_")


def is_recall_object(name: str) -> bool:
    """Whether a schema object (table, index, trigger) belongs to the recall index."""
    return name.startswith(_OBJECT_PREFIXES)


# ---------------------------------------------------------------- index rules 1 (format 3)
# Migration 0003 as released: kept verbatim, since a released migration never changes.

_TEXT_OF_V1: Final = """(CASE WHEN json_valid({b}) THEN trim(
    COALESCE(CASE json_type({b}, '$.content')
        WHEN 'text' THEN json_extract({b}, '$.content')
        WHEN 'array' THEN (SELECT group_concat(COALESCE(json_extract(p.value, '$.text'),
            CASE json_type(p.value, '$.content') WHEN 'text'
                THEN json_extract(p.value, '$.content') END, ''), ' ')
            FROM json_each({b}, '$.content') AS p)
    END, '') || ' ' ||
    COALESCE((SELECT group_concat(COALESCE(json_extract(t.value, '$.function.name'), '')
            || ' ' || COALESCE(json_extract(t.value, '$.function.arguments'), ''), ' ')
        FROM json_each({b}, '$.tool_calls') AS t
        WHERE json_type({b}, '$.tool_calls') = 'array'), ''))
    ELSE '' END)"""

_V1_FLUSH: Final = f"""DELETE FROM recall_docs WHERE docid IN (
            SELECT d.docid FROM recall_pending AS p
            JOIN recall_docs AS d ON d.session_id = p.session_id AND d.seq = p.seq);
        INSERT INTO recall_docs (session_id, seq, role, text)
            SELECT m.session_id, m.seq, m.role, {_TEXT_OF_V1.format(b="m.body")}
            FROM (SELECT DISTINCT session_id, seq FROM recall_pending) AS p
            JOIN messages AS m ON m.session_id = p.session_id AND m.seq = p.seq;
        DELETE FROM recall_pending;"""


def _queue_triggers() -> tuple[str, ...]:
    return (
        """
        CREATE TRIGGER messages_recall_ai AFTER INSERT ON messages BEGIN
            INSERT INTO recall_pending (session_id, seq) VALUES (new.session_id, new.seq);
        END
        """,
        """
        CREATE TRIGGER messages_recall_ad AFTER DELETE ON messages BEGIN
            INSERT INTO recall_pending (session_id, seq) VALUES (old.session_id, old.seq);
        END
        """,
        """
        CREATE TRIGGER messages_recall_seq AFTER UPDATE OF seq ON messages BEGIN
            INSERT INTO recall_pending (session_id, seq) VALUES (old.session_id, old.seq);
            INSERT INTO recall_pending (session_id, seq) VALUES (new.session_id, new.seq);
        END
        """,
        """
        CREATE TRIGGER messages_recall_body AFTER UPDATE OF role, body ON messages BEGIN
            INSERT INTO recall_pending (session_id, seq) VALUES (new.session_id, new.seq);
        END
        """,
    )


_TABLES: Final = (
    """
    CREATE TABLE recall_docs (
        docid INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        role TEXT NOT NULL,
        text TEXT NOT NULL
    )
    """,
    "CREATE UNIQUE INDEX recall_docs_by_message ON recall_docs (session_id, seq)",
    # Porter stemming over unicode61 (diacritics folded); the text lives in recall_docs.
    fts_table("recall_fts", "recall_docs"),
    # Every message change queues its (session_id, seq) here, in the changing statement.
    """
    CREATE TABLE recall_pending (
        id INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL
    )
    """,
)

_V1_SCHEMA: Final = (
    *_TABLES,
    *fts_sync_triggers("recall_fts", "recall_docs"),
    *_queue_triggers(),
    f"""
    CREATE TRIGGER recall_pending_flush AFTER INSERT ON recall_pending
    WHEN new.id % {RECALL_BATCH} = 0 BEGIN
        {_V1_FLUSH}
    END
    """,
)


def create_recall_index_v1(conn: sqlite3.Connection) -> None:
    """Migration 0003 as released: the index under rules 1, every stored message indexed."""
    for statement in _V1_SCHEMA:
        conn.execute(statement)
    conn.execute(
        "INSERT INTO recall_docs (session_id, seq, role, text) "
        f"SELECT session_id, seq, CAST(role AS TEXT), {_TEXT_OF_V1.format(b='body')} "
        "FROM messages"
    )


# ---------------------------------------------------------------- index rules 2


def _flag(b: str, field: str) -> str:
    """SQL: the internal field ``field`` of body ``b`` is truthy (as Python reads it).

    ``instr`` first: SQLite 3.40 parses the JSON again for every ``json_extract``, and
    most bodies hold none of the flags.
    """
    return (
        f"instr({b}, '\"{field}\"') > 0 AND "
        f"COALESCE(json_extract({b}, '$.{field}'), 0) NOT IN (0, '', '[]', '{{}}')"
    )


def _answers_memory_call(b: str) -> str:
    """SQL: tool message ``b`` (of messages row ``m``) answers a call to the memory tool.

    The call is looked up in the nearest assistant message before it (one B-tree
    descent and a step back over the other results of the same turn).
    """
    return f"""(json_extract({b}, '$.name') IS '{MEMORY_TOOL}' OR EXISTS (
        SELECT 1 FROM json_each((
            SELECT CASE WHEN json_valid(a.body) AND json_type(a.body, '$.tool_calls') = 'array'
                THEN json_extract(a.body, '$.tool_calls') END
            FROM messages AS a
            WHERE a.session_id = m.session_id AND a.seq < m.seq
              AND CAST(a.role AS TEXT) = 'assistant'
            ORDER BY a.seq DESC LIMIT 1)) AS c
        WHERE json_extract(c.value, '$.id') IS json_extract({b}, '$.tool_call_id')
          AND json_extract(c.value, '$.function.name') IS '{MEMORY_TOOL}'))"""


def _raw_text(b: str) -> str:
    """SQL: the searchable text of body ``b`` (messages row ``m``), before blocks are cut."""
    injected = " OR ".join(_flag(b, f) for f in INJECTED_FLAGS)
    return f"""(CASE
    WHEN NOT json_valid({b}) THEN ''
    WHEN {injected} THEN ''
    WHEN CAST(m.role AS TEXT) = 'tool' AND {_answers_memory_call(b)} THEN ''
    ELSE trim(
    COALESCE(CASE json_type({b}, '$.content')
        WHEN 'text' THEN json_extract({b}, '$.content')
        WHEN 'array' THEN (SELECT group_concat(COALESCE(json_extract(p.value, '$.text'),
            CASE json_type(p.value, '$.content') WHEN 'text'
                THEN json_extract(p.value, '$.content') END, ''), ' ')
            FROM json_each({b}, '$.content') AS p)
    END, '') || ' ' ||
    CASE WHEN instr({b}, '"tool_calls"') > 0 THEN
    COALESCE((SELECT group_concat(COALESCE(json_extract(t.value, '$.function.name'), '')
            || ' ' || COALESCE(json_extract(t.value, '$.function.arguments'), ''), ' ')
        FROM json_each({b}, '$.tool_calls') AS t
        WHERE json_type({b}, '$.tool_calls') = 'array'
          AND json_extract(t.value, '$.function.name') IS NOT '{MEMORY_TOOL}'), '')
    ELSE '' END)
    END)"""


def _cut(inner: str, tag: str, alias: str) -> str:
    """SQL: the text ``inner`` with its first ``<tag ...>...</tag>`` block cut out.

    ``json_each(json_array(...))`` (under ``alias``, unique per level) holds the text in
    one column, so ``inner`` is evaluated once however many times the cut reads it (a
    plain subquery would be flattened into copies of it).
    """
    v = f"{alias}.value"
    o, c = f"instr({v}, '<{tag}')", f"instr({v}, '</{tag}>')"
    after = f"substr({v}, {c} + {len(tag) + 3})"
    return f"""(SELECT CASE WHEN {o} = 0 THEN {v}
        WHEN {c} > {o} THEN substr({v}, 1, {o} - 1) || ' ' || {after}
        ELSE substr({v}, 1, {o} - 1) END FROM json_each(json_array({inner})) AS {alias})"""


def _views() -> tuple[str, str]:
    """The views ``recall_raw`` (each message's text before blocks are cut) and
    ``recall_source`` (every message as indexed: ``session_id, seq, role, text``).

    The triggers and checks read ``recall_source``, so the rules have one definition;
    two views, so each parses within SQLite's parser stack.
    """
    raw = (
        "CREATE VIEW recall_raw AS SELECT m.session_id AS session_id, m.seq AS seq, "
        f"CAST(m.role AS TEXT) AS role, {_raw_text('m.body')} AS text FROM messages AS m"
    )
    cut = "j.value"
    for n, tag in enumerate(INJECTED_TAGS):
        cut = _cut(cut, tag, f"c{n}")

    def final(x: str) -> str:
        return f"CASE WHEN ltrim({x}) LIKE '{CHECKPOINT_HEADER}%' THEN '' ELSE trim({x}) END"

    # A text without '<' holds no block: it skips the cuts (most messages).
    text = f"""(SELECT CASE WHEN instr(j.value, '<') = 0 THEN {final("j.value")}
        ELSE (SELECT {final("k.value")} FROM json_each(json_array({cut})) AS k) END
        FROM json_each(json_array(r.text)) AS j)"""
    source = (
        "CREATE VIEW recall_source AS SELECT r.session_id AS session_id, r.seq AS seq, "
        f"r.role AS role, {text} AS text FROM recall_raw AS r"
    )
    return raw, source


_FLUSH_DELETE: Final = """DELETE FROM recall_docs WHERE docid IN (
            SELECT d.docid FROM recall_pending AS p
            JOIN recall_docs AS d ON d.session_id = p.session_id AND d.seq = p.seq)"""
# A view, so the triggers' statements stay short and the rules have one definition; SQLite
# flattens it, so a join on (session_id, seq) reads only those messages.
_SOURCE: Final = _views()
_FLUSH_INSERT: Final = """INSERT INTO recall_docs (session_id, seq, role, text)
            SELECT v.session_id, v.seq, v.role, v.text
            FROM (SELECT DISTINCT session_id, seq FROM recall_pending) AS p
            JOIN recall_source AS v ON v.session_id = p.session_id AND v.seq = p.seq"""
# In the order of the sessions' activity, then of their messages: a docid grows with how
# recently its session was active, as it does when appends index it (the postings give
# ties among candidates to the larger docid, so a rebuilt index ranks as the one it replaces).
_INDEX_ALL: Final = (
    "INSERT INTO recall_docs (session_id, seq, role, text) "
    "SELECT v.session_id, v.seq, v.role, v.text FROM recall_source AS v "
    "LEFT JOIN sessions AS s ON s.id = v.session_id ORDER BY s.updated_at, s.rowid, v.seq"
)
# The indexer raises `busy` while it writes; a write to the index while it is down was made
# by someone else and marks the index dirty (the open-time check then rebuilds it).
_BUSY: Final = "UPDATE recall_state SET busy = 1"
_IDLE: Final = "UPDATE recall_state SET busy = 0"
_MARK_DIRTY: Final = "UPDATE recall_state SET dirty = 1 WHERE busy = 0 AND dirty = 0"
# `docs` counts the index rows as the indexer wrote them (changes(): the rows of the statement
# before, not those its triggers changed); FTS5's own row count must equal it.
_FLUSH_STEPS: Final = (
    _BUSY,
    _FLUSH_DELETE,
    "UPDATE recall_state SET docs = docs - changes()",
    _FLUSH_INSERT,
    "UPDATE recall_state SET docs = docs + changes()",
    "DELETE FROM recall_pending",
    _IDLE,
)

_SCHEMA: Final = (
    *_TABLES,
    *_SOURCE,
    """
    CREATE TABLE recall_state (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        version INTEGER NOT NULL,
        busy INTEGER NOT NULL DEFAULT 0,
        dirty INTEGER NOT NULL DEFAULT 0,
        docs INTEGER NOT NULL DEFAULT 0
    )
    """,
    f"""
    CREATE TRIGGER recall_docs_ai AFTER INSERT ON recall_docs BEGIN
        INSERT INTO recall_fts (rowid, text) VALUES (new.docid, new.text);
        {_MARK_DIRTY};
    END
    """,
    f"""
    CREATE TRIGGER recall_docs_ad AFTER DELETE ON recall_docs BEGIN
        INSERT INTO recall_fts (recall_fts, rowid, text) VALUES ('delete', old.docid, old.text);
        {_MARK_DIRTY};
    END
    """,
    # The indexer never updates a row (it deletes and inserts): any update is from outside.
    f"""
    CREATE TRIGGER recall_docs_au AFTER UPDATE ON recall_docs BEGIN
        INSERT INTO recall_fts (recall_fts, rowid, text) VALUES ('delete', old.docid, old.text);
        INSERT INTO recall_fts (rowid, text) VALUES (new.docid, new.text);
        {_MARK_DIRTY};
    END
    """,
    f"""
    CREATE TRIGGER recall_pending_ad AFTER DELETE ON recall_pending BEGIN
        {_MARK_DIRTY};
    END
    """,
    *_queue_triggers(),
    # Every RECALL_BATCH-th queued change indexes the queue in the same statement (ids
    # restart at 1 once the queue is emptied, so this fires once per RECALL_BATCH changes):
    # FTS5 then writes one segment per batch instead of one per commit.
    f"""
    CREATE TRIGGER recall_pending_flush AFTER INSERT ON recall_pending
    WHEN new.id % {RECALL_BATCH} = 0 BEGIN
        {"; ".join(_FLUSH_STEPS)};
    END
    """,
)


def _create(conn: sqlite3.Connection) -> None:
    """Create the index objects (rules :data:`INDEX_VERSION`, the postings included) and
    index every message."""
    for statement in (*_SCHEMA, *postings.TABLES, *postings.SQLITE_TRIGGERS):
        conn.execute(statement)
    conn.execute("INSERT INTO recall_state (id, version, busy) VALUES (1, ?, 1)", (INDEX_VERSION,))
    conn.execute(_INDEX_ALL)
    conn.execute("UPDATE recall_state SET docs = (SELECT count(*) FROM recall_docs)")
    conn.execute(_IDLE)
    postings.post(conn)


def add_postings(conn: sqlite3.Connection) -> None:
    """Migration 0006: the impact-ordered postings (:mod:`.postings`), every message posted.

    A store whose index 0004 created under this release's rules has them already; an
    index too damaged to read is left to the open-time check's rebuild.
    """
    exists = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'recall_postings'").fetchone()
    if exists is not None:
        return
    conn.execute("SAVEPOINT recall_postings")
    try:
        for statement in (*postings.TABLES, *postings.SQLITE_TRIGGERS):
            conn.execute(statement)
        conn.execute("INSERT INTO recall_unposted (doc) SELECT docid FROM recall_docs")
        postings.post(conn)
    except sqlite3.DatabaseError:  # damaged pages: the open-time check rebuilds it all
        conn.execute("ROLLBACK TO recall_postings")
        conn.execute("UPDATE recall_state SET dirty = 1")
    conn.execute("RELEASE recall_postings")


def _drop(conn: sqlite3.Connection) -> None:
    """Drop every index object found in the schema: triggers, the FTS5 table (with its
    shadow tables), then the tables and index left."""
    rows = conn.execute("SELECT type, name, sql FROM sqlite_master").fetchall()
    objects = [(str(t), str(n), str(s or "")) for t, n, s in rows if is_recall_object(str(n))]
    order = {"trigger": 0, "view": 0, "table": 2, "index": 3}
    ranked = sorted(objects, key=lambda o: order.get(o[0], 4) - ("VIRTUAL" in o[2].upper()))
    for kind, name, _ in ranked:
        if kind not in order:
            continue
        exists = conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone()
        if exists is not None:  # the FTS5 table's drop takes its shadow tables with it
            conn.execute(f'DROP {kind.upper()} "{name}"')


def upgrade_to_v2(conn: sqlite3.Connection) -> None:
    """Migration 0004: re-index every message under rules 2, inside the migration.

    An index too damaged to drop inside the migration's transaction is left for the
    open-time check: only its triggers are replaced and a state row of version 1 is
    written, so the store opens and :func:`rebuild` (which can vacuum) runs next.
    """
    conn.execute("SAVEPOINT recall_upgrade")
    try:
        _drop(conn)
        _create(conn)
    except sqlite3.DatabaseError:  # damaged pages, a table FTS5 cannot open...
        conn.execute("ROLLBACK TO recall_upgrade")
        conn.execute("DROP TABLE IF EXISTS recall_state")
        conn.execute(next(s for s in _SCHEMA if "CREATE TABLE recall_state" in s))
        conn.execute("INSERT INTO recall_state (id, version) VALUES (1, 1)")
    conn.execute("RELEASE recall_upgrade")


def flush(conn: sqlite3.Connection) -> None:
    """Index the queued message changes and post the new index rows (inside the
    caller's write transaction)."""
    for statement in _FLUSH_STEPS:
        conn.execute(statement)
    postings.post(conn)


def _averages_rows(conn: sqlite3.Connection) -> int:
    """FTS5's row count, the first varint of its averages record (``%_data`` row 1)."""
    row = conn.execute("SELECT block FROM recall_fts_data WHERE id = 1").fetchone()
    if row is None or not row[0]:
        return 0
    value = 0
    for byte in bytes(row[0])[:9]:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            break
    return value


def quick_problems(conn: sqlite3.Connection) -> list[str]:
    """The open-time check (run once the queue is indexed): what is wrong, or ``[]``.

    The state row exists, has the current rules' version, is clean (nothing but the
    indexer wrote ``recall_docs`` or ``recall_pending``), and FTS5's row count (its
    averages record) equals the rows the indexer wrote (``recall_state.docs``).
    Cost: two single-row reads, whatever the size of the store.

    Raises:
        sqlite3.DatabaseError: the index cannot be read.
    """
    row = conn.execute("SELECT version, busy, dirty, docs FROM recall_state WHERE id = 1")
    state = row.fetchone()
    if state is None:
        return ["its state row is missing"]
    version, busy, dirty, docs = state
    if version != INDEX_VERSION:
        return [
            f"it was indexed under rules {version!r}; this release indexes under rules "
            f"{INDEX_VERSION} (the memory's own messages left out)"
        ]
    if busy or dirty:
        return ["it was changed by something other than the indexer"]
    indexed = _averages_rows(conn)
    if indexed != docs:
        return [f"its full-text index holds {indexed} messages, its table {docs}"]
    return []


def rebuild(conn: sqlite3.Connection, *, drop: bool = True) -> str:
    """Re-derive the whole index from the messages, in its own transactions.

    First the plain way: drop every index object and create them again, then index
    every message, in one transaction. When the index's pages are too damaged for a
    drop (SQLite reports corruption), its objects are deleted from the schema instead
    (their pages left unowned), created again, and the file is vacuumed, which rewrites
    it without the unowned pages; the messages' pages are only read. The schema's
    fingerprint is recorded again either way.

    Args:
        conn: The connection (no transaction open).
        drop: Try the plain way first. ``False`` when an index object may point at pages
            a table owns (its root page moved): a drop would free them.

    Returns:
        ``""`` for the plain way, else what was done about the unowned pages.

    Raises:
        sqlite3.Error: the messages themselves could not be read.
    """
    failure = "its root pages may point at other tables' pages"
    if drop:
        try:
            with transaction(conn):
                _drop(conn)
                _create(conn)
                record_schema(conn, derived=is_recall_object)
            return ""
        except sqlite3.DatabaseError as exc:  # damaged pages, a table FTS5 cannot open...
            failure = str(exc)
    with transaction(conn):
        conn.execute("PRAGMA writable_schema = ON")
        try:
            conn.execute(
                "DELETE FROM sqlite_master WHERE name LIKE 'recall\\_%' ESCAPE '\\' "
                "OR name LIKE 'messages\\_recall\\_%' ESCAPE '\\'"
            )
            version = int(conn.execute("PRAGMA schema_version").fetchone()[0])
            conn.execute(f"PRAGMA schema_version = {version + 1}")
        finally:
            conn.execute("PRAGMA writable_schema = OFF")
        _create(conn)
    try:
        conn.execute("VACUUM")
        done = (
            f"its objects could not be dropped ({failure}): they were removed from the "
            "schema and the file vacuumed"
        )
    except sqlite3.OperationalError as exc:  # busy: the pages stay unowned until a VACUUM
        done = (
            f"its objects could not be dropped ({failure}): they were removed from the "
            f"schema (VACUUM failed: {exc}; their pages stay unused until one runs)"
        )
    with transaction(conn):
        record_schema(conn, derived=is_recall_object)
    return done
