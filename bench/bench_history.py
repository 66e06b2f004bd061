"""Benchmark MessageHistory: append, to_api, and token counting at 1k and 10k messages.

A benchmark, not a test: it prints figures and ratios measured in one run on
this machine, never asserts wall-clock limits.

    python bench/bench_history.py            # 1k and 10k
    python bench/bench_history.py --sizes 1000 10000 100000

What the ratios should show:

* append: O(message) -> the 10k/1k per-append ratio stays near 1.
* to_api: O(history) by design (it renders the whole history) -> per-message
  cost stays flat, so the per-call ratio is near 10.
* estimate_tokens: cached counts make a recount O(new messages): the cached
  call is much cheaper than the first, and appending one message then
  recounting costs about one message, not the history.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from _transcripts import transcript

from agentmem import MessageHistory, TiktokenCounter
from agentmem.protocols import TokenCounter


def make_messages(n: int) -> list[dict[str, Any]]:
    """A realistic agent transcript starting with a system prompt."""
    return transcript(n, system=True)


def best_of(fn: Callable[[], Any], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def bench_append(n: int, counter: TokenCounter) -> float:
    """Microseconds per append onto a history that already holds n messages."""
    base = make_messages(n)
    extra = make_messages(404)[1:401]
    samples = []
    for _ in range(3):
        history = MessageHistory(base, token_counter=counter)
        t0 = time.perf_counter()
        for msg in extra:
            history.append(msg)
        samples.append((time.perf_counter() - t0) / len(extra))
    return min(samples) * 1e6


def bench_to_api(n: int, provider: str) -> float:
    """Milliseconds per to_api() call over n messages."""
    history = MessageHistory(make_messages(n))
    return best_of(lambda: history.to_api(provider=provider), repeat=5) * 1e3


def bench_counting(n: int, counter: TokenCounter) -> tuple[float, float, float]:
    """(first count ms, cached recount ms, append-one-then-recount ms)."""
    history = MessageHistory(make_messages(n), token_counter=counter)
    t0 = time.perf_counter()
    history.estimate_tokens()
    first = time.perf_counter() - t0
    cached = best_of(history.estimate_tokens, repeat=5)
    one = make_messages(3)[1]

    def append_and_count() -> None:
        history.append(one)
        history.estimate_tokens()

    incremental = best_of(append_and_count, repeat=5)
    return first * 1e3, cached * 1e3, incremental * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000])
    args = parser.parse_args()
    sizes: list[int] = args.sizes
    counter = TiktokenCounter("cl100k_base")
    print(f"token counter: {counter!r}")
    print(f"sizes: {sizes}\n")

    rows: dict[str, list[float]] = {}
    for n in sizes:
        rows.setdefault("append (us/op)", []).append(bench_append(n, counter))
        rows.setdefault("to_api openai (ms/call)", []).append(bench_to_api(n, "openai"))
        rows.setdefault("to_api anthropic (ms/call)", []).append(bench_to_api(n, "anthropic"))
        first, cached, incremental = bench_counting(n, counter)
        rows.setdefault("estimate_tokens first (ms)", []).append(first)
        rows.setdefault("estimate_tokens cached (ms)", []).append(cached)
        rows.setdefault("append 1 + recount (ms)", []).append(incremental)

    width = max(len(k) for k in rows)
    header = "".join(f"{n:>14,}" for n in sizes)
    ratio_label = f"{sizes[-1] // 1000}k/{sizes[0] // 1000}k"
    print(f"{'operation':<{width}}{header}{ratio_label:>12}")
    for name, values in rows.items():
        cells = "".join(f"{v:>14.3f}" for v in values)
        print(f"{name:<{width}}{cells}{values[-1] / values[0]:>12.2f}")

    print()
    for i, n in enumerate(sizes):
        speedup = rows["estimate_tokens first (ms)"][i] / rows["estimate_tokens cached (ms)"][i]
        print(f"cached vs uncached count at {n:,}: {speedup:,.0f}x faster")
    per_msg = [rows["to_api openai (ms/call)"][i] / n * 1e3 for i, n in enumerate(sizes)]
    print(
        f"to_api openai per message (us): {', '.join(f'{v:.2f}' for v in per_msg)}"
        f"  (spread {max(per_msg) / min(per_msg):.2f}x)"
    )
    print(f"append per-op median across sizes: {statistics.median(rows['append (us/op)']):.1f} us")


if __name__ == "__main__":
    main()
