"""The time machine against an independent model: a dict of files per task over a tree.

The model imports nothing from agentmem: each task's end state is a plain
``{path: (bytes, executable)}`` dict, copied from the parent when the task
starts; edits change the active task's dict; undo moves to the parent;
switching makes any task active. After every step the working directory
(everything outside the memory root) must equal the model's dict for the
active task, and the payload must carry exactly the active chain's user turns.

Rules drive the facade (``s.start_task``, ``s.undo``, ``s.switch_to_task``)
and the time machine (``record_file_before_change`` before a direct write,
``guard()`` around direct writes/deletes), close and resume the session from
disk, and kill a restore half-way (an exception out of the k-th file write,
then a reopen that must finish it), and fail one half-way with a disk error
(rolled back at once: nothing changed; or, when the roll-back fails too,
finished by the next open).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from profiles import scaled

import agentmem
import agentmem.time_machine._restore as restore_module
from agentmem.errors import RestoreError

PATHS = ["a.txt", "b.bin", "d/c.txt", "d/e/f/g.txt", "n/m/deep.sh", "empty"]
INITIAL = {"a.txt": (b"alpha\n", False), "d/c.txt": (b"c", False), "empty": (b"", False)}
CONTENTS = st.sampled_from(
    [b"", b"x", b"hello\n", bytes(range(256)), b"\x00\xff" * 50, b"y" * 3000]
)

Files = dict[str, tuple[bytes, bool]]


class SimulatedKill(BaseException):
    """Stands in for a kill -9 in the middle of a restore."""


def _disk(top: Path) -> Files:
    out: Files = {}
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = [d for d in dirnames if d != ".agentmem"]
        for name in filenames:
            full = Path(dirpath) / name
            rel = full.relative_to(top).as_posix()
            out[rel] = (full.read_bytes(), bool(os.stat(full).st_mode & stat.S_IXUSR))
    return out


def _write(full: Path, data: bytes, executable: bool) -> None:
    full.parent.mkdir(parents=True, exist_ok=True)
    full.write_bytes(data)
    os.chmod(full, 0o755 if executable else 0o644)


class TimeMachineModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="agentmem-tm-"))
        for rel, (data, ex) in INITIAL.items():
            _write(self.dir / rel, data, ex)
        self.mem = agentmem.Memory(root=".agentmem", working_dir=self.dir, durability="normal")
        self.s = self.mem.session(session_id="tm")
        # The model: task id -> (parent, files); None is the initial state.
        self.states: dict[int | None, Files] = {None: dict(INITIAL)}
        self.parent: dict[int, int | None] = {}
        self.summary: dict[int, str] = {}
        self.active: int | None = None

    def teardown(self) -> None:
        self.mem.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def files(self) -> Files:
        return self.states[self.active]

    def chain(self) -> list[int]:
        out: list[int] = []
        node = self.active
        while node is not None:
            out.append(node)
            node = self.parent[node]
        return out[::-1]

    # ------------------------------------------------------------------ rules

    @rule()
    def start_task(self) -> None:
        text = f"task after {self.active}"
        task_id = self.s.start_task(text)
        assert task_id not in self.parent
        self.parent[task_id] = self.active
        self.summary[task_id] = text
        self.states[task_id] = dict(self.files)
        self.active = task_id

    @rule(path=st.sampled_from(PATHS), data=CONTENTS, executable=st.booleans())
    def tool_write(self, path: str, data: bytes, executable: bool) -> None:
        self.s.time_machine.record_file_before_change(self.dir / path)
        _write(self.dir / path, data, executable)
        self.files[path] = (data, executable)

    @rule(path=st.sampled_from(PATHS))
    def tool_delete(self, path: str) -> None:
        self.s.time_machine.record_file_before_change(path)
        (self.dir / path).unlink(missing_ok=True)
        self.files.pop(path, None)

    @rule(
        ops=st.lists(
            st.tuples(st.sampled_from(PATHS), st.none() | CONTENTS, st.booleans()),
            min_size=1,
            max_size=4,
        )
    )
    def shell_edit(self, ops: list[tuple[str, bytes | None, bool]]) -> None:
        with self.s.time_machine.guard():
            for path, data, executable in ops:
                if data is None:
                    (self.dir / path).unlink(missing_ok=True)
                else:
                    _write(self.dir / path, data, executable)
        for path, data, executable in ops:
            if data is None:
                self.files.pop(path, None)
            else:
                self.files[path] = (data, executable)

    @rule(data=CONTENTS)
    def shell_swap_file_and_directory(self, data: bytes) -> None:
        swap = self.dir / "swap"
        with self.s.time_machine.guard():
            if swap.is_file():
                swap.unlink()
                _write(swap / "inner", data, False)
            else:
                shutil.rmtree(swap, ignore_errors=True)
                _write(swap, data, False)
        if "swap" in self.files:
            del self.files["swap"]
            self.files["swap/inner"] = (data, False)
        else:
            self.files.pop("swap/inner", None)
            self.files["swap"] = (data, False)

    @rule()
    def undo(self) -> None:
        self.s.undo()
        if self.active is not None:
            self.active = self.parent[self.active]

    @precondition(lambda self: self.parent)
    @rule(data=st.data())
    def switch(self, data: st.DataObject) -> None:
        target = data.draw(st.sampled_from([None, *sorted(self.parent)]))
        self.s.switch_to_task(target)
        self.active = target

    @rule()
    def resume(self) -> None:
        self.s.close()
        self.mem.close()
        self.mem = agentmem.Memory(root=".agentmem", working_dir=self.dir, durability="normal")
        self.s = self.mem.session(session_id="tm")

    @precondition(lambda self: self.parent)
    @rule(data=st.data(), after=st.integers(0, 3))
    def killed_restore(self, data: st.DataObject, after: int) -> None:
        target = data.draw(st.sampled_from([None, *sorted(self.parent)]))
        real = restore_module.atomic_write_bytes
        writes = [0]

        def dying(path: Any, payload: bytes) -> None:
            if writes[0] >= after:
                raise SimulatedKill
            writes[0] += 1
            real(path, payload)

        restore_module.atomic_write_bytes = dying  # type: ignore[assignment]
        try:
            self.s.switch_to_task(target)
        except SimulatedKill:
            pass
        finally:
            restore_module.atomic_write_bytes = real
        # The "dead" process's objects are dropped; the next open finishes the restore.
        self.s._lock.release()
        self.mem._forget(self.s)
        self.mem.close()
        self.mem = agentmem.Memory(root=".agentmem", working_dir=self.dir, durability="normal")
        self.s = self.mem.session(session_id="tm")
        self.active = target

    @precondition(lambda self: self.parent)
    @rule(data=st.data(), after=st.integers(0, 3), once=st.booleans())
    def failed_restore(self, data: st.DataObject, after: int, once: bool) -> None:
        """A disk error at the k-th write: rolled back, or finished by the next open."""
        target = data.draw(st.sampled_from([None, *sorted(self.parent)]))
        real = restore_module.atomic_write_bytes
        writes = [0]

        def failing(path: Any, payload: bytes) -> None:
            writes[0] += 1
            if writes[0] == after + 1 or (not once and writes[0] > after + 1):
                raise OSError(28, "No space left on device", str(path))
            real(path, payload)

        restore_module.atomic_write_bytes = failing  # type: ignore[assignment]
        try:
            self.s.switch_to_task(target)
            outcome = "done"
        except RestoreError as exc:
            outcome = exc.outcome
        finally:
            restore_module.atomic_write_bytes = real
        if outcome == "done":
            self.active = target
        elif outcome == "rolled back":
            assert _disk(self.dir) == self.files, "a rolled-back restore changed nothing"
        else:
            assert outcome == "pending", outcome
            self.resume()  # the next open finishes it
            self.active = target

    # ------------------------------------------------------------------ checks

    @invariant()
    def disk_matches_the_model(self) -> None:
        assert _disk(self.dir) == self.files
        assert self.s.time_machine.active_task_id == self.active

    @invariant()
    def payload_has_only_the_active_chain(self) -> None:
        users = [m["content"] for m in self.s.context() if m["role"] == "user"]
        assert users == [self.summary[t] for t in self.chain()]


TestTimeMachineModel = TimeMachineModel.TestCase
TestTimeMachineModel.settings = settings(
    max_examples=scaled(40), stateful_step_count=25, deadline=None
)

pytestmark = pytest.mark.filterwarnings("ignore")
