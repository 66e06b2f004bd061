"""Benchmark the time machine against a full-copy snapshot and a shadow git repository.

A benchmark, not a test: it prints figures and ratios measured in one run on
this machine and asserts nothing about wall-clock time.

    python bench/bench_time_machine.py                     # 1k and 10k files
    python bench/bench_time_machine.py --sizes 1000 10000 --tasks 10

For each project size (files of ~1 KB in directories of 100, their mtimes
set an hour back as in a real checkout) it runs ``--tasks`` tasks, each
rewriting 10 files through ``record_file_before_change``, and measures:

* **restore**: ``switch_to_task`` between the last two tasks (each switch
  rewrites the 10 files they touched), median of 20;
* **guard() with nothing changed**: ``with tm.guard(): pass``, median of 20,
  after the first guard built the stat index (and 2 s passed, so no file
  is racy);
* **disk**: the snapshot store after the tasks, and what the tasks added
  beyond the first guard's baseline (one compressed copy of the project,
  shared by every session of the project);

and in the same run, on the same project:

* **full copy**: ``shutil.copytree`` of the project per task (restore = copy
  it back over the project);
* **shadow git** (the Cline approach): ``git add -A && git commit`` per task
  in a separate ``GIT_DIR``; restore = ``git reset --hard <commit>``; its
  "nothing changed" cost is ``git add -A``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from agentmem.time_machine import TimeMachine


def _make_project(top: Path, files: int) -> None:
    past = time.time() - 3600
    for i in range(files):
        path = top / f"pkg{i // 100:03d}" / f"mod{i % 100:02d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# module {i}\n" + f"value_{i} = {i}\n" * 60)
        os.utime(path, (past, past))


def _size(top: Path) -> int:
    total = 0
    for dirpath, _, names in os.walk(top):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


def _touched(files: int, task: int) -> list[str]:
    step = max(files // 10, 1)
    picks = [(task * 7 + k * step) % files for k in range(10)]
    return [f"pkg{i // 100:03d}/mod{i % 100:02d}.py" for i in picks]


def _edit(top: Path, rel: str, task: int) -> None:
    path = top / rel
    path.write_text(path.read_text() + f"# edited in task {task}\n")


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def setup_time_machine(base: Path, files: int, tasks: int) -> tuple[TimeMachine, dict[str, float]]:
    work = base / "tm-project"
    store = base / "tm-store"
    _make_project(work, files)
    tm = TimeMachine(work, "bench", store, memory_root=store)
    t0 = time.perf_counter()
    with tm.guard():
        pass
    first_guard = time.perf_counter() - t0
    baseline = _size(store)
    for task in range(tasks):
        tm.start_new_task(f"task {task}")
        for rel in _touched(files, task):
            tm.record_file_before_change(rel)
            _edit(work, rel, task)
    tm.start_new_task("idle")
    disk = _size(store)
    return tm, {
        "first_guard_s": first_guard,
        "disk": disk,
        "disk_added": disk - baseline,
        "baseline": baseline,
    }


def measure_time_machines(
    machines: dict[int, TimeMachine], tasks: int, restores_per_size: int = 40
) -> dict[int, dict[str, float]]:
    """Restores and idle guards, the sizes interleaved so machine noise hits them alike."""
    restores: dict[int, list[float]] = {n: [] for n in machines}
    guards: dict[int, list[float]] = {n: [] for n in machines}
    # Flush the freshly written projects first: an fsync on a filesystem full of dirty
    # pages pays for them, which would charge the setup to the restores.
    os.sync()
    for i in range(restores_per_size):
        for n, tm in machines.items():
            t0 = time.perf_counter()
            tm.switch_to_task(tasks - 1 if i % 2 == 0 else tasks)
            restores[n].append(time.perf_counter() - t0)
    time.sleep(2.1)  # past the racy window of the files just written
    for tm in machines.values():
        with tm.guard():
            pass
    for _ in range(20):
        for n, tm in machines.items():
            t0 = time.perf_counter()
            with tm.guard():
                pass
            guards[n].append(time.perf_counter() - t0)
    return {
        n: {"restore_ms": _median_ms(restores[n]), "guard_ms": _median_ms(guards[n])}
        for n in machines
    }


def bench_full_copy(base: Path, files: int, tasks: int) -> dict[str, float]:
    work = base / "copy-project"
    snaps = base / "copy-snaps"
    _make_project(work, files)
    for task in range(tasks):
        shutil.copytree(work, snaps / f"t{task}")
        for rel in _touched(files, task):
            _edit(work, rel, task)
    os.sync()
    restores = []
    for i in range(4):
        t0 = time.perf_counter()
        shutil.rmtree(work)
        shutil.copytree(snaps / f"t{tasks - 1 - i % 2}", work)
        restores.append(time.perf_counter() - t0)
    return {"restore_ms": _median_ms(restores), "disk": _size(snaps)}


def bench_shadow_git(base: Path, files: int, tasks: int) -> dict[str, float]:
    work = base / "git-project"
    env = {
        **os.environ,
        "GIT_DIR": str(base / "shadow.git"),
        "GIT_WORK_TREE": str(work),
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@b",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@b",
    }
    _make_project(work, files)

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=work, env=env, check=True, capture_output=True, text=True
        ).stdout.strip()

    git("init", "-q")
    # No background gc: a detached `git gc --auto` would still be writing into the shadow
    # repository when the temporary directory is removed (and is not timed anyway).
    git("config", "gc.auto", "0")
    git("config", "maintenance.auto", "false")
    commits = []
    for task in range(tasks):
        git("add", "-A")
        git("commit", "-q", "--allow-empty", "-m", f"task {task}")
        commits.append(git("rev-parse", "HEAD"))
        for rel in _touched(files, task):
            _edit(work, rel, task)
    git("add", "-A")
    git("commit", "-q", "-m", "last")
    commits.append(git("rev-parse", "HEAD"))
    os.sync()
    restores = []
    for i in range(10):
        t0 = time.perf_counter()
        git("reset", "-q", "--hard", commits[-1 - i % 2])
        restores.append(time.perf_counter() - t0)
    adds = []
    for _ in range(5):
        t0 = time.perf_counter()
        git("add", "-A")
        adds.append(time.perf_counter() - t0)
    return {
        "restore_ms": _median_ms(restores),
        "guard_ms": _median_ms(adds),
        "disk": _size(base / "shadow.git"),
    }


def measure(
    sizes: list[int], tasks: int, *, restores: int = 40, git: bool = True
) -> dict[int, dict[str, dict[str, float]]]:
    """Per project size: ``{"tm": ..., "copy": ..., "git": ...}`` figures (no ``"git"``
    when ``git`` is false, e.g. without a ``git`` binary)."""
    results: dict[int, dict[str, dict[str, float]]] = {n: {} for n in sizes}
    with contextlib.ExitStack() as stack:
        machines = {}
        for files in sizes:
            base = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="agentmem-tm-")))
            machines[files], results[files]["tm"] = setup_time_machine(base, files, tasks)
        for files, figures in measure_time_machines(machines, tasks, restores).items():
            results[files]["tm"].update(figures)
    for files in sizes:
        with tempfile.TemporaryDirectory(prefix="agentmem-bench-tm-") as tmp:
            base = Path(tmp)
            results[files]["copy"] = bench_full_copy(base, files, tasks)
            if git:
                results[files]["git"] = bench_shadow_git(base, files, tasks)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--tasks", type=int, default=10)
    args = parser.parse_args()
    results = measure(args.sizes, args.tasks)
    for files in args.sizes:
        r = results[files]
        changed = args.tasks * 10 * 1000
        print(f"\n{files} files, {args.tasks} tasks x 10 files (~{changed // 1000} KB changed):")
        print(
            f"  restore (10 files)   time machine {r['tm']['restore_ms']:8.2f} ms | "
            f"full copy {r['copy']['restore_ms']:8.1f} ms | "
            f"shadow git {r['git']['restore_ms']:8.1f} ms"
        )
        print(
            f"  nothing changed      guard()      {r['tm']['guard_ms']:8.2f} ms | "
            f"shadow git add -A {r['git']['guard_ms']:8.1f} ms"
        )
        print(
            f"  disk                 time machine {r['tm']['disk_added'] / 1e6:8.3f} MB added by "
            f"the tasks (+ {r['tm']['baseline'] / 1e6:.2f} MB one-time baseline, first guard "
            f"{r['tm']['first_guard_s']:.2f} s) | full copy {r['copy']['disk'] / 1e6:8.1f} MB | "
            f"shadow git {r['git']['disk'] / 1e6:8.1f} MB"
        )
    if len(results) > 1:
        small, large = min(results), max(results)
        ratio = results[large]["tm"]["restore_ms"] / results[small]["tm"]["restore_ms"]
        disk = results[large]["tm"]["disk_added"] / max(results[small]["tm"]["disk_added"], 1)
        print(
            f"\ntime machine {large}/{small} files: restore ratio {ratio:.2f} (target <= 1.5), "
            f"disk added ratio {disk:.2f} (same bytes changed: ~1), "
            f"guard() at {large}: {results[large]['tm']['guard_ms']:.1f} ms (target <= 50)"
        )


if __name__ == "__main__":
    main()
