"""TimeMachine: storage, safety, guard() details, retention, and kill -9 of a restore."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import agentmem
from agentmem.errors import FormatVersionError, InvalidArgumentError, UnsafePathError
from agentmem.time_machine import RestoreError, TimeMachine
from agentmem.time_machine._snapshots import IgnoreRules, walk

CHILD = Path(__file__).with_name("_tm_kill9_child.py")


def _tm(tmp_path: Path, **kw: object) -> TimeMachine:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return TimeMachine(work, "s", tmp_path / "store", memory_root=tmp_path / "store", **kw)  # type: ignore[arg-type]


def test_binary_empty_exec_and_deep_dirs_round_trip(tmp_path: Path) -> None:
    tm = _tm(tmp_path)
    work = tm.working_dir
    (work / "bin.dat").write_bytes(bytes(range(256)))
    (work / "run.sh").write_bytes(b"#!/bin/sh\n")
    os.chmod(work / "run.sh", 0o755)
    t1 = tm.start_new_task("one")
    for name in ("bin.dat", "run.sh", "a/b/c/d/new.txt", "empty"):
        tm.record_file_before_change(work / name)
    (work / "bin.dat").write_bytes(b"")
    os.chmod(work / "run.sh", 0o644)
    (work / "a/b/c/d").mkdir(parents=True)
    (work / "a/b/c/d/new.txt").write_text("deep")
    (work / "empty").write_bytes(b"")
    tm.start_new_task("two")
    tm.undo_last_task()  # back to the end of task one: nothing to change
    assert (work / "a/b/c/d/new.txt").read_text() == "deep"
    tm.undo_last_task()  # the initial state
    assert tm.active_task_id is None
    assert (work / "bin.dat").read_bytes() == bytes(range(256))
    assert os.stat(work / "run.sh").st_mode & 0o111
    assert not (work / "a").exists(), "directories the task created are removed"
    assert not (work / "empty").exists()
    tm.switch_to_task(t1)
    assert (work / "bin.dat").read_bytes() == b""
    assert not os.stat(work / "run.sh").st_mode & 0o111
    assert (work / "a/b/c/d/new.txt").read_text() == "deep"
    assert (work / "empty").read_bytes() == b""


def test_unchanged_content_is_stored_once(tmp_path: Path) -> None:
    tm = _tm(tmp_path)
    work = tm.working_dir
    for i in range(5):
        (work / f"f{i}.txt").write_text("same content " * 100)
    tm.start_new_task()
    for i in range(5):
        tm.record_file_before_change(work / f"f{i}.txt")
    blobs = list(tm.blobs.stored())
    assert len(blobs) == 1


def test_paths_outside_and_symlinks_out_are_refused(tmp_path: Path) -> None:
    tm = _tm(tmp_path)
    work = tm.working_dir
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("keep")
    os.symlink(outside, work / "link")
    os.symlink(outside / "secret", work / "file-link")
    tm.start_new_task()
    for bad in ("../outside/secret", outside / "secret", "link/secret", "file-link", ".git/x"):
        with pytest.raises(UnsafePathError):
            tm.record_file_before_change(bad)
    with pytest.raises(UnsafePathError):
        tm.record_file_before_change(tmp_path / "store" / "x")


def test_restore_never_writes_through_a_symlink_out(tmp_path: Path) -> None:
    tm = _tm(tmp_path)
    work = tm.working_dir
    outside = tmp_path / "outside"
    outside.mkdir()
    (work / "d").mkdir()
    tm.start_new_task()
    tm.record_file_before_change(work / "d/f.txt")
    (work / "d/f.txt").write_text("v1")
    tm.start_new_task()
    tm.record_file_before_change(work / "d/f.txt")
    (work / "d/f.txt").write_text("v2")
    tm.undo_last_task()
    tm.undo_last_task()
    # Someone replaces the directory by a symlink leading out; a redo must not follow it.
    os.rmdir(work / "d")
    os.symlink(outside, work / "d")
    with pytest.raises(RestoreError):
        tm.switch_to_task(2)
    assert list(outside.iterdir()) == []


def test_a_damaged_blob_fails_the_restore_cleanly(tmp_path: Path) -> None:
    tm = _tm(tmp_path)
    work = tm.working_dir
    (work / "f").write_text("original")
    tm.start_new_task()
    tm.record_file_before_change("f")
    (work / "f").write_text("changed")
    tm.start_new_task()
    for _, path in tm.blobs.stored():
        path.write_bytes(b"garbage")
    with pytest.raises(RestoreError, match="cannot restore"):
        tm.switch_to_task(None)
    assert (work / "f").read_text() == "changed"
    assert tm.active_task_id == 2
    assert not (tmp_path / "store/sessions/s.restore.json").exists()


def test_capture_errors_are_reported_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tm = _tm(tmp_path)
    work = tm.working_dir
    (work / "dir").mkdir()
    tm.start_new_task()
    with caplog.at_level(logging.WARNING, logger="agentmem.time_machine"):
        tm.record_file_before_change(work / "dir")  # a directory: cannot be snapshotted
    assert tm.errors and "dir" in tm.errors[0]
    assert "dir" in caplog.text


def test_too_large_files_are_recorded_and_reported(tmp_path: Path) -> None:
    tm = _tm(tmp_path, max_file_bytes=10)
    work = tm.working_dir
    (work / "big").write_bytes(b"x" * 100)
    tm.start_new_task()
    tm.record_file_before_change("big")
    (work / "big").write_bytes(b"y" * 100)
    tm.start_new_task()
    assert tm.too_large == {"big": 100}
    tm.switch_to_task(None)
    assert (work / "big").read_bytes() == b"y" * 100  # left alone, and said so
    assert any("too large" in e for e in tm.errors)


def test_guard_sees_a_same_size_rewrite_within_the_mtime_tick(tmp_path: Path) -> None:
    tm = _tm(tmp_path)
    work = tm.working_dir
    (work / "f").write_text("aaaa")
    tm.start_new_task()
    with tm.guard():
        pass  # indexes the tree
    st = os.stat(work / "f")
    with tm.guard():
        (work / "f").write_text("bbbb")
        os.utime(work / "f", ns=(st.st_atime_ns, st.st_mtime_ns))  # same size, same mtime
    tm.start_new_task()
    tm.switch_to_task(None)
    assert (work / "f").read_text() == "aaaa"


def test_guard_honours_gitignore_and_skips_git_and_the_memory_root(tmp_path: Path) -> None:
    tm = _tm(tmp_path)
    work = tm.working_dir
    (work / ".gitignore").write_text("*.log\nbuild/\n/top.txt\n!keep.log\n")
    (work / ".git").mkdir()
    tm.start_new_task()
    with tm.guard():
        for name in ("x.log", "keep.log", "build/out.o", "top.txt", "sub/top.txt", ".git/HEAD"):
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            (work / name).write_text(name)
    tm.start_new_task()
    tm.switch_to_task(None)
    left = sorted(p.relative_to(work).as_posix() for p in work.rglob("*") if p.is_file())
    assert left == [".git/HEAD", ".gitignore", "build/out.o", "top.txt", "x.log"]


def test_ignore_rules() -> None:
    rules = IgnoreRules().extended("", "*.pyc\n/dist\ndocs/**/*.tmp\nlogs/\n!important.pyc\n")
    rules = rules.extended("sub", "local.txt\n")
    assert rules.ignored("a/b.pyc", False)
    assert not rules.ignored("a/important.pyc", False)
    assert rules.ignored("dist", True) and not rules.ignored("a/dist", True)
    assert rules.ignored("docs/x/y/z.tmp", False) and not rules.ignored("docs.tmp", False)
    assert rules.ignored("logs", True) and not rules.ignored("logs", False)
    assert rules.ignored("sub/local.txt", False) and not rules.ignored("local.txt", False)


def test_walk_skips_symlinks_git_and_skip_dirs(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git/x").write_text("")
    (tmp_path / "mem").mkdir()
    (tmp_path / "mem/y").write_text("")
    (tmp_path / "a").write_text("")
    os.symlink(tmp_path / "a", tmp_path / "l")
    assert list(walk(tmp_path, [tmp_path / "mem"])) == ["a"]


def test_retention_prunes_old_branches_and_collects_blobs(tmp_path: Path) -> None:
    tm = _tm(tmp_path, max_tasks=3)
    work = tm.working_dir
    for i in range(6):
        tm.start_new_task(f"t{i}")
        tm.record_file_before_change("f")
        (work / "f").write_text(f"version {i}")
    assert len(tm.get_task_history(100)) <= 3
    assert tm.active_task_chain() == [1, 2, 3, 4, 5, 6], "squashed tasks keep their messages"
    tm.undo_last_task()
    assert (work / "f").read_text() == "version 4"
    tm.start_new_task()
    tm.delete_session_snapshots()
    removed = tm.collect_garbage()
    assert removed == 0  # young blobs survive the grace period
    assert not (tmp_path / "store/sessions/s.json").exists()


def test_task_history_and_branches(tmp_path: Path) -> None:
    tm = _tm(tmp_path)
    t1 = tm.start_new_task("first")
    t2 = tm.start_new_task("second")
    tm.undo_last_task()
    t3 = tm.start_new_task("third")
    assert tm.get_child_tasks(t1) == [t2, t3]
    history = {h["task_id"]: h for h in tm.get_task_history()}
    assert history[t1]["status"] == "past" and history[t1]["has_branches"]
    assert history[t2]["status"] == "undone"
    assert history[t3]["status"] == "current"
    assert tm.current_task_id == t3 and tm.active_task_chain() == [t1, t3]
    with pytest.raises(InvalidArgumentError):
        tm.switch_to_task(99)


def test_incognito_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("one")
    mem = agentmem.Memory(root=".agentmem", working_dir=tmp_path, incognito=True)
    with mem.session() as s:
        s.start_task("edit")
        with s.time_machine.guard():
            (tmp_path / "f").write_text("two")
        s.undo()
        assert (tmp_path / "f").read_text() == "one"
    assert not (tmp_path / ".agentmem").exists()


def test_undo_keeps_the_payload_valid(tmp_path: Path) -> None:
    mem = agentmem.Memory(root=".agentmem", working_dir=tmp_path)
    with mem.session() as s:
        s.start_task("one")
        s.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            }
        )
        s.append({"role": "tool", "tool_call_id": "c1", "content": "ok"})
        s.start_task("two")
        s.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c2", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            }
        )
        s.undo()
        payload = s.context()
        assert [m["role"] for m in payload] == ["user", "assistant", "tool"]
        s.start_task("three")
        assert [m.get("content") for m in s.context() if m["role"] == "user"] == ["one", "three"]
        assert s.history.to_api(task_chain=s.time_machine.active_task_chain())[-1]["content"] == (
            "three"
        )


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX SIGKILL")
def test_kill9_during_a_restore_is_completed_on_the_next_open(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), str(work)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line != b"restoring\n":
        proc.kill()
        pytest.fail(f"child did not reach the restore: {proc.communicate(timeout=30)!r}")
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    intent = work / ".agentmem/snapshots/sessions/k.restore.json"
    assert intent.exists()
    plan = json.loads(intent.read_text())["plan"]
    assert len(plan) >= 10
    mem = agentmem.Memory(root=".agentmem", working_dir=work)
    with mem.session(session_id="k") as s:
        assert s.time_machine.active_task_id is None
        assert s.time_machine.problems
    for i in range(40):
        assert (work / f"f{i:02d}.txt").read_text() == f"initial {i}"
    assert not intent.exists()


def test_a_session_resumed_in_a_new_process_can_undo_and_switch(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("v0")
    mem = agentmem.Memory(root=".agentmem", working_dir=tmp_path)
    with mem.session(session_id="p") as s:
        for i in (1, 2):
            s.start_task(f"t{i}")
            with s.time_machine.guard():
                (tmp_path / "f").write_text(f"v{i}")
    mem.close()
    script = (
        "import agentmem, sys\n"
        f"mem = agentmem.Memory(root='.agentmem', working_dir={str(tmp_path)!r})\n"
        "s = mem.session(session_id='p')\n"
        "s.undo(); a = open(sys.argv[1]).read()\n"
        "s.undo(); b = open(sys.argv[1]).read()\n"
        "s.switch_to_task(2); print(a, b, open(sys.argv[1]).read())\n"
        "s.undo(); mem.close()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "f")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.split() == ["v1", "v0", "v2"]
    mem = agentmem.Memory(root=".agentmem", working_dir=tmp_path)
    with mem.session(session_id="p") as s:
        assert s.time_machine.active_task_id == 1
        assert (tmp_path / "f").read_text() == "v1"
        s.switch_to_task(2)
        assert (tmp_path / "f").read_text() == "v2"


def test_tasks_started_on_the_time_machine_keep_facade_ids_unique(tmp_path: Path) -> None:
    mem = agentmem.Memory(root=".agentmem", working_dir=tmp_path)
    with mem.session() as s:
        first = s.start_task("one")
        direct = s.time_machine.start_new_task("direct")
        third = s.start_task("three")
        assert len({first, direct, third}) == 3
        assert s.time_machine.active_task_chain() == [first, direct, third]


def test_guard_never_takes_a_too_large_file_for_a_new_one(tmp_path: Path) -> None:
    tm = _tm(tmp_path, max_file_bytes=10)
    work = tm.working_dir
    (work / "big").write_bytes(b"x" * 100)
    tm.start_new_task()
    with tm.guard():
        (work / "small").write_text("s")
    with tm.guard():
        pass
    tm.start_new_task()
    tm.switch_to_task(None)
    assert (work / "big").read_bytes() == b"x" * 100
    assert not (work / "small").exists()


def test_a_file_and_a_directory_may_swap_places(tmp_path: Path) -> None:
    tm = _tm(tmp_path)
    work = tm.working_dir
    (work / "a").write_text("file")
    tm.start_new_task()
    with tm.guard():
        (work / "a").unlink()
        (work / "a").mkdir()
        (work / "a/inner.txt").write_text("inside")
    tm.start_new_task()
    tm.switch_to_task(None)
    assert (work / "a").read_text() == "file"
    tm.switch_to_task(1)
    assert (work / "a/inner.txt").read_text() == "inside"


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX SIGKILL")
def test_kill9_inside_a_guarded_command_is_recorded_on_the_next_open(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), str(work), "guard"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line != b"inside\n":
        proc.kill()
        pytest.fail(f"child did not reach the command: {proc.communicate(timeout=30)!r}")
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    mem = agentmem.Memory(root=".agentmem", working_dir=work)
    with mem.session(session_id="g") as s:
        assert any("died inside guard" in p for p in s.time_machine.problems)
        s.undo()
        assert (work / "f00.txt").read_text() == "initial 0"
        assert (work / "f01.txt").read_text() == "initial 1"
        assert not (work / "new.txt").exists()
        s.switch_to_task(1)
        assert (work / "f00.txt").read_text() == "changed"
        assert not (work / "f01.txt").exists()


@pytest.mark.parametrize("version", [99, "1", 0])
def test_record_of_a_newer_agentmem_is_left_alone_a_malformed_one_moved_aside(
    tmp_path: Path, version: object
) -> None:
    tm = _tm(tmp_path)
    tm.start_new_task("one")
    record = tmp_path / "store/sessions/s.json"
    doc = json.loads(record.read_text())
    doc["version"] = version
    record.write_text(json.dumps(doc))
    if version == 99:
        with pytest.raises(FormatVersionError) as info:
            _tm(tmp_path)
        assert info.value.found == 99
        assert json.loads(record.read_text())["version"] == 99, "never overwritten"
        return
    reopened = _tm(tmp_path)
    assert reopened.active_task_id is None
    assert not record.exists()
    moved = list(record.parent.glob("s.json.corrupt-*"))
    assert len(moved) == 1 and json.loads(moved[0].read_text())["version"] == version
    assert len(reopened.problems) == 1 and str(moved[0]) in reopened.problems[0]
