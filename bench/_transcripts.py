"""Synthetic agent transcripts shared by the benchmarks (about 60 tokens per message)."""

from __future__ import annotations

import json
from typing import Any

LOREM = (
    "The build failed because the fixture path is resolved relative to the working "
    "directory; switching to importlib.resources fixes it on every platform. "
)


def transcript(n: int, offset: int = 0, *, system: bool = False) -> list[dict[str, Any]]:
    """n messages of an agent loop: a user turn, a tool call, its result, an answer; repeated.

    Messages carry a ``task_id`` internal field, as a session would store them.
    """
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": "You are a coding agent. " * 20})
    i = offset
    while len(out) < n:
        call_id = f"call_{i}"
        out.append({"role": "user", "content": f"Task {i}: " + LOREM, "task_id": i})
        out.append(
            {
                "role": "assistant",
                "content": "Let me check.",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {
                            "name": "read_file",
                            "arguments": json.dumps({"path": f"src/m{i}.py"}),
                        },
                    }
                ],
                "task_id": i,
            }
        )
        out.append({"role": "tool", "tool_call_id": call_id, "content": LOREM * 3, "task_id": i})
        out.append({"role": "assistant", "content": LOREM, "task_id": i})
        i += 1
    return out[:n]
