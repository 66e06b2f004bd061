"""Build ``semantic-v1.sqlite``: a LocalMemoryClient database of format version 1.

Future readers must keep opening it and reading exactly what it holds
(``tests/test_semantic_local.py::test_golden_v1_database_reads_back`` checks
it), so once committed it is never regenerated for a new format: a new
version gets a new fixture beside it. The script refuses to overwrite the
file unless given ``--force``.

Run from the repository root::

    python tests/golden/make_golden_semantic.py [--force]

What the database must hold is written out by hand below (``EXPECTED_*``),
not read back from the store, so the test compares against an independent
statement.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from agentmem.semantic import LocalMemoryClient
from agentmem.testing import ScriptedLLM

HERE = Path(__file__).resolve().parent
DB_NAME = "semantic-v1.sqlite"
START = 1_700_000_000.0

# (text, user_id, agent_id, run_id, metadata), as get_all(user_id=...) lists them per user.
EXPECTED_MEMORIES: list[tuple[str, str, str | None, str | None, dict[str, Any]]] = [
    ("Prefers light mode", "martin", None, None, {"source": "chat", "topic": "ui"}),
    ("Lives in Lyon — ünïcödé 漢字", "martin", "coder", None, {}),
    ("Uses key [REDACTED:openai_key] for tests", "martin", "coder", "run-1", {}),
    ("Has a dog named Rex", "ada", None, None, {"n": 1, "flag": True}),
]

# text -> [(event, old, new)] for every memory that ever existed.
EXPECTED_HISTORY: dict[str, list[tuple[str, str | None, str | None]]] = {
    "Prefers light mode": [
        ("ADD", None, "Prefers dark mode"),
        ("UPDATE", "Prefers dark mode", "Prefers light mode"),
    ],
    "Forgotten fact": [("ADD", None, "Forgotten fact"), ("DELETE", "Forgotten fact", None)],
}

VECTORS = {"Has a dog named Rex": [1.0, 0.0, 0.5]}


class Embedder:
    def embed(self, texts: Any) -> list[list[float]]:
        return [VECTORS.get(t, [0.0, 1.0, 0.0]) for t in texts]


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        self.now += 60.0
        return self.now


def build(path: Path) -> None:
    client = LocalMemoryClient(path.parent / "_golden_root", embedder=None, clock=Clock())
    client.add("Prefers dark mode", user_id="martin", metadata={"source": "chat"})
    client.llm = ScriptedLLM(
        [
            {"role": "assistant", "content": json.dumps({"facts": ["Prefers light mode"]})},
            {
                "role": "assistant",
                "content": json.dumps(
                    {"memory": [{"event": "UPDATE", "id": "0", "text": "Prefers light mode"}]}
                ),
            },
        ]
    )
    client.add("I switched to light mode", user_id="martin", metadata={"topic": "ui"})
    client.llm = None
    client.add("Lives in Lyon —  ünïcödé 漢字", user_id="martin", agent_id="coder")
    client.add(
        "Uses key sk-proj-4f9Qx2LmZ8rT1vB7nK3pW6yH0cJ5dA for tests",
        user_id="martin",
        agent_id="coder",
        run_id="run-1",
    )
    [gone] = client.add("Forgotten fact", user_id="ada")
    client.delete(gone["id"])
    client.embedder = Embedder()
    client.add("Has a dog named Rex", user_id="ada", metadata={"n": 1, "flag": True})
    client.close()
    source = path.parent / "_golden_root" / "semantic.sqlite"
    import sqlite3

    conn = sqlite3.connect(source)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    source.replace(path)
    for leftover in sorted((path.parent / "_golden_root").rglob("*"), reverse=True):
        leftover.unlink() if leftover.is_file() else leftover.rmdir()
    (path.parent / "_golden_root").rmdir()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args()
    target = HERE / DB_NAME
    if target.exists() and not args.force:
        sys.exit(f"{target} exists; a committed golden file is never regenerated (use --force)")
    build(target)
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
