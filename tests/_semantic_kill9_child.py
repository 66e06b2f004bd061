"""Adds statements to ROOT/semantic.sqlite forever, printing "<id> <unique word>" after each
add returns (see test_semantic_local.py::test_kill9_...). The parent kills it with SIGKILL.

Usage: python _semantic_kill9_child.py ROOT
"""

from __future__ import annotations

import sys

from agentmem.semantic import LocalMemoryClient


def main() -> None:
    client = LocalMemoryClient(sys.argv[1], embedder=None)
    i = 0
    while True:
        word = f"k{i}q"
        [event] = client.add(f"statement {word} with some words", user_id="u")
        print(event["id"], word, flush=True)
        i += 1


if __name__ == "__main__":
    main()
