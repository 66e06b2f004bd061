"""Benchmark recall speed and the cost of the recall index on appends.

A benchmark, not a test: it prints figures and ratios measured in one run on
this machine and asserts nothing about wall-clock time.

    python bench/bench_recall.py                   # 1,000 sessions x 50 messages
    python bench/bench_recall.py --sessions 200    # quicker

It measures, in one run:

* **recall**: ``mem.recall(query)`` p50 / p95 over 200 queries against a
  store of ``--sessions`` sessions x 50 messages (synthetic agent chat: words
  drawn from a Zipf vocabulary of 20,000 words, ~40 words per message);
  queries are 2-5 words, half drawn from stored messages, half from the
  vocabulary;
* **naive scan**: the same queries answered the way a store without an index
  must (the CLIO approach): load every session and score every message by
  the classic rules (exact phrase +3, +1 per keyword, density +1.5, title
  +0.5), on a subset of the queries (it is slow), p50 / p95 and the ratio;
* **index size**: pages of the recall tables vs the whole database (``dbstat``);
* **append cost**: ``SessionWriter.on_append`` of one message, with the
  default durability (``"full"``, fsync per append) and with ``"normal"``
  (no fsync: the CPU and page cost shows), p50 over 300 appends, into a session of 1,000
  and of 100,000 messages, with the index and without it (the same store
  with the index's triggers dropped, which is exactly the append of the
  release before the index), interleaved append by append so both run in
  the same rhythm; ratios indexed / unindexed and 100k / 1k.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _data import bench_data

import agentmem
from agentmem._storage.sqlite import Durability
from agentmem.recall import DEFAULT_RANKING, STOPWORDS, Ranking, keywords, recall
from agentmem.session_store import SessionStore

MESSAGES = 50
VOCABULARY = 20_000
DATA = bench_data("deepseek-usage")
_WORD = re.compile(r"\w+")


def vocabulary(rng: random.Random) -> tuple[list[str], list[float]]:
    """Synthetic words with Zipf weights (a natural-language-like frequency curve).

    As in English text, the head of the curve is the stopwords (``agentmem.recall.STOPWORDS``,
    in a fixed order), then made-up words.
    """
    letters = "abcdefghijklmnopqrstuvwxyz"
    made_up = sorted(
        {"".join(rng.choices(letters, k=rng.randint(3, 9))) for _ in range(VOCABULARY)}
    )
    rng.shuffle(made_up)
    words = sorted(STOPWORDS) + [w for w in made_up if w not in STOPWORDS]
    weights = [1.0 / (rank + 1) for rank in range(len(words))]
    return words, weights


def sentence(rng: random.Random, words: list[str], weights: list[float], n: int) -> str:
    return " ".join(rng.choices(words, weights, k=n))


def populate(
    root: Path, sessions: int, rng: random.Random, messages: int = MESSAGES
) -> tuple[agentmem.Memory, list[str]]:
    words, weights = vocabulary(rng)
    mem = agentmem.Memory(root=root, durability="normal")
    texts: list[str] = []
    for n in range(sessions):
        sid = mem.sessions.create(name=f"session {n}: {sentence(rng, words, weights, 3)}").id
        batch = []
        for i in range(messages):
            text = sentence(rng, words, weights, rng.randint(10, 70))
            texts.append(text)
            batch.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
        mem.sessions.writer(sid).on_append(batch)
    queries = []
    for q in range(200):
        if q % 2 == 0:
            source = rng.choice(texts).split()
            start = rng.randrange(max(1, len(source) - 5))
            queries.append(" ".join(source[start : start + rng.randint(2, 5)]))
        else:
            queries.append(sentence(rng, words, weights, rng.randint(2, 5)))
    return mem, queries


def classic_scan(store: SessionStore, query: str, limit: int = 5) -> list[tuple[float, str, int]]:
    """Load every session and score every message by the classic rules (no index)."""
    words = keywords(query)
    phrase = " ".join(_WORD.findall(query.lower()))
    scored: list[tuple[float, str, int]] = []
    for info in store.list():
        record = store.load(info.id)
        title = set(_WORD.findall((info.name or "").lower()))
        for index, message in enumerate(record.messages):
            content = message.get("content")
            text = content if isinstance(content, str) else ""
            lowered = text.lower()
            tokens = _WORD.findall(lowered)
            present = set(tokens)
            found = [w for w in words if w in present]
            if not found:
                continue
            score = float(len(found))
            if phrase and phrase in " ".join(tokens):
                score += 3.0
            if sum(1 for t in tokens if t in found) / len(tokens) >= 0.1:
                score += 1.5
            if title & set(found):
                score += 0.5
            scored.append((score, info.id, index))
    scored.sort(key=lambda s: -s[0])
    return scored[:limit]


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e3


STORES = ("ordinary", "common-word", "agent")


def populate_common(
    root: Path, sessions: int, messages: int, rng: random.Random
) -> tuple[agentmem.Memory, list[str]]:
    """The common-word store: messages of 10-70 words drawn (Zipf weights) from a
    vocabulary of 60 made-up words, so every query word is in most messages."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    made_up = sorted({"".join(rng.choices(letters, k=rng.randint(4, 8))) for _ in range(200)})
    words = [w for w in made_up if w not in STOPWORDS][:60]
    rng.shuffle(words)
    weights = [1.0 / (rank + 1) ** 0.5 for rank in range(len(words))]
    mem = agentmem.Memory(root=root, durability="normal")
    for n in range(sessions):
        sid = mem.sessions.create(name=f"session {n}").id
        batch = [
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": sentence(rng, words, weights, rng.randint(10, 70)),
            }
            for i in range(messages)
        ]
        mem.sessions.writer(sid).on_append(batch)
    queries = [sentence(rng, words, weights, rng.randint(2, 5)) for _ in range(200)]
    return mem, queries


def populate_agent(
    root: Path, sessions: int, messages: int, rng: random.Random, data: Path
) -> tuple[agentmem.Memory, list[str]]:
    """The agent store: the 23 real DeepSeek runs of ``deepseek-usage/`` replicated into
    ``sessions`` sessions, each ``messages`` consecutive messages of one run (the run and
    the start drawn by the RNG; the texts repeat, as an agent's commands and outputs do)."""
    from bench_recall_agent import load_runs

    runs = [run for run in load_runs(data) if len(run) > messages]
    mem = agentmem.Memory(root=root, durability="normal")
    texts: list[str] = []
    for n in range(sessions):
        run = rng.choice(runs)
        start = rng.randrange(len(run) - messages)
        batch = run[start : start + messages]
        if batch[0].get("role") == "tool":  # a window never starts with an answer
            batch = batch[1:]
        sid = mem.sessions.create(name=f"run {runs.index(run)} from {start}").id
        mem.sessions.writer(sid).on_append(batch)
        if n < 200:
            for m in batch:
                content = m.get("content")
                if isinstance(content, str) and len(content.split()) >= 5:
                    texts.append(content)
    counts: dict[str, int] = {}
    for text in texts:
        for word in _WORD.findall(text.lower()):
            if word not in STOPWORDS:
                counts[word] = counts.get(word, 0) + 1
    common = sorted(counts, key=lambda w: -counts[w])[:300]
    queries = []
    for q in range(200):
        if q % 2 == 0:
            source = rng.choice(texts).split()
            at = rng.randrange(max(1, len(source) - 5))
            queries.append(" ".join(source[at : at + rng.randint(2, 5)]))
        else:
            queries.append(" ".join(rng.sample(common, rng.randint(2, 4))))
    return mem, queries


def build_store(
    kind: str, root: Path, sessions: int, messages: int, data: Path
) -> tuple[agentmem.Memory, list[str]]:
    rng = random.Random(1)
    if kind == "ordinary":
        return populate(root, sessions, rng, messages)
    if kind == "common-word":
        return populate_common(root, sessions, messages, rng)
    return populate_agent(root, sessions, messages, rng, data)


def time_queries(mem: agentmem.Memory, queries: list[str], ranking: Ranking) -> list[float]:
    for q in queries[:5]:
        recall(mem.sessions, q, ranking=ranking)  # warm the page and statement caches
    samples = []
    for q in queries:
        t = time.perf_counter()
        recall(mem.sessions, q, ranking=ranking)
        samples.append(time.perf_counter() - t)
    return samples


def bench_recall(
    kinds: list[str], sizes: list[int], messages: int, old_queries: int, scans: int, data: Path
) -> None:
    """Recall p50/p95 on each store at each size, the postings (this release) against FTS5
    candidates (the previous release's way, ``Ranking(postings=False)``), same store."""
    old = dataclasses.replace(DEFAULT_RANKING, postings=False)
    p50s: dict[tuple[str, int], tuple[float, float]] = {}
    for kind in kinds:
        for sessions in sizes:
            with tempfile.TemporaryDirectory() as tmp:
                start = time.perf_counter()
                mem, queries = build_store(kind, Path(tmp) / "m", sessions, messages, data)
                mem.sessions.check_recall_index(repair=False)  # indexes what is still queued
                built = time.perf_counter() - start
                count = sum(info.message_count for info in mem.sessions.list())
                print(
                    f"{kind} store: {sessions:,} sessions, {count:,} messages, "
                    f"written in {built:.0f} s"
                )
                new = time_queries(mem, queries, DEFAULT_RANKING)
                before = time_queries(mem, queries[:old_queries], old)
                n50, n95 = pct(new, 0.5), pct(new, 0.95)
                o50, o95 = pct(before, 0.5), pct(before, 0.95)
                p50s[(kind, sessions)] = (n50, o50)
                print(
                    f"  postings (new)      p50 {n50:8.2f} ms   p95 {n95:8.2f} ms   "
                    f"({len(new)} queries)\n"
                    f"  FTS5 (before)       p50 {o50:8.2f} ms   p95 {o95:8.2f} ms   "
                    f"({len(before)} queries)   new/before p50 {n50 / o50:.2f}"
                )
                if scans and kind == "ordinary":
                    scan = []
                    for q in queries[:scans]:
                        t = time.perf_counter()
                        classic_scan(mem.sessions, q)
                        scan.append(time.perf_counter() - t)
                    s50 = pct(scan, 0.5)
                    print(f"  naive scan (CLIO)   p50 {s50:8.2f} ms   speed-up {s50 / n50:.0f}x")
                _index_size(mem)
                mem.close()
        if len(sizes) > 1:
            lo, hi = p50s[(kind, sizes[0])], p50s[(kind, sizes[-1])]
            print(
                f"  {kind}: p50 at {sizes[-1]:,} / at {sizes[0]:,} sessions: "
                f"postings {hi[0] / lo[0]:.2f}x, FTS5 {hi[1] / lo[1]:.2f}x"
            )


def scan_figures(sessions: int, messages: int, queries: int, scans: int) -> dict[str, float]:
    """Recall against the naive scan on the ordinary store, for ``python -m bench``.

    p50 in ms of ``recall`` over ``queries`` queries and of :func:`classic_scan` over the
    first ``scans`` of them (the scan is slow).
    """
    with tempfile.TemporaryDirectory() as tmp:
        mem, texts = build_store("ordinary", Path(tmp) / "m", sessions, messages, DATA)
        mem.sessions.check_recall_index(repair=False)  # indexes what is still queued
        indexed = time_queries(mem, texts[:queries], DEFAULT_RANKING)
        scan = []
        for q in texts[:scans]:
            t = time.perf_counter()
            classic_scan(mem.sessions, q)
            scan.append(time.perf_counter() - t)
        mem.close()
    return {"recall_ms": pct(indexed, 0.5), "scan_ms": pct(scan, 0.5)}


def _index_size(mem: agentmem.Memory) -> None:
    conn = mem.sessions._conn
    assert conn is not None
    sizes = dict(conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall())
    total = sum(sizes.values())
    index = sum(v for k, v in sizes.items() if k.startswith("recall"))
    post = sum(v for k, v in sizes.items() if k.startswith(("recall_postings", "recall_terms")))
    messages = sum(
        v for k, v in sizes.items() if k.startswith("messages") or "autoindex_messages" in k
    )
    print(
        f"  index size: {index / 1e6:.1f} MB of {total / 1e6:.1f} MB "
        f"({index / total:.0%} of the database, {index / max(messages, 1):.2f}x the messages; "
        f"postings {post / 1e6:.1f} MB)"
    )


def _append_store(
    path: Path, size: int, *, indexed: bool, durability: Durability
) -> tuple[SessionStore, str]:
    store = SessionStore(path, durability=durability)
    sid = store.create(name="append bench").id
    writer = store.writer(sid)
    for start in range(0, size, 5_000):
        writer.on_append(
            [
                {"role": "user", "content": f"message {start + i} about the build and the tests"}
                for i in range(min(5_000, size - start))
            ]
        )
    if not indexed:
        conn = store._conn
        assert conn is not None
        for trigger in ("messages_recall_ai", "messages_recall_ad"):
            conn.execute(f"DROP TRIGGER {trigger}")
        for trigger in ("messages_recall_seq", "messages_recall_body"):
            conn.execute(f"DROP TRIGGER {trigger}")
    return store, sid


def _wal_size(store: SessionStore) -> int:
    assert store.path is not None
    wal = Path(f"{store.path}-wal")
    return wal.stat().st_size if wal.exists() else 0


def bench_append(sizes: list[int], turns: int, durability: Durability) -> None:
    print(f"append, durability {durability!r}:")
    rng = random.Random(2)
    words, weights = vocabulary(rng)
    results: dict[int, dict[bool, float]] = {}
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            stores = {
                flag: _append_store(
                    Path(tmp) / f"{flag}.sqlite", size, indexed=flag, durability=durability
                )
                for flag in (True, False)
            }
            wal = {}
            for flag, (store, _) in stores.items():
                conn = store._conn
                assert conn is not None
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                conn.execute("PRAGMA wal_autocheckpoint = 0")  # to count the frames written
                wal[flag] = _wal_size(store)
            page = stores[True][0]._conn.execute("PRAGMA page_size").fetchone()[0]  # type: ignore[union-attr]
            samples: dict[bool, list[float]] = {True: [], False: []}
            cpu = {True: 0.0, False: 0.0}
            for turn in range(turns):
                message: dict[str, Any] = {
                    "role": "user" if turn % 2 == 0 else "assistant",
                    "content": sentence(rng, words, weights, 60),
                }
                order = (True, False) if turn % 2 == 0 else (False, True)
                for flag in order:
                    store, sid = stores[flag]
                    c = time.process_time()
                    t = time.perf_counter()
                    store.writer(sid).on_append([message])
                    samples[flag].append(time.perf_counter() - t)
                    cpu[flag] += time.process_time() - c
            frames = {
                f: (_wal_size(s) - wal[f]) / (page + 24) / turns for f, (s, _) in stores.items()
            }
            results[size] = {flag: statistics.median(v) * 1e6 for flag, v in samples.items()}
            for store, _ in stores.values():
                store.close()
            shutil.rmtree(tmp, ignore_errors=True)
        r = results[size]
        p95 = {f: pct(v, 0.95) * 1e3 for f, v in samples.items()}
        p99 = {f: pct(v, 0.99) * 1e3 for f, v in samples.items()}
        mean = {f: statistics.fmean(v) * 1e6 for f, v in samples.items()}
        print(
            f"append into a {size:>7,}-message session: indexed {r[True]:8.0f} us   "
            f"unindexed {r[False]:8.0f} us   ratio {r[True] / r[False]:.3f}\n"
            f"    p95 {p95[True]:.0f} / {p95[False]:.0f} us   p99 {p99[True]:.0f} / "
            f"{p99[False]:.0f} us   mean {mean[True]:.0f} / {mean[False]:.0f} us "
            f"(ratio {mean[True] / mean[False]:.2f})   CPU {cpu[True] / turns * 1e6:.0f} / "
            f"{cpu[False] / turns * 1e6:.0f} us   WAL frames per commit "
            f"{frames[True]:.2f} / {frames[False]:.2f}"
        )
    if len(sizes) > 1:
        lo, hi = results[sizes[0]][True], results[sizes[-1]][True]
        print(f"indexed append {sizes[-1]:,} / {sizes[0]:,}: {hi / lo:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stores", choices=STORES, nargs="*", default=list(STORES))
    parser.add_argument("--sessions", type=int, nargs="*", default=[1_000, 10_000])
    parser.add_argument("--messages", type=int, default=20, help="messages per session")
    parser.add_argument("--old-queries", type=int, default=60, help="queries timed the old way")
    parser.add_argument("--scans", type=int, default=5, help="queries answered by the scan")
    parser.add_argument("--data", type=Path, default=DATA, help="the deepseek-usage directory")
    parser.add_argument("--sizes", type=int, nargs="*", default=[1_000, 100_000])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--skip-append", action="store_true")
    parser.add_argument("--quick", action="store_true", help="100 and 1,000 sessions, no append")
    parser.add_argument(
        "--durability", choices=["full", "normal"], nargs="*", default=["full", "normal"]
    )
    args = parser.parse_args()
    if args.quick:
        args.sessions, args.skip_append = [100, 1_000], True
    print(f"SQLite {sqlite3.sqlite_version}, Python {sys.version.split()[0]}")
    if args.sessions:
        bench_recall(
            args.stores, args.sessions, args.messages, args.old_queries, args.scans, args.data
        )
    if not args.skip_append:
        for durability in args.durability:
            bench_append(args.sizes, args.turns, durability)


if __name__ == "__main__":
    sys.exit(main())
