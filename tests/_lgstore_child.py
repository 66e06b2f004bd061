"""One of several processes writing one AgentMemStore at once (see test_integration_langgraph.py).

Usage: python _lgstore_child.py ROOT BACKEND WORKER COUNT GO_FILE

Opens the store, says so (GO_FILE.ready-WORKER), waits for GO_FILE (so every worker
writes at the same time), then makes COUNT puts of its own
keys into a namespace all workers share, each followed by a put of the one shared key
and, every third round, a batch of two puts and a delete of a key of its own.
BACKEND is "embedded" or a postgresql:// DSN.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from langgraph.store.base import PutOp

import agentmem
from agentmem.integrations.langgraph import AgentMemStore


def main() -> None:
    root, backend, worker, count, go = sys.argv[1:6]
    mem = agentmem.Memory(root=root, working_dir=Path(root).parent, backend=backend)
    try:
        store = AgentMemStore(memory=mem)
        Path(f"{go}.ready-{worker}").touch()  # imported and open: only the writes remain
        deadline = time.monotonic() + 60
        while not Path(go).exists():
            if time.monotonic() > deadline:
                raise SystemExit("never told to go")
            time.sleep(0.001)
        for i in range(int(count)):
            store.put(("shared", "items"), f"{worker}-{i}", {"worker": worker, "i": i})
            store.put(("shared",), "last", {"worker": worker, "i": i})
            if i % 3 == 0:
                store.batch(
                    [
                        PutOp(("per", worker), f"b{i}", {"i": i}),
                        PutOp(("per", worker), "gone", {"i": i}),
                        PutOp(("per", worker), "gone", None),
                    ]
                )
    finally:
        mem.close()


if __name__ == "__main__":
    main()
