"""Nothing is written outside the root (issue 13, A6).

For each file or folder agentmem writes under its root, a symlink planted
there (to a directory or file outside) makes the operation raise
:class:`UnsafePathError`, and the outside target is left exactly as it was.
Paths handed to ``record_file_before_change`` with a NUL byte or an
over-long name raise ``UnsafePathError`` too, never a raw ``ValueError`` or
``OSError``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

import agentmem
from agentmem import UnsafePathError
from agentmem._storage.files import check_inside, make_dirs
from agentmem.ltm import LongTermMemory
from agentmem.notes import KeyValueStore
from agentmem.topics import TopicStore


def _tree(top: Path) -> dict[str, bytes | None]:
    """Every path under ``top`` with its bytes (``None`` for a directory)."""
    found: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames:
            found[os.path.relpath(os.path.join(dirpath, name), top)] = None
        for name in filenames:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as handle:
                found[os.path.relpath(path, top)] = handle.read()
    return found


def _outside(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_bytes(b"outside data\n")
    (outside / "sub").mkdir()
    return outside


def _plant(root: Path, rel: str, outside: Path) -> None:
    """``root/rel`` becomes a symlink: to the outside directory for a folder slot, else to
    the outside file."""
    link = root / rel
    link.parent.mkdir(parents=True, exist_ok=True)
    is_dir = not ("." in Path(rel).name or rel.endswith(("-wal", "-shm")))
    target = outside if is_dir else outside / "victim.txt"
    link.symlink_to(target, target_is_directory=is_dir)


def _ltm_add(root: Path, work: Path) -> None:
    LongTermMemory(root / "ltm.json").add_discovery("the build uses make")


def _ltm_read(root: Path, work: Path) -> None:
    LongTermMemory(root / "ltm.json").entries()


def _note_store(root: Path, work: Path) -> None:
    KeyValueStore(root / "memory", root=root).store("plan", "ship it")


def _note_list(root: Path, work: Path) -> None:
    KeyValueStore(root / "memory", root=root).list()


def _progress_read(root: Path, work: Path) -> None:
    KeyValueStore(root / "memory", root=root).retrieve("session_progress")


def _topic_write(root: Path, work: Path) -> None:
    TopicStore(root / "memories", root=root).write("deploy", "make ship\n")


def _memory_open(root: Path, work: Path) -> None:
    with agentmem.Memory(root=root, working_dir=work):
        pass


def _session_edit(root: Path, work: Path) -> None:
    (work / "app.py").write_text("print(1)\n")
    with (
        agentmem.Memory(root=root, working_dir=work) as mem,
        mem.session(session_id="s1") as s,
    ):
        s.start_task("edit app.py")
        s.time_machine.record_file_before_change(work / "app.py")


def _semantic_open(root: Path, work: Path) -> None:
    from agentmem.semantic import LocalMemoryClient

    mem = agentmem.Memory(root=root, working_dir=work)
    try:
        client = LocalMemoryClient(mem, embedder=None)
        client.add("I like tabs", user_id="u", infer=False)
        client.close()
    finally:
        mem.close()


CASES: list[tuple[str, Callable[[Path, Path], None]]] = [
    ("locks", _ltm_add),
    ("locks", _note_store),
    ("locks", _topic_write),
    ("locks", _memory_open),
    ("locks/ltm.json.lock", _ltm_add),
    ("locks/notes.lock", _note_store),
    ("locks/memories.lock", _topic_write),
    ("locks/s1.lock", _session_edit),
    ("ltm.json", _ltm_add),
    ("ltm.json", _ltm_read),
    ("memory", _note_store),
    ("memory", _note_list),
    ("memory/plan.json", _note_store),
    ("memory/session_progress.md", _progress_read),
    ("memories", _topic_write),
    ("memories/deploy.md", _topic_write),
    ("sessions.sqlite", _memory_open),
    ("sessions.sqlite-wal", _memory_open),
    ("sessions.sqlite-shm", _memory_open),
    ("snapshots", _session_edit),
    ("snapshots/sessions", _session_edit),
    ("snapshots/blobs", _session_edit),
    ("semantic.sqlite", _semantic_open),
    ("semantic.sqlite-wal", _semantic_open),
]


@pytest.mark.parametrize(("rel", "operation"), CASES, ids=[f"{r}-{o.__name__}" for r, o in CASES])
def test_a_symlink_planted_under_the_root_is_refused_and_the_outside_untouched(
    tmp_path: Path, rel: str, operation: Callable[[Path, Path], None]
) -> None:
    outside = _outside(tmp_path)
    root = tmp_path / "root"
    work = tmp_path / "work"
    work.mkdir()
    root.mkdir()
    _plant(root, rel, outside)
    before = _tree(outside)
    with pytest.raises(UnsafePathError):
        operation(root, work)
    assert _tree(outside) == before
    assert (root / rel).is_symlink()  # left where it was, for a person to look at


def test_a_root_that_is_itself_a_symlink_is_the_hosts_choice(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    with agentmem.Memory(root=tmp_path / "link", working_dir=tmp_path) as mem:
        mem.ltm.add_discovery("the build uses make")
        mem.notes.store("plan", "ship it")
    assert (real / "ltm.json").exists()
    assert (real / "memory" / "plan.json").exists()


def test_check_inside_refuses_lexical_escapes_and_inner_links(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    assert check_inside(root, root / "a" / "new" / "file") == root / "a" / "new" / "file"
    with pytest.raises(UnsafePathError):
        check_inside(root, root / "a" / ".." / ".." / "x")
    with pytest.raises(UnsafePathError):
        check_inside(root, tmp_path / "elsewhere")
    (root / "inner").symlink_to(root / "a", target_is_directory=True)
    with pytest.raises(UnsafePathError):  # a link that stays inside is refused too (one rule)
        check_inside(root, root / "inner" / "file")
    with pytest.raises(UnsafePathError):
        make_dirs(root, root / "inner" / "deeper")
    assert not (root / "a" / "deeper").exists()
    with pytest.raises(UnsafePathError):
        check_inside(root, root / "a" / "x\x00y")
    with pytest.raises(UnsafePathError):
        check_inside(root, root / ("n" * 300) / "x")


@pytest.mark.parametrize(
    "bad",
    ["a\x00b.py", "x" * 300 + ".py", "dir/" + "y" * 256, "/".join(["d"] * 2100)],
    ids=["nul", "long-name", "long-inner-name", "long-path"],
)
def test_record_file_before_change_refuses_paths_the_os_cannot_take(
    tmp_path: Path, bad: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with (
        agentmem.Memory(root=tmp_path / "root", working_dir=work) as mem,
        mem.session(session_id="s") as s,
    ):
        s.start_task("edit")
        with pytest.raises(UnsafePathError):
            s.time_machine.record_file_before_change(bad)
        with pytest.raises(UnsafePathError):
            s.time_machine.record_file_before_change(work / bad)
        (work / "ok.py").write_text("x = 1\n")
        s.time_machine.record_file_before_change("ok.py")  # still works afterwards


def test_the_trim_checkpoint_is_not_written_through_a_symlinked_memory_dir(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    outside = _outside(tmp_path)
    root = tmp_path / "root"
    root.mkdir()
    _plant(root, "memory", outside)
    before = _tree(outside)
    with (
        agentmem.Memory(root=root, working_dir=tmp_path) as mem,
        mem.session(context_window=1024) as s,
    ):
        s.start_task("summarise the logs " * 5)
        for i in range(60):
            s.append({"role": "assistant", "content": f"step {i}: " + "words " * 30})
            s.append({"role": "user", "content": f"go on {i}"})
        s.context()  # trims, and tries to write memory/session_progress.md first
    assert _tree(outside) == before  # old code wrote session_progress.md out there
    assert any("checkpoint" in r.getMessage() for r in caplog.records)
