"""Child for the kill -9 tests of undo/switch/start_task (run with ``sys.executable``).

Never collected by pytest. It imports agentmem once, builds a template
session (tasks 1 and 2, an undo, task 3 as a sibling branch of 2), then for
each kill copies the template and forks a grandchild that opens the copy and
changes tasks until it is killed with SIGKILL (a real ``kill -9``: no
cleanup, no ``finally``). Forking avoids paying the interpreter start and the
import for every kill, so ~100 kills take a few seconds. One JSON line per
copy on stdout says what happened; the parent test reopens each copy.

``steps <base>``: the grandchild runs :data:`OPS` with every write step
instrumented (each ``os.replace``/``os.rename``/``os.unlink``/``os.rmdir``
and each commit of the session writer, before and after it) and kills itself
at step ``k``, for k = 1, 2, ... until a run completes unkilled.

``random <base> <kills> <seed>``: the grandchild loops :data:`LOOP` forever;
the child kills it after a random delay of 0-30 ms from the moment it has
opened the session (so kills land at arbitrary instants of undo/switch).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import agentmem
from agentmem.session_store.writer import SessionWriter

SESSION = "k"
INITIAL = {"a": "a0", "b": "b0"}
STATES: dict[int | None, dict[str, str]] = {
    None: INITIAL,
    1: {"a": "a1", "b": "b0", "c/new": "c1"},
    2: {"a": "a2", "c/new": "c1"},
    3: {"a": "a1", "b": "b3", "c/new": "c1", "d": "d3"},
}
"""The working directory's files at the end of each task of the template."""

OPS: list[tuple[str, Any]] = [
    ("undo", None),  # 3 -> 1
    ("switch", 2),
    ("undo", None),  # 2 -> 1
    ("undo", None),  # 1 -> initial state
    ("switch", 3),
    ("start", "four"),  # 4, a child of 3 (same files)
    ("undo", None),  # 4 -> 3
    ("switch", 4),
]
LOOP: list[tuple[str, Any]] = [
    ("switch", 2),
    ("undo", None),
    ("undo", None),
    ("switch", 3),
    ("undo", None),
    ("switch", None),
    ("switch", 1),
]


def expected_files(active: int | None) -> dict[str, str]:
    """What the working directory holds at the end of ``active`` (a task 4+ is 3's child)."""
    return STATES[active if active is None or active <= 3 else 3]


def build_template(work: Path) -> None:
    work.mkdir(parents=True)
    for name, text in INITIAL.items():
        (work / name).write_text(text)
    with agentmem.Memory(root=".agentmem", working_dir=work, durability="normal") as mem:
        s = mem.session(session_id=SESSION, context_window=4_000)

        def one() -> None:
            (work / "a").write_text("a1")
            (work / "c").mkdir()
            (work / "c" / "new").write_text("c1")

        def two() -> None:
            (work / "a").write_text("a2")
            (work / "b").unlink()

        def three() -> None:
            (work / "b").write_text("b3")
            (work / "d").write_text("d3")

        for text, edit in (("one", one), ("two", two)):
            s.start_task(text)
            with s.time_machine.guard():
                edit()
            s.append({"role": "assistant", "content": f"did {text}"})
        s.undo()
        s.start_task("three")
        with s.time_machine.guard():
            three()
        s.append({"role": "assistant", "content": "did three"})
        s.close()


def run_op(s: agentmem.Session, op: str, arg: Any) -> None:
    if op == "undo":
        s.undo()
    elif op == "switch":
        s.switch_to_task(arg)
    else:
        s.start_task(arg)


def instrument(kill_at: int) -> None:
    """Kill this process with SIGKILL at write step ``kill_at`` (counted from 1)."""
    count = [0]

    def step() -> None:
        count[0] += 1
        if count[0] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            step()
            result = fn(*args, **kwargs)
            step()
            return result

        return wrapped

    for name in ("replace", "rename", "unlink", "rmdir"):
        setattr(os, name, wrap(getattr(os, name)))
    for name in ("on_append", "save_state", "add_billing"):
        setattr(SessionWriter, name, wrap(getattr(SessionWriter, name)))


def grandchild(work: Path, ops: list[tuple[str, Any]], kill_at: int | None, ready: int) -> None:
    mem = agentmem.Memory(root=".agentmem", working_dir=work, durability="normal")
    s = mem.session(session_id=SESSION)
    if kill_at is not None:
        instrument(kill_at)
    os.write(ready, b"r")
    while True:
        for op, arg in ops:
            run_op(s, op, arg)
        if kill_at is not None:
            os._exit(0)  # ran every op unkilled: there is no step kill_at


def fork_run(
    work: Path, ops: list[tuple[str, Any]], kill_at: int | None, delay: float | None
) -> str:
    """Fork a grandchild on ``work``; return "killed" or "completed"."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the grandchild
        os.close(read_end)
        try:
            grandchild(work, ops, kill_at, write_end)
        except BaseException as exc:  # report it and leave without any cleanup
            sys.stderr.write(f"grandchild failed: {exc!r}\n")
            os._exit(3)
    os.close(write_end)
    opened = os.read(read_end, 1)
    os.close(read_end)
    if delay is not None and opened:
        time.sleep(delay)
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
        return "killed"
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return "completed"
    raise SystemExit(f"grandchild on {work} ended with status {status}")


def main(argv: list[str]) -> None:
    mode, base = argv[0], Path(argv[1])
    template = base / "template"
    build_template(template)
    if mode == "steps":
        k = 0
        while True:
            k += 1
            copy = base / f"k{k:03d}"
            shutil.copytree(template, copy, symlinks=True)
            outcome = fork_run(copy, OPS, k, None)
            print(json.dumps({"dir": copy.name, "step": k, "outcome": outcome}), flush=True)
            if outcome == "completed":
                return
    kills, rng = int(argv[2]), random.Random(int(argv[3]))
    for k in range(kills):
        copy = base / f"r{k:03d}"
        shutil.copytree(template, copy, symlinks=True)
        outcome = fork_run(copy, LOOP, None, rng.uniform(0.0, 0.03))
        print(json.dumps({"dir": copy.name, "step": k, "outcome": outcome}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
