"""What the agent was doing, rendered once for the recovery note and the progress file.

Two places tell an agent (or a person) where the work stands after the
conversation was shortened: the *recovery injection* the context manager
adds to every stage-3 payload, and ``memory/session_progress.md``, the
checkpoint a session writes before every trim. Both render the same
:class:`Progress` with :func:`render_progress`, so they always say the same
thing: the current task, the agent's todo list, recent commits and (in the
file) the thread summary.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentmem._json import decode_arguments
from agentmem._truncate import truncate_text
from agentmem.messages import Message, is_real_user, message_text

__all__ = ["TODO_TOOL_NAMES", "Progress", "latest_todos", "progress_of", "render_progress"]

TODO_TOOL_NAMES = frozenset(
    {"todo_write", "TodoWrite", "write_todos", "update_todos", "todo", "todos", "update_plan"}
)


@dataclass(frozen=True)
class Progress:
    """Where the work stands."""

    task: str
    """The newest real user request (or the summary's current task), cut to ``task_chars``."""
    todos: tuple[str, ...]
    """The newest todo list written through a todo tool, as display lines."""
    commits: tuple[str, ...]
    """The last commits the thread summary holds (``"hash: subject"``)."""
    summary: str | None
    """The rendered thread summary, or ``None`` when nothing was summarized."""


def progress_of(
    history: Sequence[Message], summary: Any | None, *, task_chars: int = 300, commits: int = 5
) -> Progress:
    """Read the progress of a conversation.

    Args:
        history: The conversation (a :class:`~agentmem.history.MessageHistory`
            or a list of messages).
        summary: YaRN's :class:`~agentmem.yarn.ThreadSummary`, or ``None``.
        task_chars: Longest task text kept.
        commits: How many of the newest commits to keep.
    """
    index = getattr(history, "last_real_user_index", None)
    if callable(index):
        anchor = index()
    else:
        newest_first = range(len(history) - 1, -1, -1)
        anchor = next((i for i in newest_first if is_real_user(history[i])), None)
    task = message_text(history[anchor]).strip() if anchor is not None else ""
    if not task and summary is not None and summary.current_task:
        task = summary.current_task
    return Progress(
        task=truncate_text(task, task_chars) if task else "",
        todos=tuple(latest_todos(history)),
        commits=tuple(summary.commits[-commits:]) if summary is not None and commits else (),
        summary=summary.render() if summary is not None else None,
    )


def render_progress(progress: Progress, *, with_summary: bool = False) -> list[str]:
    """The progress as lines: ``Current task:``, ``Todo list:``, ``Recent git activity:``,
    and with ``with_summary`` the ``Summary of earlier work:``. Empty sections are left out.
    """
    lines = []
    if progress.task:
        lines.append(f"Current task: {progress.task}")
    if progress.todos:
        lines.append("Todo list:")
        lines.extend(f"- {item}" for item in progress.todos)
    if progress.commits:
        lines.append("Recent git activity:")
        lines.extend(f"- {c}" for c in progress.commits)
    if with_summary and progress.summary:
        lines.append("Summary of earlier work:")
        lines.append(progress.summary)
    return lines


_TODO_STATUS_RE = re.compile(r"^[a-z_ -]{1,20}$")


def latest_todos(messages: Sequence[Message], *, scan_limit: int = 400) -> list[str]:
    """The newest todo list an agent wrote through a todo tool, as display lines.

    Looks at the last ``scan_limit`` messages for a tool call whose name is
    one of :data:`TODO_TOOL_NAMES` and reads its ``todos`` (or ``items`` /
    ``plan``) argument: a list of strings or of objects with
    ``content``/``text``/``step`` and ``status``.
    """
    n = len(messages)
    for i in range(n - 1, max(n - scan_limit, 0) - 1, -1):
        msg = messages[i]
        for call in reversed(msg.get("tool_calls") or ()):
            if call.get("function", {}).get("name") not in TODO_TOOL_NAMES:
                continue
            args = decode_arguments(call["function"].get("arguments"))
            items = (
                args.get("todos") or args.get("items") or args.get("plan")
                if isinstance(args, dict)
                else None
            )
            if not isinstance(items, list):
                continue
            lines = []
            for item in items[:30]:
                if isinstance(item, str):
                    lines.append(truncate_text(item, 200))
                elif isinstance(item, dict):
                    text = item.get("content") or item.get("text") or item.get("step") or ""
                    status = item.get("status")
                    mark = (
                        f"[{status}] "
                        if isinstance(status, str) and _TODO_STATUS_RE.match(status)
                        else ""
                    )
                    if isinstance(text, str) and text:
                        lines.append(mark + truncate_text(text, 200))
            return lines
    return []
