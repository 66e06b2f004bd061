"""Benchmark ``import agentmem``: wall time against pydantic and tiktoken, and what dominates.

A benchmark, not a test: it prints figures measured in one run on this machine
and asserts nothing about wall-clock time.

    python bench/bench_import.py                  # median of 10 fresh processes each
    python bench/bench_import.py --runs 20 --top 25
    PYTHONPATH=. python bench/bench_import.py     # a checkout instead of the installed package

Every figure is a fresh ``python -c STATEMENT`` process, timed from outside
(interpreter start-up included; the ``pass`` row is that start-up alone). The
statements run round-robin, so a burst of load on the machine hits all of them
alike, and each row is the median of ``--runs`` processes. The baselines are
measured in the same run, and the ratios are of wall times: ``import pydantic``
(agentmem's models need more of pydantic than its lazy top-level import loads,
so ``from pydantic import BaseModel`` is shown too) and ``import tiktoken``.
``from agentmem import Memory`` is the facade and everything it wires: what an
application pays before its first session.

Bytecode is cached as in an installed package (pip compiles on install): the
children get ``PYTHONPYCACHEPREFIX`` pointing at a temporary folder and one
warm-up process per statement fills it, whatever ``PYTHONDONTWRITEBYTECODE`` says,
so no figure includes compiling source.

Then ``python -X importtime -c "import agentmem"`` (the median run of five by
total) says what dominates: the self time of agentmem's own modules against the
libraries they pull in, the slowest modules, and the third-party or standard
library imports that agentmem modules trigger first (cumulative).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

STATEMENTS = (
    "pass",
    "import agentmem",
    "from agentmem import Memory",
    "import pydantic",
    "from pydantic import BaseModel",
    "import tiktoken",
)


@dataclass(frozen=True)
class ImportRow:
    """One line of ``-X importtime``: self and cumulative microseconds, depth, module."""

    self_us: int
    cumulative_us: int
    depth: int
    module: str


def _env(pycache: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = pycache
    return env


def _wall(python: str, statement: str, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([python, "-c", statement], env=env, check=True)
    return time.perf_counter() - start


def wall_times(python: str, runs: int, env: dict[str, str]) -> dict[str, list[float]]:
    """``runs`` wall times per statement, round-robin, after one warm-up each."""
    for statement in STATEMENTS:
        _wall(python, statement, env)
    times: dict[str, list[float]] = {s: [] for s in STATEMENTS}
    for _ in range(runs):
        for statement in STATEMENTS:
            times[statement].append(_wall(python, statement, env))
    return times


def parse_importtime(stderr: str) -> list[ImportRow]:
    rows = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cumulative_us, name = line.removeprefix("import time:").split("|", 2)
        depth = (len(name) - len(name.lstrip(" ")) - 1) // 2
        rows.append(ImportRow(int(self_us), int(cumulative_us), depth, name.strip()))
    return rows


def importtime(python: str, env: dict[str, str], runs: int = 5) -> list[ImportRow]:
    """The ``-X importtime`` rows of the median run (by agentmem's cumulative time)."""
    trees = []
    for _ in range(runs):
        done = subprocess.run(
            [python, "-X", "importtime", "-c", "import agentmem"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        rows = parse_importtime(done.stderr)
        total = next(r.cumulative_us for r in rows if r.module == "agentmem")
        trees.append((total, rows))
    trees.sort(key=lambda tree: tree[0])
    return trees[len(trees) // 2][1]


def triggered(rows: list[ImportRow]) -> list[tuple[int, str, str]]:
    """(cumulative us, module, the agentmem module importing it) for non-agentmem imports."""
    out = []
    for i, row in enumerate(rows):
        if row.module.split(".")[0] == "agentmem":
            continue
        # -X importtime prints a module after its children: the parent is the next
        # row one level up.
        parent = next((r for r in rows[i + 1 :] if r.depth == row.depth - 1), None)
        if parent is not None and parent.module.split(".")[0] == "agentmem":
            out.append((row.cumulative_us, row.module, parent.module))
    return sorted(out, reverse=True)


def report(python: str, runs: int, top: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="agentmem-pycache-") as pycache:
        env = _env(pycache)
        where = subprocess.run(
            [python, "-c", "import agentmem; print(agentmem.__file__)"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        times = wall_times(python, runs, env)
        rows = importtime(python, env)
    medians = {s: statistics.median(t) for s, t in times.items()}
    minima = {s: min(t) for s, t in times.items()}
    start = medians["pass"]
    agentmem_self = sum(r.self_us for r in rows if r.module.split(".")[0] == "agentmem")
    total = next(r.cumulative_us for r in rows if r.module == "agentmem")
    return {
        "python": sys.version.split()[0] if python == sys.executable else python,
        "agentmem": where,
        "runs": runs,
        "median_s": medians,
        "min_s": minima,
        "net_s": {s: m - start for s, m in medians.items()},
        "importtime_total_us": total,
        "importtime_agentmem_self_us": agentmem_self,
        "importtime_modules": len(rows),
        "slowest_self": [
            (r.self_us, r.module) for r in sorted(rows, key=lambda r: r.self_us, reverse=True)
        ][:top],
        "triggered": triggered(rows)[:top],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="processes per statement")
    parser.add_argument("--top", type=int, default=15, help="rows in the importtime lists")
    parser.add_argument("--python", default=sys.executable, help="interpreter to measure")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    out = report(args.python, args.runs, args.top)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"agentmem from {out['agentmem']}; median of {out['runs']} fresh processes")
    base = out["median_s"]
    net = out["net_s"]
    low = out["min_s"]
    head = ("wall ms", "min ms", "- start-up", "x pydantic", "x tiktoken")
    print(
        f"{'statement':32s} {head[0]:>8s} {head[1]:>8s} {head[2]:>10s} {head[3]:>10s} "
        f"{head[4]:>10s}"
    )
    for statement in STATEMENTS:
        ratio_p = base[statement] / base["import pydantic"]
        ratio_t = base[statement] / base["import tiktoken"]
        print(
            f"{statement:32s} {base[statement] * 1000:8.1f} {low[statement] * 1000:8.1f} "
            f"{net[statement] * 1000:10.1f} {ratio_p:10.2f} {ratio_t:10.2f}"
        )
    print("(wall ms: the median; min ms: the fastest run; - start-up: median minus `pass`)")
    print(
        f"\n-X importtime, import agentmem: {out['importtime_total_us'] / 1000:.1f} ms over "
        f"{out['importtime_modules']} modules; agentmem's own modules' self time "
        f"{out['importtime_agentmem_self_us'] / 1000:.1f} ms"
    )
    print("slowest modules (self ms):")
    for self_us, module in out["slowest_self"]:
        print(f"  {self_us / 1000:7.1f}  {module}")
    print("imports agentmem modules trigger first (cumulative ms <- importer):")
    for cumulative_us, module, importer in out["triggered"]:
        print(f"  {cumulative_us / 1000:7.1f}  {module} <- {importer}")


if __name__ == "__main__":
    main()
