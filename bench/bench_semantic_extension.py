"""Benchmark the semantic memory extension's cost on the agent's turn.

A benchmark, not a test: it prints figures and ratios measured in one run on
this machine and asserts nothing about wall-clock time.

    python bench/bench_semantic_extension.py

It measures, with an in-process client whose ``add`` sleeps ``--add-ms``
(a stand-in for an LLM extraction or a mem0 round trip):

* **record**: ``Recorder.record(text)`` per call against one ``client.add``
  (the ratio is what the background queue saves the turn);
* **context**: ``s.context()`` per turn (append one message, then build),
  median over ``--turns`` turns, in a session without extensions and in one
  with an extension whose every user turn carries a ``<memory-context>``
  block (the ratio is the cost of placing the blocks).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import agentmem
from agentmem.protocols import MemoryRecord
from agentmem.semantic import Recorder, SemanticMemoryExtension


class SlowClient:
    """A MemoryClient whose add takes ``delay`` seconds; search returns three memories."""

    def __init__(self, delay: float) -> None:
        self.delay = delay

    def add(self, messages: Any, *, user_id: str, **kwargs: Any) -> list[dict[str, Any]]:
        time.sleep(self.delay)
        return []

    def search(self, query: str, *, user_id: str, limit: int = 5, **kwargs: Any) -> Sequence[Any]:
        return [
            MemoryRecord(id=f"m{i}", memory=f"remembered fact {i} about {query[:20]}", score=0.9)
            for i in range(3)
        ]

    def get_all(self, *, user_id: str, **kwargs: Any) -> list[MemoryRecord]:
        return []

    def delete(self, memory_id: str) -> None:
        pass

    def delete_all(self, *, user_id: str, **kwargs: Any) -> int:
        return 0


def bench_record(delay: float, n: int) -> tuple[float, float]:
    client = SlowClient(delay)
    rec = Recorder(client, user_id="u", maxsize=n + 1, flush_timeout=0)
    samples = []
    for i in range(n):
        start = time.perf_counter()
        rec.record(f"turn {i}")
        samples.append(time.perf_counter() - start)
    rec.close(timeout=0)
    start = time.perf_counter()
    client.add("x", user_id="u")
    return statistics.median(samples), time.perf_counter() - start


def bench_context(turns: int, with_ext: bool) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        mem = agentmem.Memory(root=root / ".a", working_dir=root, durability="normal")
        exts = (
            [SemanticMemoryExtension(client=SlowClient(0), user_id="u", resident_persona=False)]
            if with_ext
            else []
        )
        s = mem.session(context_window=32_000, extensions=exts)
        s.history.replace_system_prompt("You are an agent.")
        samples = []
        for i in range(turns):
            if i % 10 == 0:
                s.start_task(f"task {i}: please look at file {i}.py")
            else:
                s.append({"role": "assistant", "content": f"step {i} " + "word " * 40})
            start = time.perf_counter()
            s.context()
            samples.append(time.perf_counter() - start)
        s.close()
        mem.close()
        return statistics.median(samples)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--add-ms", type=float, default=50.0)
    parser.add_argument("--turns", type=int, default=600)
    args = parser.parse_args(argv)
    record_s, add_s = bench_record(args.add_ms / 1000, 200)
    print(f"record: {record_s * 1e6:.1f} us per call; client.add: {add_s * 1e3:.1f} ms")
    print(f"  add / record = {add_s / record_s:,.0f}x")
    plain = bench_context(args.turns, with_ext=False)
    blocks = bench_context(args.turns, with_ext=True)
    print(f"context per turn: {plain * 1e6:.0f} us plain, {blocks * 1e6:.0f} us with blocks")
    print(f"  with blocks / plain = {blocks / plain:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
