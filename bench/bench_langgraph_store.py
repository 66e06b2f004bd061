"""AgentMemStore at scale: put, get, search (with and without a query), list_namespaces.

    PYTHONPATH=. python bench/bench_langgraph_store.py [N] [BACKEND]

Fills N items (batches of 500) spread over 100 namespaces ("users", "u<i>") with a
short text each, then times each read a few times and prints the median. Search
reads every item under its namespace prefix and ranks in Python (no index), so
search over the whole store is O(N); under one user's namespace it is O(N/100)
for the reads plus a listing of all N document names.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from langgraph.store.base import PutOp

import agentmem
from agentmem.integrations.langgraph import AgentMemStore

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "tea",
    "coffee",
    "water",
    "lyon",
    "paris",
    "rome",
    "code",
    "test",
    "store",
    "graph",
]


def timed(what: str, work: Callable[[], object], repeat: int = 5) -> None:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        runs.append(time.perf_counter() - start)
    print(f"{what:<48} {statistics.median(runs) * 1000:9.1f} ms")


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    backend = sys.argv[2] if len(sys.argv) > 2 else None
    root = Path(tempfile.mkdtemp())
    mem = agentmem.Memory(root=root / ".agentmem", working_dir=root, backend=backend)
    store = AgentMemStore(memory=mem)
    start = time.perf_counter()
    for base in range(0, n, 500):
        store.batch(
            [
                PutOp(
                    ("users", f"u{i % 100}"),
                    f"k{i}",
                    {"text": " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(8)), "i": i},
                )
                for i in range(base, min(n, base + 500))
            ]
        )
    print(f"backend {mem.backend}; {n} items put in {time.perf_counter() - start:.1f} s")
    timed("put (update one item)", lambda: store.put(("users", "u1"), "k1", {"text": "x", "i": 1}))
    timed("get", lambda: store.get(("users", "u7"), "k7"))
    timed("search one namespace (n/100), no query", lambda: store.search(("users", "u3")))
    timed("search one namespace, query", lambda: store.search(("users", "u3"), query="tea lyon"))
    timed("search all, no query, limit 10", lambda: store.search(("users",)), repeat=3)
    timed(
        "search all, filter i >= n-5",
        lambda: store.search(("users",), filter={"i": {"$gte": n - 5}}),
        repeat=3,
    )
    timed(
        "search all, query, limit 10", lambda: store.search(("users",), query="tea lyon"), repeat=3
    )
    timed("list_namespaces", lambda: store.list_namespaces())
    mem.close()


if __name__ == "__main__":
    main()
