"""Build ``recall-echoes-v3.sqlite``: a format-3 sessions store whose recall index holds
the memory's own echoes (index rules 1 indexed every message).

Run once with agentmem at sessions format 3 (the release before index rules 2), from the
repository root; the file is committed and never regenerated::

    python tests/golden/make_golden_recall_v3.py

``tests/test_recall_echoes.py`` opens it with the current code: migration 0004
re-indexes it, and recall no longer returns the echoes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from agentmem.session_store import FORMAT_VERSION, SessionStore

HERE = Path(__file__).resolve().parent
NAME = "recall-echoes-v3.sqlite"


def _call(call_id: str, name: str, arguments: dict[str, object]) -> dict[str, object]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


MESSAGES: list[dict[str, object]] = [
    {"role": "user", "content": "Please run the tests."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [_call("c1", "shell", {"cmd": "pytest -q"})],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "12 passed"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            _call("m1", "memory_operations", {"operation": "recall_sessions", "query": "ran tests"})
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "m1",
        "content": json.dumps({"ok": True, "hits": "ran tests"}),
    },
    {"role": "user", "content": "ran tests before", "system_injected": True},
]


def main() -> int:
    if FORMAT_VERSION != 3:
        print(f"needs agentmem at sessions format 3, this is {FORMAT_VERSION}", file=sys.stderr)
        return 1
    path = HERE / NAME
    if path.exists():
        print(f"{path} exists; it is never regenerated", file=sys.stderr)
        return 1
    with SessionStore(path, durability="full", clock=lambda: 1_700_000_000.0) as store:
        store.create(session_id="echoes", name="echoes")
        store.writer("echoes").on_append(MESSAGES)
        assert store.check_recall_index(repair=False) == []  # indexes the queue
    return 0


if __name__ == "__main__":
    sys.exit(main())
