"""Benchmark LocalMemoryClient search as the user's memories grow.

A benchmark, not a test: it prints figures and ratios measured in one run on
this machine and asserts nothing about wall-clock time.

    python bench/bench_semantic.py                  # 1,000 and 10,000 memories
    python bench/bench_semantic.py --sizes 500 5000
    python bench/bench_semantic.py --backend postgresql://user@host/db   # on PostgreSQL

For each size it fills an in-memory client with statements of 8 words drawn
from a 3,000-word vocabulary (plus a unique word each), all for one user
(another user holds as many again, so the scope filter has work to do), and
measures ``search`` p50 / p95 over 200 queries of 3 words, without and with
a toy embedder (a hashed bag of words, 64 dimensions: the vector pass scans
every memory of the scope). With ``--backend DSN`` the client runs on that
PostgreSQL database (users ``u`` and ``other`` are emptied before and after).
Ratios: each size against the first (how the cost grows with the store) and
with / without vectors.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import statistics
import time
from collections.abc import Sequence

from agentmem.semantic import LocalMemoryClient


class HashEmbedder:
    """A deterministic bag-of-words embedder (no model): word -> one of 64 axes."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for text in texts:
            vec = [0.0] * 64
            for word in text.lower().split():
                vec[hashlib.blake2b(word.encode(), digest_size=1).digest()[0] % 64] += 1.0
            out.append(vec)
        return out


def run(
    size: int, embedder: HashEmbedder | None, rng: random.Random, backend: str | None = None
) -> tuple[float, float]:
    words = [f"w{i}" for i in range(3000)]
    client = LocalMemoryClient(None, embedder=embedder, durability="normal", backend=backend)
    for user in ("u", "other"):
        client.delete_all(user_id=user)
    for user in ("u", "other"):
        for i in range(size):
            text = " ".join(rng.choices(words, k=8)) + f" {user}{i}"
            client.add(text, user_id=user, infer=False)
    times = []
    for _ in range(200):
        query = " ".join(rng.choices(words, k=3))
        start = time.perf_counter()
        client.search(query, user_id="u")
        times.append(time.perf_counter() - start)
    for user in ("u", "other"):
        client.delete_all(user_id=user)
    client.close()
    times.sort()
    return statistics.median(times) * 1e3, times[int(len(times) * 0.95)] * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--backend", default=None, help="a PostgreSQL DSN (default: SQLite)")
    args = parser.parse_args()
    rng = random.Random(7)
    base: dict[str, float] = {}
    for size in args.sizes:
        lexical = run(size, None, rng, args.backend)
        vectors = run(size, HashEmbedder(), rng, args.backend)
        base.setdefault("lexical", lexical[0])
        base.setdefault("vectors", vectors[0])
        print(
            f"{size:>7} memories: search p50 {lexical[0]:.2f} ms (p95 {lexical[1]:.2f}), "
            f"x{lexical[0] / base['lexical']:.1f} vs the first size; with vectors p50 "
            f"{vectors[0]:.2f} ms (p95 {vectors[1]:.2f}), x{vectors[0] / lexical[0]:.1f} "
            "vs lexical"
        )


if __name__ == "__main__":
    main()
