"""Benchmark context builds over one giant message (issue 6, item 2.11).

A benchmark, not a test: it prints figures measured in one run on this
machine and asserts nothing about wall-clock time.

    python bench/bench_giant_message.py                    # 1 MB and 5 MB, both counters
    python bench/bench_giant_message.py --sizes 50000000 --counter heuristic

A session gets a system prompt, a request, a tool call and one tool result
of N repeated characters (the worst case for a BPE tokenizer: no whitespace),
then ``s.context()`` is called several times. For each size and counter it
prints:

* **count once**: counting that one message with the session's counter, the
  floor any build must pay once (the token counter's own cost);
* **first build**: the first ``context()`` (it counts the message once and
  truncates it in the payload);
* **steady build**: the median of the following builds (the truncated view is
  cached, so nothing scales with the message any more);
* **texts counted**: how many times the counter was handed a text of at
  least 1 MB during all the builds (1 means: counted once).

The ratios first/count and steady/count show that a build does the
message-sized work once.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

import agentmem
from agentmem.tokens import count_message

BUILDS = 6


def run(size: int, counter_kind: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as root:
        mem = agentmem.Memory(root=root)
        model = "gpt-4o" if counter_kind == "tiktoken" else "some-local-model"
        s = mem.session(model=model, context_window=32_000)
        counter = s.token_counter
        big_texts = 0
        original = counter.count_text

        def counting(text: str) -> int:
            nonlocal big_texts
            if len(text) >= 1_000_000:
                big_texts += 1
            return original(text)

        s.append({"role": "system", "content": "You are a coding agent."})
        s.append({"role": "user", "content": "Read the log and fix the bug."})
        s.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"command": "cat log"}'},
                    }
                ],
            }
        )
        message = {"role": "tool", "tool_call_id": "c1", "content": "a" * size}
        start = time.perf_counter()
        count_message(message, counter)
        count_once = time.perf_counter() - start
        s.append(message)
        counter.count_text = counting  # type: ignore[method-assign]
        times = []
        for _ in range(BUILDS):
            start = time.perf_counter()
            s.context()
            times.append(time.perf_counter() - start)
        s.close()
    return {
        "count": count_once,
        "first": times[0],
        "steady": statistics.median(times[1:]),
        "big_texts": big_texts,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 5_000_000])
    parser.add_argument("--counter", choices=["tiktoken", "heuristic", "both"], default="both")
    args = parser.parse_args()
    kinds = ["tiktoken", "heuristic"] if args.counter == "both" else [args.counter]
    print(
        f"{'counter':10} {'size':>11} {'count once':>11} {'first build':>12} "
        f"{'steady build':>13} {'first/count':>12} {'steady/count':>13} {'texts counted':>14}"
    )
    for kind in kinds:
        for size in args.sizes:
            r = run(size, kind)
            print(
                f"{kind:10} {size:>11,} {r['count']:>10.3f}s {r['first']:>11.3f}s "
                f"{r['steady'] * 1e3:>11.3f}ms {r['first'] / r['count']:>12.2f} "
                f"{r['steady'] / r['count']:>13.5f} {r['big_texts']:>14}"
            )


if __name__ == "__main__":
    main()
