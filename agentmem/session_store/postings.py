"""Impact-ordered postings: the recall index's bounded top-k, in plain tables and portable SQL.

Recall re-ranks a pool of candidate messages with many signals (:mod:`agentmem.recall`);
finding that pool must not cost more when a query's words are in every message. FTS5's
``ORDER BY rank`` scores *every* match, so its cost grows with the store. These postings
give the same kind of pool (the best messages by a BM25) while reading only the head
of each word's list: the threshold algorithm (Fagin, Lotem and Naor, 2001) over lists
sorted by impact.

Tables (derived data: everything here is computed from ``recall_docs``, and
:func:`rebuild` derives it again):

* ``recall_postings (term, doc, tf, impact)``, primary key ``(doc, term)`` (a message's
  terms, for the exact score of a message and for its removal) and the B-tree index
  ``recall_postings_by_impact (term, impact, doc)`` (a term's messages, best first,
  read backwards);
* ``recall_terms (term, docs)``: how many messages hold each term (BM25's document
  frequency, one row read per query term whatever the store's size);
* ``recall_unposted (doc)``: messages of ``recall_docs`` not yet posted.

**Impact** (:func:`impact`): a message's BM25 term weight without the idf,
``tf (k1 + 1) / (tf + k1 (1 - b + b len / AVG))`` with the fixed :data:`IMPACT_K1`,
:data:`IMPACT_B` and :data:`IMPACT_AVG` (a constant average, so a stored impact never
goes stale as the store grows), times :data:`IMPACT_SCALE`, rounded to an integer.
A query term's **weight** (:func:`weight`) is its idf ``ln(1 + (N - n + 0.5) / (n + 0.5))``
(always positive: a word in every message still ranks by frequency), times
:data:`WEIGHT_SCALE`, rounded. A message's score is the sum of weight x impact over the
query's terms: integers, so every score and every tie is exact.

**Top-k** (:func:`top_k`): read each term's list best first, a block at a time (the
list whose next impact, weighted, is highest first); score each newly seen message
exactly (its postings of the query's terms, by primary key); stop when the k-th best
score is above the sum over the terms of weight x the impact at the head of its list,
which bounds the score of every message not yet seen. The result equals scoring every
matching message (``tests/test_recall_postings.py`` checks it against an independent
scorer), and the work depends on where the k best are in the lists, not on how many
messages match.

**Portability.** Everything here is ``SELECT``/``INSERT``/``DELETE`` with ``?``
placeholders, ``INSERT ... ON CONFLICT ... DO UPDATE`` and row-value comparisons, the
subset SQLite (3.24+) and PostgreSQL share, through a DB-API cursor or connection (its
``execute``/``executemany``): a PostgreSQL backend creates the same tables
(:data:`TABLES`, ``WITHOUT ROWID`` dropped) and calls :func:`add` / :func:`remove` in the
transaction that changes ``recall_docs`` (psycopg takes ``%s``: replace ``?``). On
SQLite, :data:`SQLITE_TRIGGERS` queue each new ``recall_docs`` row and remove a deleted
one's postings in the statement that changes it, and :func:`post` indexes the queue
(the tokenizer is Python: :mod:`.postings_terms`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Protocol

from agentmem.session_store.postings_terms import terms as index_terms

__all__ = [
    "IMPACT_AVG",
    "IMPACT_B",
    "IMPACT_K1",
    "IMPACT_SCALE",
    "SQLITE_TRIGGERS",
    "TABLES",
    "WEIGHT_SCALE",
    "Cursor",
    "add",
    "doc_frequencies",
    "frequencies",
    "impact",
    "post",
    "problems",
    "remove",
    "score_docs",
    "top_k",
    "unposted",
    "weight",
]

IMPACT_K1: Final = 1.2
"""BM25's k1 of the stored impacts."""
IMPACT_B: Final = 0.75
"""BM25's b of the stored impacts: a long tool output does not outrank a message that
holds the same words in a few lines."""
IMPACT_AVG: Final = 64.0
"""The average message length (in index tokens) the impacts are normalised by: a
constant, so a stored impact stays right however the store grows."""
IMPACT_SCALE: Final = 100
"""Impacts are ``round(IMPACT_SCALE x the term weight)``, at least 1."""
WEIGHT_SCALE: Final = 100
"""Query weights are ``round(WEIGHT_SCALE x idf)``, at least 1."""

BUDGET: Final = 1024
"""The postings a search reads at most (:func:`top_k`'s ``budget``)."""

_FIRST_BLOCK: Final = 32
_MAX_BLOCK: Final = 1024
_CHUNK: Final = 400  # ids per IN (...) list: well under every SQLite build's variable limit


class Cursor(Protocol):
    """What this module needs of a DB-API connection or cursor (sqlite3, psycopg)."""

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Any: ...

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Any: ...


TABLES: Final = (
    """
    CREATE TABLE recall_postings (
        term TEXT NOT NULL,
        doc INTEGER NOT NULL,
        tf INTEGER NOT NULL,
        impact INTEGER NOT NULL,
        PRIMARY KEY (doc, term)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX recall_postings_by_impact ON recall_postings (term, impact, doc)",
    """
    CREATE TABLE recall_terms (
        term TEXT PRIMARY KEY,
        docs INTEGER NOT NULL
    ) WITHOUT ROWID
    """,
    "CREATE TABLE recall_unposted (doc INTEGER PRIMARY KEY)",
)
"""The postings' tables (SQLite flavour; PostgreSQL: the same without ``WITHOUT ROWID``)."""

_FORGET: Final = """
        UPDATE recall_terms SET docs = docs - 1
            WHERE term IN (SELECT term FROM recall_postings WHERE doc = {doc});
        DELETE FROM recall_postings WHERE doc = {doc};
        DELETE FROM recall_unposted WHERE doc = {doc};"""

SQLITE_TRIGGERS: Final = (
    """
    CREATE TRIGGER recall_docs_post_ai AFTER INSERT ON recall_docs BEGIN
        INSERT INTO recall_unposted (doc) VALUES (new.docid);
    END
    """,
    "CREATE TRIGGER recall_docs_post_ad AFTER DELETE ON recall_docs BEGIN"
    + _FORGET.format(doc="old.docid")
    + "\n    END",
    "CREATE TRIGGER recall_docs_post_au AFTER UPDATE ON recall_docs BEGIN"
    + _FORGET.format(doc="old.docid")
    + "\n        INSERT INTO recall_unposted (doc) VALUES (new.docid);\n    END",
)
"""SQLite: the postings follow ``recall_docs`` in the statement that changes it (a new or
changed row is queued for :func:`post`, a deleted one's postings go)."""


def impact(tf: int, length: int) -> int:
    """The stored impact of a term held ``tf`` times by a message of ``length`` tokens."""
    norm = IMPACT_K1 * (1 - IMPACT_B + IMPACT_B * length / IMPACT_AVG)
    return max(1, round(IMPACT_SCALE * tf * (IMPACT_K1 + 1) / (tf + norm)))


def weight(total: int, held: int) -> int:
    """A query term's weight: its idf among ``total`` messages, ``held`` of which hold it."""
    return max(1, round(WEIGHT_SCALE * math.log(1 + (total - held + 0.5) / (held + 0.5))))


def _decoded(value: object) -> str:
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def add(cur: Cursor, docs: Iterable[tuple[int, str]]) -> int:
    """Post messages ``(doc, text)`` (not posted yet); returns how many.

    Each distinct term becomes one ``recall_postings`` row and one more message in
    ``recall_terms``.
    """
    rows: list[tuple[str, int, int, int]] = []
    held: Counter[str] = Counter()
    count = 0
    for doc, text in docs:
        tokens = index_terms(text)
        length = len(tokens)
        counts = Counter(tokens)
        values: dict[int, int] = {}  # tf: impact, for this length (most tf are 1 or 2)
        for term, tf in counts.items():
            value = values.get(tf)
            if value is None:
                value = values[tf] = impact(tf, length)
            rows.append((term, doc, tf, value))
        held.update(counts.keys())
        count += 1
    if rows:
        rows.sort()  # by term: the by-impact index is written in order, page by page
        cur.executemany(
            "INSERT INTO recall_postings (term, doc, tf, impact) VALUES (?, ?, ?, ?)", rows
        )
        cur.executemany(
            "INSERT INTO recall_terms (term, docs) VALUES (?, ?) "
            "ON CONFLICT (term) DO UPDATE SET docs = recall_terms.docs + excluded.docs",
            sorted(held.items()),
        )
    return count


def remove(cur: Cursor, docs: Iterable[int]) -> None:
    """Drop the postings of messages ``docs`` (PostgreSQL; SQLite's triggers do it)."""
    for doc in docs:
        for statement in _FORGET.format(doc="?").strip().split(";"):
            cur.execute(statement, (doc,))


def unposted(cur: Cursor) -> bool:
    """Whether messages wait to be posted (one row read)."""
    return cur.execute("SELECT 1 FROM recall_unposted LIMIT 1").fetchone() is not None


def post(cur: Cursor, batch: int = 500, *, limit: int | None = None) -> int:
    """Post the queued messages (``recall_unposted``), oldest first, ``batch`` at a time;
    returns how many.

    Every one, or at most ``limit`` of them. Runs inside the caller's write transaction.
    """
    done = 0
    while limit is None or done < limit:
        size = batch if limit is None else min(batch, limit - done)
        rows = cur.execute(
            "SELECT u.doc, d.text FROM recall_unposted AS u "
            "LEFT JOIN recall_docs AS d ON d.docid = u.doc ORDER BY u.doc LIMIT ?",
            (size,),
        ).fetchall()
        if not rows:
            return done
        ids = [int(doc) for doc, _ in rows]
        for chunk in _chunks(ids):
            marks = ", ".join("?" * len(chunk))
            cur.execute(f"DELETE FROM recall_unposted WHERE doc IN ({marks})", chunk)
        add(cur, ((int(doc), _decoded(text)) for doc, text in rows if text is not None))
        done += len(rows)
    return done


def doc_frequencies(cur: Cursor, query_terms: Sequence[str]) -> dict[str, int]:
    """How many messages hold each of ``query_terms`` (terms none holds left out)."""
    out: dict[str, int] = {}
    for chunk in _chunks(list(query_terms)):
        marks = ", ".join("?" * len(chunk))
        for term, docs in cur.execute(
            f"SELECT term, docs FROM recall_terms WHERE term IN ({marks}) AND docs > 0", chunk
        ).fetchall():
            out[str(term)] = int(docs)
    return out


def frequencies(
    cur: Cursor, query_terms: Sequence[str], docs: Sequence[int]
) -> dict[int, dict[str, int]]:
    """How many times each of ``docs`` holds each of ``query_terms`` (absent ones left out)."""
    held: dict[int, dict[str, int]] = {}
    _scored(cur, dict.fromkeys(query_terms, 0), docs, held)
    return held


def score_docs(cur: Cursor, weights: Mapping[str, int], docs: Sequence[int]) -> dict[int, int]:
    """The exact score of each of ``docs`` (sum of weight x impact; 0 for no query term)."""
    return _scored(cur, weights, docs, None)


_SCORED: Final = "SELECT doc, term, tf, impact FROM recall_postings"
_SCORED_ARRAYS: Final = f"{_SCORED} WHERE doc = ANY(?::bigint[]) AND term = ANY(?::text[])"


def _scored(
    cur: Cursor,
    weights: Mapping[str, int],
    docs: Sequence[int],
    held: dict[int, dict[str, int]] | None,
) -> dict[int, int]:
    """:func:`score_docs`, filling ``held`` (when given) with :func:`frequencies`' answer
    from the same rows (one read of each message's postings of the terms)."""
    out = dict.fromkeys(docs, 0)
    if held is not None:
        for doc in docs:
            held[doc] = {}
    names = list(weights)
    if not names:
        return out
    term_marks = ", ".join("?" * len(names))
    arrays = getattr(cur, "takes_arrays", False)  # PostgreSQL: one parameter per list
    params: list[Any]
    for chunk in [list(docs)] if arrays else _chunks(list(docs)):
        if arrays:
            sql, params = _SCORED_ARRAYS, [chunk, names]
        else:
            marks = ", ".join("?" * len(chunk))
            sql = f"{_SCORED} WHERE doc IN ({marks}) AND term IN ({term_marks})"
            params = [*chunk, *names]
        rows = cur.execute(sql, params).fetchall()
        if held is None:
            for doc, term, _, value in rows:
                out[int(doc)] += weights[str(term)] * int(value)
        else:
            for doc, term, tf, value in rows:
                number, name = int(doc), str(term)
                out[number] += weights[name] * int(value)
                held[number][name] = int(tf)
    return out


class _List:
    """One query term's postings, read best first a block at a time."""

    __slots__ = ("block", "buffer", "done", "last", "term", "weight")

    def __init__(self, term: str, weight: int) -> None:
        self.term = term
        self.weight = weight
        self.buffer: list[tuple[int, int]] = []
        self.last: tuple[int, int] | None = None
        self.done = False
        self.block = _FIRST_BLOCK

    def head(self, cur: Cursor, cap: int) -> int:
        """Weight x the impact of the next unread posting (0 when the list is read);
        a block read here holds at most ``cap`` postings."""
        if not self.buffer and not self.done:
            size = min(self.block, cap)
            if self.last is None:
                rows = cur.execute(
                    "SELECT impact, doc FROM recall_postings WHERE term = ? "
                    "ORDER BY impact DESC, doc DESC LIMIT ?",
                    (self.term, size),
                ).fetchall()
            else:
                rows = cur.execute(
                    "SELECT impact, doc FROM recall_postings WHERE term = ? "
                    "AND (impact, doc) < (?, ?) ORDER BY impact DESC, doc DESC LIMIT ?",
                    (self.term, *self.last, size),
                ).fetchall()
            self.buffer = rows
            self.done = len(rows) < size
            self.block = min(_MAX_BLOCK, self.block * 2)
            if rows:
                self.last = rows[-1]
        return self.weight * self.buffer[0][0] if self.buffer else 0

    def take(self) -> list[tuple[int, int]]:
        """The buffered postings ``(impact, doc)`` (the list's head moves past them)."""
        rows, self.buffer = self.buffer, []
        return rows


def top_k(
    cur: Cursor,
    weights: Mapping[str, int],
    k: int,
    accept: Callable[[list[int]], Iterable[int]] | None = None,
    *,
    budget: int | None = None,
    held: dict[int, dict[str, int]] | None = None,
) -> list[tuple[int, int]]:
    """The ``k`` best messages for the query terms ``weights`` (term: weight), best first.

    ``(score, doc)`` pairs, best first (ties: the larger ``doc``, the newer message, first);
    only messages holding a
    query term, and only those ``accept`` keeps (given each batch of newly seen
    messages, it returns those that pass the caller's filters).

    The lists are read best first (the one whose next posting weighs most), adding each
    posting to its message's partial score (no access by message while reading: the
    threshold algorithm without random access, Fagin's NRA). Reading stops when the k
    best partial scores are above the best score any other message could still reach
    (its partial score plus the heads of the lists it was not seen in; the sum of all
    heads for a message not seen at all): the k are then exactly the best, and their
    exact scores are read by message (one query). ``budget`` (postings read) bounds
    the work whatever the lists hold: once it is spent the k best partial scores are
    taken (exact in every test corpus that does not spend it; see ``docs/recall.md``
    for how often a real query does). ``held``, when given, receives each returned
    message's :func:`frequencies` of the terms (read with the exact scores: a term of
    weight 0 is not searched but its frequencies are given).
    """
    lists = [_List(term, w) for term, w in sorted(weights.items()) if w > 0]
    if k <= 0 or not lists:
        return []
    partial: dict[int, int] = {}
    seen_in: dict[int, int] = {}  # bit i: seen in lists[i]
    rejected: set[int] = set()
    read = 0
    complete = False
    while True:
        if budget is not None and read >= budget:
            break
        # A block never takes the postings read past the budget.
        cap = _MAX_BLOCK if budget is None else budget - read
        heads = [lst.head(cur, cap) for lst in lists]
        threshold = sum(heads)
        if threshold == 0:
            complete = True  # every list read: the partial scores are the scores
            break
        if len(partial) >= k and _settled(partial, seen_in, lists, heads, k):
            break
        at = max(range(len(lists)), key=heads.__getitem__)
        rows = lists[at].take()
        read += len(rows)
        if accept is not None:
            new = [d for _, d in rows if d not in partial and d not in rejected]
            if new:
                kept = set(accept(new))
                rejected.update(d for d in new if d not in kept)
        bit, w = 1 << at, lists[at].weight
        scored, seen = partial.get, seen_in.get
        for value, doc in rows:
            if rejected and doc in rejected:
                continue
            partial[doc] = scored(doc, 0) + w * value
            seen_in[doc] = seen(doc, 0) | bit
    best = _members(partial, _kth(partial, k), k) if len(partial) > k else list(partial)
    if complete and held is None:
        exact = partial
    else:
        scores = _scored(cur, weights, best, held)
        exact = partial if complete else scores
    return sorted(((exact[doc], doc) for doc in best), reverse=True)


def _settled(
    partial: dict[int, int], seen_in: dict[int, int], lists: list[_List], heads: list[int], k: int
) -> bool:
    """Whether the k best partial scores are final as a set: no other message can reach
    them (its partial score plus the heads of the lists it was not seen in; for a message
    not seen at all, the sum of every head), ties going to the larger ``doc``."""
    threshold = sum(heads)
    kth = _kth(partial, k)
    if kth < threshold:
        return False  # cheap first: a message not seen yet could still outscore the k-th
    members = _members(partial, kth, k)
    worst = members[-1]  # the k-th: the smallest doc of those tied at kth
    if threshold == kth:
        # An unseen message scoring the threshold sits at every list's head impact, at or
        # after its head posting (so its doc is at most the head's): it must lose the tie.
        lowest = min(lst.buffer[0][1] for lst, h in zip(lists, heads, strict=True) if h)
        if lowest >= worst:
            return False
    chosen = set(members)
    missing: dict[int, int] = {}
    for doc, value in partial.items():
        if doc in chosen:
            continue
        mask = seen_in[doc]
        rest = missing.get(mask)
        if rest is None:
            rest = missing[mask] = sum(h for i, h in enumerate(heads) if not mask >> i & 1)
        best = value + rest
        if best > kth or (best == kth and doc > worst):
            return False
    return True


def _kth(partial: dict[int, int], k: int) -> int:
    """The k-th best of the partial scores (at least ``k`` of them): ``sorted`` runs in C,
    4-5 times faster than ``heapq.nlargest`` on a thousand scores (it is called at every
    block read once ``k`` messages are seen)."""
    return sorted(partial.values())[-k]


def _members(partial: dict[int, int], kth: int, k: int) -> list[int]:
    """The ``k`` best messages: those scoring above ``kth``, then those tied at it, the
    larger ``doc`` first (the tied ones last, the smallest kept last)."""
    members = [doc for doc, value in partial.items() if value > kth]
    tied = sorted((doc for doc, value in partial.items() if value == kth), reverse=True)
    members += tied[: k - len(members)]
    return members


def problems(cur: Cursor) -> list[str]:
    """What differs between the postings and the messages' text (O(index): the full check).

    Every ``recall_docs`` row not queued must have exactly the postings its text gives,
    and ``recall_terms`` must count them.
    """
    expected: dict[int, dict[str, tuple[int, int]]] = {}
    queued = {int(d) for (d,) in cur.execute("SELECT doc FROM recall_unposted").fetchall()}
    for doc, text in cur.execute("SELECT docid, text FROM recall_docs").fetchall():
        if int(doc) in queued:
            continue
        tokens = index_terms(_decoded(text))
        counts = Counter(tokens)
        expected[int(doc)] = {t: (tf, impact(tf, len(tokens))) for t, tf in counts.items()}
    stored: dict[int, dict[str, tuple[int, int]]] = {}
    for term, doc, tf, value in cur.execute(
        "SELECT term, doc, tf, impact FROM recall_postings"
    ).fetchall():
        stored.setdefault(int(doc), {})[str(term)] = (int(tf), int(value))
    out: list[str] = []
    wrong = sum(
        1 for doc in expected.keys() | stored.keys() if expected.get(doc, {}) != stored.get(doc, {})
    )
    if wrong:
        out.append(f"{wrong} messages' postings differ from their text")
    held: Counter[str] = Counter()
    for postings in expected.values():
        held.update(postings.keys())
    counted = {
        str(t): int(n)
        for t, n in cur.execute("SELECT term, docs FROM recall_terms").fetchall()
        if n
    }
    if counted != dict(held):
        out.append("the term counts differ from the postings")
    return out


def _chunks(items: list[Any]) -> Iterable[list[Any]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]
