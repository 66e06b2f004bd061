"""One of six processes writing LTM, notes and topics at once (see test_documents_stores.py).

Usage: python _documents_writer_child.py ROOT BACKEND WORKER ROUNDS GO_FILE

BACKEND is ``embedded`` or a PostgreSQL DSN. Waits for GO_FILE (so every worker
starts together), then ROUNDS times, through the Memory facade: adds a fact of
its own, confirms the shared patterns (spelled differently each round), stores a
note of its own, writes a topic of its own, and appends one line to the shared
topic with a read -> merge -> write_if_unchanged loop.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import agentmem

SHARED = ("the build uses hatchling", "locks live under the locks dir")


def spelling(text: str, round_: int) -> str:
    if round_ % 2:
        return " ".join(reversed(text.split())).upper() + "!"
    return text


def main() -> None:
    root, backend, worker, rounds, go = sys.argv[1:6]
    deadline = time.monotonic() + 60
    while not Path(go).exists():
        if time.monotonic() > deadline:
            raise SystemExit("never told to go")
        time.sleep(0.005)
    with agentmem.Memory(root=root, backend=backend) as mem:
        for i in range(int(rounds)):
            mem.ltm.add_discovery(f"fact w{worker}-n{i} from a worker")
            for text in SHARED:
                mem.ltm.add_pattern(spelling(text, i), examples=[f"w{worker}"])
            mem.notes.store(f"w{worker}-{i}", f"note of worker {worker} round {i}")
            mem.topics.write(f"w{worker}-{i}", f"topic of worker {worker} round {i}")
            while True:
                before = mem.topics.read("shared")
                merged = (before or "") + f"line w{worker}-{i}\n"
                if mem.topics.write_if_unchanged("shared", merged, expected=before):
                    break


if __name__ == "__main__":
    main()
