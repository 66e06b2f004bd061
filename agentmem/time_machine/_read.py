"""Read a session's task tree from its record file, without a lock and without writing.

The :class:`~agentmem.time_machine.TimeMachine` of an open session owns the
record ``<store_dir>/sessions/<session_id>.json``: it saves it atomically
(write a temp file, rename), and on open it moves a damaged record aside.
An export, or any other reader that must not disturb a running session,
reads the same file here instead: one read of whatever the last rename put
in place, never a lock, never a write. A record that cannot be read is
*reported* (``problem``), never moved aside and never silently dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentmem.errors import AgentMemError
from agentmem.time_machine._machine import FORMAT
from agentmem.time_machine._snapshots import parse_record
from agentmem.time_machine._tree import TaskTree, public

__all__ = ["TaskTreeView", "read_task_tree"]


@dataclass(frozen=True, slots=True)
class TaskTreeView:
    """A session's task tree as last saved: read-only, plain data.

    ``tasks`` holds one dict per task, oldest id first (the initial state,
    task ``0`` inside the tree, is not listed): ``task_id``, ``parent_id``
    (``None``: the initial state), ``summary`` (the task's user request, as
    the session recorded it), ``status`` (``"current"``: the active task;
    ``"past"``: on its ancestor chain; ``"undone"``: any other branch),
    ``has_branches``, ``created_at`` (epoch seconds) and ``files``: the paths
    the task changed (content after differs from content before; for the
    active task, every path it has touched so far, as those are not settled
    yet), sorted.
    """

    tasks: tuple[dict[str, Any], ...] = ()
    """The tasks, oldest id first."""
    active: int | None = None
    """The active task's id (``None``: the initial state, or no record)."""
    problem: str | None = None
    """Why the record could not be read (``None``: it was read, or there is none)."""


def read_task_tree(store_dir: str | Path | None, session_id: str) -> TaskTreeView:
    """The task tree the time machine last saved for ``session_id`` under ``store_dir``.

    Args:
        store_dir: The snapshots directory (``<root>/snapshots``); ``None``
            (incognito: nothing on disk) reads as no tree.
        session_id: A session id the sessions store accepted.

    Returns:
        The tree; an empty view when the session has no record (no task was
        started, or the session predates the time machine), and an empty view
        with ``problem`` set when the record is damaged or was written by a
        newer agentmem. Never raises for the record's content, never writes.
    """
    if store_dir is None:
        return TaskTreeView()
    path = Path(store_dir) / "sessions" / f"{session_id}.json"
    try:
        data = parse_record(path, FORMAT, "time-machine record")
    except FileNotFoundError:
        return TaskTreeView()
    except (OSError, ValueError, AgentMemError) as exc:
        return TaskTreeView(problem=f"task tree record {path} unreadable: {exc}")
    tree = TaskTree()
    try:
        tree.load(data)
        tasks = tree.history(len(tree.tasks))
        for task in tasks:
            record = tree.tasks[task["task_id"]]
            changed = {rel for rel, ref in record.after.items() if record.before.get(rel) != ref}
            if task["status"] == "current":
                changed |= tree.dirty
            task["files"] = sorted(changed)
    except (ValueError, KeyError, TypeError, AttributeError, AgentMemError) as exc:
        return TaskTreeView(problem=f"task tree record {path} unreadable: {exc}")
    return TaskTreeView(tasks=tuple(tasks), active=public(tree.active))
