"""One of several processes adding to one PostgreSQL semantic memory at once (see
test_semantic_pg.py).

Usage: python _semantic_pg_child.py DSN WORKER COUNT GO_FILE

Waits for GO_FILE to exist (so every worker starts together), then adds COUNT
statements of its own, each followed by the statement every worker shares (spelled
with this worker's case and spacing), through one LocalMemoryClient on DSN, and
prints one JSON line per add: the events it returned (what was acknowledged).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from agentmem.semantic import LocalMemoryClient

SHARED = "the whole team deploys on fridays"


def main() -> None:
    dsn, worker, count, go = sys.argv[1:5]
    with LocalMemoryClient(None, backend=dsn, embedder=None) as client:
        deadline = time.monotonic() + 60
        while not Path(go).exists():
            if time.monotonic() > deadline:
                raise SystemExit("never told to go")
            time.sleep(0.005)
        for i in range(int(count)):
            events = client.add(f"worker{worker} statement{i} zz{worker}x{i}", user_id="team")
            print(json.dumps(events), flush=True)
            shared = SHARED.upper() if int(worker) % 2 else "  " + SHARED.replace(" ", "   ")
            print(json.dumps(client.add(shared, user_id="team")), flush=True)


if __name__ == "__main__":
    main()
