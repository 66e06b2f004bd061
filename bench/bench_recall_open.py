"""Benchmark the recall index's open-time check: opening a store with it and without it.

A benchmark, not a test: it prints figures measured in one run on this machine and
asserts nothing about wall-clock time.

    python bench/bench_recall_open.py                      # 100 and 1,000 sessions x 50
    python bench/bench_recall_open.py --sessions 100 2000

For each store size it builds a sessions database (``--sessions`` sessions of 50
messages of ~40 words each, indexed), then opens and closes it ``--opens`` times
with the check (``SessionStore(path)``) and as many times without it (the same
class with ``_check_recall_on_open`` replaced by a no-op), interleaved, and times
the check's queries alone on an open store
(:func:`agentmem.session_store.recall_index.quick_problems`). It prints p50s and
the ratio with / without.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from agentmem.session_store import SessionStore, recall_index

MESSAGES = 50


class _Unchecked(SessionStore):
    def _check_recall_on_open(self) -> None:
        return None


def build(path: Path, sessions: int, rng: random.Random) -> None:
    words = [f"w{i}" for i in range(5_000)]
    with SessionStore(path, durability="normal") as store:
        for s in range(sessions):
            sid = store.create(name=f"session {s}").id
            store.writer(sid).on_append(
                [
                    {
                        "role": "user" if i % 2 == 0 else "assistant",
                        "content": " ".join(rng.choices(words, k=40)),
                    }
                    for i in range(MESSAGES)
                ]
            )
        assert store.check_recall_index(repair=False) == []


def p50_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def bench(sessions: int, opens: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sessions.sqlite"
        build(path, sessions, random.Random(sessions))
        with_check: list[float] = []
        without: list[float] = []
        for _ in range(opens):
            for cls, samples in ((SessionStore, with_check), (_Unchecked, without)):
                start = time.perf_counter()
                cls(path).close()
                samples.append(time.perf_counter() - start)
        check: list[float] = []
        with SessionStore(path) as store:
            conn = store._conn
            assert conn is not None
            for _ in range(opens):
                start = time.perf_counter()
                problems = recall_index.quick_problems(conn)
                check.append(time.perf_counter() - start)
                assert problems == []
        size = path.stat().st_size / 1e6
        print(
            f"{sessions:>6} sessions x {MESSAGES} "
            f"({sessions * MESSAGES:,} messages, {size:.1f} MB): "
            f"open+close p50 {p50_us(with_check):,.0f} us with the check, "
            f"{p50_us(without):,.0f} us without ({p50_us(with_check) / p50_us(without):.2f}x); "
            f"the check's queries alone p50 {p50_us(check):,.0f} us"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, nargs="*", default=[100, 1_000])
    parser.add_argument("--opens", type=int, default=50)
    args = parser.parse_args()
    for sessions in args.sessions:
        bench(sessions, args.opens)


if __name__ == "__main__":
    main()
