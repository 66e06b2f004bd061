"""One of several processes adding to the same semantic.sqlite at once (see test_semantic_local.py).

Usage: python _semantic_writer_child.py ROOT WORKER COUNT GO_FILE

Waits for GO_FILE to exist (so every worker starts together), then adds
COUNT statements of its own, each followed by the statement every worker
shares (spelled with this worker's case and spacing), through one
LocalMemoryClient on ROOT.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from agentmem.semantic import LocalMemoryClient

SHARED = "the whole team deploys on fridays"


def main() -> None:
    root, worker, count, go = sys.argv[1:5]
    deadline = time.monotonic() + 60
    while not Path(go).exists():
        if time.monotonic() > deadline:
            raise SystemExit("never told to go")
        time.sleep(0.005)
    with LocalMemoryClient(root, embedder=None, durability="normal") as client:
        for i in range(int(count)):
            client.add(f"worker{worker} statement{i} zz{worker}x{i}", user_id="team")
            shared = SHARED.upper() if int(worker) % 2 else "  " + SHARED.replace(" ", "   ")
            client.add(shared, user_id="team")


if __name__ == "__main__":
    main()
