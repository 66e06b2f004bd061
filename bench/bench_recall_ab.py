"""Recall A/B: two checkouts' code on the very same stores, results compared hit by hit.

A benchmark, not a test: it prints figures and asserts nothing.

    python bench/bench_recall_ab.py --old ../main --new . --rounds 3

Writes the three stores of ``bench_recall.py`` (1,000 sessions by default) once, with
the ``--old`` checkout's code, then times ``recall(query)`` over their 200 queries
(twice) in a child process per run, the ``--old`` and ``--new`` checkouts alternating
``--rounds`` times; prints each run's wall-clock and CPU (process time) p50 / p95, and
whether every field of every hit is the same for both.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
STORES = ("ordinary", "common-word", "agent")

_BUILD = """
import json, sys
from pathlib import Path
sys.path.insert(0, {bench!r})
import bench_recall as b
out, n, data = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
for kind in b.STORES:
    mem, queries = b.build_store(kind, out / kind / "m", n, 20, data)
    mem.sessions.check_recall_index(repair=False)
    mem.close()
    (out / kind / "queries.json").write_text(json.dumps(queries))
"""

_TIME = """
import json, pickle, sys, time
from pathlib import Path
import agentmem
from agentmem.recall import recall
root, out, reps = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
queries = json.loads((root / "queries.json").read_text())
mem = agentmem.Memory(root=root / "m", durability="normal")
for q in queries[:5]:
    recall(mem.sessions, q)
wall, cpu, results = [], [], []
for r in range(reps):
    for q in queries:
        t, c = time.perf_counter(), time.process_time()
        hits = recall(mem.sessions, q)
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - t)
        if r == 0:
            results.append([tuple(getattr(h, f) for f in h.__slots__) for h in hits])
mem.close()
pct = lambda xs, q: sorted(xs)[min(len(xs) - 1, int(q * len(xs)))] * 1e3
print(json.dumps([pct(wall, .5), pct(wall, .95), pct(cpu, .5), pct(cpu, .95)]))
pickle.dump(results, open(out, "wb"))
"""


def run(code: str, tree: Path, *args: str) -> str:
    # cwd: ``python -c`` puts the working directory first on sys.path, before PYTHONPATH, so
    # a child started from the --new checkout would import its code whatever tree it was given.
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        cwd=tree,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", type=Path, required=True, help="checkout of the old code")
    parser.add_argument("--new", type=Path, default=HERE.parent, help="checkout of the new code")
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stores", choices=STORES, nargs="*", default=list(STORES))
    parser.add_argument(
        "--data", type=Path, default=HERE.parents[1] / "shared" / "bench-data" / "deepseek-usage"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        stores = Path(tmp)
        run(
            _BUILD.format(bench=str(HERE)),
            args.old.resolve(),
            str(stores),
            str(args.sessions),
            str(args.data),
        )
        for kind in args.stores:
            answers: dict[str, object] = {}
            for _ in range(args.rounds):
                for name, tree in (("old", args.old), ("new", args.new)):
                    out = str(stores / f"{kind}-{name}.pkl")
                    figures = json.loads(run(_TIME, tree.resolve(), str(stores / kind), out, "2"))
                    print(
                        f"{kind:12s} {name}  wall p50 {figures[0]:6.2f} p95 {figures[1]:6.2f}   "
                        f"CPU p50 {figures[2]:6.2f} p95 {figures[3]:6.2f} ms",
                        flush=True,
                    )
                    with open(out, "rb") as f:
                        answers[name] = pickle.load(f)
            same = answers["old"] == answers["new"]
            print(f"{kind:12s} results identical (every field of every hit): {same}")


if __name__ == "__main__":
    main()
