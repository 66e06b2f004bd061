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

import agentmem
from agentmem._storage.sqlite import Durability
from agentmem.recall import STOPWORDS, keywords
from agentmem.session_store import SessionStore

MESSAGES = 50
VOCABULARY = 20_000
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


def populate(root: Path, sessions: int, rng: random.Random) -> tuple[agentmem.Memory, list[str]]:
    words, weights = vocabulary(rng)
    mem = agentmem.Memory(root=root, durability="normal")
    texts: list[str] = []
    for n in range(sessions):
        sid = mem.sessions.create(name=f"session {n}: {sentence(rng, words, weights, 3)}").id
        batch = []
        for i in range(MESSAGES):
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


def bench_recall(sessions: int, scans: int) -> None:
    rng = random.Random(1)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        mem, queries = populate(Path(tmp) / "m", sessions, rng)
        built = time.perf_counter() - start
        print(
            f"store: {sessions} sessions x {MESSAGES} messages "
            f"({sessions * MESSAGES:,} messages), written in {built:.1f} s"
        )
        for q in queries[:5]:
            mem.recall(q)  # warm the page cache and statement cache
        indexed = []
        for q in queries:
            t = time.perf_counter()
            mem.recall(q)
            indexed.append(time.perf_counter() - t)
        scan = []
        for q in queries[:scans]:
            t = time.perf_counter()
            classic_scan(mem.sessions, q)
            scan.append(time.perf_counter() - t)
        p50, p95 = pct(indexed, 0.5), pct(indexed, 0.95)
        s50, s95 = pct(scan, 0.5), pct(scan, 0.95)
        print(
            f"recall (index)      p50 {p50:9.2f} ms   p95 {p95:9.2f} ms   ({len(indexed)} queries)"
        )
        print(f"naive scan (CLIO)   p50 {s50:9.2f} ms   p95 {s95:9.2f} ms   ({len(scan)} queries)")
        print(f"speed-up            p50 {s50 / p50:9.0f} x   p95 {s95 / p95:9.0f} x")
        conn = mem.sessions._conn
        assert conn is not None
        sizes = dict(conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall())
        total = sum(sizes.values())
        index = sum(v for k, v in sizes.items() if k.startswith("recall"))
        messages = sum(
            v for k, v in sizes.items() if k.startswith("messages") or "autoindex_messages" in k
        )
        print(
            f"index size: {index / 1e6:.1f} MB of {total / 1e6:.1f} MB "
            f"({index / total:.0%} of the database, {index / max(messages, 1):.2f}x the messages)"
        )
        mem.close()


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
        p90 = {f: pct(v, 0.9) * 1e3 for f, v in samples.items()}
        mean = {f: statistics.fmean(v) * 1e6 for f, v in samples.items()}
        print(
            f"append into a {size:>7,}-message session: indexed {r[True]:8.0f} us   "
            f"unindexed {r[False]:8.0f} us   ratio {r[True] / r[False]:.3f}\n"
            f"    p90 {p90[True]:.0f} / {p90[False]:.0f} us   mean {mean[True]:.0f} / "
            f"{mean[False]:.0f} us   CPU {cpu[True] / turns * 1e6:.0f} / "
            f"{cpu[False] / turns * 1e6:.0f} us   WAL frames per commit "
            f"{frames[True]:.2f} / {frames[False]:.2f}"
        )
    if len(sizes) > 1:
        lo, hi = results[sizes[0]][True], results[sizes[-1]][True]
        print(f"indexed append {sizes[-1]:,} / {sizes[0]:,}: {hi / lo:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=1_000)
    parser.add_argument("--scans", type=int, default=10, help="queries answered by the scan")
    parser.add_argument("--sizes", type=int, nargs="*", default=[1_000, 100_000])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--skip-append", action="store_true")
    parser.add_argument(
        "--durability", choices=["full", "normal"], nargs="*", default=["full", "normal"]
    )
    args = parser.parse_args()
    print(f"SQLite {sqlite3.sqlite_version}, Python {sys.version.split()[0]}")
    if args.sessions:
        bench_recall(args.sessions, args.scans)
    if not args.skip_append:
        for durability in args.durability:
            bench_append(args.sizes, args.turns, durability)


if __name__ == "__main__":
    sys.exit(main())
