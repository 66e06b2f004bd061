"""TimeMachine: undo, redo and branches for the agent's file edits, shell commands included.

Tasks form a tree; before a tool first changes a file in a task, its
content is captured; ``guard()`` captures what a shell command changed; a
restore rebuilds the disk state at the end of any task (DESIGN section 6,
docs/time-machine.md). This package's public names are re-exported here;
the code lives in one module per job:

* :mod:`~agentmem.time_machine._machine`: the :class:`TimeMachine` class,
  which composes the parts below under one lock, saves their records, and
  runs ``guard()`` around a command;
* :mod:`~agentmem.time_machine._tree`: the task tree (where a task id is
  issued, which task is active, what each task touched, retention);
* :mod:`~agentmem.time_machine._capture`: where a file is captured, and the
  guard's stat index (where ``guard()`` decides what a command changed);
* :mod:`~agentmem.time_machine._restore`: where a restore is planned,
  checked and applied, and an interrupted one finished or rolled back;
* :mod:`~agentmem.time_machine._read`: the task tree read from its record
  without a lock and without writing (for exports of a running session);
* :mod:`~agentmem.time_machine._snapshots`: storage (verified
  content-addressed blobs, the session's record files, the ignore rules
  and the stat walk, garbage collection);
* :mod:`~agentmem.time_machine._check`: the read-only check of a whole store
  (``agentmem doctor``).
"""

from __future__ import annotations

from agentmem.errors import RestoreError
from agentmem.time_machine._check import SnapshotProblem, check_snapshots
from agentmem.time_machine._machine import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_FILE_BYTES,
    DEFAULT_MAX_TASKS,
    TimeMachine,
)
from agentmem.time_machine._read import TaskTreeView, read_task_tree
from agentmem.time_machine._restore import RestoreResult, SkippedFile
from agentmem.time_machine._snapshots import (
    GC_GRACE_SECONDS,
    SESSION_FILE_SUFFIXES,
    delete_stored_session,
)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MAX_TASKS",
    "GC_GRACE_SECONDS",
    "SESSION_FILE_SUFFIXES",
    "RestoreError",
    "RestoreResult",
    "SkippedFile",
    "SnapshotProblem",
    "TaskTreeView",
    "TimeMachine",
    "check_snapshots",
    "delete_stored_session",
    "read_task_tree",
]
