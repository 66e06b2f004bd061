"""One of several processes writing topic files at once (see test_topics.py).

Usage: python _topic_writer_child.py DIRECTORY WORKER ROUNDS GO_FILE

Waits for GO_FILE (so every worker starts together), then ROUNDS times:
writes its own topic ``w<WORKER>-<round>`` and the shared topic ``shared``
with a large, self-checking content (every line names the worker and round,
and the last line says how many lines came before it).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from agentmem.topics import TopicStore


def content(worker: str, round_: int, lines: int = 400) -> str:
    body = [f"worker {worker} round {round_} line {i} " + "x" * 60 for i in range(lines)]
    return "\n".join([*body, f"end {worker} {round_} {lines}"])


def main() -> None:
    directory, worker, rounds, go = sys.argv[1:5]
    deadline = time.monotonic() + 60
    while not Path(go).exists():
        if time.monotonic() > deadline:
            raise SystemExit("never told to go")
        time.sleep(0.005)
    store = TopicStore(directory, max_tokens_per_file=1_000_000)
    for r in range(int(rounds)):
        store.write(f"w{worker}-{r}", content(worker, r))
        store.write("shared", content(worker, r))


if __name__ == "__main__":
    main()
