"""One of several processes editing memory files through the memory tool at once.

Usage: python _anthmem_child.py ROOT BACKEND WORKER ROUNDS GO_FILE

BACKEND is ``embedded`` or a ``postgresql://`` URI. Waits for GO_FILE (so every
worker starts together), then ROUNDS times, through ``AgentMemMemoryTool.call``
(the entry the SDK's tool runner uses): inserts the line ``w<WORKER>-<round>`` at
the top of ``/memories/shared.md``, replaces its own placeholder
``slot-w<WORKER>-<round>`` in ``/memories/team/slots.md`` with
``done-w<WORKER>-<round>``, and creates ``/memories/w<WORKER>/r<round>.md``. A lost
update (a read-modify-write that overwrote another process's edit) loses a line or
brings a placeholder back; the parent checks every one is there.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import agentmem
from agentmem.integrations.anthropic_memory import AgentMemMemoryTool


def main() -> None:
    root, backend, worker, rounds, go = sys.argv[1:6]
    deadline = time.monotonic() + 60
    while not Path(go).exists():
        if time.monotonic() > deadline:
            raise SystemExit("never told to go")
        time.sleep(0.005)
    with agentmem.Memory(root=root, backend=backend) as mem:
        tool = AgentMemMemoryTool(mem)
        for r in range(int(rounds)):
            me = f"w{worker}-{r}"
            tool.call(
                {
                    "command": "insert",
                    "path": "/memories/shared.md",
                    "insert_line": 0,
                    "insert_text": me,
                }
            )
            tool.call(
                {
                    "command": "str_replace",
                    "path": "/memories/team/slots.md",
                    "old_str": f"slot-{me}\n",
                    "new_str": f"done-{me}\n",
                }
            )
            tool.call(
                {"command": "create", "path": f"/memories/w{worker}/r{r}.md", "file_text": me}
            )


if __name__ == "__main__":
    main()
