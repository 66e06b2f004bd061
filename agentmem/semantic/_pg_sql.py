"""The statements of semantic memory that PostgreSQL says differently from SQLite.

The SQL functions of :mod:`agentmem.semantic._store` are written once, with ``?``
placeholders, for both engines; inside a PostgreSQL transaction they are given a
:class:`PgConn` (inside a SQLite one, the :class:`sqlite3.Connection`) and take
from here what SQLite does with features PostgreSQL does not have:

* **Keyword matching.** SQLite's store matches through an FTS5 index (porter
  stemming over unicode61, diacritics folded) and ranks with FTS5's ``bm25()``.
  Here the same terms are kept in a plain table, ``semantic_terms (term, docid,
  tf)``, written by :func:`index_terms` in the transaction that writes the memory.
  The terms are made by FTS5 itself (:func:`terms`: SQLite's tokenizer, run on a
  private in-memory table of this process), so a word matches the same memories on
  both engines (stems, case, accents). :func:`keyword_matches` computes the same
  numbers as the SQLite one: how many of the query's words a memory holds (a word
  that is several terms, ``foo_bar``, is a phrase: its terms consecutive), and
  FTS5's BM25 formula (k1 = 1.2, b = 0.75, FTS5's idf floor) over the whole table.
  A plain table rather than a ``tsvector``: PostgreSQL's text-search parsers and
  its ``english`` stemmer (Porter 2) split and stem differently from FTS5, so the
  two engines would not find the same memories for the same words.
* **Vectors** are the same float32 ``BYTEA`` blobs, scored in the client; with the
  pgvector extension (:attr:`PgConn.vector_schema`) the server computes the cosines
  (:func:`server_similarities`) from a ``vector`` column kept beside the blob.
"""

from __future__ import annotations

import hashlib
import math
import sqlite3
import struct
import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any, Final

from agentmem._storage.fts import TOKENIZER
from agentmem._storage.postgres import PgCursor

__all__ = [
    "STALE_EMBEDDING",
    "PgConn",
    "forget",
    "index_terms",
    "keyword_matches",
    "quote",
    "server_similarities",
    "set_embedding",
    "terms",
    "vector_literal",
]

MEMORIES: Final = "semantic_memories"
HISTORY: Final = "semantic_history"
TERMS: Final = "semantic_terms"
STATS: Final = "semantic_stats"

STALE_EMBEDDING: Final = (
    """
    CREATE OR REPLACE FUNCTION semantic_embedding_stale() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        IF NEW.vector IS DISTINCT FROM OLD.vector THEN
            NEW.embedding := NULL;
        END IF;
        RETURN NEW;
    END
    $$
    """,
    f"DROP TRIGGER IF EXISTS semantic_embedding_stale ON {MEMORIES}",
    f"""
    CREATE TRIGGER semantic_embedding_stale BEFORE UPDATE OF vector ON {MEMORIES}
    FOR EACH ROW EXECUTE FUNCTION semantic_embedding_stale()
    """,
)
"""With pgvector: an update of a blob empties its ``embedding`` until it is set again."""

_K1: Final = 1.2
_B: Final = 0.75
_LONG_TERM: Final = 200  # characters; longer terms are stored as digests (B-tree rows are bounded)


class PgConn:
    """What the SQL functions get inside a PostgreSQL transaction: ``execute`` (``?``
    placeholders, returns the cursor), and the schema of the pgvector extension when
    the server scores vectors (``None``: the client does). Its names are written
    qualified: the extension may live in a schema that is not on agentmem's path."""

    __slots__ = ("cursor", "vector_schema")

    def __init__(self, cursor: PgCursor, *, vector_schema: str | None) -> None:
        self.cursor = cursor
        self.vector_schema = vector_schema

    @property
    def pgvector(self) -> bool:
        """Whether the server scores vectors."""
        return self.vector_schema is not None

    def vector_name(self, name: str) -> str:
        """``name`` (``vector``, ``vector_dims``) qualified by pgvector's schema."""
        return f"{quote(self.vector_schema or 'public')}.{name}"

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> PgCursor:
        return self.cursor.execute(sql, params)


_TOKENIZERS = threading.local()


def terms(text: str) -> list[str]:
    """The index terms FTS5 makes of ``text`` (``porter unicode61 remove_diacritics 2``),
    in order: read from an in-memory FTS5 table (one per thread), never written to disk."""
    conn: sqlite3.Connection | None = getattr(_TOKENIZERS, "conn", None)
    if conn is None:
        conn = sqlite3.connect(":memory:", isolation_level=None)
        conn.execute(f"CREATE VIRTUAL TABLE tokens USING fts5 (text, tokenize = '{TOKENIZER}')")
        conn.execute("CREATE VIRTUAL TABLE token_list USING fts5vocab (tokens, 'instance')")
        _TOKENIZERS.conn = conn
    conn.execute("BEGIN")
    try:
        conn.execute("INSERT INTO tokens (rowid, text) VALUES (1, ?)", (text,))
        return [
            str(term) for (term,) in conn.execute("SELECT term FROM token_list ORDER BY offset")
        ]
    finally:
        conn.execute("ROLLBACK")


def quote(identifier: str) -> str:
    """An SQL identifier, double-quoted."""
    return '"' + identifier.replace('"', '""') + '"'


def _key(term: str) -> str:
    """A term as stored: itself, or ``#`` and its digest when very long (``#`` is never
    part of a term, so a digest never equals a term)."""
    if len(term) <= _LONG_TERM:
        return term
    return "#" + hashlib.sha256(term.encode("utf-8")).hexdigest()


def index_terms(conn: PgConn, docid: int, text: str, *, old: int | None) -> None:
    """Make ``semantic_terms`` and the length of memory ``docid`` those of ``text``, and
    count them in ``semantic_stats``; ``old``: its length before (``None``: a new memory)."""
    counts = Counter(_key(term) for term in terms(text))
    length = sum(counts.values())
    if old is not None:
        conn.execute(f"DELETE FROM {TERMS} WHERE docid = ?", (docid,))
    conn.cursor.executemany(
        f"INSERT INTO {TERMS} (term, docid, tf) VALUES (?, ?, ?)",
        [(term, docid, count) for term, count in counts.items()],
    )
    conn.execute(f"UPDATE {MEMORIES} SET terms = ? WHERE docid = ?", (length, docid))
    conn.execute(
        f"UPDATE {STATS} SET memories = memories + ?, terms = terms + ?",
        (1 if old is None else 0, length - (old or 0)),
    )


def forget(conn: PgConn, returned: Sequence[Sequence[Any]]) -> None:
    """Take deleted memories (the ``terms`` their ``DELETE ... RETURNING`` gave) out of
    ``semantic_stats`` (their terms went by cascade)."""
    if returned:
        conn.execute(
            f"UPDATE {STATS} SET memories = memories - ?, terms = terms - ?",
            (len(returned), sum(int(row[0]) for row in returned)),
        )


def set_embedding(conn: PgConn, docid: int, blob: bytes | None) -> None:
    """Keep pgvector's ``embedding`` column equal to the blob (when the server has it)."""
    if conn.pgvector:
        literal = None if blob is None else vector_literal(blob)
        conn.execute(
            f"UPDATE {MEMORIES} SET embedding = CAST(? AS {conn.vector_name('vector')}) "
            "WHERE docid = ?",
            (literal, docid),
        )


Phrase = tuple[str, ...]


def _occurrences(phrase: Phrase, keys: Sequence[str]) -> int:
    """How many times ``phrase`` occurs in ``keys`` as consecutive terms."""
    n = len(phrase)
    return sum(1 for i in range(len(keys) - n + 1) if tuple(keys[i : i + n]) == phrase)


def keyword_matches(
    conn: PgConn, where: str, params: Sequence[str], words: Sequence[str]
) -> dict[int, tuple[float, int]]:
    """``docid -> (BM25, how many of words it holds)`` for the memories matching
    ``where`` (over alias ``m``) that hold any of ``words`` (see the module docstring).

    Each word is an FTS5 phrase: its terms, consecutive. A one-term phrase is read from
    ``semantic_terms``; a longer one (``foo_bar``) from the texts of the memories that
    hold all its terms, counted the way FTS5 counts phrase matches.
    """
    wanted: list[Phrase] = [
        phrase for phrase in (tuple(_key(t) for t in terms(word)) for word in words) if phrase
    ]
    if not wanted:
        return {}
    tf: dict[int, dict[Phrase, int]] = {}  # docid -> phrase -> occurrences
    lengths: dict[int, int] = {}
    documents: dict[Phrase, int] = {}  # phrase -> memories holding it, over the whole table
    singles = sorted({phrase[0] for phrase in wanted if len(phrase) == 1})
    if singles:
        for docid, term, count, length in conn.execute(
            f"SELECT t.docid, t.term, t.tf, m.terms FROM {TERMS} AS t "
            f"JOIN {MEMORIES} AS m ON m.docid = t.docid WHERE t.term = ANY(?) AND {where}",
            [singles, *params],
        ):
            tf.setdefault(int(docid), {})[(str(term),)] = int(count)
            lengths[int(docid)] = int(length)
        if tf:
            for term, count in conn.execute(
                f"SELECT term, count(*) FROM {TERMS} WHERE term = ANY(?) GROUP BY term", [singles]
            ):
                documents[(str(term),)] = int(count)
    for phrase in dict.fromkeys(p for p in wanted if len(p) > 1):
        distinct = sorted(set(phrase))
        documents[phrase] = 0
        for docid, text, length, inside in conn.execute(
            f"SELECT m.docid, m.text, m.terms, ({where}) FROM {MEMORIES} AS m WHERE m.docid IN "
            f"(SELECT docid FROM {TERMS} WHERE term = ANY(?) GROUP BY docid HAVING count(*) = ?)",
            [*params, distinct, len(distinct)],
        ):
            count = _occurrences(phrase, [_key(t) for t in terms(str(text))])
            if count:
                documents[phrase] += 1
                if inside:
                    tf.setdefault(int(docid), {})[phrase] = count
                    lengths[int(docid)] = int(length)
    if not tf:
        return {}
    row = conn.execute(f"SELECT memories, terms FROM {STATS}").fetchone()
    total, tokens = (int(row[0]), int(row[1])) if row is not None else (0, 0)
    average = tokens / total if total else 1.0
    idf: list[float] = []
    for phrase in wanted:
        hits = documents.get(phrase, 0)
        value = math.log((total - hits + 0.5) / (hits + 0.5))
        idf.append(value if value > 0.0 else 1e-6)  # FTS5's floor
    out: dict[int, tuple[float, int]] = {}
    for docid, counts in tf.items():
        score = 0.0
        found = 0
        size = lengths[docid]
        for phrase, weight in zip(wanted, idf, strict=True):
            n = counts.get(phrase, 0)
            if n:
                found += 1
                score += weight * (n * (_K1 + 1.0)) / (n + _K1 * (1 - _B + _B * size / average))
        if found:
            out[docid] = (-1.0 * score, found)
    return out


def vector_literal(blob: bytes) -> str | None:
    """A float32 blob as pgvector's text input (``[1,2.5,...]``), or ``None`` when it
    has no dimension or a value pgvector refuses (NaN, infinity)."""
    if not blob or len(blob) % 4:
        return None
    values = struct.unpack(f"<{len(blob) // 4}f", blob)
    if not all(math.isfinite(v) for v in values):
        return None
    return "[" + ",".join(repr(v) for v in values) + "]"


def server_similarities(
    conn: PgConn, where: str, params: Sequence[str], query: bytes
) -> tuple[dict[int, float], list[tuple[int, bytes]]]:
    """Cosine similarities computed by pgvector for the memories matching ``where``
    whose vector has the query's length, and the ``(docid, blob)`` of those that have
    a blob but no ``embedding`` (a value pgvector refuses): the client scores those.

    A zero vector's cosine is 0 (pgvector gives NaN).
    """
    literal = vector_literal(query)
    dims = len(query) // 4
    similar: dict[int, float] = {}
    if literal is not None:
        for docid, value in conn.execute(
            f"SELECT m.docid, 1 - (m.embedding OPERATOR({conn.vector_name('<=>')}) "
            f"CAST(? AS {conn.vector_name('vector')})) FROM {MEMORIES} AS m WHERE {where} "
            f"AND m.embedding IS NOT NULL AND {conn.vector_name('vector_dims')}(m.embedding) = ?",
            [literal, *params, dims],
        ):
            number = float(value) if value is not None else math.nan
            similar[int(docid)] = number if math.isfinite(number) else 0.0
    left = [
        (int(docid), bytes(blob))
        for docid, blob in conn.execute(
            f"SELECT m.docid, m.vector FROM {MEMORIES} AS m "
            f"WHERE {where} AND m.vector IS NOT NULL AND m.embedding IS NULL",
            list(params),
        )
    ]
    return similar, left
