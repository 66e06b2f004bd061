"""One of several processes writing the same ltm.json at once (see test_ltm.py).

Usage: python _ltm_writer_child.py ROOT WORKER UNIQUE SHARED_ROUNDS GO_FILE

Waits for GO_FILE to exist (so every worker starts together), then
interleaves adding UNIQUE facts of its own with confirming the shared facts
(each spelled differently per round: case, punctuation, word order),
SHARED_ROUNDS times each, through the Memory facade.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import agentmem

SHARED = ("the build uses hatchling", "tests need CI=1 set", "locks live under locks dir")


def spelling(text: str, round_: int) -> str:
    words = text.split()
    if round_ % 3 == 1:
        return " ".join(reversed(words)).upper() + "!"
    if round_ % 3 == 2:
        return ", ".join(words) + "."
    return text


def main() -> None:
    root, worker, unique, rounds, go = sys.argv[1:6]
    deadline = time.monotonic() + 60
    while not Path(go).exists():
        if time.monotonic() > deadline:
            raise SystemExit("never told to go")
        time.sleep(0.005)
    mem = agentmem.Memory(root=root)
    try:
        for i in range(max(int(unique), int(rounds))):
            if i < int(unique):
                mem.ltm.add_discovery(f"fact w{worker}-n{i} from a worker", examples=[f"w{worker}"])
            if i < int(rounds):
                for text in SHARED:
                    mem.ltm.add_pattern(spelling(text, i), examples=[f"w{worker}/{i % 2}"])
    finally:
        mem.close()


if __name__ == "__main__":
    main()
