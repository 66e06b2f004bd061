"""PostgreSQL recall, two checkouts on one store: the same answers, and how fast.

A benchmark, not a test. It seeds a PostgreSQL database the way
``bench/bench_backends.py`` does (100-message sessions of the bench's vocabulary,
then ``VACUUM ANALYZE``), then runs the same recall queries (with and without
filters) in one child process per checkout, alternating rounds, and prints for each:
the recall p50/p95, the statements sent per recall (each one a round trip), and
whether every hit (session, index, role, score, previews) is the same as the first
checkout's.

    python bench/bench_pg_recall_ab.py --dsn postgresql://... --size 1000 \\
        --checkouts /work/main /work/wt/pgrecall

``--dsn``: an administrative DSN (a database is created and dropped); ``--keep NAME``
reuses (or makes and keeps) a database of that name instead.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

_CHILD = r"""
import json, os, random, sys, time
sys.path.insert(0, sys.argv[1])
import bench_backends as bb
import psycopg
from agentmem import Memory

count = [0]
original = psycopg.Cursor.execute  # Connection.execute calls it too
def execute(self, *a, **k):
    count[0] += 1
    return original(self, *a, **k)
psycopg.Cursor.execute = execute

dsn, root, size, rounds = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
mem = Memory(root=root, working_dir=os.path.dirname(root), backend=dsn)
rng = random.Random(size)
queries = bb._queries(rng)
ids = [i.id for i in mem.sessions.list()]
variants = [{}, {"roles": ["user"]}, {"max_sessions": 20}, {"max_sessions": 500},
            {"session_ids": ids[:3]}, {"exclude_session": ids[0]}, {"max_results": 20}]
answers = {}
for q in queries:
    for v in variants:
        hits = mem.recall(q, **v)
        answers[q + " " + json.dumps(v)] = [
            [h.session_id, h.index, h.role, h.score, h.preview, h.previous, h.next,
             h.session_name] for h in hits]
times, statements = [], []
for _ in range(rounds):
    for q in queries:
        before = count[0]
        t0 = time.perf_counter()
        mem.recall(q)
        times.append(time.perf_counter() - t0)
        statements.append(count[0] - before)
mem.close()
print(json.dumps({"times": times, "statements": statements, "answers": answers}))
"""


def _seed(dsn: str, root: str, size: int) -> None:
    sys.path.insert(0, str(HERE))
    import random

    import bench_backends as bb

    from agentmem import Memory

    mem = Memory(root=root, working_dir=os.path.dirname(root), backend=dsn)
    try:
        bb._seed(mem, size, random.Random(size))
    finally:
        mem.close()
    bb._settle(dsn)


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=2, help="alternations of the checkouts")
    parser.add_argument("--checkouts", nargs="+", required=True)
    parser.add_argument("--keep", help="a database name to reuse (seeded when new)")
    args = parser.parse_args()
    import psycopg

    name = args.keep or f"agentmem_ab_{os.getpid()}"
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')
    sys.path.insert(0, str(HERE))
    import bench_backends as bb

    dsn = bb._uri(str(psycopg.conninfo.make_conninfo(args.dsn, dbname=name)))
    try:
        with tempfile.TemporaryDirectory(prefix="agentmem-ab-") as tmp:
            root = str(Path(tmp) / "mem")
            if not exists:
                _seed(dsn, root, args.size)
            results: dict[str, dict[str, Any]] = {}
            for _ in range(args.repeat):
                for checkout in args.checkouts:
                    env = dict(os.environ, PYTHONPATH=checkout)
                    out = subprocess.run(
                        [
                            sys.executable,
                            "-c",
                            _CHILD,
                            str(HERE),
                            dsn,
                            root,
                            str(args.size),
                            str(args.rounds),
                        ],
                        env=env,
                        capture_output=True,
                        text=True,
                        cwd=checkout,
                    )
                    if out.returncode:
                        raise SystemExit(f"{checkout} failed:\n{out.stderr}")
                    got = json.loads(out.stdout)
                    entry = results.setdefault(checkout, {"times": [], "statements": []})
                    entry["times"] += got["times"]
                    entry["statements"] += got["statements"]
                    entry["answers"] = got["answers"]
            first = results[args.checkouts[0]]
            for checkout in args.checkouts:
                r = results[checkout]
                same = r["answers"] == first["answers"]
                differing = sum(1 for k, v in r["answers"].items() if first["answers"].get(k) != v)
                print(
                    f"{checkout}: {args.size} messages, recall p50 {_pct(r['times'], 0.5):.2f} ms, "
                    f"p95 {_pct(r['times'], 0.95):.2f} ms, statements per recall "
                    f"median {statistics.median(r['statements'])} "
                    f"max {max(r['statements'])}; answers ({len(r['answers'])} recalls) "
                    f"{'identical' if same else f'DIFFER in {differing}'}"
                )
    finally:
        if not args.keep:
            with psycopg.connect(args.dsn, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
