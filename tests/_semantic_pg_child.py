"""One of several processes adding to one PostgreSQL semantic memory at once (see
test_semantic_pg.py).

Usage: python _semantic_pg_child.py DSN WORKER WORKERS COUNT GO_FILE

For each of COUNT rounds, waits for every one of the WORKERS workers to reach the
round (a file per worker and round beside GO_FILE), so that they race, then adds the
round's statement every worker shares (spelled with this worker's case and spacing:
the same fact), then a statement of its own, through one LocalMemoryClient on DSN,
and prints one JSON line per add: the events it returned (what was acknowledged).

With a sixth argument ``update``, the odd workers instead ask (a scripted model) to
update the round's seeded statement (``SEED``) into the round's new one, which the
even workers add as said: the dedupe and the merge of an update into an existing
twin race across processes.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from agentmem.semantic import LocalMemoryClient
from agentmem.testing import ScriptedLLM

SHARED = "the whole team deploys on day {}"
SEED = "tool{0}x alpha{0}y old{0}z"  # no word shared with another round's statements
NEW = "tool{0}x alpha{0}y new{0}z"


def _reply(data: object) -> dict[str, str]:
    return {"role": "assistant", "content": json.dumps(data)}


def main() -> None:
    dsn, worker, workers, count, go = sys.argv[1:6]
    with LocalMemoryClient(None, backend=dsn, embedder=None) as client:
        for i in range(int(count)):
            _barrier(Path(go), int(worker), int(workers), i)
            if sys.argv[6:] == ["update"]:
                new = NEW.format(i)
                if int(worker) % 2:
                    client.llm = ScriptedLLM(
                        [
                            _reply({"facts": [new]}),
                            _reply({"memory": [{"event": "UPDATE", "id": "0", "text": new}]}),
                        ]
                    )
                    print(json.dumps(client.add(new, user_id="team")), flush=True)
                else:
                    print(json.dumps(client.add(new.upper(), user_id="team")), flush=True)
                continue
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
