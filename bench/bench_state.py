"""Benchmark the per-turn state save against the size of the YaRN side-thread archive.

A benchmark, not a test: it prints figures and ratios measured in one run on
this machine and asserts nothing about wall-clock time.

    python bench/bench_state.py                 # 0, ~1 MB, ~10 MB of side threads
    python bench/bench_state.py --turns 50      # quicker

It prints which agentmem it imported (set ``PYTHONPATH`` to a checkout to
measure that one, e.g. an older release for comparison).

For each archive size it opens a session through the public facade, archives
that much into side threads (``s.yarn.archive(messages, thread_id)``, 8 threads
of 2 KB messages), saves once, then measures ``s.record_usage(...)`` -- one
billing row and the session state, saved every turn -- p50 over ``--turns``
calls. It runs twice: with ``durability="normal"`` (no fsync per commit, so the
cost of the state itself shows) and with the default ``"full"``.

It prints each size's ratio to the empty archive: flat (~1x) means a state save
is O(1) in the archive's size; a ratio that grows with the size means the
archive is rewritten every turn.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Literal

import agentmem

SIZES_MB = (0, 1, 10)
THREADS = 8
MESSAGE_BYTES = 2_000


def measure(size_mb: int, turns: int, durability: Literal["normal", "full"]) -> float:
    """p50 of ``record_usage`` in ms with ``size_mb`` MB of side threads."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        with agentmem.Memory(root, working_dir=tmp, durability=durability) as mem:
            s = mem.session("bench")
            s.append({"role": "user", "content": "hello"})
            count = size_mb * 1_000_000 // MESSAGE_BYTES
            for t in range(THREADS):
                batch = [
                    {"role": "user", "content": f"thread {t} message {i} " + "x" * MESSAGE_BYTES}
                    for i in range(count // THREADS)
                ]
                s.yarn.archive(batch, f"sub-{t}")
            s.record_usage(1, 1)  # the archive is saved once, outside the timing
            samples = []
            for _ in range(turns):
                start = time.perf_counter()
                s.record_usage(100, 10)
                samples.append((time.perf_counter() - start) * 1_000)
            s.close()
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args(argv)
    print(f"agentmem from {Path(agentmem.__file__).parent}")
    durabilities: tuple[Literal["normal", "full"], ...] = ("normal", "full")
    for durability in durabilities:
        figures = {mb: measure(mb, args.turns, durability) for mb in SIZES_MB}
        base = figures[0]
        print(f"record_usage p50, durability={durability!r}:")
        for mb, ms in figures.items():
            print(
                f"  {mb:>3} MB of side threads: {ms:8.3f} ms  ({ms / base:6.1f}x the empty archive)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
