"""One of several processes adding to one PostgreSQL semantic memory at once (see
test_semantic_pg.py).

Usage: python _semantic_pg_child.py DSN WORKER WORKERS COUNT GO_FILE

For each of COUNT rounds, waits for every one of the WORKERS workers to reach the
round (a file per worker and round beside GO_FILE), so that they race, then adds the
round's statement every worker shares (spelled with this worker's case and spacing:
the same fact), then a statement of its own, through one LocalMemoryClient on DSN,
and prints one JSON line per add: the events it returned (what was acknowledged).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from agentmem.semantic import LocalMemoryClient

SHARED = "the whole team deploys on day {}"


def main() -> None:
    dsn, worker, workers, count, go = sys.argv[1:6]
    with LocalMemoryClient(None, backend=dsn, embedder=None) as client:
        for i in range(int(count)):
            _barrier(Path(go), int(worker), int(workers), i)
            shared = SHARED.format(i)
            shared = shared.upper() if int(worker) % 2 else "  " + shared.replace(" ", "   ")
            print(json.dumps(client.add(shared, user_id="team")), flush=True)
            events = client.add(f"worker{worker} statement{i} zz{worker}x{i}", user_id="team")
            print(json.dumps(events), flush=True)


def _barrier(go: Path, worker: int, workers: int, round_: int) -> None:
    """Wait until every worker has reached ``round_``."""
    (go.parent / f"{go.name}.{round_}.{worker}").touch()
    deadline = time.monotonic() + 20
    while not all((go.parent / f"{go.name}.{round_}.{w}").exists() for w in range(workers)):
        if time.monotonic() > deadline:
            raise SystemExit(f"the other workers never reached round {round_}")
        time.sleep(0.001)


if __name__ == "__main__":
    main()
