"""AgentMemStore at scale: put, get, search (with and without a query), list_namespaces.

    PYTHONPATH=. python bench/bench_langgraph_store.py [N] [BACKEND] [NAMESPACES]

Fills N items (batches of 500) spread over NAMESPACES (default 100) namespaces
("bench<pid>", "u<i>") with a short text each, then times each operation a few times and
prints the median. BACKEND: "embedded" (default) or a postgresql:// DSN. Items are
one document per namespace (agentmem.items), so a search reads the documents of the
namespaces under its prefix (O(items there)) and a put rewrites its namespace's
document (O(items in that namespace)).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from langgraph.store.base import PutOp

import agentmem
from agentmem.integrations.langgraph import AgentMemStore

TOP = f"bench{os.getpid()}"  # one run's items apart from another's in a shared database
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
    backend = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] != "embedded" else None
    spread = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    root = Path(tempfile.mkdtemp())
    mem = agentmem.Memory(root=root / ".agentmem", working_dir=root, backend=backend)
    store = AgentMemStore(memory=mem)
    start = time.perf_counter()
    for base in range(0, n, 500):
        store.batch(
            [
                PutOp(
                    (TOP, f"u{i % spread}"),
                    f"k{i}",
                    {"text": " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(8)), "i": i},
                )
                for i in range(base, min(n, base + 500))
            ]
        )
    took = time.perf_counter() - start
    print(f"backend {mem.backend}; {n} items in {spread} namespaces put in {took:.1f} s")
    timed(
        "put (update one item)",
        lambda: store.put((TOP, f"u{1 % spread}"), "k1", {"text": "x", "i": 1}),
    )
    timed("get", lambda: store.get((TOP, f"u{7 % spread}"), "k7"))
    timed("search one namespace, no query", lambda: store.search((TOP, f"u{3 % spread}")))
    timed(
        "search one namespace, query",
        lambda: store.search((TOP, f"u{3 % spread}"), query="tea lyon"),
    )
    timed("search all, no query, limit 10", lambda: store.search((TOP,)), repeat=3)
    timed(
        "search all, filter i >= n-5",
        lambda: store.search((TOP,), filter={"i": {"$gte": n - 5}}),
        repeat=3,
    )
    timed("search all, query, limit 10", lambda: store.search((TOP,), query="tea lyon"), repeat=3)
    timed("list_namespaces", lambda: store.list_namespaces())
    mem.close()


if __name__ == "__main__":
    main()
