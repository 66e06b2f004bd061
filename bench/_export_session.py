"""A long agent session stored the way a real one is, for the export benchmark and browser tests.

:func:`build_session` writes, under a memory root, one session of ``n``
messages in several tasks: user requests, assistant turns with tool calls
(shell commands, file writes with the file's content as an argument), tool
results of a few kilobytes, a YaRN thread summary in the session state,
one billing row per assistant turn, a side thread, and the time machine's
task tree (each task edits a file, one task is undone so the tree has a
branch). :func:`build_record` makes the same session as a record without
storing it (a page can be rendered from it in a fraction of a second);
:func:`build_session` stores it (the recall index makes that the slow part:
about 6 s for 10,000 messages).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import agentmem
from agentmem.session_store import BillingRecord, SessionInfo, SessionRecord
from agentmem.time_machine import TimeMachine
from agentmem.yarn import ThreadSummary

OUTPUT_LINE = "test_session_store.py::test_export_{i} PASSED [{p:3d}%]  (0.{i:03d}s)\n"


def _tool_output(i: int, chars: int) -> str:
    lines = []
    size = 0
    while size < chars:
        line = OUTPUT_LINE.format(i=len(lines) + i, p=len(lines) % 100)
        lines.append(line)
        size += len(line)
    return "".join(lines)[:chars]


def transcript(n: int, *, tasks: int, output_chars: int) -> list[dict[str, Any]]:
    """``n`` messages in ``tasks`` tasks: request, then rounds of tool call, result, answer."""
    per_task = max(n // tasks, 4)
    out: list[dict[str, Any]] = []
    for i in range(n):
        task_id = min(i // per_task, tasks - 1) + 1
        step = i - (task_id - 1) * per_task
        if step == 0:
            out.append(
                {
                    "role": "user",
                    "content": f"Task {task_id}: make the export readable. " * 3,
                    "task_id": task_id,
                }
            )
        elif step % 3 == 1:
            tool, args = (
                ("bash", {"command": f"pytest -q tests/test_{i}.py"})
                if i % 2
                else ("write_file", {"path": f"src/mod_{task_id}.py", "content": "x = 1\n" * 80})
            )
            out.append(
                {
                    "role": "assistant",
                    "content": f"Step {i}: running {tool}.",
                    "tool_calls": [
                        {
                            "id": f"call_{i}",
                            "type": "function",
                            "function": {"name": tool, "arguments": json.dumps(args)},
                        }
                    ],
                    "task_id": task_id,
                }
            )
        elif step % 3 == 2:
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": f"call_{i - 1}",
                    "content": _tool_output(i, output_chars),
                    "task_id": task_id,
                }
            )
        else:
            out.append(
                {
                    "role": "assistant",
                    "content": f"The tests pass after step {i}; next I check the docs. " * 4,
                    "task_id": task_id,
                }
            )
    return out


def billing(messages: list[dict[str, Any]]) -> list[BillingRecord]:
    """One priced call per assistant turn."""
    return [
        BillingRecord(
            at=1_700_000_000.0 + i,
            kind="llm",
            model="gpt-4.1",
            prompt_tokens=1_000 + i,
            completion_tokens=50,
            cost_usd=0.002,
            cached_prompt_tokens=800,
        )
        for i, message in enumerate(messages)
        if message["role"] == "assistant"
    ]


def session_state(messages: list[dict[str, Any]], tasks: int) -> dict[str, Any]:
    """A session state with a YaRN thread summary of the first half and the task counters."""
    summary = ThreadSummary.from_messages(messages[: len(messages) // 2], current_task="export")
    return {
        "format": "agentmem.session-state",
        "version": 1,
        "yarn": {"format": "agentmem.yarn", "version": 1, "summary": summary.to_json()},
        "tasks": {"finished": list(range(1, tasks)), "iterations": {"1": 3, "2": 5}},
    }


def build_record(
    n: int,
    *,
    tasks: int = 8,
    output_chars: int = 3_000,
    extra: list[dict[str, Any]] | None = None,
    session_id: str = "export-bench",
) -> SessionRecord:
    """The session as a record (no store): for rendering a page without storing it first."""
    messages = transcript(n, tasks=tasks, output_chars=output_chars) + (extra or [])
    info = SessionInfo(
        id=session_id,
        name=f"Export of {len(messages):,} messages",
        created_at=1_700_000_000.0,
        updated_at=1_700_000_000.0 + len(messages),
        working_directory="/work/project",
        model="gpt-4.1",
        context_window=128_000,
        message_count=len(messages),
    )
    return SessionRecord(
        info=info,
        messages=messages,
        state=session_state(messages, tasks),
        billing=billing(messages),
        threads={"subagent-1": messages[:6]},
    )


def make_task_tree(root: Path, working_dir: Path, session_id: str, tasks: int) -> None:
    """The time machine's record for ``session_id`` under ``root``: ``tasks`` tasks, a branch.

    Each task edits one file; the next-to-last task is undone, so the last
    one is its sibling; the last task stays active.
    """
    machine = TimeMachine(working_dir, session_id, root / "snapshots", memory_root=root)
    for task_id in range(1, tasks + 1):
        machine.start_new_task(f"Task {task_id}: make the export readable.", task_id=task_id)
        target = working_dir / f"mod_{task_id}.py"
        machine.record_file_before_change(target)
        target.write_text(f"x = {task_id}\n", encoding="utf-8")
        if task_id == tasks - 1:
            machine.undo_last_task()


def build_session(
    root: Path, working_dir: Path, n: int, *, tasks: int = 8, output_chars: int = 3_000
) -> tuple[agentmem.Memory, str]:
    """A memory at ``root`` holding one ``n``-message session, stored through the public store.

    Returns the open memory (close it) and the session id.
    """
    record = build_record(n, tasks=tasks, output_chars=output_chars)
    mem = agentmem.Memory(root=root, working_dir=working_dir, durability="normal")
    info = mem.sessions.create(
        name=record.info.name, working_directory=str(working_dir), model=record.info.model
    )
    writer = mem.sessions.writer(info.id)
    writer.on_append(record.messages)
    writer.save_state(record.state)
    for row in record.billing:
        writer.add_billing(row)
    for thread_id, messages in record.threads.items():
        writer.append_thread(thread_id, messages)
    writer.close()
    make_task_tree(root, working_dir, info.id, tasks)
    return mem, info.id
