"""One of several processes writing one AgentMemStore at once (see test_integration_langgraph.py).

Usage: python _lgstore_child.py ROOT BACKEND WORKER COUNT GO_FILE
       python _lgstore_child.py kill ROOT

The second form opens the store on ROOT (embedded), prints "ready", then puts
forever (new items in three namespaces, updates of earlier ones, every fifth a
delete) and prints each key after its put or delete returned, for the parent to
kill it with SIGKILL and check that everything acknowledged is there.

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


def acknowledge_until_killed(root: str) -> None:
    mem = agentmem.Memory(root=root, working_dir=Path(root).parent)
    store = AgentMemStore(memory=mem)
    print("ready", flush=True)
    i = 0
    while True:
        namespace = ("kill", f"n{i % 3}")
        if i % 5 == 4:
            store.delete(namespace, f"k{i - 3}")
            print(f"del {i % 3} k{i - 3}", flush=True)
        else:
            store.put(namespace, f"k{i}", {"i": i, "text": "x" * (i % 50)})
            print(f"put {i % 3} k{i}", flush=True)
        i += 1


def main() -> None:
    if sys.argv[1] == "kill":
        acknowledge_until_killed(sys.argv[2])
        return
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
