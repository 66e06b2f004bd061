"""The impact-ordered postings (``agentmem.session_store.postings``): bounded top-k is exact.

The reference here is written independently of the module (no shared code): it scores
every message of a small corpus with the stated formula (impact = round(100 x BM25 term
weight with k1 1.2, b 0.75, average length 64), at least 1; score = the sum of weight x
impact over the query's terms) and sorts them (score, then the larger doc first). The
corpora use two-letter words, which the index's tokenizer keeps as they are, so the
reference can split on spaces.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import scaled

import agentmem
from agentmem.recall import Ranking, recall
from agentmem.session_store import SessionStore, postings
from agentmem.session_store.postings import TABLES, add, top_k
from agentmem.session_store.sql import POST_BACKLOG, POST_PER_WRITE

VOCAB = ["ax", "by", "cz", "dq", "ew", "fv", "gu", "ht"]


def _reference_impact(tf: int, length: int) -> int:
    saturation = tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / 64.0))
    return max(1, round(saturation * 100))


def _reference_top(
    docs: dict[int, list[str]], weights: dict[str, int], k: int, keep: Callable[[int], bool]
) -> list[tuple[int, int]]:
    scored = []
    for doc, words in docs.items():
        if not keep(doc):
            continue
        total, hit = 0, False
        for term, w in weights.items():
            tf = words.count(term)
            if tf and w > 0:
                total += w * _reference_impact(tf, len(words))
                hit = True
        if hit:
            scored.append((total, doc))
    scored.sort(key=lambda p: (-p[0], -p[1]))
    return scored[:k]


def _index(docs: dict[int, list[str]]) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    for statement in TABLES:
        conn.execute(statement)
    add(conn, [(doc, " ".join(words)) for doc, words in docs.items()])
    return conn


_words = st.lists(st.sampled_from(VOCAB), min_size=1, max_size=90)
_corpus = st.dictionaries(st.integers(1, 400), _words, min_size=1, max_size=60)
_weights = st.dictionaries(st.sampled_from(VOCAB), st.integers(1, 400), min_size=1, max_size=5)


@settings(max_examples=scaled(150))
@given(
    docs=_corpus,
    weights=_weights,
    k=st.integers(1, 12),
    copies=st.integers(0, 3),
    seed=st.integers(0, 3),
)
def test_top_k_equals_the_exhaustive_top_k(
    docs: dict[int, list[str]], weights: dict[str, int], k: int, copies: int, seed: int
) -> None:
    """Random corpora, ties included (copies of messages), filters included."""
    corpus = dict(docs)
    for doc, words in list(docs.items())[:copies]:
        corpus[doc + 1000] = list(words)  # the same text again: the same score
    conn = _index(corpus)

    def keep(doc: int) -> bool:
        return seed == 0 or doc % (seed + 1) != 0

    def accept(batch: list[int]) -> list[int]:
        return [d for d in batch if keep(d)]

    expected = _reference_top(corpus, weights, k, keep)
    assert top_k(conn, weights, k, accept if seed else None) == expected


_small_words = st.lists(st.sampled_from(VOCAB[:3]), min_size=1, max_size=4)


@settings(max_examples=scaled(300))
@given(
    docs=st.dictionaries(st.integers(1, 60), _small_words, min_size=1, max_size=40),
    weights=st.dictionaries(st.sampled_from(VOCAB[:3]), st.integers(1, 2), min_size=1),
    k=st.integers(1, 6),
)
def test_top_k_is_exact_among_many_ties(
    docs: dict[int, list[str]], weights: dict[str, int], k: int
) -> None:
    """Short messages of three words and weights of 1 or 2: most scores tie, and the
    ties are broken by doc exactly as the exhaustive ranking breaks them."""
    conn = _index(docs)
    assert top_k(conn, weights, k) == _reference_top(docs, weights, k, lambda _: True)


@pytest.mark.parametrize(
    ("docs", "weights"),
    [
        # A message not read yet ties the k-th score and wins the tie (the larger doc).
        ({5: ["ax"], 9: ["by"]}, {"ax": 1, "by": 1}),
        # A message read in one list only can still tie the k-th (4 x 166 = 4 x 126 + 160)
        # and wins the tie: its other list must be read before the k are settled.
        ({5: ["ax", "cz"], 9: ["ax", "by", "by", *["cz"] * 29]}, {"ax": 4, "by": 1}),
    ],
)
def test_a_tie_at_the_kth_score_is_read_before_settling(
    docs: dict[int, list[str]], weights: dict[str, int]
) -> None:
    conn = _index(docs)
    assert top_k(conn, weights, 1) == _reference_top(docs, weights, 1, lambda _: True)


@settings(max_examples=scaled(80))
@given(
    size=st.integers(1, 150),
    length=st.integers(1, 12),
    weights=_weights,
    k=st.integers(1, 10),
)
def test_top_k_is_exact_when_every_message_matches(
    size: int, length: int, weights: dict[str, int], k: int
) -> None:
    """Every message holds every word (so every message matches every query)."""
    corpus = {
        doc: [VOCAB[(doc + i) % len(VOCAB)] for i in range(len(VOCAB) * (1 + (doc % length)))]
        for doc in range(1, size + 1)
    }
    conn = _index(corpus)
    assert top_k(conn, weights, k) == _reference_top(corpus, weights, k, lambda _: True)


def test_a_budget_bounds_the_postings_read() -> None:
    """With every message matching, the budget caps what is read (and the answer is the
    exact one here: the best are at the heads of the lists)."""
    corpus = {doc: ["ax"] * (1 + doc % 7) + ["by"] * 20 for doc in range(1, 3001)}
    conn = _index(corpus)
    reads: list[str] = []
    conn.set_trace_callback(reads.append)
    weights = {"ax": 50, "by": 3}
    got = top_k(conn, weights, 5, budget=200)
    limits = [int(r.rsplit("LIMIT", 1)[1]) for r in reads if "ORDER BY impact DESC" in r]
    # The budget, plus the next block of each list (its head): of 6,000 postings.
    assert sum(limits) <= 200 + 2 * 256
    assert got == _reference_top(corpus, weights, 5, lambda _: True)


def _texts(n: int) -> list[str]:
    words = ["deploy", "parquet", "pytest", "error", "retry", "schema", "cache", "token"]
    return [
        " ".join(words[(i * 7 + j * 3) % len(words)] for j in range(3 + i % 9)) for i in range(n)
    ]


def test_rebuild_from_the_messages_gives_the_same_postings_and_results(tmp_path: Path) -> None:
    mem = agentmem.Memory(root=tmp_path / "m", durability="normal")
    for s in range(6):
        sid = mem.sessions.create(name=f"s{s}").id
        mem.sessions.writer(sid).on_append(
            [{"role": "user", "content": t} for t in _texts(300 + s)]
        )
    queries = ["parquet error", "retry schema cache", "deploy", "token pytest error"]
    before = [[(h.session_id, h.index, h.score) for h in mem.recall(q)] for q in queries]
    conn = mem.sessions._conn
    assert conn is not None
    rows = """SELECT p.term, d.session_id, d.seq, p.tf, p.impact FROM recall_postings AS p
        JOIN recall_docs AS d ON d.docid = p.doc ORDER BY 1, 2, 3"""
    counts = "SELECT term, docs FROM recall_terms WHERE docs > 0 ORDER BY term"
    stored = conn.execute(rows).fetchall()
    terms = conn.execute(counts).fetchall()
    assert stored and mem.sessions.check_recall_index(repair=False) == []
    conn.execute("DELETE FROM recall_postings WHERE doc % 2 = 0")  # damage only the postings
    assert mem.sessions.check_recall_index(repair=False) != []
    assert mem.sessions.check_recall_index() != []  # rebuilt from the messages
    assert mem.sessions.check_recall_index(repair=False) == []
    assert conn.execute(rows).fetchall() == stored
    assert conn.execute(counts).fetchall() == terms
    after = [[(h.session_id, h.index, h.score) for h in mem.recall(q)] for q in queries]
    assert after == before
    mem.close()


def test_appends_post_a_bounded_share_of_the_queue(tmp_path: Path) -> None:
    """The batch an append indexes is posted over the next appends, a bounded number of
    messages each (no append pays for a whole batch), the queue never holds more than
    one batch, a large append posts all but one batch itself, and a search sees every
    message whatever is still queued."""
    store = SessionStore(tmp_path / "s.sqlite", durability="normal")
    sid = store.create(name="x").id
    writer = store.writer(sid)
    conn = store._conn
    assert conn is not None
    posted = "SELECT count(DISTINCT doc) FROM recall_postings"
    queued = "SELECT count(*) FROM recall_unposted"
    for n in range(200):
        before = conn.execute(posted).fetchone()[0]
        writer.on_append([{"role": "user", "content": f"message {n} about parquet"}])
        assert conn.execute(posted).fetchone()[0] - before <= POST_PER_WRITE
        assert conn.execute(queued).fetchone()[0] <= POST_BACKLOG
    indexed = conn.execute("SELECT count(*) FROM recall_docs").fetchone()[0]
    assert indexed == 192  # three batches of 64; the rest still in the FTS5 queue
    assert conn.execute(posted).fetchone()[0] + conn.execute(queued).fetchone()[0] == indexed
    writer.on_append([{"role": "user", "content": f"bulk {n} about arrow"} for n in range(1_000)])
    assert 0 < conn.execute(queued).fetchone()[0] <= POST_BACKLOG
    hits = recall(store, "message 199 parquet", max_results=1, ranking=Ranking(every_match=0))
    assert [(h.index, h.preview) for h in hits] == [(199, "message 199 about parquet")]
    assert recall(store, "bulk 999 arrow", max_results=1)[0].index == 1_199
    assert not postings.unposted(conn)  # the search posted the rest first
    assert store.check_recall_index(repair=False) == []
    store.close()


@pytest.mark.parametrize("name", ["sessions-v5.sqlite", "sessions-v3.sqlite"])
def test_an_old_store_gets_its_postings_on_migration(tmp_path: Path, name: str) -> None:
    db = tmp_path / "sessions.sqlite"
    shutil.copy(Path(__file__).parent / "golden" / name, db)
    store = SessionStore(db)
    conn = store._conn
    assert conn is not None
    migrations = {r[0] for r in conn.execute("SELECT name FROM migrations")}
    assert "0006_recall_postings" in migrations
    assert store.check_recall_index(repair=False) == []
    docs = conn.execute("SELECT count(*) FROM recall_docs WHERE text != ''").fetchone()[0]
    posted = conn.execute("SELECT count(DISTINCT doc) FROM recall_postings").fetchone()[0]
    assert docs and posted == docs
    store.close()


def test_a_message_quoted_verbatim_ranks_above_tool_outputs_holding_its_words(
    tmp_path: Path,
) -> None:
    """The known-item case of the agent runs: a query quoting a command finds the message
    holding it, not the messages of a session that holds the same words all along (the
    neighbours', window's and session's shares lift those)."""
    from agentmem.recall import recall

    command = 'bash {"command": "cd /testbed && python test_fix.py 2>&1"}'
    words = ["python", "testbed", "fix", "test", "cd", "bash", "command", "py"]
    store = SessionStore(tmp_path / "s.sqlite", durability="normal")
    target = ""
    for n in range(3):
        sid = store.create(name=f"run {n}").id
        if n == 1:
            target = sid
            messages = [f"unrelated step {i} of the plan" for i in range(20)]
            messages[7] = command
        else:  # every message holds the words, in another order, among others
            messages = [
                " ".join(words[i % 8 :] + words[: i % 8]) + f" output line {i} 2 1" * 3
                for i in range(20)
            ]
        store.writer(sid).on_append([{"role": "user", "content": m} for m in messages])
    hits = recall(store, command, 5)
    assert (hits[0].session_id, hits[0].index) == (target, 7)
    store.close()


def test_a_search_reads_a_bounded_number_of_postings_when_every_message_matches(
    tmp_path: Path,
) -> None:
    """Every message holds the query's words: the postings read by a search stay within
    the budget (plus one block per word) as the store grows fourfold."""
    from agentmem.recall import DEFAULT_RANKING, recall

    read: dict[int, int] = {}
    for size in (1_500, 6_000):
        store = SessionStore(tmp_path / f"{size}.sqlite", durability="normal")
        sid = store.create(name="all").id
        store.writer(sid).on_append(
            [
                {"role": "user", "content": f"alpha beta gamma {'delta ' * (i % 5)}note {i}"}
                for i in range(size)
            ]
        )
        conn = store._conn
        assert conn is not None
        recall(store, "alpha gamma delta")  # indexes what is queued
        statements: list[str] = []
        conn.set_trace_callback(statements.append)
        hits = recall(store, "alpha gamma delta", 5, ranking=DEFAULT_RANKING)
        conn.set_trace_callback(None)
        assert len(hits) == 5
        assert not any("recall_fts MATCH" in s for s in statements)
        read[size] = sum(
            int(s.rsplit("LIMIT", 1)[1]) for s in statements if "ORDER BY impact DESC" in s
        )
        store.close()
    assert read[6_000] <= postings.BUDGET + 3 * 1024
    assert read[6_000] <= 2 * read[1_500]


@pytest.mark.parametrize("damaged", [("recall_docs",), ("recall_docs", "recall_state")])
def test_an_old_store_with_a_damaged_index_migrates_and_is_rebuilt(
    tmp_path: Path, damaged: tuple[str, ...]
) -> None:
    """Migration 0006 cannot read a damaged index (nor, maybe, its state row): the store
    still opens, every message loads, and the index is rebuilt from the messages."""
    db = tmp_path / "sessions.sqlite"
    shutil.copy(Path(__file__).parent / "golden" / "sessions-v5.sqlite", db)
    conn = sqlite3.connect(db)
    marks = ", ".join("?" * len(damaged))
    pages = [
        int(r[0])
        for r in conn.execute(f"SELECT pageno FROM dbstat WHERE name IN ({marks})", damaged)
    ]
    size = int(conn.execute("PRAGMA page_size").fetchone()[0])
    conn.close()
    with db.open("r+b") as f:
        for page in pages:
            f.seek((page - 1) * size)
            f.write(b"\xff" * size)
    store = SessionStore(db)
    assert store.recall_repairs
    assert store.check_recall_index(repair=False) == []
    assert {info.id: info.message_count for info in store.list()} == {
        "golden-main": 7,
        "golden-empty": 0,
    }
    assert len(store.load("golden-main").messages) == 7
    store.close()


@settings(max_examples=scaled(150))
@given(
    docs=_corpus,
    weights=st.dictionaries(st.sampled_from(VOCAB), st.integers(0, 400), min_size=1, max_size=5),
    k=st.integers(1, 12),
    budget=st.sampled_from([None, 1, 7, 40]),
)
def test_top_k_gives_the_frequencies_with_the_scores(
    docs: dict[int, list[str]], weights: dict[str, int], k: int, budget: int | None
) -> None:
    """``held`` receives each returned message's frequencies of every term (weight 0
    included: not searched, but counted), and asking for them changes no result."""
    conn = _index(docs)
    held: dict[int, dict[str, int]] = {}
    best = top_k(conn, weights, k, budget=budget, held=held)
    assert best == top_k(conn, weights, k, budget=budget)
    if budget is None:
        searched = {t: w for t, w in weights.items() if w}
        assert best == _reference_top(docs, searched, k, lambda _: True)
    returned = [doc for _, doc in best]
    assert sorted(held) == sorted(returned) or not best
    for doc in returned:
        expected = {t: docs[doc].count(t) for t in weights if t in docs[doc]}
        assert held[doc] == expected


@settings(max_examples=scaled(60))
@given(docs=_corpus, weights=_weights, budget=st.integers(1, 60))
def test_top_k_reads_within_its_budget(
    docs: dict[int, list[str]], weights: dict[str, int], budget: int
) -> None:
    """A block read never takes the postings read past the budget: with one list, at
    most ``budget`` postings are fetched; with several, at most one budget per list."""
    conn = _index(docs)
    fetched = 0

    class Counting:
        def execute(self, sql: str, parameters: tuple[object, ...] = ()) -> object:
            nonlocal fetched
            cursor = conn.execute(sql, parameters)
            if "ORDER BY impact DESC" not in sql:
                return cursor
            rows = cursor.fetchall()
            fetched += len(rows)
            return _Rows(rows)

        def executemany(self, sql: str, parameters: object) -> object:
            raise AssertionError("top_k writes nothing")

    top_k(Counting(), weights, 3, budget=budget)
    assert fetched <= budget * len(weights)
    if len(weights) == 1:
        assert fetched <= budget


class _Rows:
    def __init__(self, rows: list[tuple[object, ...]]) -> None:
        self._rows = rows

    def fetchall(self) -> list[tuple[object, ...]]:
        return self._rows


def test_post_with_a_limit_posts_the_oldest_first(tmp_path: Path) -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE recall_docs (docid INTEGER PRIMARY KEY, text TEXT NOT NULL)")
    for statement in TABLES:
        conn.execute(statement)
    for doc in range(1, 11):
        conn.execute("INSERT INTO recall_docs VALUES (?, ?)", (doc, f"word{doc} common"))
        conn.execute("INSERT INTO recall_unposted VALUES (?)", (doc,))
    assert postings.post(conn, limit=4) == 4
    posted = [d for (d,) in conn.execute("SELECT DISTINCT doc FROM recall_postings ORDER BY doc")]
    assert posted == [1, 2, 3, 4]
    assert conn.execute("SELECT docs FROM recall_terms WHERE term = 'common'").fetchone() == (4,)
    assert postings.post(conn, batch=3) == 6  # every one left, three at a time
    assert not postings.unposted(conn)
    assert postings.problems(conn) == []


@settings(max_examples=scaled(300))
@given(
    partial=st.dictionaries(st.integers(1, 300), st.integers(1, 6), min_size=1, max_size=80),
    k=st.integers(1, 90),
)
def test_the_k_best_partial_scores_are_the_k_first_by_score_then_doc(
    partial: dict[int, int], k: int
) -> None:
    """The k best of the partial scores (what a search whose budget ran out returns, and what
    each stopping check weighs): the first k by score then the larger doc, the last of them
    the k-th (scores of 1-6: most are tied)."""
    first = sorted(partial.items(), key=lambda item: (-item[1], -item[0]))[: min(k, len(partial))]
    kth = postings._kth(partial, min(k, len(partial)))
    assert kth == first[-1][1]
    members = postings._members(partial, kth, min(k, len(partial)))
    assert sorted(members) == sorted(d for d, _ in first)
    assert members[-1] == first[-1][0]  # the k-th: the stopping check's tie-break
