"""Child for the kill -9 restore test (run with ``sys.executable``; never collected by pytest).

``python tests/_tm_kill9_child.py <work dir>``: in session ``k``, one task
rewrites 40 files, then an undo starts; after the 5th file of the restore is
replaced the child prints ``restoring`` and sleeps until it is killed.

``python tests/_tm_kill9_child.py <work dir> guard``: in session ``g``, a
task's guarded "command" rewrites ``f00``, creates ``new.txt`` and deletes
``f01``, then prints ``inside`` and sleeps (inside the guard) until killed.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import agentmem
import agentmem.time_machine._restore as restore_module


def main(work: Path) -> None:
    for i in range(40):
        (work / f"f{i:02d}.txt").write_text(f"initial {i}")
    mem = agentmem.Memory(root=".agentmem", working_dir=work)
    s = mem.session(session_id="k")
    s.start_task("rewrite everything")
    with s.time_machine.guard():
        for i in range(40):
            (work / f"f{i:02d}.txt").write_text(f"changed {i}")
    s.start_task("next")
    real = restore_module.atomic_write_bytes
    count = [0]

    def slow(path: Any, data: bytes) -> None:
        real(path, data)
        count[0] += 1
        if count[0] == 5:
            print("restoring", flush=True)
            time.sleep(3600)

    restore_module.atomic_write_bytes = slow  # type: ignore[assignment]
    s.switch_to_task(None)


def inside_guard(work: Path) -> None:
    for i in range(3):
        (work / f"f{i:02d}.txt").write_text(f"initial {i}")
    mem = agentmem.Memory(root=".agentmem", working_dir=work)
    s = mem.session(session_id="g")
    s.start_task("a command that never returns")
    with s.time_machine.guard():
        (work / "f00.txt").write_text("changed")
        (work / "new.txt").write_text("new")
        (work / "f01.txt").unlink()
        print("inside", flush=True)
        time.sleep(3600)


if __name__ == "__main__":
    if sys.argv[2:] == ["guard"]:
        inside_guard(Path(sys.argv[1]))
    else:
        main(Path(sys.argv[1]))
