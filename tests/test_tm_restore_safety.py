"""A restore never loses a file the user had, and either completes or changes nothing.

Two classes of defect, each tested as a class:

* **Unknown before-state.** A file the time machine could not read when it
  first saw it (permission denied, hidden in an unreadable directory), or
  that changed while it was read (another process appending), or that
  vanished between its stat and its read, must never be deleted or
  overwritten by an undo or a switch: it is left alone and reported in the
  :class:`RestoreResult` and on the logger. Permissions are real: the
  scenarios run in a forked child that drops to an unprivileged uid (we run
  as root, which ignores them); the busy file is appended by a real writer
  process during ``guard()``; a stateful machine injects every kind of
  unknown read at random and checks a model of what the user had.
* **All or nothing.** A target that cannot be restored (a tracked file now a
  directory, a directory now a file, a read-only directory) is found before
  anything changes; a failure half-way (an injected write error) is rolled
  back, or left for the next open to finish or roll back, and the error's
  message and ``outcome`` say which.
"""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from profiles import scaled

import agentmem
import agentmem.time_machine._capture as capture_module
import agentmem.time_machine._machine as machine_module
import agentmem.time_machine._restore as restore_module
from agentmem.errors import RestoreError
from agentmem.time_machine import RestoreResult, SkippedFile, TimeMachine

NOBODY = 65534


def _tm(work: Path, store: Path) -> TimeMachine:
    return TimeMachine(work, "s", store, memory_root=store)


def _tree(top: Path) -> dict[str, bytes | str]:
    """Every file (content) and directory (``"<dir>"``) under ``top``, the store excluded."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = [d for d in dirnames if d not in (".agentmem", "store")]
        here = Path(dirpath)
        for d in dirnames:
            out[(here / d).relative_to(top).as_posix()] = "<dir>"
        for name in filenames:
            out[(here / name).relative_to(top).as_posix()] = (here / name).read_bytes()
    return out


# ---------------------------------------------------------------------------- unprivileged


def _as_nobody(work: Path, scenario: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
    """Run ``scenario(work)`` in a forked child that dropped to uid/gid 65534."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        code = 0
        try:
            os.close(read)
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
            out: dict[str, Any] = {"ok": scenario(work)}
        except BaseException:
            out = {"error": traceback.format_exc()}
            code = 1
        with os.fdopen(write, "w") as pipe:
            pipe.write(json.dumps(out, default=repr))
        os._exit(code)
    os.close(write)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    os.waitpid(pid, 0)
    data = json.loads(text)
    if "error" in data:
        pytest.fail(f"the unprivileged scenario failed:\n{data['error']}")
    return dict(data["ok"])


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A working directory uid 65534 owns (pytest's tmp_path is private to root)."""
    top = Path(tempfile.mkdtemp(prefix="agentmem-tm-nobody-"))
    work = top / "work"
    work.mkdir()
    if os.geteuid() == 0:
        os.chown(top, NOBODY, NOBODY)
        os.chown(work, NOBODY, NOBODY)
    try:
        yield work
    finally:
        for dirpath, dirnames, _ in os.walk(top):
            for d in dirnames:
                os.chmod(Path(dirpath) / d, 0o700)
        shutil.rmtree(top, ignore_errors=True)


def _skip_unless_permissions_bite() -> None:
    if os.geteuid() == 0 and not hasattr(os, "fork"):
        pytest.skip("needs fork to drop privileges")


def _unreadable_file_scenario(work: Path) -> dict[str, Any]:
    mem = agentmem.Memory(root=".agentmem", working_dir=work)
    with mem.session(session_id="u") as s:
        s.start_task("build")
        with s.time_machine.guard():  # first guard: indexes secret.txt, which it cannot read
            (work / "out.txt").write_text("built")
        s.start_task("rename")
        with s.time_machine.guard():
            os.rename(work / "keys.txt", work / "keys.moved")
        second = s.time_machine.undo_last_task()
        s.time_machine.undo_last_task()
        return {
            "files": sorted(p.name for p in work.iterdir() if p.name != ".agentmem"),
            "second": repr(second),
            "active": s.time_machine.active_task_id,
        }


def test_undo_never_deletes_a_file_it_could_not_read(shared_dir: Path) -> None:
    _skip_unless_permissions_bite()
    work = shared_dir
    for name in ("secret.txt", "keys.txt"):
        (work / name).write_text(f"the user's {name}")
        os.chmod(work / name, 0o600)  # root's, unreadable to uid 65534
    if os.geteuid() != 0:
        pytest.skip("needs root to own a file the test user cannot read")
    out = _as_nobody(work, _unreadable_file_scenario)
    assert (work / "secret.txt").read_text() == "the user's secret.txt"
    # The rename cannot be undone (keys.txt's content was never read), so both
    # names are left as they are, and the restore says so.
    assert (work / "keys.moved").read_text() == "the user's keys.txt"
    assert out["files"] == ["keys.moved", "secret.txt"], "what the task created is undone"
    assert out["active"] is None
    assert out["second"] == repr(
        RestoreResult(
            task_id=1,
            skipped=(
                SkippedFile(
                    "keys.moved",
                    "what it holds now is not known: "
                    "it could not be read when the time machine first saw it",
                ),
                SkippedFile(
                    "keys.txt",
                    "what it held then is not known: "
                    "it could not be read when the time machine first saw it",
                ),
            ),
        )
    )


def _hidden_directory_scenario(work: Path) -> dict[str, Any]:
    tm = _tm(work, work / "store")
    tm.start_new_task()
    with tm.guard():  # the walk cannot list locked/: it is remembered as unseen
        os.chmod(work / "locked", 0o755)
        with open(work / "locked/data.txt", "a") as out:
            out.write(", and the command's line")
        (work / "new.txt").write_text("made by the command")
    result = tm.undo_last_task()
    return {
        "data": (work / "locked/data.txt").read_text(),
        "new_exists": (work / "new.txt").exists(),
        "skipped": [f.path for f in getattr(result, "skipped", ())],
    }


def test_undo_never_deletes_files_of_a_directory_it_could_not_list(shared_dir: Path) -> None:
    _skip_unless_permissions_bite()
    work = shared_dir
    (work / "locked").mkdir()
    (work / "locked/data.txt").write_text("the user's data")
    if os.geteuid() == 0:
        for p in (work / "locked", work / "locked/data.txt"):
            os.chown(p, NOBODY, NOBODY)
    os.chmod(work / "locked", 0)
    out = _as_nobody(work, _hidden_directory_scenario)
    assert out["data"] == "the user's data, and the command's line", "never deleted"
    assert out["skipped"] == ["locked/data.txt"]
    assert not out["new_exists"]


def _read_only_directory_scenario(work: Path) -> dict[str, Any]:
    tm = _tm(work, work / "store")
    tm.start_new_task()
    for rel in ("a/x.txt", "ro/f.txt"):
        tm.record_file_before_change(rel)
        (work / rel).write_text(f"task one {rel}")
    tm.start_new_task()
    os.chmod(work / "ro", 0o555)  # the user makes ro/ read-only
    before = _tree(work)
    outcome = message = ""
    try:
        tm.undo_last_task()
        tm.undo_last_task()
    except RestoreError as exc:
        outcome, message = getattr(exc, "outcome", "(none)"), str(exc)
    unchanged = _tree(work) == before
    reopened = _tm(work, work / "store")
    return {
        "outcome": outcome,
        "message": message,
        "unchanged": unchanged,
        "active": tm.active_task_id,
        "reopened_active": reopened.active_task_id,
        "reopened_unchanged": _tree(work) == before,
        "problems": reopened.problems,
    }


def test_a_read_only_directory_stops_the_restore_before_any_change(shared_dir: Path) -> None:
    _skip_unless_permissions_bite()
    work = shared_dir
    for rel in ("a/x.txt", "ro/f.txt"):
        (work / rel).parent.mkdir()
        (work / rel).write_text(f"initial {rel}")
        if os.geteuid() == 0:
            os.chown(work / rel, NOBODY, NOBODY)
            os.chown((work / rel).parent, NOBODY, NOBODY)
    out = _as_nobody(work, _read_only_directory_scenario)
    assert out["unchanged"], "a/x.txt must not be restored while ro/f.txt cannot be"
    assert out["reopened_unchanged"] and out["problems"] == []
    assert out["outcome"] == "unchanged"
    assert "nothing was changed" in out["message"] and "ro is not writable" in out["message"]
    assert out["active"] == out["reopened_active"] == 1


# ---------------------------------------------------------------------------- busy files

WRITER = """
import sys, time
from pathlib import Path
log, stop = Path(sys.argv[1]), Path(sys.argv[2])
with open(log, "a", buffering=1) as out:
    print("started", flush=True)
    while not stop.exists():
        out.write("a line the service logged\\n" * 20)
        time.sleep(0.0005)
"""


def test_undo_never_deletes_a_file_another_process_appends_to(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    log = work / "service.log"
    log.write_bytes(b"the first line\n" * 200_000)  # ~3 MB: reading it takes a while
    stop = tmp_path / "stop"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(log), str(stop)], stdout=subprocess.PIPE
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline() == b"started\n"
        mem = agentmem.Memory(root=".agentmem", working_dir=work)
        with mem.session(session_id="busy") as s:
            s.start_task("build")
            with s.time_machine.guard():
                (work / "out.txt").write_text("built")
            s.undo()
            stop.touch()
            writer.communicate(timeout=30)
            size = log.stat().st_size
            s.switch_to_task(1)
            s.undo()
        assert log.stat().st_size == size, "neither the undo nor the redo rewrote the log"
        assert log.read_bytes().startswith(b"the first line\n" * 200_000)
        assert not (work / "out.txt").exists()
    finally:
        stop.touch()
        writer.communicate(timeout=30)


class _Faults:
    """Stands in for ``open`` inside the time machine: some paths misbehave when read."""

    def __init__(self, modes: dict[str, str]) -> None:
        self.modes = modes

    def __call__(self, file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        kind = self.modes.get(Path(file).name)
        if kind == "unreadable":
            raise PermissionError(13, "Permission denied", str(file))
        if kind == "vanishing":
            raise FileNotFoundError(2, "No such file or directory", str(file))
        handle = open(file, mode, *args, **kwargs)  # noqa: SIM115 - returned to the caller
        if kind != "growing":
            return handle
        data = handle.read()
        handle.close()
        with open(file, "ab") as out:  # another process appends while we read
            out.write(b"one more line\n")
        return io.BytesIO(data)


@pytest.mark.parametrize("kind", ["unreadable", "vanishing", "growing"])
def test_a_file_whose_read_failed_is_never_deleted_nor_overwritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "user.dat").write_bytes(b"the user's own data\n")
    tm = _tm(work, tmp_path / "store")
    monkeypatch.setattr(capture_module, "open", _Faults({"user.dat": kind}), raising=False)
    tm.start_new_task()
    with tm.guard():  # first guard: the index learns user.dat, unreadably
        (work / "made.txt").write_text("new")
    tm.start_new_task()
    with tm.guard():  # the command rewrites the file whose earlier content is unknown
        (work / "user.dat").write_bytes(b"rewritten by the command\n")
    kept = (work / "user.dat").read_bytes()
    with caplog.at_level(logging.WARNING, logger="agentmem.time_machine"):
        undo = tm.undo_last_task()
        assert (work / "user.dat").read_bytes().startswith(kept), "never overwritten"
        tm.undo_last_task()
    assert (work / "user.dat").is_file(), "never deleted"
    assert (work / "user.dat").read_bytes().startswith(kept), "never overwritten"
    assert not (work / "made.txt").exists()
    assert isinstance(undo, RestoreResult)
    assert [f.path for f in undo.skipped] == ["user.dat"]
    assert "user.dat" in caplog.text and "left alone" in caplog.text


def test_a_file_that_changes_while_recorded_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "app.log").write_bytes(b"line\n")
    tm = _tm(work, tmp_path / "store")
    monkeypatch.setattr(capture_module, "open", _Faults({"app.log": "growing"}), raising=False)
    tm.start_new_task()
    tm.record_file_before_change("app.log")  # a tool is about to edit it; a writer appends
    (work / "app.log").write_bytes(b"edited\n")
    tm.start_new_task()
    monkeypatch.undo()
    result = tm.switch_to_task(None)
    assert (work / "app.log").read_bytes().startswith(b"edited\n")
    assert [f.path for f in result.skipped] == ["app.log"]
    assert "another process" in result.skipped[0].reason


# ---------------------------------------------------------------------------- all or nothing


def _two_task_tree(tmp_path: Path, paths: list[str]) -> tuple[TimeMachine, Path]:
    """Task 1 writes ``paths``; task 2 is started; the disk holds task 1's end state."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    for rel in paths:
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(f"initial {rel}")
    tm = _tm(work, tmp_path / "store")
    tm.start_new_task()
    for rel in paths:
        tm.record_file_before_change(rel)
        (work / rel).write_text(f"task one {rel}")
    tm.start_new_task()
    return tm, work


def _initial(paths: list[str]) -> dict[str, bytes | str]:
    out: dict[str, bytes | str] = {}
    for rel in paths:
        out[rel] = f"initial {rel}".encode()
        if "/" in rel:
            out[rel.rpartition("/")[0]] = "<dir>"
    return out


def test_a_file_replaced_by_a_directory_stops_the_restore_before_any_change(
    tmp_path: Path,
) -> None:
    tm, work = _two_task_tree(tmp_path, ["a.txt", "b.txt", "c.txt"])
    (work / "b.txt").unlink()
    (work / "b.txt").mkdir()
    (work / "b.txt/mine").write_text("the user's")
    before = _tree(work)
    with pytest.raises(RestoreError) as info:
        tm.switch_to_task(None)
    assert _tree(work) == before
    assert "b.txt: a directory stands where the file goes (it holds b.txt/mine)" in str(info.value)
    assert info.value.outcome == "unchanged" and "nothing was changed" in str(info.value)
    assert tm.active_task_id == 2
    assert _tm(work, tmp_path / "store").problems == []
    assert _tree(work) == before


def test_a_directory_replaced_by_a_file_stops_the_restore_before_any_change(
    tmp_path: Path,
) -> None:
    tm, work = _two_task_tree(tmp_path, ["a/x.txt", "d/y.txt"])
    shutil.rmtree(work / "d")
    (work / "d").write_text("a file now")
    before = _tree(work)
    with pytest.raises(RestoreError) as info:
        tm.switch_to_task(None)
    assert _tree(work) == before
    assert "d is a file where a directory must be" in str(info.value)
    assert info.value.outcome == "unchanged"


def test_an_empty_directory_where_a_file_goes_is_replaced(tmp_path: Path) -> None:
    tm, work = _two_task_tree(tmp_path, ["a.txt", "b.txt"])
    (work / "b.txt").unlink()
    (work / "b.txt/sub").mkdir(parents=True)  # holds nothing: removing it loses nothing
    result = tm.switch_to_task(None)
    assert _tree(work) == _initial(["a.txt", "b.txt"])
    assert sorted(result.restored) == ["a.txt", "b.txt"]


class _FailingWrites:
    """Stands in for the restore's write step: the ``fail_at``-th write (1-based) and,
    unless ``once``, every later one raise OSError."""

    def __init__(self, fail_at: int, once: bool) -> None:
        self.real = restore_module.atomic_write_bytes
        self.count = 0
        self.fail_at = fail_at
        self.once = once

    def __call__(self, path: Any, data: bytes) -> None:
        self.count += 1
        if self.count == self.fail_at or (not self.once and self.count > self.fail_at):
            raise OSError(28, "No space left on device", str(path))
        self.real(path, data)


PATHS = [f"f{i}.txt" for i in range(6)] + ["d/g.txt", "d/e/h.txt"]


@pytest.mark.parametrize("fail_at", [1, 3, 8])
def test_a_failure_half_way_is_rolled_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_at: int
) -> None:
    tm, work = _two_task_tree(tmp_path, PATHS)
    (work / "made").mkdir()
    tm.record_file_before_change("made/new.txt")  # task 2 creates a file in a new directory
    (work / "made/new.txt").write_text("new")
    before = _tree(work)
    monkeypatch.setattr(restore_module, "atomic_write_bytes", _FailingWrites(fail_at, once=True))
    with pytest.raises(RestoreError) as info:
        tm.switch_to_task(None)
    assert _tree(work) == before, "wholly the old state"
    assert info.value.outcome == "rolled back"
    assert "put back: nothing was changed" in str(info.value)
    assert tm.active_task_id == 2
    assert not (tmp_path / "store/sessions/s.restore.json").exists()
    monkeypatch.undo()
    assert _tm(work, tmp_path / "store").active_task_id == 2
    assert _tree(work) == before


@pytest.mark.parametrize("fail_at", [1, 4])
def test_a_failure_that_cannot_be_rolled_back_is_finished_on_the_next_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_at: int
) -> None:
    tm, work = _two_task_tree(tmp_path, PATHS)
    monkeypatch.setattr(restore_module, "atomic_write_bytes", _FailingWrites(fail_at, once=False))
    with pytest.raises(RestoreError) as info:
        tm.switch_to_task(None)
    assert info.value.outcome == "pending"
    assert "until the session is opened again" in str(info.value)
    assert (tmp_path / "store/sessions/s.restore.json").exists()
    monkeypatch.undo()
    reopened = _tm(work, tmp_path / "store")
    assert reopened.problems == ["completed an interrupted restore to task 0"]
    assert reopened.active_task_id is None
    assert _tree(work) == _initial(PATHS), "wholly the new state"
    assert not (tmp_path / "store/sessions/s.restore.json").exists()


def test_a_pending_restore_that_cannot_be_finished_is_rolled_back_on_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tm, work = _two_task_tree(tmp_path, PATHS)
    before = _tree(work)
    monkeypatch.setattr(restore_module, "atomic_write_bytes", _FailingWrites(3, once=False))
    with pytest.raises(RestoreError):
        tm.switch_to_task(None)
    monkeypatch.undo()
    # Before the next open, something takes the place of a file not yet restored.
    (work / "f5.txt").unlink()
    (work / "f5.txt").mkdir()
    (work / "f5.txt/mine").write_text("the user's")
    reopened = _tm(work, tmp_path / "store")
    assert reopened.active_task_id == 2
    assert len(reopened.problems) == 1 and "rolled back" in reopened.problems[0]
    expected = dict(before)
    expected["f5.txt"] = "<dir>"
    expected["f5.txt/mine"] = b"the user's"
    assert _tree(work) == expected, "wholly the old state, the user's directory kept"


def test_a_pending_restore_in_memory_is_finished_by_the_next_restore(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    tm = TimeMachine(work, "s", None)
    for rel in PATHS:
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(f"initial {rel}")
    tm.start_new_task()
    with tm.guard():
        for rel in PATHS:
            (work / rel).write_text(f"task one {rel}")
    tm.start_new_task()
    monkeypatch.setattr(restore_module, "atomic_write_bytes", _FailingWrites(2, once=False))
    with pytest.raises(RestoreError) as info:
        tm.switch_to_task(None)
    monkeypatch.undo()
    tm.switch_to_task(1)
    assert _tree(work) == {
        **{rel: f"task one {rel}".encode() for rel in PATHS},
        "d": "<dir>",
        "d/e": "<dir>",
    }
    assert tm.problems == ["completed an interrupted restore to task 0"]
    assert info.value.outcome == "pending" and "the next undo/switch" in str(info.value)


# ---------------------------------------------------------------------------- the class, stateful

USER = ["u_plain.txt", "u_unreadable.txt", "u_vanishing.txt", "u_growing.log"]
AGENT = ["a.txt", "sub/b.txt"]
CONTENT = st.sampled_from([b"", b"x", b"hello\n", b"y" * 100])


class UnknownBeforeState(RuleBasedStateMachine):
    """Undo, redo and branch switches against a model, while some files read badly.

    The model knows only what a user would: every file's content after each
    task (agent files and ``u_plain.txt`` change only through the agent's
    guarded commands and tools, so each task's end state is a dict). The
    three "bad" user files fail every read by the time machine (permission
    denied, vanished between stat and read, another process appending on
    each read): their before-state is never known, so after any restore each
    must still exist and hold at least what it held before the restore.
    """

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="agentmem-tm-unknown-"))
        self.store = Path(tempfile.mkdtemp(prefix="agentmem-tm-store-"))
        self.faults = _Faults(
            {
                "u_unreadable.txt": "unreadable",
                "u_vanishing.txt": "vanishing",
                "u_growing.log": "growing",
            }
        )
        self.real_open = getattr(capture_module, "open", None)
        capture_module.open = self.faults  # type: ignore[attr-defined]
        for rel in USER:
            (self.dir / rel).write_bytes(f"the user's {rel}\n".encode())
        self.tm = _tm(self.dir, self.store)
        self.states: dict[int | None, dict[str, bytes]] = {
            None: {"u_plain.txt": b"the user's u_plain.txt\n"}
        }
        self.parent: dict[int, int | None] = {}
        self.active: int | None = None

    def teardown(self) -> None:
        del capture_module.open  # type: ignore[attr-defined]
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.rmtree(self.store, ignore_errors=True)

    @initialize()
    def first_guard(self) -> None:
        self.start_task()
        self.shell(ops=[("a.txt", b"first")])

    @rule()
    def start_task(self) -> None:
        task = self.tm.start_new_task()
        self.parent[task] = self.active
        self.states[task] = dict(self.states[self.active])
        self.active = task

    @rule(
        ops=st.lists(
            st.tuples(st.sampled_from([*AGENT, "u_plain.txt"]), st.none() | CONTENT),
            min_size=1,
            max_size=3,
        )
    )
    def shell(self, ops: list[tuple[str, bytes | None]]) -> None:
        files = self.states[self.active]
        with self.tm.guard():
            for rel, data in ops:
                full = self.dir / rel
                if data is None:
                    full.unlink(missing_ok=True)
                    files.pop(rel, None)
                else:
                    full.parent.mkdir(exist_ok=True)
                    full.write_bytes(data)
                    files[rel] = data

    @rule(rel=st.sampled_from(USER[1:]), data=CONTENT)
    def shell_touches_a_bad_file(self, rel: str, data: bytes) -> None:
        with self.tm.guard(), open(self.dir / rel, "ab") as out:
            out.write(data)

    @rule(rel=st.sampled_from(AGENT), data=CONTENT)
    def tool_write(self, rel: str, data: bytes) -> None:
        self.tm.record_file_before_change(rel)
        (self.dir / rel).parent.mkdir(exist_ok=True)
        (self.dir / rel).write_bytes(data)
        self.states[self.active][rel] = data

    def _restore(self, go: Callable[[], object], target: int | None) -> None:
        bad = {rel: (self.dir / rel).read_bytes() for rel in USER[1:]}
        go()
        self.active = target
        for rel, held in bad.items():
            assert (self.dir / rel).is_file(), f"{rel} was deleted"
            assert (self.dir / rel).read_bytes().startswith(held), f"{rel} was overwritten"

    @rule()
    def undo(self) -> None:
        if self.active is not None:
            self._restore(self.tm.undo_last_task, self.parent[self.active])

    @precondition(lambda self: self.parent)
    @rule(data=st.data())
    def switch(self, data: st.DataObject) -> None:
        target = data.draw(st.sampled_from([None, *sorted(self.parent)]))
        self._restore(lambda: self.tm.switch_to_task(target), target)

    @rule()
    def reopen(self) -> None:
        self.tm = _tm(self.dir, self.store)

    @invariant()
    def the_known_files_follow_the_model(self) -> None:
        on_disk = {
            rel: (self.dir / rel).read_bytes()
            for rel in [*AGENT, "u_plain.txt"]
            if (self.dir / rel).is_file()
        }
        assert on_disk == self.states[self.active]
        assert self.tm.active_task_id == self.active


TestUnknownBeforeState = UnknownBeforeState.TestCase
TestUnknownBeforeState.settings = settings(
    max_examples=scaled(25), stateful_step_count=20, deadline=None
)


def test_restore_work_is_silent_when_nothing_is_unknown(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tm, _ = _two_task_tree(tmp_path, ["a.txt"])
    with caplog.at_level(logging.WARNING, logger="agentmem.time_machine"):
        result = tm.switch_to_task(None)
    assert result == RestoreResult(task_id=None, restored=("a.txt",))
    assert caplog.text == ""


def test_a_file_changed_outside_the_time_machine_is_never_overwritten(tmp_path: Path) -> None:
    tm, work = _two_task_tree(tmp_path, ["a.txt", "b.txt"])
    (work / "b.txt").write_text("the user's edit")  # not through a task
    result = tm.switch_to_task(None)
    assert (work / "b.txt").read_text() == "the user's edit"
    assert (work / "a.txt").read_text() == "initial a.txt"
    assert [f.path for f in result.skipped] == ["b.txt"]
    assert "changed since the time machine recorded it" in result.skipped[0].reason
    # Redo leaves it alone too: the disk never held task one's b.txt again.
    tm.switch_to_task(1)
    assert (work / "b.txt").read_text() == "the user's edit"
    assert (work / "a.txt").read_text() == "task one a.txt"
    # A task that does rewrite it is undone back to what it found, never to a stale value.
    tm.start_new_task()
    with tm.guard():
        (work / "b.txt").write_text("the agent's")
    tm.undo_last_task()
    assert (work / "b.txt").read_text() == "the user's edit"
    tm.switch_to_task(None)
    assert (work / "b.txt").read_text() == "the user's edit"


def test_errors_keep_only_the_newest(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "dir").mkdir(parents=True)
    tm = _tm(work, tmp_path / "store")
    tm.start_new_task()
    for _ in range(machine_module.MAX_ERRORS + 5):
        tm.record_file_before_change("dir")  # a directory: noted, each time
    assert len(tm.errors) == machine_module.MAX_ERRORS
    assert all("dir" in e for e in tm.errors)


def test_a_file_that_vanishes_between_the_walk_and_its_read_is_never_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("v1")
    tm = _tm(work, tmp_path / "store")
    real_walk = capture_module.walk
    walks: list[int] = []

    def walk_then_vanish(*args: Any, **kwargs: Any) -> Any:
        out = real_walk(*args, **kwargs)
        if not walks:  # the user's editor saves: unlink, then write (raced with the index)
            (work / "notes.txt").unlink()
        walks.append(1)
        return out

    monkeypatch.setattr(capture_module, "walk", walk_then_vanish)
    tm.start_new_task()
    with tm.guard():
        (work / "notes.txt").write_text("v2, saved by the user's editor")
        (work / "made.txt").write_text("made by the command")
    result = tm.undo_last_task()
    assert (work / "notes.txt").read_text() == "v2, saved by the user's editor"
    assert not (work / "made.txt").exists()
    assert result is not None and [f.path for f in result.skipped] == ["notes.txt"]


def test_a_symlink_put_at_a_tracked_path_is_neither_followed_nor_replaced(tmp_path: Path) -> None:
    tm, work = _two_task_tree(tmp_path, ["a.txt", "b.txt"])
    (work / "target.txt").write_text("the user's")
    (work / "b.txt").unlink()
    (work / "b.txt").symlink_to(work / "target.txt")
    result = tm.switch_to_task(None)
    assert (work / "b.txt").is_symlink()
    assert (work / "target.txt").read_text() == "the user's"
    assert (work / "a.txt").read_text() == "initial a.txt"
    assert [(f.path, "symbolic link" in f.reason) for f in result.skipped] == [("b.txt", True)]


def test_files_the_user_changed_before_a_command_are_not_the_commands(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "draft.md").write_text("v1")
    tm = _tm(work, tmp_path / "store")
    tm.start_new_task()
    with tm.guard():  # indexes the tree
        (work / "a.txt").write_text("a")
    tm.start_new_task()
    # Between two commands the user writes a new file and edits another, outside any task.
    (work / "notes.md").write_text("the user's notes")
    (work / "draft.md").write_text("v2, the user's edit")
    time.sleep(3 * capture_module.CTIME_MARGIN_NS / 1e9)  # older than the next command
    with tm.guard():
        (work / "b.txt").write_text("b")
    result = tm.undo_last_task()
    assert (work / "notes.md").read_text() == "the user's notes", "never deleted"
    assert (work / "draft.md").read_text() == "v2, the user's edit", "never reverted"
    assert not (work / "b.txt").exists()
    assert result is not None and result.removed == ("b.txt",)


def test_a_pending_restore_is_not_finished_once_another_task_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tm, _ = _two_task_tree(tmp_path, PATHS)
    monkeypatch.setattr(restore_module, "atomic_write_bytes", _FailingWrites(2, once=False))
    with pytest.raises(RestoreError):
        tm.switch_to_task(None)
    monkeypatch.undo()
    third = tm.start_new_task()  # the host carried on regardless
    tm.undo_last_task()
    assert tm.active_task_id == 2, "the undo of task 3, not the stale restore's target"
    assert any("became active before it finished" in p for p in tm.problems)
    assert third in tm.get_child_tasks(2)


def test_the_session_keeps_and_reports_what_a_restore_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "user.dat").write_bytes(b"the user's own data\n")
    events: list[tuple[str, dict[str, Any]]] = []

    class Recorder:
        def report(self, event: str, data: dict[str, Any]) -> None:
            events.append((event, data))

    mem = agentmem.Memory(root=tmp_path / "root", working_dir=work, reporter=Recorder())
    monkeypatch.setattr(capture_module, "open", _Faults({"user.dat": "unreadable"}), raising=False)
    with mem, mem.session() as s:
        assert s.last_restore is None
        s.start_task("one")
        with s.time_machine.guard():
            (work / "made.txt").write_text("new")
        s.start_task("two")
        with s.time_machine.guard():
            (work / "user.dat").write_bytes(b"rewritten by the command\n")
        assert s.undo() == 1
        assert s.last_restore is not None and s.last_restore.task_id == 1
        assert [f.path for f in s.last_restore.skipped] == ["user.dat"]
        finished = [d for e, d in events if e == "restore.finished"]
        assert finished[-1]["skipped"] and finished[-1]["skipped"][0].startswith("user.dat: ")
        assert s.switch_to_task(2) == 2
        assert s.last_restore.task_id == 2
    assert (work / "user.dat").read_bytes() == b"rewritten by the command\n"
