"""The time machine's parts work alone, without a ``TimeMachine`` around them.

The task tree (``_tree.TaskTree``) does no I/O, and the captures
(``_capture.FileCapture``) know nothing of the tree but the record a capture
adds its bytes to: each is built and checked here from what it needs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentmem.errors import InvalidArgumentError
from agentmem.time_machine._capture import FileCapture
from agentmem.time_machine._snapshots import BlobStore, TaskRecord, blob_of, hash_bytes
from agentmem.time_machine._tree import ROOT, TaskTree


def test_a_task_tree_never_issues_an_id_twice_through_retention() -> None:
    tree = TaskTree()
    for i in range(1, 6):
        task_id = tree.check_new_id(None, f"task {i}")
        assert task_id == i
        tree.add(task_id, f"task {i}")
        tree.tasks[task_id].bytes = 10
        tree.retain(max_tasks=2, max_bytes=10**6)
    # The oldest tasks of the one chain were folded into the initial state...
    assert tree.absorbed == [1, 2, 3]
    assert sorted(tree.tasks) == [ROOT, 4, 5]
    assert tree.active_chain()[1] == [1, 2, 3, 4, 5]
    # ...and none of their ids can be issued again.
    assert tree.next_task_id == 6
    for reused in (1, 3, 5):
        assert reused in tree
        with pytest.raises(InvalidArgumentError):
            tree.check_new_id(reused, "again")


def test_a_task_tree_pins_an_edit_after_an_undo_into_the_children() -> None:
    tree = TaskTree()
    tree.add(tree.check_new_id(None, ""), "first")
    tree.touch("a.txt", "old", lambda parent: True)
    tree.settle(lambda rel: "new")
    tree.active = ROOT  # an undo, as a restore leaves it
    tree.touch("b.txt", "b0", lambda parent: True)  # the initial state is edited
    tree.settle(lambda rel: "b1")
    # Task 1 never touched b.txt: its end state keeps what b.txt held then.
    assert tree.value(tree.chain(1), "b.txt") == "b0"
    assert tree.value(tree.chain(1), "a.txt") == "new"
    assert tree.value(tree.chain(ROOT), "a.txt") == "old"


def test_file_capture_alone_sees_what_a_command_changed(tmp_path: Path) -> None:
    (tmp_path / "kept.txt").write_text("kept")
    (tmp_path / "edited.txt").write_text("before")
    (tmp_path / "deleted.txt").write_text("doomed")
    errors: list[str] = []
    files = FileCapture(tmp_path, [], BlobStore(None), 10**6, errors.append)
    task = TaskRecord(parent=None)
    files.refresh(task)
    assert sorted(files.index) == ["deleted.txt", "edited.txt", "kept.txt"]
    edited_before = files.index["edited.txt"].ref
    deleted_before = files.index["deleted.txt"].ref
    started = files.index["kept.txt"].stat[1]  # the command "started" after the files were made

    (tmp_path / "edited.txt").write_text("after, longer")
    (tmp_path / "deleted.txt").unlink()
    (tmp_path / "new" / "dir").mkdir(parents=True)
    (tmp_path / "new" / "dir" / "made.txt").write_text("made")
    changes = files.changes(started, task)

    assert changes.before == {
        "deleted.txt": deleted_before,
        "edited.txt": edited_before,
        "new/dir/made.txt": None,
    }
    assert changes.exists == {"edited.txt", "new/dir/made.txt"}
    assert changes.created_dirs == {"new", "new/dir"}
    assert blob_of(edited_before) == hash_bytes(b"before")
    assert errors == []
    # Nothing changed since: a second look finds nothing.
    for rel in changes.exists:
        files.capture(rel, task)
    assert files.changes(started, task).before == {}
