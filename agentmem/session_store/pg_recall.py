"""The recall index on PostgreSQL: the postings of :mod:`.postings`, kept in the message's
own transaction.

Tables (migration ``0006_recall_postings`` of :data:`.pg.PG_MIGRATIONS`):

* ``recall_docs (docid, session_id, seq, role, text, length)``: one row per message of
  a main history, its indexed text (:func:`.pg_recall_text.indexed_text`, index rules 2
  as on SQLite) and its length in index tokens;
* ``recall_postings`` and its index ``recall_postings_by_impact``: as on SQLite
  (:data:`.postings.TABLES`), read by the same :func:`.postings.top_k`,
  :func:`.postings.score_docs` and :func:`.postings.frequencies`;
* ``recall_terms (term, docs, tokens)`` and ``recall_counts (id, term, docs, tokens)``:
  how many messages hold each term. An append does not update a shared counter row
  (with several writers, every message holding "the" would wait on that row's lock
  until the other writer committed, and appends would commit one at a time): it inserts
  its changes into ``recall_counts``, and every :data:`FOLD_EVERY`-th message posted
  folds them into ``recall_terms`` (terms in sorted order, one folder at a time). A
  term's count is its ``recall_terms`` row plus its ``recall_counts`` rows; the term
  ``''`` (no index term is empty) counts the messages and their tokens, which on SQLite
  FTS5's averages record gives.

Every message-changing method of :class:`.pg.PgSessionsSQL` calls :func:`index` or
:func:`forget` in its transaction: an append is committed with its index rows or not at
all, and there is no queue (``recall_queued`` is always false).

Where SQLite uses FTS5, PostgreSQL uses the postings: a small store's every-match search
(:func:`match_rows`, FTS5's query of quoted words ORed, its BM25 computed as FTS5's
``bm25()`` does) and the integrity check (:func:`problems`).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Final

from agentmem.session_store import postings
from agentmem.session_store.pg_recall_text import indexed_text, parsed
from agentmem.session_store.postings_terms import terms as index_terms

__all__ = [
    "FOLD_EVERY",
    "TABLES",
    "doc_frequencies",
    "forget",
    "forget_from",
    "index",
    "match_rows",
    "problems",
    "rebuild",
    "reindex",
    "stored_text",
    "totals",
]

FOLD_EVERY: Final = 256
"""Fold ``recall_counts`` into ``recall_terms`` when a docid is a multiple of this."""

_FOLD_LOCK: Final = 0x61676D726563616C  # pg_try_advisory_xact_lock key: one folder at a time
_TOTAL: Final = ""  # recall_counts/recall_terms row counting the messages and their tokens

TABLES: Final = (
    """
    CREATE TABLE recall_docs (
        docid BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        session_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        role TEXT NOT NULL,
        text TEXT NOT NULL,
        length BIGINT NOT NULL,
        UNIQUE (session_id, seq)
    )
    """,
    """
    CREATE TABLE recall_postings (
        term TEXT NOT NULL,
        doc BIGINT NOT NULL,
        tf INTEGER NOT NULL,
        impact INTEGER NOT NULL,
        PRIMARY KEY (doc, term)
    )
    """,
    "CREATE INDEX recall_postings_by_impact ON recall_postings (term, impact, doc)",
    """
    CREATE TABLE recall_terms (
        term TEXT PRIMARY KEY,
        docs BIGINT NOT NULL,
        tokens BIGINT NOT NULL DEFAULT 0
    )
    """,
    """
    CREATE TABLE recall_counts (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        term TEXT NOT NULL,
        docs BIGINT NOT NULL,
        tokens BIGINT NOT NULL DEFAULT 0
    )
    """,
    "CREATE INDEX recall_counts_by_term ON recall_counts (term)",
)
"""Migration ``0006_recall_postings``'s statements (the messages stored before it are
indexed by :func:`rebuild`, run by the migration)."""

_LAST_ASSISTANT: Final = (
    "SELECT body FROM messages WHERE session_id = ? AND seq < ? AND role = 'assistant' "
    "ORDER BY seq DESC LIMIT 1"
)
_CHUNK: Final = 400


def _marks(n: int) -> str:
    return ", ".join("?" * n)


def stored_text(role: str, body: str, before: Any) -> str:
    """The text of a message's index row: :func:`.pg_recall_text.indexed_text` with NUL
    characters as spaces (PostgreSQL's text cannot hold NUL; both separate tokens, so
    the postings are the same as SQLite's)."""
    return indexed_text(role, body, before).replace("\x00", " ")


def index(
    cur: Any,
    sid: str,
    rows: Sequence[tuple[int, str, str]],
    crcs: Sequence[int | None] | None = None,
) -> None:
    """Index messages ``(seq, role, raw body)`` of session ``sid`` (in ``seq`` order, none
    indexed yet), in the caller's transaction.

    ``crcs``: insert the messages too, with these checksums, in the same statement (an
    append's message rows and index rows in one round trip).
    """
    if not rows:
        return
    before: Any = None
    looked = False
    docs: list[tuple[str, int, str, str, int]] = []
    tokens_of: list[list[str]] = []
    for seq, role, body in rows:
        if role == "tool" and before is None and not looked:
            found = cur.execute(_LAST_ASSISTANT, (sid, rows[0][0])).fetchone()
            before = None if found is None else parsed(found[0])
            looked = True
        text = stored_text(role, body, before)
        tokens = index_terms(text)
        docs.append((sid, seq, role, text, len(tokens)))
        tokens_of.append(tokens)
        if role == "assistant":
            before, looked = parsed(body), True
    _post(cur, sid, docs, tokens_of, None if crcs is None else (rows, crcs))


# One round trip: the index rows, their postings and the count changes (data-modifying
# CTEs run to completion whether the main query reads them or not); returns the docids.
# The numbers and the index terms travel as one text parameter each, split by the server
# (string_to_array on " ": terms are runs of [^\W_], never holding a space; a crc "N" is
# NULL): psycopg dumps a list element by element in Python, a joined string in C.
_SQL_POST: Final = """
    WITH r AS (
        SELECT * FROM unnest(
            string_to_array(?, ' ')::bigint[], ?::text[], ?::text[],
            string_to_array(?, ' ')::bigint[]{columns}
        ) AS r (seq, role, text, length{names})
    ), {messages}d AS (
        INSERT INTO recall_docs (session_id, seq, role, text, length)
        SELECT ?, seq, role, text, length FROM r
        RETURNING docid, seq
    ), p AS (
        INSERT INTO recall_postings (term, doc, tf, impact)
        SELECT t.term, d.docid, t.tf, t.impact
        FROM unnest(
            string_to_array(?, ' ')::bigint[], string_to_array(?, ' '),
            string_to_array(?, ' ')::int[], string_to_array(?, ' ')::int[]
        ) AS t (seq, term, tf, impact)
        JOIN d ON d.seq = t.seq
    ), c AS (
        INSERT INTO recall_counts (term, docs, tokens)
        SELECT * FROM unnest(
            array_prepend('', string_to_array(?, ' ')),
            string_to_array(?, ' ')::bigint[], string_to_array(?, ' ')::bigint[]
        )
    )
    SELECT MIN(docid), MAX(docid) FROM d
"""
_SQL_POST_INDEX: Final = _SQL_POST.format(columns="", names="", messages="")
_SQL_POST_APPEND: Final = _SQL_POST.format(
    columns=", ?::text[], string_to_array(?, ' ', 'N')::bigint[]",
    names=", body, crc",
    messages="""m AS (
        INSERT INTO messages (session_id, seq, role, body, crc)
        SELECT ?, seq, role, body, crc FROM r
    ), """,
)


def _spaced(words: Iterable[object]) -> str:
    """``words`` joined by single spaces, for ``string_to_array(?, ' ')``."""
    return " ".join(map(str, words))


def _spaced_terms(terms: Sequence[str]) -> str:
    """Index terms joined by single spaces (refuses a term holding one: it cannot be split
    back, and no term of :func:`.postings_terms.terms` does)."""
    joined = " ".join(terms)
    if joined.count(" ") != max(len(terms) - 1, 0) or (terms and "" in terms):
        raise ValueError(f"index terms cannot be empty or hold a space: {terms!r}")
    return joined


def _post(
    cur: Any,
    sid: str,
    docs: Sequence[tuple[str, int, str, str, int]],
    tokens_of: Sequence[list[str]],
    messages: tuple[Sequence[tuple[int, str, str]], Sequence[int | None]] | None,
) -> None:
    """Insert the index rows ``docs`` (and the ``messages`` rows and their checksums,
    when given), post their tokens and count them, in one statement; fold the counts
    when a docid crossed a multiple of :data:`FOLD_EVERY`."""
    seqs: list[int] = []
    terms: list[str] = []
    tfs: list[int] = []
    impacts: list[int] = []
    held: Counter[str] = Counter()
    length = 0
    for (_, seq, _, _, _), tokens in zip(docs, tokens_of, strict=True):
        for term, tf in Counter(tokens).items():
            seqs.append(seq)
            terms.append(term)
            tfs.append(tf)
            impacts.append(postings.impact(tf, len(tokens)))
            held[term] += 1
        length += len(tokens)
    counted = sorted(held.items())
    rows: list[Any] = [
        _spaced(d[1] for d in docs),
        [d[2] for d in docs],
        [d[3] for d in docs],
        _spaced(d[4] for d in docs),
    ]
    if messages is None:
        sql = _SQL_POST_INDEX
    else:
        sql = _SQL_POST_APPEND
        stored, crcs = messages  # the rows of docs (index: same seqs and roles)
        bodies = [r[2] for r in stored]
        rows += [bodies, _spaced("N" if crc is None else crc for crc in crcs), sid]
    row = cur.execute(
        sql,
        (
            *rows,
            sid,
            _spaced(seqs),
            _spaced_terms(terms),
            _spaced(tfs),
            _spaced(impacts),
            _spaced_terms([t for t, _ in counted]),
            _spaced([len(docs), *(n for _, n in counted)]),
            _spaced([length, *(0 for _ in counted)]),
        ),
    ).fetchone()
    first, last = int(row[0]), int(row[1])
    if last // FOLD_EVERY != (first - 1) // FOLD_EVERY:
        fold(cur)


def fold(cur: Any) -> None:
    """Move the committed ``recall_counts`` rows into ``recall_terms`` (skipped while
    another transaction folds)."""
    locked = cur.execute("SELECT pg_try_advisory_xact_lock(?)", (_FOLD_LOCK,)).fetchone()
    if not locked or not locked[0]:
        return
    cur.execute(
        "WITH moved AS (DELETE FROM recall_counts RETURNING term, docs, tokens) "
        "INSERT INTO recall_terms (term, docs, tokens) "
        "SELECT term, SUM(docs), SUM(tokens) FROM moved GROUP BY term ORDER BY term "
        "ON CONFLICT (term) DO UPDATE SET docs = recall_terms.docs + excluded.docs, "
        "tokens = recall_terms.tokens + excluded.tokens"
    )


def _forget_docs(cur: Any, docids: list[int]) -> None:
    for start in range(0, len(docids), _CHUNK):
        chunk = docids[start : start + _CHUNK]
        marks = _marks(len(chunk))
        cur.execute(
            "INSERT INTO recall_counts (term, docs) "
            f"SELECT term, -COUNT(*) FROM recall_postings WHERE doc IN ({marks}) "
            "GROUP BY term ORDER BY term",
            chunk,
        )
        cur.execute(
            "INSERT INTO recall_counts (term, docs, tokens) "
            f"SELECT ?, -COUNT(*), -COALESCE(SUM(length), 0) FROM recall_docs "
            f"WHERE docid IN ({marks})",
            [_TOTAL, *chunk],
        )
        cur.execute(f"DELETE FROM recall_postings WHERE doc IN ({marks})", chunk)
        cur.execute(f"DELETE FROM recall_docs WHERE docid IN ({marks})", chunk)


def forget(cur: Any, sid: str, seqs: Iterable[int]) -> None:
    """Drop the index rows of messages ``seqs`` of session ``sid`` (absent ones ignored)."""
    wanted = list(seqs)
    docids: list[int] = []
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start : start + _CHUNK]
        docids.extend(
            int(r[0])
            for r in cur.execute(
                f"SELECT docid FROM recall_docs WHERE session_id = ? AND seq IN "
                f"({_marks(len(chunk))})",
                [sid, *chunk],
            ).fetchall()
        )
    if docids:
        _forget_docs(cur, docids)


def forget_from(cur: Any, sid: str, start: int) -> None:
    """Drop the index rows of the messages of ``sid`` from ``start`` on (0: all)."""
    docids = [
        int(r[0])
        for r in cur.execute(
            "SELECT docid FROM recall_docs WHERE session_id = ? AND seq >= ?", (sid, start)
        ).fetchall()
    ]
    if docids:
        _forget_docs(cur, docids)


def reindex(cur: Any, sid: str, seqs: Sequence[int]) -> None:
    """Index messages ``seqs`` of ``sid`` again from their stored rows (after a replace
    or a renumbering: each one's old index row is dropped first)."""
    forget(cur, sid, seqs)
    wanted = sorted(set(seqs))
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start : start + _CHUNK]
        rows = cur.execute(
            f"SELECT seq, role, body FROM messages WHERE session_id = ? AND seq IN "
            f"({_marks(len(chunk))}) ORDER BY seq",
            [sid, *chunk],
        ).fetchall()
        for seq, role, body in rows:  # one by one: each looks up the assistant before it
            index(cur, sid, [(int(seq), str(role), body)])


def rebuild(cur: Any) -> None:
    """Drop every index row and index every message again (sessions by activity, then
    messages by seq, as SQLite's rebuild numbers them)."""
    cur.execute("LOCK TABLE recall_docs IN EXCLUSIVE MODE")
    for table in ("recall_postings", "recall_counts", "recall_terms", "recall_docs"):
        cur.execute(f"DELETE FROM {table}")
    sids = [
        str(r[0])
        for r in cur.execute("SELECT id FROM sessions ORDER BY updated_at, ord").fetchall()
    ]
    for sid in sids:
        rows = cur.execute(
            "SELECT seq, role, body FROM messages WHERE session_id = ? ORDER BY seq", (sid,)
        ).fetchall()
        if rows:
            index(cur, sid, [(int(s), str(r), b) for s, r, b in rows])
    fold(cur)


def doc_frequencies(cur: Any, query_terms: Sequence[str]) -> dict[str, int]:
    """How many messages hold each of ``query_terms`` (terms none holds left out)."""
    out: dict[str, int] = {}
    names = [t for t in query_terms if t != _TOTAL]
    for start in range(0, len(names), _CHUNK):
        chunk = names[start : start + _CHUNK]
        marks = _marks(len(chunk))
        for term, docs in cur.execute(
            f"SELECT term, SUM(docs) FROM (SELECT term, docs FROM recall_terms "
            f"WHERE term IN ({marks}) UNION ALL SELECT term, docs FROM recall_counts "
            f"WHERE term IN ({marks})) AS c GROUP BY term HAVING SUM(docs) > 0",
            [*chunk, *chunk],
        ).fetchall():
            out[str(term)] = int(docs)
    return out


def totals(cur: Any) -> tuple[int, int]:
    """The messages indexed and the tokens in them."""
    row = cur.execute(
        "SELECT COALESCE(SUM(docs), 0), COALESCE(SUM(tokens), 0) FROM (SELECT docs, tokens "
        "FROM recall_terms WHERE term = ? UNION ALL SELECT docs, tokens FROM recall_counts "
        "WHERE term = ?) AS c",
        (_TOTAL, _TOTAL),
    ).fetchone()
    return (int(row[0]), int(row[1])) if row is not None else (0, 0)


_PHRASE: Final = re.compile(r'"((?:[^"]|"")*)"')


def _occurrences(tokens: Sequence[str], phrase: Sequence[str]) -> int:
    n = len(phrase)
    if n == 1:
        return tokens.count(phrase[0])
    first = phrase[0]
    return sum(
        1
        for i, token in enumerate(tokens)
        if token == first and list(tokens[i : i + n]) == list(phrase)
    )


def match_rows(
    cur: Any, match: str, passing: str, params: Sequence[Any]
) -> list[tuple[int, float]]:
    """FTS5's answer to ``match`` (quoted words ORed, as :mod:`agentmem.recall` writes it)
    through the postings: ``(docid, bm25 score, higher is better)`` of every message
    holding one of the phrases and passing the filter query ``passing`` (its first
    parameter: an array of the docids; then ``params``), best first, ties by docid.

    A word of one term is its postings; a word of several terms (``def_test``) is an FTS5
    phrase: the messages holding all of its terms, its occurrences counted in their text.
    The score is FTS5's ``bm25()`` (k1 1.2, b 0.75, idf floored at 1e-6, the average
    length of every indexed message), summed in the query's phrase order as FTS5 does.
    """
    phrases = [index_terms(m.replace('""', '"')) for m in _PHRASE.findall(match)]
    phrases = [p for p in phrases if p]
    if not phrases:
        return []
    freq: dict[int, list[float]] = {}
    lengths: dict[int, int] = {}
    hits = [0] * len(phrases)
    for i, phrase in enumerate(phrases):
        found = _holding(cur, phrase)
        if len(phrase) > 1 and found:
            for doc, (length, text) in _texts(cur, list(found)).items():
                count = _occurrences(index_terms(text), phrase)
                if count:
                    freq.setdefault(doc, [0.0] * len(phrases))[i] = float(count)
                    lengths[doc] = length
                    hits[i] += 1
            continue
        for doc, tf in found.items():
            freq.setdefault(doc, [0.0] * len(phrases))[i] = float(tf)
            hits[i] += 1
    if not freq:
        return []
    kept = {int(r[0]) for r in cur.execute(passing, [sorted(freq), *params])}
    missing = [d for d in kept if d not in lengths]
    if missing:
        for doc, length in cur.execute(
            "SELECT docid, length FROM recall_docs WHERE docid = ANY(?::bigint[])", (missing,)
        ):
            lengths[int(doc)] = int(length)
    rows, tokens = totals(cur)
    average = tokens / rows if rows else 1.0
    idf = []
    for n in hits:
        value = math.log((rows - n + 0.5) / (n + 0.5)) if rows else 0.0
        idf.append(value if value > 0.0 else 1e-6)
    k1, b = 1.2, 0.75
    scored: list[tuple[int, float]] = []
    for doc in kept:
        score = 0.0
        size = float(lengths[doc])
        for i, f in enumerate(freq[doc]):
            score += idf[i] * ((f * (k1 + 1.0)) / (f + k1 * (1 - b + b * size / average)))
        scored.append((doc, score))
    scored.sort(key=lambda pair: (-pair[1], pair[0]))
    return scored


def _holding(cur: Any, phrase: Sequence[str]) -> dict[int, int]:
    """The messages holding every term of ``phrase``: docid to the first term's tf."""
    out: dict[int, int] = {
        int(d): int(tf)
        for d, tf in cur.execute(
            "SELECT doc, tf FROM recall_postings WHERE term = ?", (phrase[0],)
        ).fetchall()
    }
    for term in dict.fromkeys(phrase[1:]):
        if not out:
            break
        have = {
            int(d)
            for (d,) in cur.execute(
                "SELECT doc FROM recall_postings WHERE term = ?", (term,)
            ).fetchall()
        }
        out = {d: tf for d, tf in out.items() if d in have}
    return out


def _texts(cur: Any, docids: list[int]) -> dict[int, tuple[int, str]]:
    return {
        int(doc): (int(length), str(text))
        for doc, length, text in cur.execute(
            "SELECT docid, length, text FROM recall_docs WHERE docid = ANY(?::bigint[])",
            (docids,),
        )
    }


def problems(cur: Any) -> list[str]:
    """What differs between the index and the messages (O(messages): the full check,
    SQLite's FTS5 ``integrity-check`` and drift query in one).

    Each message's index row must hold the text and length the rules give, its postings
    exactly those its text gives, and the term counts must count them.
    """
    out: list[str] = []
    docs = {
        (str(s), int(q)): (int(d), str(r), str(t), int(n))
        for d, s, q, r, t, n in cur.execute(
            "SELECT docid, session_id, seq, role, text, length FROM recall_docs"
        ).fetchall()
    }
    missing = stale = 0
    seen: set[tuple[str, int]] = set()
    before: Any = None
    last_sid: str | None = None
    for sid, seq, role, body in cur.execute(
        "SELECT session_id, seq, role, body FROM messages ORDER BY session_id, seq"
    ).fetchall():
        if sid != last_sid:
            before, last_sid = None, sid
        key = (str(sid), int(seq))
        seen.add(key)
        text = stored_text(str(role), body, before)
        if role == "assistant":
            before = parsed(body)
        row = docs.get(key)
        if row is None:
            missing += 1
        elif row[1:] != (str(role), text, len(index_terms(text))):
            stale += 1
    extra = len(docs.keys() - seen)
    if missing:
        out.append(f"{missing} messages are missing from the index")
    if extra:
        out.append(f"{extra} index rows have no message")
    if stale:
        out.append(f"{stale} index rows differ from their message")
    expected: dict[int, dict[str, tuple[int, int]]] = {}
    for docid, _, text, _ in docs.values():
        tokens = index_terms(text)
        expected[docid] = {
            t: (tf, postings.impact(tf, len(tokens))) for t, tf in Counter(tokens).items()
        }
    stored: dict[int, dict[str, tuple[int, int]]] = {}
    for term, doc, tf, value in cur.execute(
        "SELECT term, doc, tf, impact FROM recall_postings"
    ).fetchall():
        stored.setdefault(int(doc), {})[str(term)] = (int(tf), int(value))
    wrong = sum(
        1 for d in expected.keys() | stored.keys() if expected.get(d, {}) != stored.get(d, {})
    )
    if wrong:
        out.append(f"postings: {wrong} messages' postings differ from their text")
    held: Counter[str] = Counter()
    for terms in expected.values():
        held.update(terms.keys())
    counted: Counter[str] = Counter()
    for term, n in cur.execute(
        "SELECT term, docs FROM recall_terms UNION ALL SELECT term, docs FROM recall_counts"
    ).fetchall():
        counted[str(term)] += int(n)
    messages = counted.pop(_TOTAL, 0)
    if {t: n for t, n in counted.items() if n} != dict(held):
        out.append("postings: the term counts differ from the postings")
    indexed = sum(n for _, _, _, n in docs.values())
    if (messages, totals(cur)[1]) != (len(docs), indexed):
        out.append("the message and token totals differ from the index rows")
    return out
